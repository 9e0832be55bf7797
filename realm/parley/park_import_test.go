package parley

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"relay/protocol"
	"relay/store"
)

// unparkedSource is a service holding alpha's thread, where alpha:3
// refutes gamma's claim and asserts alpha:cl_2: it was parked until gamma's
// claim arrived, and alpha:4 behind it; both were projected after it.
func unparkedSource(t *testing.T) *Service {
	t.Helper()
	ctx := context.Background()
	src := newTestService(t)
	if _, err := src.st.EnsureProjections(ctx); err != nil {
		t.Fatal(err)
	}
	alpha := newChainWriter(t, src.st, "alpha", 2, nil)
	gamma := newChainWriter(t, src.st, "gamma", 4, nil)
	alpha.emit(evBoardCreated, "human", boardData{ID: 1, Slug: "general", Name: "General"})
	alpha.emit(evThreadOpened, "alice", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "q", AuthorKind: "llm"})
	g1, _ := gamma.sign(evBoardCreated, "human", boardData{ID: 1, Slug: "general", Name: "General"})
	g2, _ := gamma.sign(evThreadOpened, "gus", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "x", AuthorKind: "llm",
		Claims: []claimData{{N: 1, Statement: "g claims"}}})
	alpha.emit(evMessagePosted, "alice", messageData{Thread: "th_1", N: 2, Kind: "refute", Body: "no", AuthorKind: "llm",
		Refutes: []string{"gamma:cl_1"}, Evidence: []protocol.Evidence{{Kind: "note", Value: "no"}}, Claims: []claimData{{N: 2, Statement: "a claims"}}})
	alpha.emit(evMessagePosted, "alice", messageData{Thread: "th_1", N: 3, Kind: "ask", Body: "more", AuthorKind: "llm"})
	if p, _ := src.st.ParkedEvents(0); len(p) != 2 {
		t.Fatalf("parked %+v", p)
	}
	gamma.ingest(g1)
	gamma.ingest(g2)
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if p, _ := src.st.ParkedEvents(0); len(p) == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("alpha:3 never unparked")
		}
	}
	return src
}

// exported lists src's events in an export's order, and names them.
func exported(t *testing.T, src *Service) (evs []store.Checked, order string) {
	t.Helper()
	var names []string
	err := src.st.View(func(tx *store.Tx) error {
		return tx.EachChained(func(se *store.StoredEvent) error {
			names = append(names, fmt.Sprintf("%s:%d", se.Event.Realm, se.Event.Seq))
			evs = append(evs, store.Checked{Event: se.Event, CID: se.CID, Raw: se.Raw})
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs, fmt.Sprint(names)
}

// TestImportOfUnparkedDependency: an export of a store that unparked
// events (alpha:3 and alpha:4, behind gamma's claim) has them where they
// were projected, after gamma's claim, and beta's thread refuting alpha:3's
// claim after them: the import projects every event on the way.
func TestImportOfUnparkedDependency(t *testing.T) {
	ctx := context.Background()
	src := unparkedSource(t)
	beta := newChainWriter(t, src.st, "beta", 3, nil)
	// beta opens a thread refuting alpha:cl_2, held now.
	beta.emit(evBoardCreated, "human", boardData{ID: 1, Slug: "general", Name: "General"})
	beta.emit(evThreadOpened, "bob", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "refute", Body: "y", AuthorKind: "llm",
		Refutes: []string{"alpha:cl_2"}, Evidence: []protocol.Evidence{{Kind: "note", Value: "y"}}})

	evs, order := exported(t, src)
	if want := "[test:1 alpha:1 alpha:2 gamma:1 gamma:2 alpha:3 alpha:4 beta:1 beta:2]"; order != want {
		t.Fatalf("export order %v, want %s", order, want)
	}

	// Import it into a fresh store, as realm.Import does (one chunk).
	dst := newTestService(t)
	if _, err := dst.st.EnsureProjections(ctx); err != nil {
		t.Fatal(err)
	}
	// newTestService bootstrapped a lobby of its own realm "test": the
	// source's "test" events are in the file too, so skip them here and
	// restore only the other realms' chains.
	var others []store.Checked
	for _, e := range evs {
		if e.Event.Realm != string(testRealm) {
			others = append(others, e)
		}
	}
	held := uint64(0)
	hs, _ := dst.st.Heads()
	for _, h := range hs {
		held += h.Seq
	}
	if err := dst.st.Restore(ctx, held, others)(); err != nil {
		t.Fatalf("import of a valid export fails: %v", err)
	}
	dst.st.Unpark(ctx)
	if p, _ := dst.st.ParkedEvents(0); len(p) != 0 {
		t.Fatalf("parked after the import: %+v", p)
	}
}

// TestImportProjectsParkedHomeEvent: after an import of a store where
// other realms' events were parked and projected later, and a home event
// refutes one of their claims, nothing is left parked and the node's
// numbering resumes past the home message.
func TestImportProjectsParkedHomeEvent(t *testing.T) {
	ctx := context.Background()
	src := unparkedSource(t)
	// The home realm posts: a thread, then a refutation of alpha:cl_2.
	alice := agent(t, "alice")
	open, err := src.post(ctx, alice, "lobby", &protocol.Envelope{Kind: protocol.ActAsk, Body: "home asks"}, "")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := src.post(ctx, agent(t, "bob"), "", &protocol.Envelope{Kind: protocol.ActRefute, Body: "home refutes", Thread: protocol.KeyRef(open.Thread.ID),
		Refutes: []string{"alpha:cl_2"}, Evidence: []protocol.Evidence{{Kind: "url", Value: "https://example.org/r"}}}, "")
	if err != nil {
		t.Fatal(err)
	}

	evs, order := exported(t, src)
	if want := "[test:1 alpha:1 alpha:2 gamma:1 gamma:2 alpha:3 alpha:4 test:2 test:3]"; order != want {
		t.Fatalf("export order %v, want %s", order, want)
	}

	// A fresh store of the same realm, as realm.Import builds it.
	cfg := store.DefaultConfig("")
	cfg.InMemory, cfg.Realm, cfg.Key = true, testRealm, nil
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dst := New(st, Config{Realm: testRealm, Logger: cfg.Logger})
	// As realm.Import: projections recorded, the events restored, the
	// parked ones projected before the store closes.
	if _, err := st.EnsureProjections(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Restore(ctx, 0, evs)(); err != nil {
		t.Fatal(err)
	}
	st.Unpark(ctx)
	if p, _ := st.ParkedEvents(0); len(p) != 0 {
		t.Fatalf("parked after the import: %+v", p)
	}
	if err := dst.Bootstrap(ctx, "human:op"); err != nil {
		t.Fatal(err)
	}
	var next uint64
	st.View(func(tx *store.Tx) error {
		v, err := tx.Get([]byte("m/id/msg"))
		if err == nil && len(v) == 8 {
			next = uint64(v[7]) + 1
		}
		return nil
	})
	if fmt.Sprintf("msg_%d", next) == ref.Message.ID || fmt.Sprint(next) == ref.Message.ID {
		t.Fatalf("after the import, the next home message would be msg_%d: the number of the parked home event %s", next, ref.Message.ID)
	}
}
