package parley

import (
	"fmt"
	"slices"
	"testing"

	"relay/protocol"
	"relay/store"
)

// TestParkedThreadAndLaterBoardCommute: alpha opens a thread in board 2,
// refuting gamma's claim, not held, and then creates board 2. The thread
// waits for the claim, and for its board, so that the board counts it as
// where the events came in order.
func TestParkedThreadAndLaterBoardCommute(t *testing.T) {
	alpha := newChainWriter(t, nil, "alpha", 2, nil)
	ev := []protocol.Evidence{{Kind: "log", Value: "x"}}
	g1, g2 := gammaClaim(t)
	a1, _ := alpha.sign(evThreadOpened, "alice", messageData{Thread: "th_1", Board: 2, N: 1, Kind: "refute", Body: "no", AuthorKind: "llm",
		Refutes: []string{"gamma:cl_1"}, Evidence: ev})
	a2, _ := alpha.sign(evBoardCreated, "human:operator", boardData{ID: 2, Slug: "ideas", Name: "Ideas"})

	final := func(order [][]byte) string {
		s := ingestInOrder(t, order, 0, nil)
		var b Board
		err := s.st.View(func(tx *store.Tx) error {
			_, err := tx.GetJSON(ridKey(pfxBoard, rid{"alpha", 2}), &b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("threads %d messages %d open %d", b.Threads, b.Messages, b.Open)
	}
	inOrder := final([][]byte{g1, g2, a1, a2})
	parked := final([][]byte{a1, a2, g1, g2})
	if inOrder != parked {
		t.Fatalf("alpha's board 2: %q in order, %q with alpha:1 parked", inOrder, parked)
	}
}

// acceptedReply is alpha's board and thread (a1, a2), beta's answer in it
// (b1) and alpha's acceptance of that answer (a3), signed; alpha's writer
// goes on from there.
func acceptedReply(t *testing.T) (alpha *chainWriter, a1, a2, b1, a3 []byte) {
	alpha = newChainWriter(t, nil, "alpha", 2, nil)
	beta := newChainWriter(t, nil, "beta", 3, nil)
	a1, _ = alpha.sign(evBoardCreated, "human:operator", boardData{ID: 1, Slug: "lobby", Name: "Lobby"})
	a2, _ = alpha.sign(evThreadOpened, "alice", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "q?", AuthorKind: "llm"})
	b1, reply := beta.sign(evMessagePosted, "dan", messageData{Thread: "alpha:th_1", N: 1, Kind: "answer", Body: "a", AuthorKind: "llm"})
	a3, _ = alpha.sign(evReplyAccepted, "dan", decisionData{Thread: "th_1", Message: "beta:msg_1", CID: reply.String(),
		Change: &protocol.Change{To: protocol.StateAnswered, Origin: protocol.OriginLLM}})
	return alpha, a1, a2, b1, a3
}

// TestAcceptanceBeforeReplyKeepsHomeOrder: alpha accepts beta's answer in
// its thread, then decides there. A node that gets alpha's events before
// beta's reply ends with the thread as alpha has it: the acceptance waits
// for the reply, and alpha's decision behind it, rather than the reply
// joining the thread after the decision.
func TestAcceptanceBeforeReplyKeepsHomeOrder(t *testing.T) {
	alpha, a1, a2, b1, a3 := acceptedReply(t)
	a4, _ := alpha.sign(evMessagePosted, "alice", messageData{Thread: "th_1", N: 2, Kind: "decide", Body: "so", AuthorKind: "llm",
		Change: &protocol.Change{To: protocol.StateDecided, Origin: protocol.OriginLLM}})

	final := func(order [][]byte) string {
		s := ingestInOrder(t, order, 0, nil)
		var th threadRec
		err := s.st.View(func(tx *store.Tx) error {
			_, err := tx.GetJSON(ridKey(pfxThread, rid{"alpha", 1}), &th)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%s by %s, %d messages, last %s:%d", th.State.State, th.StateBy, th.Messages, th.Last.Realm, th.Last.N)
	}
	inOrder := final([][]byte{a1, a2, b1, a3, a4})
	early := final([][]byte{a1, a2, a3, a4, b1})
	if inOrder != early || inOrder != "decided by alpha:alice, 3 messages, last alpha:2" {
		t.Fatalf("in order: %s; the acceptance first: %s", inOrder, early)
	}
}

// TestRelatesToNamesItsRealm: another realm's message relating to "cl_3"
// relates to that realm's claim, and says so here: "beta:cl_3".
func TestRelatesToNamesItsRealm(t *testing.T) {
	s := newTestService(t)
	got := s.relatesOut("beta", []string{"cl_3", "gamma:msg_2", "test:th_1", "th_4", "12", "bafy-not-a-key"})
	want := []string{"beta:cl_3", "gamma:msg_2", "th_1", "beta:th_4", "12", "bafy-not-a-key"}
	if !slices.Equal(got, want) {
		t.Fatalf("relates_to %v, want %v", got, want)
	}
}

// TestAcceptanceOfRefusedRealmsReplyHoldsNothing: this node takes no events
// of beta (blocked, or quarantined), so beta's reply will not come: alpha's
// acceptance of it is kept for it, as before, and alpha's thread goes on.
func TestAcceptanceOfRefusedRealmsReplyHoldsNothing(t *testing.T) {
	alpha, a1, a2, _, a3 := acceptedReply(t)
	a4, _ := alpha.sign(evMessagePosted, "alice", messageData{Thread: "th_1", N: 2, Kind: "note", Body: "and", AuthorKind: "llm"})
	refusingBeta := func(c *Config) { c.Refusing = func(r protocol.Realm) bool { return r == "beta" } }
	s := ingestInOrderWith(t, refusingBeta, [][]byte{a1, a2, a3, a4}, 0, nil)
	var th threadRec
	err := s.st.View(func(tx *store.Tx) error {
		_, err := tx.GetJSON(ridKey(pfxThread, rid{"alpha", 1}), &th)
		return err
	})
	if err != nil || th.Messages != 2 || th.Last.N != 2 {
		t.Fatalf("alpha's thread: %d messages, last %d, %v", th.Messages, th.Last.N, err)
	}
}
