package federation

import (
	"context"
	"math"
	"testing"
	"time"

	"relay/protocol"
)

// TestWaitFarAhead: an event dated beyond what a Duration holds waits, and
// its timer does not wrap into the past and fire at once (over and over).
func TestWaitFarAhead(t *testing.T) {
	st := memStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &Service{cfg: Config{MaxAhead: time.Minute}, log: quietLog, st: st, stats: newStats(), ctx: ctx,
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
