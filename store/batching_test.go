package store

import (
	"testing"
	"time"
)

// TestBatchingLinger: the writer waits after a batch of several ops only
// while the next batch holds fewer than half as many, and no longer than
// half the batch's time, within lingerMax.
func TestBatchingLinger(t *testing.T) {
	defer func(d time.Duration) { lingerMax = d }(lingerMax)
	lingerMax = time.Second
	const took = 400 * time.Millisecond // half of it is plain to see
	tests := []struct {
		name       string
		prev, cur  int
		arrive     int // ops the committer adds once the writer waits
		minW, maxW time.Duration
	}{
		{"a lone writer's batch", 1, 0, 0, 0, 50 * time.Millisecond},
		{"a small batch", lingerSiblings - 1, 0, 0, 0, 50 * time.Millisecond},
		{"the next batch half full", 10, 5, 0, 0, 50 * time.Millisecond},
		{"the next batch fills", 10, 1, 6, 0, 100 * time.Millisecond},
		{"nothing comes", 10, 1, 0, took / 2, took/2 + 150*time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bt := newBatching()
			bt.added(tc.cur)
			if tc.arrive > 0 {
				go func() {
					for bt.target.Load() == 0 { // until the writer waits
						time.Sleep(time.Millisecond)
					}
					for n := tc.cur + 1; n <= tc.cur+tc.arrive; n++ {
						bt.added(n)
					}
				}()
			}
			start := time.Now()
			bt.linger(tc.prev, took)
			if w := time.Since(start); w < tc.minW || w > tc.maxW {
				t.Fatalf("waited %v, want %v to %v", w, tc.minW, tc.maxW)
			}
			if bt.target.Load() != 0 {
				t.Fatal("the target outlived the wait")
			}
		})
	}
	t.Run("capped", func(t *testing.T) {
		lingerMax = 10 * time.Millisecond
		bt := newBatching()
		start := time.Now()
		bt.linger(10, took)
		if w := time.Since(start); w < lingerMax || w > lingerMax+100*time.Millisecond {
			t.Fatalf("waited %v, want about lingerMax, %v", w, lingerMax)
		}
	})
}
