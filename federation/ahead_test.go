package federation

import (
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"relay/protocol"
	"relay/store"
)

// TestWaitFarAhead: an event dated beyond what a Duration holds waits, and
// its timer does not wrap into the past and fire at once (over and over).
func TestWaitFarAhead(t *testing.T) {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := store.DefaultConfig("")
	cfg.InMemory, cfg.Realm, cfg.Key = true, "home", key
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &Service{cfg: Config{MaxAhead: time.Minute}, log: cfg.Logger, st: st, stats: newStats(), ctx: ctx,
		pending: map[protocol.Realm]map[uint64]gossiped{}, waiting: map[protocol.Realm]waitNote{}, lanes: map[protocol.Realm]*lane{},
		aheadOf: map[protocol.Realm]aheadWait{}}
	at := time.UnixMilli(math.MaxInt64)
	s.waitUntil("far", &aheadError{seq: 1, at: at, due: at.Add(-time.Minute), allowed: time.Minute}, "")
	time.Sleep(100 * time.Millisecond)
	if !s.waitingForTime("far") {
		t.Fatal("the wait for a far date ended at once")
	}
	s.mu.Lock()
	s.aheadOf["far"].timer.Stop()
	s.mu.Unlock()
}
