package testnet

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
)

type claimAnswer struct {
	Claim struct {
		State        string `json:"state"`
		Attestations []struct {
			CID     string    `json:"cid"`
			At      time.Time `json:"at"`
			Refused string    `json:"refused"`
		} `json:"attestations"`
		SupersededBy *string `json:"superseded_by"`
	} `json:"claim"`
}

// TestClaimRaceConverges: r1 is cut off while r2 attests two of r1's
// claims and r1's author supersedes them, r2 first for one claim and r1
// first for the other. Each side folded the facts in the order it got them;
// healed, all three realms show each claim the same: the attestation made
// before the supersede counts, the one made after it does not, and is
// shown refused.
func TestClaimRaceConverges(t *testing.T) {
	net, err := Start(Config{Realms: 3, Topology: Mesh})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	// Agents, with a write token each.
	r1, r2 := as(net.Realms[0], agentToken(t, net.Realms[0], "author")), as(net.Realms[1], agentToken(t, net.Realms[1], "checker"))
	env := map[string]any{"kind": "propose", "body": "Two claims.",
		"claims": []any{map[string]any{"statement": "one"}, map[string]any{"statement": "two"}}}
	if st := call(t, r1, "POST", "/api/v1/boards/lobby/threads", env, nil); st/100 != 2 {
		t.Fatalf("open: %d", st)
	}
	converge(t, net)

	net.Partition([]int{0}, []int{1, 2})
	attest := func(claim string) claimAnswer {
		var out claimAnswer
		if st := call(t, r2, "POST", "/api/v1/claims/r1:"+claim+"/attest", map[string]any{"verdict": "supports"}, &out); st/100 != 2 || out.Claim.State != "supported" {
			t.Fatalf("r2 attests r1:%s: %d %+v", claim, st, out)
		}
		return out
	}
	supersede := func(claim string) time.Time {
		var out struct {
			Message struct {
				CreatedAt time.Time `json:"created_at"`
			} `json:"message"`
		}
		refine := map[string]any{"kind": "refine", "body": "Sharper.", "relates_to": []string{claim},
			"claims": []any{map[string]any{"statement": claim + ", sharper"}}}
		if st := call(t, r1, "POST", "/api/v1/threads/th_1/messages", refine, &out); st/100 != 2 {
			t.Fatalf("r1 supersedes %s: %d", claim, st)
		}
		return out.Message.CreatedAt
	}
	before := attest("cl_1").Claim.Attestations[0].At
	superseded1 := supersede("cl_1")
	superseded2 := supersede("cl_2")
	after := attest("cl_2").Claim.Attestations[0].At

	net.HealAll()
	if err := net.WaitConverged(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		claim string
		shown bool // whether r2's attestation counts
		tie   bool // same millisecond: the CIDs decide, either way
	}{
		{"cl_1", before.Before(superseded1), before.Equal(superseded1)},
		{"cl_2", after.Before(superseded2), after.Equal(superseded2)},
	} {
		var first []byte
		for _, r := range net.Realms {
			var raw json.RawMessage
			if st := call(t, r, "GET", "/api/v1/claims/r1:"+tc.claim, nil, &raw); st != 200 {
				t.Fatalf("%s: r1:%s: %d %s", r.Name, tc.claim, st, raw)
			}
			// r1 writes its own keys bare, the others prefixed.
			got := bytes.ReplaceAll(raw, []byte(`"r1:`), []byte(`"`))
			if first == nil {
				first = got
				var c claimAnswer
				if err := json.Unmarshal(raw, &c); err != nil {
					t.Fatal(err)
				}
				if c.Claim.State != "superseded" || c.Claim.SupersededBy == nil || len(c.Claim.Attestations) != 1 ||
					(!tc.tie && (c.Claim.Attestations[0].Refused == "") != tc.shown) {
					t.Fatalf("%s: r1:%s: %s", r.Name, tc.claim, raw)
				}
				continue
			}
			if !bytes.Equal(got, first) {
				t.Fatalf("r1:%s differs:\n%s: %s\n%s: %s", tc.claim, net.Realms[0].Name, first, r.Name, got)
			}
		}
	}
}

// TestAttestationKeptAside: r3 blocks r1, so it never gets r1's claim; r2's
// attestation of it is taken at r3 and kept aside for the claim, rather
// than parked waiting for a claim that will not come, and r2's thread
// opened after it is shown at once. Once r3 takes r1's events again, the
// claim shows the attestation.
func TestAttestationKeptAside(t *testing.T) {
	net := meshOf3(t)
	r3 := net.Realms[2]
	block(t, r3, "r1")
	r1, r2 := as(net.Realms[0], agentToken(t, net.Realms[0], "author")), as(net.Realms[1], agentToken(t, net.Realms[1], "checker"))
	env := map[string]any{"kind": "propose", "body": "One claim.", "claims": []any{map[string]any{"statement": "one"}}}
	if st := call(t, r1, "POST", "/api/v1/boards/lobby/threads", env, nil); st/100 != 2 {
		t.Fatalf("open at r1: %d", st)
	}
	for deadline := time.Now().Add(10 * time.Second); call(t, r2, "GET", "/api/v1/claims/r1:cl_1", nil, nil) != 200; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("r2 never held r1's claim")
		}
	}
	if st := call(t, r2, "POST", "/api/v1/claims/r1:cl_1/attest", map[string]any{"verdict": "supports"}, nil); st/100 != 2 {
		t.Fatalf("r2 attests: %d", st)
	}
	if st := call(t, r2, "POST", "/api/v1/boards/lobby/threads", map[string]any{"kind": "note", "body": "Not held back."}, nil); st/100 != 2 {
		t.Fatalf("open at r2: %d", st)
	}
	want, _ := net.Realms[1].Node.Store().Heads()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		heads, _ := r3.Node.Store().Heads()
		if heads["r2"].Seq == want["r2"].Seq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r3 holds r2 to %d of %d; realms %+v", heads["r2"].Seq, want["r2"].Seq, mustRealms(t, r3))
		}
	}
	if rs := realmOf(t, r3, "r2"); rs.Parked != 0 || rs.Quarantined != "" {
		t.Fatalf("r3 on r2: %+v", rs)
	}
	if st := call(t, r3, "GET", "/api/v1/threads/r2:th_1", nil, nil); st != 200 {
		t.Fatalf("r3 holds back r2's thread: %d", st)
	}

	if st := call(t, r3, "DELETE", "/api/v1/federation/blocks/r1", nil, nil); st != 200 {
		t.Fatalf("unblock: %d", st)
	}
	converge(t, net)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var out claimAnswer
		if call(t, r3, "GET", "/api/v1/claims/r1:cl_1", nil, &out) == 200 && out.Claim.State == "supported" && len(out.Claim.Attestations) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r3's claim after the unblock: %+v; realms %+v", out, mustRealms(t, r3))
		}
	}
	// Nothing of r2's waits any more.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st := call(t, r3, "GET", "/api/v1/threads/r2:th_1", nil, nil)
		if rs := realmOf(t, r3, "r2"); st == 200 && rs.Parked == 0 && rs.Waiting == "" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("r3, after the unblock, on r2's thread: %d; on r2: %+v", st, rs)
		}
	}
	// r3's log now holds the attestation before the claim it attests: a
	// rebuild, with r1 no longer blocked, and a restart end as the live
	// projection did.
	if err := r3.Node.Store().Rebuild(context.Background()); err != nil {
		t.Fatalf("rebuild at r3: %v", err)
	}
	if err := net.Restart(2); err != nil {
		t.Fatalf("restart r3: %v", err)
	}
	var out claimAnswer
	if st := call(t, r3, "GET", "/api/v1/claims/r1:cl_1", nil, &out); st != 200 || out.Claim.State != "supported" || len(out.Claim.Attestations) != 1 {
		t.Fatalf("r3's claim after a rebuild: %d %+v", st, out)
	}
}
