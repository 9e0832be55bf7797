package testnet

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"relay/protocol"
)

// honestConverged waits until realms[0..n) hold the same heads of each other.
func honestConverged(t *testing.T, net *Net, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		same := true
		first, _ := net.Realms[0].Node.Store().Heads()
		for _, r := range net.Realms[1:n] {
			h, _ := r.Node.Store().Heads()
			for _, o := range net.Realms[:n] {
				k := protocol.Realm(o.Name)
				if h[k].Seq != first[k].Seq || !h[k].CID.Equals(first[k].CID) {
					same = false
				}
			}
		}
		if same {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("honest realms not converged: %s", net.headsSummary())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nextEvent drafts the realm's next event after its head, as its store
// would, without storing it.
func nextEvent(t *testing.T, r *Realm, typ string, data any) *protocol.Event {
	t.Helper()
	heads, err := r.Node.Store().Heads()
	if err != nil {
		t.Fatal(err)
	}
	h := heads[protocol.Realm(r.Name)]
	d, err := protocol.EncodeData(data)
	if err != nil {
		t.Fatal(err)
	}
	ev := &protocol.Event{Realm: r.Name, Seq: h.Seq + 1, Type: typ, At: time.Now().UnixMilli(), Author: "human:operator", Data: d}
	if h.Seq > 0 {
		ev.Prev = protocol.Link{Cid: h.CID}
	}
	return ev
}

// TestMisbehavingPeers has r4 and r5 lie in every way the issue names; the
// honest realms r1..r3 refuse each lie and keep working.
func TestMisbehavingPeers(t *testing.T) {
	net, err := Start(Config{Realms: 5, Topology: Mesh})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	openThreads(t, net.Realms[0], 2)
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	r1, r4, r5 := net.Realms[0], net.Realms[3], net.Realms[4]
	liar, twofaced := r4.Node.Federation().Misbehave(), r5.Node.Federation().Misbehave()
	// Lies are told once: wait until they have an audience on each topic.
	deadline := time.Now().Add(20 * time.Second)
	for liar.TopicPeers("r1") < 3 || liar.TopicPeers("r4") < 3 || twofaced.TopicPeers("r5") < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the liars' topics have no peers")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A forged signature: r4 writes r1's next event with its own key.
	forged := nextEvent(t, r1, "parley.thread.pinned", map[string]any{"thread": "th_1", "pinned": true})
	raw, _, err := liar.Sign(forged)
	if err != nil {
		t.Fatal(err)
	}
	if err := liar.Publish("r1", raw); err != nil {
		t.Fatal(err)
	}
	// A replay: r1's first event again.
	old, err := r1.Node.Store().EventAt("r1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := liar.Publish("r1", old.Raw); err != nil {
		t.Fatal(err)
	}
	// Malformed bytes on a topic.
	if err := liar.Publish("r1", []byte("not an event")); err != nil {
		t.Fatal(err)
	}
	// A thread it does not own: r4 pins r1's thread, in r4's own chain.
	pin := nextEvent(t, r4, "parley.thread.pinned", map[string]any{"thread": "r1:th_1", "pinned": true})
	raw, _, err = liar.Sign(pin)
	if err != nil {
		t.Fatal(err)
	}
	if err := liar.Publish("r4", raw); err != nil {
		t.Fatal(err)
	}
	// Equivocation: r5 signs a second event at the seq its head holds.
	heads, _ := r5.Node.Store().Heads()
	prior, err := r5.Node.Store().EventAt("r5", heads["r5"].Seq)
	if err != nil {
		t.Fatal(err)
	}
	twin := *prior.Event
	twin.Sig = nil
	twin.At++
	raw, _, err = twofaced.Sign(&twin)
	if err != nil {
		t.Fatal(err)
	}
	if err := twofaced.Publish("r5", raw); err != nil {
		t.Fatal(err)
	}
	// Oversized and malformed catch-up frames.
	ctx := context.Background()
	huge := binary.AppendUvarint(nil, 1<<40)
	if _, err := liar.SendSync(ctx, r1.Node.Federation().PeerID(), huge); err == nil {
		t.Log("oversized frame: stream closed without error")
	}
	junk := append(binary.AppendUvarint(nil, 5), "hello"...)
	if b, _ := liar.SendSync(ctx, r1.Node.Federation().PeerID(), junk); len(b) > 0 {
		t.Fatalf("junk request answered: %q", b)
	}

	// A gossip message can miss a peer right after the mesh forms, and a
	// forgery never comes by catch-up (no honest realm holds it): the liar
	// forges afresh until r2 and r3 have each refused one, or time is up.
	deadline = time.Now().Add(20 * time.Second)
	for _, r := range net.Realms[1:3] {
		for r.Node.Federation().Counters().Refused["signature"] == 0 && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			forged.At++
			raw, _, err := liar.Sign(forged)
			if err != nil {
				t.Fatal(err)
			}
			if err := liar.Publish("r1", raw); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Every honest realm quarantines r5 (equivocation; the evidence travels
	// with catch-up to those the lie did not reach) and keeps the evidence;
	// none stores r4's pin of r1's thread, and those it reached quarantine
	// r4 (a realm that already scored r4 down for the forgery never takes
	// it in). r1's chain stays as r1 wrote it.
	deadline = time.Now().Add(20 * time.Second)
	quarantinedR4, refusedSig := 0, uint64(0)
	for _, r := range net.Realms[:3] {
		var q map[string]string
		for {
			rs, err := r.Node.Federation().Realms()
			if err != nil {
				t.Fatal(err)
			}
			q = map[string]string{}
			for _, s := range rs {
				q[s.Realm] = s.Quarantined
			}
			if q["r5"] != "" && (r == r1 || r.Node.Federation().Counters().Refused["signature"] > 0) || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !strings.Contains(q["r5"], "equivocation") {
			t.Fatalf("%s: r5 not quarantined for equivocation: %v", r.Name, q)
		}
		if n := r.Node.Federation().Counters().Refused["equivocation"]; n == 0 {
			t.Errorf("%s counts no refusal for r5's equivocation", r.Name)
		}
		if q["r1"] != "" || q["r2"] != "" || q["r3"] != "" {
			t.Fatalf("%s: an honest realm quarantined: %v", r.Name, q)
		}
		if q["r4"] != "" {
			quarantinedR4++
		}
		if h, _ := r.Node.Store().Heads(); h["r4"].Seq >= pin.Seq {
			t.Fatalf("%s stored r4's pin of r1's thread", r.Name)
		}
		refusedSig += r.Node.Federation().Counters().Refused["signature"]
		if evs, _ := r.Node.Store().Equivocations(); len(evs) != 2 {
			t.Errorf("%s keeps %d pieces of evidence, want 2", r.Name, len(evs))
		}
	}
	if refusedSig < 2 {
		t.Errorf("the honest realms refused %d forged signatures, want one at r2 and r3 at least", refusedSig)
	}
	if quarantinedR4 == 0 {
		t.Fatal("no honest realm quarantined r4")
	}
	// r4's pin of r1's thread was applied nowhere.
	var th struct {
		Thread struct {
			Pinned bool `json:"pinned"`
		} `json:"thread"`
	}
	for _, r := range net.Realms[:3] {
		if st := call(t, r, "GET", "/api/v1/threads/r1:th_1", nil, &th); st != 200 {
			t.Fatalf("%s: r1:th_1: %d", r.Name, st)
		}
		if th.Thread.Pinned {
			t.Fatalf("%s: r4 pinned r1's thread", r.Name)
		}
	}

	// r5's own node learns that its key signed an event it did not (the
	// evidence comes with the peers' heads), and tells its operator.
	deadline = time.Now().Add(20 * time.Second)
	for {
		alarms := r5.Node.Federation().OwnChainAlarms()
		if len(alarms) > 0 {
			if a := alarms[0]; a.Kind != "fork" || a.Seq != twin.Seq || a.CID == prior.CID.String() {
				t.Fatalf("r5's alarm: %+v", a)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("r5 was not told that its key signed elsewhere")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var fed struct {
		OwnChain []map[string]any `json:"own_chain"`
	}
	if st := call(t, r5, "GET", "/api/v1/federation", nil, &fed); st != 200 || len(fed.OwnChain) == 0 {
		t.Fatalf("r5's federation status: %d %+v", st, fed)
	}

	// The honest realms keep working.
	openThreads(t, net.Realms[1], 3)
	openThreads(t, r1, 3)
	honestConverged(t, net, 3, 20*time.Second)
	checkChains(t, net)

	// Their operators lift r5's quarantine: r5's chain goes on at each,
	// and the evidence, still held and still passed on by peers, does not
	// quarantine r5 again.
	for _, r := range net.Realms[:3] {
		if st := call(t, r, "DELETE", "/api/v1/federation/blocks/r5", nil, nil); st != 200 {
			t.Fatalf("%s: lift r5's quarantine: %d", r.Name, st)
		}
	}
	openThreads(t, r5, 2)
	want, _ := r5.Node.Store().Heads()
	deadline = time.Now().Add(20 * time.Second)
	for _, r := range net.Realms[:3] {
		for {
			h, _ := r.Node.Store().Heads()
			if h["r5"].Seq == want["r5"].Seq {
				break
			}
			if time.Now().After(deadline) {
				rs, _ := r.Node.Federation().Realms()
				t.Fatalf("%s holds r5 at %d of %d after the quarantine was lifted: %+v", r.Name, h["r5"].Seq, want["r5"].Seq, rs)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, r := range net.Realms[:3] {
		rs, _ := r.Node.Federation().Realms()
		for _, st := range rs {
			if st.Realm == "r5" && st.Quarantined != "" {
				t.Fatalf("%s quarantined r5 again: %s", r.Name, st.Quarantined)
			}
		}
		if evs, _ := r.Node.Store().Equivocations(); len(evs) != 2 {
			t.Errorf("%s keeps %d pieces of evidence after the lift, want 2", r.Name, len(evs))
		}
	}
}
