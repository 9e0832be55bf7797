package store

import (
	"fmt"
	"testing"
	"time"

	"relay/protocol"
)

// TestBatchingLinger: the writer waits after a batch of several ops only
// while the next batch holds fewer than half as many, and no longer than
// half the batch's time, within lingerMax.
func TestBatchingLinger(t *testing.T) {
	defer func(d time.Duration) { lingerMax = d }(lingerMax)
	lingerMax = 10 * time.Second
	const took = 2 * time.Second // half of it is plain to see
	tests := []struct {
		name       string
		prev, cur  int
		arrive     int // ops the committer adds once the writer waits
		minW, maxW time.Duration
	}{
		{"a lone writer's batch", 1, 0, 0, 0, 500 * time.Millisecond},
		{"a small batch", lingerSiblings - 1, 0, 0, 0, 500 * time.Millisecond},
		{"the next batch half full", 10, 5, 0, 0, 500 * time.Millisecond},
		{"the next batch fills", 10, 1, 6, 0, 500 * time.Millisecond},
		{"nothing comes", 10, 1, 0, took / 2, took/2 + 500*time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bt := newBatching()
			bt.added(tc.cur)
			if tc.arrive > 0 {
				go func() {
					for deadline := time.Now().Add(took); bt.target.Load() == 0; { // until the writer waits
						if time.Now().After(deadline) {
							return
						}
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
		if w := time.Since(start); w < lingerMax || w > lingerMax+500*time.Millisecond {
			t.Fatalf("waited %v, want about lingerMax, %v", w, lingerMax)
		}
	})
}

// TestStoreLingers: the store's writer waits after a batch of several ops,
// even when no op has come since, and the committer's ops end the wait.
// Removing either of the committer's reports (an op added, a batch handed
// off) fails it.
func TestStoreLingers(t *testing.T) {
	// Restored after the store is closed (cleanups run last first): its
	// writer reads it until then.
	d := lingerMax
	t.Cleanup(func() { lingerMax = d })
	lingerMax = 10 * time.Second // the gate below makes the batch slow
	s := openTest(t, testConfig(""), counter{})
	g := gate(s)
	g.armed.Store(true)
	t.Cleanup(func() { // a failed check leaves no writer held at the gate
		g.armed.Store(false)
		for {
			select {
			case <-g.held:
				g.release <- nil
			case g.release <- nil:
			case <-time.After(100 * time.Millisecond):
				return
			}
		}
	})
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("never: " + what)
			}
		}
	}
	draft := func(i int) func(*Tx) (*protocol.Draft, error) { return draftFn("t.a", fmt.Sprint(i)) }
	var acks []<-chan submitResult
	acks = append(acks, submitAsync(s, draft(0)))
	<-g.held // a batch of one commits; 8 ops pile up behind it
	for i := 1; i <= 8; i++ {
		acks = append(acks, submitAsync(s, draft(i)))
	}
	until("8 ops in the next batch", func() bool { return s.batching.cur.Load() == 8 })
	g.release <- nil
	<-g.held // the batch of 8 commits, slowly
	time.Sleep(200 * time.Millisecond)
	g.armed.Store(false)
	g.release <- nil
	until("the writer waits for 4", func() bool { return s.batching.target.Load() == 4 })
	for i := 9; i <= 12; i++ {
		acks = append(acks, submitAsync(s, draft(i)))
	}
	for _, a := range acks {
		if r := <-a; r.err != nil {
			t.Fatal(r.err)
		}
	}
	if n := s.batching.woken.Load(); n != 1 {
		t.Fatalf("the committer ended %d waits, want 1", n)
	}
}
