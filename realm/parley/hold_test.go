package parley

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"relay/protocol"
	"relay/store"
)

// TestReplyDecidedAfterHold: a reply from another realm that arrives while
// this realm may not write its decision (authoring held for longer than a
// write waits: its chain being brought level) is decided once it may.
// Before, it stayed pending until the node started again.
func TestReplyDecidedAfterHold(t *testing.T) {
	defer func(d time.Duration) { store.AuthorHoldWait = d }(store.AuthorHoldWait)
	store.AuthorHoldWait = 100 * time.Millisecond
	defer func(d time.Duration) { decideAgain = d }(decideAgain)
	decideAgain = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newTestService(t)
	if _, err := s.st.EnsureProjections(ctx); err != nil {
		t.Fatal(err)
	}
	go s.Run(ctx)
	alice := agent(t, "alice")
	open, err := s.post(ctx, alice, "lobby", &protocol.Envelope{Kind: protocol.ActAsk, Body: "home asks"}, "")
	if err != nil {
		t.Fatal(err)
	}
	release := s.st.HoldAuthoring()
	beta := newChainWriter(t, s.st, "beta", 3, nil)
	beta.emit(evMessagePosted, "dan", messageData{Thread: "test:" + open.Thread.ID, N: 1, Kind: "ask", Body: "A question back?", AuthorKind: "llm"})
	time.Sleep(300 * time.Millisecond) // longer than a write waits
	release()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var m messageRec
		s.st.View(func(tx *store.Tx) error {
			_, err := tx.GetJSON(key(pfxMessage, rid{"beta", 1}.bytes()), &m)
			return err
		})
		if m.Status == ReplyAccepted {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the reply is still %q 5 s after the hold ended", m.Status)
		}
	}
}

// TestHeldReplyOfRefusedRealmRefused: a reply from another realm that this
// node held, undecided, when it stopped taking that realm's events (a block,
// a quarantine) is refused when it is decided, as the replies that realm
// posts later are (BlockedEvent), not accepted into the thread.
func TestHeldReplyOfRefusedRealmRefused(t *testing.T) {
	defer func(d time.Duration) { store.AuthorHoldWait = d }(store.AuthorHoldWait)
	store.AuthorHoldWait = 100 * time.Millisecond
	defer func(d time.Duration) { decideAgain = d }(decideAgain)
	decideAgain = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var blocked atomic.Bool
	s := newTestServiceWith(t, func(c *Config) { c.Refusing = func(r protocol.Realm) bool { return r == "beta" && blocked.Load() } })
	if _, err := s.st.EnsureProjections(ctx); err != nil {
		t.Fatal(err)
	}
	go s.Run(ctx)
	open, err := s.post(ctx, agent(t, "alice"), "lobby", &protocol.Envelope{Kind: protocol.ActAsk, Body: "home asks"}, "")
	if err != nil {
		t.Fatal(err)
	}
	release := s.st.HoldAuthoring()
	beta := newChainWriter(t, s.st, "beta", 3, nil)
	beta.emit(evMessagePosted, "dan", messageData{Thread: "test:" + open.Thread.ID, N: 1, Kind: "answer", Body: "An answer.", AuthorKind: "llm"})
	time.Sleep(300 * time.Millisecond) // longer than a write waits
	blocked.Store(true)
	release()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var m messageRec
		s.st.View(func(tx *store.Tx) error {
			_, err := tx.GetJSON(key(pfxMessage, rid{"beta", 1}.bytes()), &m)
			return err
		})
		if m.Status == ReplyRefused {
			if m.Refusal == nil || m.Refusal.Reason != string(protocol.ReasonForbidden) {
				t.Fatalf("refused with %+v, want forbidden", m.Refusal)
			}
			return
		}
		if m.Status == ReplyAccepted || time.Now().After(end) {
			t.Fatalf("the reply of a realm refused here is %q", m.Status)
		}
	}
}
