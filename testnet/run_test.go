package testnet

import (
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"relay/federation"
	"relay/protocol"
)

// noQuarantine fails t if r has quarantined a realm.
func noQuarantine(t *testing.T, r *Realm) {
	t.Helper()
	rs, err := r.Node.Federation().Realms()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rs {
		if s.Quarantined != "" {
			t.Fatalf("%s quarantined %s: %s", r.Name, s.Realm, s.Quarantined)
		}
	}
}

// runsNet starts four realms in a mesh, r4 with a thread, converged, and
// returns r4's and r3's means to misbehave once r4's topic has its peers.
func runsNet(t *testing.T) (net *Net, r4 *Realm, m, forger federation.Misbehaver) {
	t.Helper()
	net, err := Start(Config{Realms: 4, Topology: Mesh})
	if err != nil {
		t.Fatal(err)
	}
	r4 = net.Realms[3]
	openThreads(t, r4, 1)
	if err := net.WaitConverged(20 * time.Second); err != nil {
		net.Close()
		t.Fatal(err)
	}
	m = r4.Node.Federation().Misbehave()
	forger = net.Realms[2].Node.Federation().Misbehave()
	deadline := time.Now().Add(20 * time.Second)
	for m.TopicPeers("r4") < 3 {
		if time.Now().After(deadline) {
			net.Close()
			t.Fatal("r4's topic has no peers")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return net, r4, m, forger
}

// TestGossipRuns has r4 publish runs of its own events itself, out of
// order and the last one with a forged event in it: the honest events of
// every run land in order, the forged one nowhere, and r4 is not
// quarantined (a forgery is the sender's fault, not the realm's).
func TestGossipRuns(t *testing.T) {
	net, r4, m, forger := runsNet(t)
	defer net.Close()

	// Seven events after r4's head, signed by r4 but never stored there;
	// the seventh is signed by r3's key instead.
	var raws [][]byte
	ev := nextEvent(t, r4, "test.note", map[string]any{"n": 0})
	var last *protocol.Event
	for i := range 7 {
		if i > 0 {
			ev = &protocol.Event{Realm: "r4", Seq: last.Seq + 1, Prev: protocol.Link{Cid: protocol.CIDOf(raws[i-1])},
				Type: "test.note", At: time.Now().UnixMilli(), Author: "human:operator", Data: ev.Data}
		}
		sign := m.Sign
		if i == 6 {
			sign = forger.Sign
		}
		raw, _, err := sign(ev)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
		last = ev
	}
	base := last.Seq - 7
	for _, run := range [][][]byte{raws[2:4], raws[0:2], raws[4:7]} {
		if err := m.Publish("r4", run...); err != nil {
			t.Fatal(err)
		}
	}

	// Every honest realm ends at the last authentic event (by gossip, or
	// by catch-up from a realm that stored it); at least one refused the
	// forged one (a realm the run did not reach directly never sees it:
	// a refused message is not forwarded).
	want := protocol.CIDOf(raws[5])
	refused := uint64(0)
	for _, r := range net.Realms[:3] {
		deadline := time.Now().Add(20 * time.Second)
		for {
			h, _ := r.Node.Store().Heads()
			if h["r4"].Seq == base+6 && h["r4"].CID.Equals(want) {
				break
			}
			if h["r4"].Seq > base+6 {
				t.Fatalf("%s stored r4 up to %d: the forged event", r.Name, h["r4"].Seq)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: r4 at %d, want %d; %+v", r.Name, h["r4"].Seq, base+6, r.Node.Federation().Counters())
			}
			time.Sleep(20 * time.Millisecond)
		}
		refused += r.Node.Federation().Counters().Refused["signature"]
		noQuarantine(t, r)
	}
	if refused == 0 {
		t.Fatal("no realm refused the forged event")
	}
}

// TestGossipRunForgedInside has r4 publish runs of its own events with a
// forgery inside: one whose successors link to it (so the forger signed
// them too, and the newest signature fails), one whose successor does not
// (the link breaks). Every honest realm stores the genuine events before
// each forgery and nothing of it, and then the genuine rest.
func TestGossipRunForgedInside(t *testing.T) {
	net, r4, m, forger := runsNet(t)
	defer net.Close()

	// chain signs events after prev (raws so far), event i with sign(i).
	first := nextEvent(t, r4, "test.note", map[string]any{"n": 0})
	base := first.Seq - 1
	chain := func(prev [][]byte, n int, sign func(i int) func(*protocol.Event) ([]byte, cid.Cid, error), note int) [][]byte {
		out := append([][]byte{}, prev...)
		for len(out) < len(prev)+n {
			i := len(out)
			ev := &protocol.Event{Realm: "r4", Seq: base + uint64(i) + 1, Type: "test.note", At: first.At,
				Author: "human:operator", Data: mustData(t, map[string]any{"n": note})}
			if i > 0 {
				ev.Prev = protocol.Link{Cid: protocol.CIDOf(out[i-1])}
			} else {
				ev.Prev = first.Prev
			}
			raw, _, err := sign(i)(ev)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, raw)
		}
		return out
	}
	genuine := chain(nil, 8, func(int) func(*protocol.Event) ([]byte, cid.Cid, error) { return m.Sign }, 0)
	// Events 2 to 4 forged: another note at 2, the two after linked to it.
	relinked := chain(genuine[:2], 3, func(int) func(*protocol.Event) ([]byte, cid.Cid, error) { return forger.Sign }, 1)
	// Event 5 forged; the genuine 6 and 7 after it.
	forged := chain(genuine[:5], 1, func(int) func(*protocol.Event) ([]byte, cid.Cid, error) { return forger.Sign }, 1)
	unlinked := append([][]byte{genuine[4], forged[5]}, genuine[6:]...)

	waitAt := func(seq int, why string) {
		t.Helper()
		want := protocol.CIDOf(genuine[seq-1])
		for _, r := range net.Realms[:3] {
			deadline := time.Now().Add(20 * time.Second)
			for {
				h, _ := r.Node.Store().Heads()
				if h["r4"].Seq == base+uint64(seq) && h["r4"].CID.Equals(want) {
					break
				}
				if h["r4"].Seq > base+uint64(seq) {
					t.Fatalf("%s: %s: r4 at %d, beyond %d", r.Name, why, h["r4"].Seq-base, seq)
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: %s: r4 at %d, want %d; %+v", r.Name, why, h["r4"].Seq-base, seq, r.Node.Federation().Counters())
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	if err := m.Publish("r4", relinked...); err != nil {
		t.Fatal(err)
	}
	waitAt(2, "forged and relinked")
	if err := m.Publish("r4", genuine[2:4]...); err != nil {
		t.Fatal(err)
	}
	if err := m.Publish("r4", unlinked...); err != nil {
		t.Fatal(err)
	}
	waitAt(5, "forged, link broken")
	refused := uint64(0)
	for _, r := range net.Realms[:3] {
		refused += r.Node.Federation().Counters().Refused["signature"]
	}
	if refused == 0 {
		t.Fatal("no realm refused a forged event")
	}
	if err := m.Publish("r4", genuine[5:]...); err != nil {
		t.Fatal(err)
	}
	waitAt(8, "genuine")
	for _, r := range net.Realms[:3] {
		noQuarantine(t, r)
	}
}

func mustData(t *testing.T, v any) []byte {
	t.Helper()
	d, err := protocol.EncodeData(v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestGossipRelays has r1's events reach r3 on a line r1–r2–r3 by gossip
// alone: r2, which has them from r1, relays them (after relayDelay), and
// anti-entropy is too slow to be what brings them.
func TestGossipRelays(t *testing.T) {
	net, err := Start(Config{Realms: 3, Topology: Line, SyncInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	r1, r2, r3 := net.Realms[0], net.Realms[1], net.Realms[2]
	deadline := time.Now().Add(20 * time.Second)
	for r2.Node.Federation().Misbehave().TopicPeers("r1") < 2 || r3.Node.Federation().Misbehave().TopicPeers("r1") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("r1's topic has no peers beyond r2")
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := r3.Node.Federation().Counters().Received["gossip"]
	openThreads(t, r1, 3)
	want, _ := r1.Node.Store().Heads()
	deadline = time.Now().Add(10 * time.Second)
	for {
		h, _ := r3.Node.Store().Heads()
		if h["r1"].Seq >= want["r1"].Seq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r3 holds r1 up to %d of %d: %+v", h["r1"].Seq, want["r1"].Seq, r3.Node.Federation().Counters())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := r3.Node.Federation().Counters().Received["gossip"] - before; got == 0 {
		t.Fatalf("r3 stored none of r1's events by gossip: %+v", r3.Node.Federation().Counters())
	}
}
