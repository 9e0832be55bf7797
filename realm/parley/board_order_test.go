package parley

import (
	"fmt"
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
	gamma := newChainWriter(t, nil, "gamma", 4, nil)
	ev := []protocol.Evidence{{Kind: "log", Value: "x"}}
	g1, _ := gamma.sign(evBoardCreated, "human:operator", boardData{ID: 1, Slug: "lobby", Name: "Lobby"})
	g2, _ := gamma.sign(evThreadOpened, "gus", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "propose", Body: "g", AuthorKind: "llm",
		Claims: []claimData{{N: 1, Statement: "g claims"}}})
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
