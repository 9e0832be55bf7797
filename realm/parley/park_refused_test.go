package parley

import (
	"context"
	"strings"
	"testing"

	"relay/protocol"
)

// TestSealOfForeignClaimRefusedNotParked: a realm sealing another realm's
// claim breaks a rule whatever this node holds, so it is refused at once
// (federation quarantines the realm), not parked to wait for the claim.
func TestSealOfForeignClaimRefusedNotParked(t *testing.T) {
	ctx := context.Background()
	s := newTestService(t)
	if _, err := s.st.EnsureProjections(ctx); err != nil {
		t.Fatal(err)
	}
	beta := newChainWriter(t, s.st, "beta", 3, nil)
	raw, _ := beta.sign(evClaimSealed, "human:operator", sealData{Claim: "alpha:cl_1"})
	_, err := s.st.Ingest(ctx, raw, func(*protocol.Event) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "cannot seal a claim of alpha") {
		t.Fatalf("beta sealing alpha's claim: %v", err)
	}
	if p, _ := s.st.ParkedEvents(0); len(p) != 0 {
		t.Fatalf("parked %+v", p)
	}
}
