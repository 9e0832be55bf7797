package parley

import (
	"context"
	"fmt"
	"testing"
	"time"

	"relay/store"
)

// TestImportOfUnparkedDependency: an export of a store that unparked an
// event (alpha:3, which waited for gamma's claim) puts it before what it
// waited for, and a thread beta opens refuting alpha:3's claim after it. On
// import alpha:3 parks again, and so must beta's thread opening rather
// than fail the import.
func TestImportOfUnparkedDependency(t *testing.T) {
	ctx := context.Background()
	src := newTestService(t)
	if _, err := src.st.EnsureProjections(ctx); err != nil {
		t.Fatal(err)
	}
	alpha := newChainWriter(t, src.st, "alpha", 2, nil)
	beta := newChainWriter(t, src.st, "beta", 3, nil)
	gamma := newChainWriter(t, src.st, "gamma", 4, nil)

	alpha.emit(evBoardCreated, "human", boardData{ID: 1, Slug: "general", Name: "General"})
	alpha.emit(evThreadOpened, "alice", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "q", AuthorKind: "llm"})
	// gamma's claim is not held yet: alpha:3 parks.
	g1, _ := gamma.sign(evBoardCreated, "human", boardData{ID: 1, Slug: "general", Name: "General"})
	g2, _ := gamma.sign(evThreadOpened, "gus", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "x", AuthorKind: "llm",
		Claims: []claimData{{N: 1, Statement: "g claims"}}})
	alpha.emit(evMessagePosted, "alice", messageData{Thread: "th_1", N: 2, Kind: "refute", Body: "no", AuthorKind: "llm",
		Refutes: []string{"gamma:cl_1"}, Claims: []claimData{{N: 2, Statement: "a claims"}}})
	alpha.emit(evMessagePosted, "alice", messageData{Thread: "th_1", N: 3, Kind: "ask", Body: "more", AuthorKind: "llm"})
	if p, _ := src.st.ParkedEvents(0); len(p) != 1 {
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
	// beta opens a thread refuting alpha:cl_2, held now.
	beta.emit(evBoardCreated, "human", boardData{ID: 1, Slug: "general", Name: "General"})
	beta.emit(evThreadOpened, "bob", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "y", AuthorKind: "llm",
		Refutes: []string{"alpha:cl_2"}})

	// Export order.
	var evs []store.Checked
	var order []string
	err := src.st.View(func(tx *store.Tx) error {
		return tx.EachChained(func(se *store.StoredEvent) error {
			order = append(order, fmt.Sprintf("%s:%d", se.Event.Realm, se.Event.Seq))
			evs = append(evs, store.Checked{Event: se.Event, CID: se.CID, Raw: se.Raw})
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "[test:1 alpha:1 alpha:2 alpha:3 alpha:4 gamma:1 gamma:2 beta:1 beta:2]"; fmt.Sprint(order) != want {
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
