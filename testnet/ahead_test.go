package testnet

import (
	"strings"
	"testing"
	"time"
)

// TestEventsDatedAheadWait: r2's clock runs ahead of the others'. r1 and r3
// take each of r2's events only once its date is no more than
// MaxClockAhead past their clocks, tell the operator why they wait, and
// end with all of them: first by catch-up (r2's events from before the
// links), then by gossip (a thread opened once the links are up).
func TestEventsDatedAheadWait(t *testing.T) {
	const skew, allowed = 4 * time.Second, time.Second
	net, err := Start(Config{Realms: 3, Topology: Unpeered, Skew: map[string]time.Duration{"r2": skew}, MaxClockAhead: allowed})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	r1, r2, r3 := net.Realms[0], net.Realms[1], net.Realms[2]
	openThreads(t, r2, 1)
	if err := net.Link(0, 1); err != nil {
		t.Fatal(err)
	}
	if err := net.Link(2, 1); err != nil {
		t.Fatal(err)
	}
	// The first seen time of each of r2's events at r1 and r3.
	seen := map[string]map[uint64]time.Time{"r1": {}, "r3": {}}
	told := map[string]bool{}
	watch := func(until uint64, deadline time.Time) {
		t.Helper()
		for {
			now := time.Now()
			done := true
			for _, r := range []*Realm{r1, r3} {
				heads, err := r.Node.Store().Heads()
				if err != nil {
					t.Fatal(err)
				}
				for seq := uint64(1); seq <= heads["r2"].Seq; seq++ {
					if _, ok := seen[r.Name][seq]; !ok {
						seen[r.Name][seq] = now
					}
				}
				if heads["r2"].Seq < until {
					done = false
					realms, err := r.Node.Federation().Realms()
					if err != nil {
						t.Fatal(err)
					}
					for _, rs := range realms {
						if rs.Realm == "r2" && strings.Contains(rs.Waiting, "ahead of this node's clock") {
							told[r.Name] = true
						}
					}
				}
			}
			if done {
				return
			}
			if now.After(deadline) {
				t.Fatalf("r2's events up to %d not taken: %s", until, net.headsSummary())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	head := func() uint64 {
		heads, err := r2.Node.Store().Heads()
		if err != nil {
			t.Fatal(err)
		}
		return heads["r2"].Seq
	}
	first := head()
	watch(first, time.Now().Add(skew+10*time.Second))
	// Once the links are up, by gossip.
	deadline := time.Now().Add(10 * time.Second)
	for r2.Node.Federation().Misbehave().TopicPeers("r2") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("r2's topic has no peers")
		}
		time.Sleep(20 * time.Millisecond)
	}
	openThreads(t, r2, 1)
	last := head()
	if last <= first {
		t.Fatalf("r2's head did not move: %d", last)
	}
	watch(last, time.Now().Add(skew+10*time.Second))

	for _, name := range []string{"r1", "r3"} {
		if !told[name] {
			t.Errorf("%s never said that r2's next event waits for its time", name)
		}
		for seq := uint64(1); seq <= last; seq++ {
			se, err := r2.Node.Store().EventAt("r2", seq)
			if err != nil {
				t.Fatal(err)
			}
			due := se.Event.Time().Add(-allowed)
			if at := seen[name][seq]; at.Before(due) {
				t.Errorf("%s took r2's event %d at %s, %s before it was due", name, seq, at.Format(time.RFC3339Nano), due.Sub(at))
			}
		}
	}
	if err := net.WaitConverged(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	checkChains(t, net)
}
