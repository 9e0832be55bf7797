package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"relay/protocol"
)

// TestHoldAuthoring: while authoring is held, an op that would append an
// event of this realm waits and then runs on the head it finds; ops that
// author nothing go on; a hold outlasting AuthorHoldWait is
// ErrAuthoringHeld, and the op left nothing behind.
func TestHoldAuthoring(t *testing.T) {
	s := openTest(t, testConfig(t.TempDir()), counter{})
	ctx := context.Background()
	draft := func(*Tx) (*protocol.Draft, error) {
		return &protocol.Draft{Type: "test.note", Author: "home:a", Data: benchPayload}, nil
	}
	if _, err := s.Submit(ctx, draft); err != nil {
		t.Fatal(err)
	}
	release := s.HoldAuthoring()
	second := s.HoldAuthoring() // two holders: both must let go
	done := make(chan *StoredEvent, 1)
	go func() {
		ev, err := s.Submit(ctx, draft)
		if err != nil {
			t.Error(err)
		}
		done <- ev
	}()
	// A local write that authors nothing is not held.
	if _, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) { return nil, tx.Set([]byte("l/x"), []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	release()
	release() // once only
	select {
	case <-done:
		t.Fatal("an event was authored while one holder still held")
	case <-time.After(50 * time.Millisecond):
	}
	second()
	select {
	case ev := <-done:
		if ev == nil || ev.Event.Seq != 2 {
			t.Fatalf("after the hold: %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held write did not run after the release")
	}

	defer func(d time.Duration) { AuthorHoldWait = d }(AuthorHoldWait)
	AuthorHoldWait = 30 * time.Millisecond
	defer s.HoldAuthoring()()
	if _, err := s.Submit(ctx, draft); !errors.Is(err, ErrAuthoringHeld) {
		t.Fatalf("a write held too long: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Submit(cctx, draft); err == nil {
		t.Fatal("a held write of a gone caller ran")
	}
	if h, _ := s.Heads(); h[s.cfg.Realm].Seq != 2 {
		t.Fatalf("head %d after refused writes, want 2", h[s.cfg.Realm].Seq)
	}
}
