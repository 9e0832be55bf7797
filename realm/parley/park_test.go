package parley

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"relay/protocol"
	"relay/store"
)

// TestSealOfForeignClaimRefusedNotParked: a realm sealing another realm's
// claim breaks a rule whatever this node holds, so it is refused at once
// (federation quarantines the realm), not parked to wait for the claim.
func TestSealOfForeignClaimRefusedNotParked(t *testing.T) {
	ctx := context.Background()
	s := newTestService(t)
	if _, err := s.st.EnsureProjections(ctx); err != nil {
		t.Fatal(err)
	}
	beta := newChainWriter(t, s.st, "beta", 3, nil)
	raw, _ := beta.sign(evClaimSealed, "human:operator", sealData{Claim: "alpha:cl_1"})
	_, err := s.st.Ingest(ctx, raw, func(*protocol.Event) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "cannot seal a claim of alpha") {
		t.Fatalf("beta sealing alpha's claim: %v", err)
	}
	if p, _ := s.st.ParkedEvents(0); len(p) != 0 {
		t.Fatalf("parked %+v", p)
	}
}

// gammaClaim is gamma's board and a thread with gamma:cl_1, signed: the
// record another realm's events refer to before it is held.
func gammaClaim(t *testing.T) (g1, g2 []byte) {
	gamma := newChainWriter(t, nil, "gamma", 4, nil)
	g1, _ = gamma.sign(evBoardCreated, "human:operator", boardData{ID: 1, Slug: "lobby", Name: "Lobby"})
	g2, _ = gamma.sign(evThreadOpened, "gus", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "propose", Body: "g", AuthorKind: "llm",
		Claims: []claimData{{N: 1, Statement: "g claims"}}})
	return g1, g2
}

// alphaThread is alpha's writer and its first two events, signed: its
// board and a thread, th_1, on it.
func alphaThread(t *testing.T) (alpha *chainWriter, a1, a2 []byte) {
	alpha = newChainWriter(t, nil, "alpha", 2, nil)
	a1, _ = alpha.sign(evBoardCreated, "human:operator", boardData{ID: 1, Slug: "lobby", Name: "Lobby"})
	a2, _ = alpha.sign(evThreadOpened, "alice", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "q", AuthorKind: "llm"})
	return alpha, a1, a2
}

// ingestInOrder ingests the signed events of order into a new service,
// calling during, if set, once the first n are in; then it makes an unpark
// pass, after which nothing may wait.
func ingestInOrder(t *testing.T, order [][]byte, n int, during func(*Service)) *Service {
	t.Helper()
	return ingestInOrderWith(t, nil, order, n, during)
}

// ingestInOrderWith is ingestInOrder into a service whose Config with
// changes.
func ingestInOrderWith(t *testing.T, with func(*Config), order [][]byte, n int, during func(*Service)) *Service {
	t.Helper()
	ctx := context.Background()
	s := newTestServiceWith(t, with)
	if _, err := s.st.EnsureProjections(ctx); err != nil {
		t.Fatal(err)
	}
	for i, raw := range order {
		if _, err := s.st.Ingest(ctx, raw, func(*protocol.Event) error { return nil }); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if i+1 == n && during != nil {
			during(s)
		}
	}
	s.st.Unpark(ctx)
	if p, err := s.st.ParkedEvents(0); err != nil || len(p) != 0 {
		t.Fatalf("still parked %+v %v", p, err)
	}
	return s
}

// TestParkedRealmKeepsItsOrder: alpha:3 waits for gamma's claim; alpha's
// later refine of alpha:3's claim and its close of the thread wait behind
// it, so that once gamma's claim arrives the claim is superseded and the
// thread closed, as where the events came in order.
func TestParkedRealmKeepsItsOrder(t *testing.T) {
	alpha, a1, a2 := alphaThread(t)
	ev := []protocol.Evidence{{Kind: "log", Value: "x"}}
	g1, g2 := gammaClaim(t)
	a3, _ := alpha.sign(evMessagePosted, "alice", messageData{Thread: "th_1", N: 2, Kind: "refute", Body: "no", AuthorKind: "llm",
		Refutes: []string{"gamma:cl_1"}, Evidence: ev, Claims: []claimData{{N: 2, Statement: "a claims"}},
		Change: &protocol.Change{To: protocol.StateAnswered, Origin: "act"}})
	a4, _ := alpha.sign(evMessagePosted, "alice", messageData{Thread: "th_1", N: 3, Kind: "refine", Body: "sharper", AuthorKind: "llm",
		RelatesTo: []string{"cl_2"}, Claims: []claimData{{N: 3, Statement: "a claims, sharper"}}})
	a5, _ := alpha.sign(evThreadState, "human:operator", stateData{Thread: "th_1", Via: "close",
		Change: protocol.Change{To: protocol.StateClosed, Origin: "close", Confirmed: true}})

	final := func(order [][]byte) string {
		s := ingestInOrder(t, order, 0, nil)
		var c claimRec
		var th threadRec
		err := s.st.View(func(tx *store.Tx) error {
			if _, err := tx.GetJSON(key(pfxClaim, rid{"alpha", 2}.bytes()), &c); err != nil {
				return err
			}
			_, err := tx.GetJSON(ridKey(pfxThread, rid{"alpha", 1}), &th)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return string(c.State) + " " + string(th.State.State)
	}
	inOrder := final([][]byte{g1, g2, a1, a2, a3, a4, a5})
	parked := final([][]byte{a1, a2, a3, a4, a5, g1, g2})
	if inOrder != "superseded closed" || parked != inOrder {
		t.Fatalf("claim and thread: %q in order, %q with alpha:3 parked", inOrder, parked)
	}
}

// TestParkedRealmGoesOn: alpha:3 waits for gamma's claim, which it
// refutes; alpha's later thread, and a reply in it with a claim of its own,
// touch nothing alpha:3 does, so they are shown at once; its later reply in
// the thread of alpha:3 waits behind it. Once gamma's claim arrives, every
// record is as where the events came in order.
func TestParkedRealmGoesOn(t *testing.T) {
	alpha, a1, a2 := alphaThread(t)
	ev := []protocol.Evidence{{Kind: "log", Value: "x"}}
	g1, g2 := gammaClaim(t)
	a3, _ := alpha.sign(evMessagePosted, "alice", messageData{Thread: "th_1", N: 2, Kind: "refute", Body: "no", AuthorKind: "llm",
		Refutes: []string{"gamma:cl_1"}, Evidence: ev})
	a4, _ := alpha.sign(evThreadOpened, "bob", messageData{Thread: "th_2", Board: 1, N: 3, Kind: "ask", Body: "other", AuthorKind: "llm"})
	a5, _ := alpha.sign(evMessagePosted, "alice", messageData{Thread: "th_2", N: 4, Parent: "msg_3", Kind: "answer", Body: "yes", AuthorKind: "llm",
		Claims: []claimData{{N: 1, Statement: "mine"}}, Change: &protocol.Change{To: protocol.StateAnswered, Origin: "llm"}})
	a6, _ := alpha.sign(evMessagePosted, "bob", messageData{Thread: "th_1", N: 5, Parent: "msg_2", Kind: "note", Body: "after", AuthorKind: "llm"})

	type state struct{ th1, th2, gclaim string }
	read := func(s *Service) state {
		var out state
		err := s.st.View(func(tx *store.Tx) error {
			var t1, t2 threadRec
			var c claimRec
			if _, err := tx.GetJSON(ridKey(pfxThread, rid{"alpha", 1}), &t1); err != nil {
				return err
			}
			if _, err := tx.GetJSON(ridKey(pfxThread, rid{"alpha", 2}), &t2); err != nil {
				return err
			}
			if _, err := tx.GetJSON(key(pfxClaim, rid{"gamma", 1}.bytes()), &c); err != nil {
				return err
			}
			out = state{th1: fmt.Sprintf("%s %d %d %v", t1.State.State, t1.Messages, t1.Last.N, t1.Awaiting),
				th2:    fmt.Sprintf("%s %d %d %v", t2.State.State, t2.Messages, t2.Last.N, t2.Awaiting),
				gclaim: fmt.Sprintf("%s %d", c.State, len(c.RefutedBy))}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	final := func(order [][]byte, during func(*Service)) state {
		return read(ingestInOrder(t, order, 6, during))
	}
	inOrder := final([][]byte{g1, g2, a1, a2, a3, a4, a5, a6}, nil)
	parked := final([][]byte{a1, a2, a3, a4, a5, a6, g1, g2}, func(s *Service) {
		p, err := s.st.ParkedEvents(0)
		if err != nil || len(p) != 2 || p[0].Seq != 3 || p[1].Seq != 6 {
			t.Fatalf("with gamma's claim not held, parked %+v %v", p, err)
		}
		var t2 threadRec
		err = s.st.View(func(tx *store.Tx) error {
			_, err := tx.GetJSON(ridKey(pfxThread, rid{"alpha", 2}), &t2)
			return err
		})
		if err != nil || t2.Messages != 2 || t2.State.State != protocol.StateAnswered {
			t.Fatalf("alpha's th_2 held back: %+v %v", t2, err)
		}
	})
	if inOrder != parked || inOrder.gclaim != "refuted 1" {
		t.Fatalf("in order %+v, with alpha:3 parked %+v", inOrder, parked)
	}
}

// TestDecisionWaitsForRefutedClaim: beta's reply into this realm's thread
// refutes gamma's claim, not held here. Accepting it would refute what is
// not held, so the decision waits, and is made once gamma's claim arrives.
func TestDecisionWaitsForRefutedClaim(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newTestService(t)
	if _, err := s.st.EnsureProjections(ctx); err != nil {
		t.Fatal(err)
	}
	go s.Run(ctx)
	open, err := s.post(ctx, agent(t, "alice"), "lobby", &protocol.Envelope{Kind: protocol.ActAsk, Body: "home asks"}, "")
	if err != nil {
		t.Fatal(err)
	}
	beta := newChainWriter(t, s.st, "beta", 3, nil)
	gamma := newChainWriter(t, s.st, "gamma", 4, nil)
	beta.emit(evMessagePosted, "dan", messageData{Thread: "test:" + open.Thread.ID, N: 1, Kind: "refute", Body: "Not so.", AuthorKind: "llm",
		Refutes: []string{"gamma:cl_1"}, Evidence: []protocol.Evidence{{Kind: "log", Value: "failed"}}})
	status := func() string {
		var m messageRec
		s.st.View(func(tx *store.Tx) error {
			_, err := tx.GetJSON(key(pfxMessage, rid{"beta", 1}.bytes()), &m)
			return err
		})
		return m.Status
	}
	time.Sleep(200 * time.Millisecond)
	if st := status(); st != ReplyPending {
		t.Fatalf("the reply before gamma's claim: %q", st)
	}
	gamma.emit(evBoardCreated, "human:operator", boardData{ID: 1, Slug: "lobby", Name: "Lobby"})
	gamma.emit(evThreadOpened, "gus", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "propose", Body: "g", AuthorKind: "llm",
		Claims: []claimData{{N: 1, Statement: "g claims"}}})
	for end := time.Now().Add(5 * time.Second); status() != ReplyAccepted; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the reply after gamma's claim: %q", status())
		}
	}
}
