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

// TestImportProjectsParkedHomeEvent: an export keeps every chain in seq
// order, so an event unparked at the exporting node (alpha:3, which waited
// for gamma's claim) comes before what it waited for, and parks again on
// import; so does a home event that refutes alpha:3's claim. The import
// projects both before it ends, so that the node's numbering resumes past
// the home message rather than handing its number out again.
func TestImportProjectsParkedHomeEvent(t *testing.T) {
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
		Refutes: []string{"gamma:cl_1"}, Claims: []claimData{{N: 2, Statement: "a claims"}}})
	alpha.emit(evMessagePosted, "alice", messageData{Thread: "th_1", N: 3, Kind: "ask", Body: "more", AuthorKind: "llm"})
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
	t.Logf("source: home refutation is %s", ref.Message.ID)

	var evs []store.Checked
	var order []string
	err = src.st.View(func(tx *store.Tx) error {
		return tx.EachChained(func(se *store.StoredEvent) error {
			order = append(order, fmt.Sprintf("%s:%d", se.Event.Realm, se.Event.Seq))
			evs = append(evs, store.Checked{Event: se.Event, CID: se.CID, Raw: se.Raw})
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "[test:1 alpha:1 alpha:2 alpha:3 alpha:4 gamma:1 gamma:2 test:2 test:3]"; fmt.Sprint(order) != want {
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
