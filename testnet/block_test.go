package testnet

import (
	"testing"
	"time"

	"relay/protocol"
)

// TestBlockRealm: r1 blocks r3: r3's new events are neither stored at r1
// nor served by it, while r2 goes on taking them; unblocking resumes sync.
func TestBlockRealm(t *testing.T) {
	net, err := Start(Config{Realms: 3, Topology: Mesh})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	r1, r2, r3 := net.Realms[0], net.Realms[1], net.Realms[2]
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if st := call(t, r1, "POST", "/api/v1/federation/blocks", map[string]any{"realm": "r3", "reason": "spam"}, nil); st != 200 {
		t.Fatalf("block: %d", st)
	}
	before, _ := r1.Node.Store().Heads()
	openThreads(t, r3, 5)
	want, _ := r3.Node.Store().Heads()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h, _ := r2.Node.Store().Heads()
		if h["r3"].Seq == want["r3"].Seq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r2 did not take r3's events: %d of %d", h["r3"].Seq, want["r3"].Seq)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // an anti-entropy round or more
	if h, _ := r1.Node.Store().Heads(); h["r3"].Seq != before["r3"].Seq {
		t.Fatalf("r1 stored a blocked realm's events: %d, was %d", h["r3"].Seq, before["r3"].Seq)
	}
	var realms struct {
		Realms []struct {
			Realm   string `json:"realm"`
			Blocked bool   `json:"blocked"`
		} `json:"realms"`
	}
	call(t, r1, "GET", "/api/v1/federation/realms", nil, &realms)
	blocked := false
	for _, r := range realms.Realms {
		blocked = blocked || (r.Realm == "r3" && r.Blocked)
	}
	if !blocked {
		t.Fatalf("r1 does not show r3 blocked: %+v", realms)
	}
	// A block of the realm itself is refused.
	var ref struct{ Reason string }
	if st := call(t, r1, "POST", "/api/v1/federation/blocks", map[string]any{"realm": "r1"}, &ref); st != 400 || ref.Reason != "invalid_body" {
		t.Fatalf("self block: %d %+v", st, ref)
	}

	if st := call(t, r1, "DELETE", "/api/v1/federation/blocks/r3", nil, nil); st != 200 {
		t.Fatalf("unblock: %d", st)
	}
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if h, _ := r1.Node.Store().Heads(); h[protocol.Realm("r3")].Seq != want["r3"].Seq {
		t.Fatalf("after unblock r1 holds %d of r3", h["r3"].Seq)
	}
}
