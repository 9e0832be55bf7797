package federation

import "testing"

// TestBackOffKeepsTheReason: libp2p's "dial backoff", which follows a
// failed dial, does not replace the reason that dial failed (a peer ID
// mismatch stayed hidden behind it for 20 s in an operator's drill).
func TestBackOffKeepsTheReason(t *testing.T) {
	s := &Service{}
	p := &peerState{}
	s.backOff(p, "failed to dial: dial backoff")
	if p.lastErr != "failed to dial: dial backoff" {
		t.Fatalf("a first error: %q", p.lastErr)
	}
	s.backOff(p, "peer id mismatch: expected 12D3KooWA, but remote key matches 12D3KooWB")
	s.backOff(p, "failed to dial: dial backoff")
	if p.lastErr != "peer id mismatch: expected 12D3KooWA, but remote key matches 12D3KooWB" {
		t.Fatalf("after a backoff: %q", p.lastErr)
	}
	s.backOff(p, "connection refused")
	if p.lastErr != "connection refused" {
		t.Fatalf("a new reason: %q", p.lastErr)
	}
}
