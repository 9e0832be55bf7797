package testnet

import (
	"strings"
	"testing"
	"time"

	"relay/protocol"
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

// TestForgedAheadDoesNotStall: a peer answers r1's catch-up of r2 with an
// event it signed itself, dated a year ahead. That is not r2's, so r1 does
// not wait for its date: it refuses the range, and catches r2 up once a
// peer answers honestly.
func TestForgedAheadDoesNotStall(t *testing.T) {
	net, err := Start(Config{Realms: 3, Topology: Unpeered})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	r1, r2, r3 := net.Realms[0], net.Realms[1], net.Realms[2]
	openThreads(t, r2, 3)
	if err := net.Link(2, 1); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if h, _ := r3.Node.Store().Heads(); h["r2"].Seq >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("r3 did not get r2's events")
		}
	}
	liar := r3.Node.Federation().Misbehave()
	liar.ForgeRanges(func(realm protocol.Realm, from uint64) [][]byte {
		if realm != "r2" {
			return nil
		}
		se, err := r3.Node.Store().EventAt("r2", from)
		if err != nil {
			return nil
		}
		ev := *se.Event
		ev.At, ev.Sig = time.Now().Add(365*24*time.Hour).UnixMilli(), nil
		raw, _, err := liar.Sign(&ev) // r3's key, not r2's
		if err != nil {
			t.Error(err)
			return nil
		}
		return [][]byte{raw}
	})
	if err := net.Link(0, 2); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		realms, err := r1.Node.Federation().Realms()
		if err != nil {
			t.Fatal(err)
		}
		for _, rs := range realms {
			if rs.Realm == "r2" && strings.Contains(rs.Waiting, "ahead of this node's clock") {
				t.Fatalf("r1 waits on a forged event: %s", rs.Waiting)
			}
		}
	}
	liar.ForgeRanges(nil)
	if err := net.Link(0, 1); err != nil {
		t.Fatal(err)
	}
	openThreads(t, r2, 2)
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatalf("r2 stalled at r1 by a forged event: %v", err)
	}
}

// TestAheadAtRangeStart: r2's event 1025, the first of catch-up's second
// range, is dated an hour ahead (r2 restarted with its clock set ahead). r1
// takes the first range and waits at 1024, though that range is still
// queued, not committed, when the second is checked.
func TestAheadAtRangeStart(t *testing.T) {
	skew := map[string]time.Duration{}
	net, err := Start(Config{Realms: 2, Topology: Unpeered, Skew: skew, MaxClockAhead: time.Second, RateLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	r1, r2 := net.Realms[0], net.Realms[1]
	head := func(r *Realm, realm string) uint64 {
		h, err := r.Node.Store().Heads()
		if err != nil {
			t.Fatal(err)
		}
		return h[protocol.Realm(realm)].Seq
	}
	openThreads(t, r2, int(1024-head(r2, "r2")))
	skew["r2"] = time.Hour
	if err := net.Restart(1); err != nil {
		t.Fatal(err)
	}
	if h := head(r2, "r2"); h != 1024 {
		t.Fatalf("r2 head after restart %d", h)
	}
	openThreads(t, r2, 3)
	se, _ := r2.Node.Store().EventAt("r2", 1025)
	t.Logf("r2 event 1025 dated %s (now %s)", se.Event.Time().Format(time.RFC3339), time.Now().Format(time.RFC3339))
	if err := net.Link(0, 1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for head(r1, "r2") < 1024 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	if h := head(r1, "r2"); h != 1024 {
		t.Fatalf("r1 holds r2's events up to %d; want 1024, as 1025 is dated an hour ahead", h)
	}
}
