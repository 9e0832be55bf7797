package federation

import (
	"context"
	"errors"
	"testing"
	"time"

	"relay/protocol"
	"relay/store"
)

// TestOwnHold: the hold on authoring while this realm's chain is brought
// level. At start it ends only at an exchange with a peer that carries the
// realm and is not ahead; behind a peer it ends once the head has reached
// what the peer holds and the numbering was carried on (again and again
// until that succeeds); a hold that cannot end in time is given up, with an
// alarm, and not taken for the same chain again.
func TestOwnHold(t *testing.T) {
	st := memStore(t)
	ctx := context.Background()
	for range 3 {
		if _, err := st.Submit(ctx, func(*store.Tx) (*protocol.Draft, error) {
			return &protocol.Draft{Type: "test.note", Author: "home:a", Data: []byte{0xa0}}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	renumbered, failNext := 0, true
	s := &Service{cfg: Config{Realm: "home", OwnTaken: func(context.Context) error {
		renumbered++
		if failNext {
			failNext = false
			return errors.New("disk full")
		}
		return nil
	}}, st: st, log: quietLog}
	held := func() bool { h, _ := s.OwnHeld(); return h }
	heads, err := st.Heads()
	if err != nil {
		t.Fatal(err)
	}
	head := heads["home"]
	first, err := st.EventAt("home", 1)
	if err != nil {
		t.Fatal(err)
	}

	s.holdOwn(0, time.Hour, "start")
	for _, h := range []struct {
		name string
		head protocol.Head
	}{
		{"a peer without this realm", protocol.Head{}},
		{"a peer ahead, whose chain was not checked", protocol.Head{Seq: 5}},
		{"a peer behind", protocol.Head{Seq: 1, CID: first.CID}},
		{"a peer at this seq with another event", protocol.Head{Seq: head.Seq, CID: first.CID}},
	} {
		s.levelOwn(ctx, "", h.head)
		if !held() {
			t.Fatalf("the start hold ended at an exchange with %s", h.name)
		}
	}
	s.levelOwn(ctx, "", head)
	if held() || renumbered != 0 {
		t.Fatalf("start hold at a level peer: held %v, renumbered %d", held(), renumbered)
	}

	s.holdOwn(3, time.Hour, "behind") // the events were taken: head 3
	s.levelOwn(ctx, "", head)
	if !held() || renumbered != 1 {
		t.Fatalf("a failed renumbering: held %v, renumbered %d", held(), renumbered)
	}
	s.levelOwn(ctx, "", head)
	if held() || renumbered != 2 {
		t.Fatalf("renumbered at last: held %v, renumbered %d", held(), renumbered)
	}

	defer func(d time.Duration) { ownHoldMax = d }(ownHoldMax)
	ownHoldMax = 30 * time.Millisecond
	s.holdOwn(9, time.Hour, "behind, for good") // never reached
	before := renumbered
	deadline := time.Now().Add(5 * time.Second)
	for held() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if held() {
		t.Fatal("a hold outlived ownHoldMax")
	}
	if renumbered != before+1 {
		t.Fatalf("a hold given up on renumbered %d times before writes went on, want once", renumbered-before)
	}
	if a := s.OwnChainAlarms(); len(a) != 1 || a[0].Kind != "ahead" || a[0].Seq != 9 {
		t.Fatalf("alarms %+v", a)
	}
	s.holdOwn(9, time.Hour, "again")
	if held() {
		t.Fatal("held again for a chain given up on")
	}
	s.holdOwn(10, time.Hour, "further")
	if !held() {
		t.Fatal("a chain further on is not held for")
	}
}
