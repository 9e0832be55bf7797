package federation

import (
	"errors"
	"fmt"
	"testing"

	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"
)

// TestBackOffKeepsTheReason: libp2p's "dial backoff", which follows a
// failed dial, does not replace the reason that dial failed (a peer ID
// mismatch stayed hidden behind it for 20 s in an operator's drill); a
// dial failing for backoff on one address and another reason on another
// is that other reason.
func TestBackOffKeepsTheReason(t *testing.T) {
	s := &Service{}
	p := &peerState{}
	s.dialFailed(p, fmt.Errorf("failed to dial: %w", swarm.ErrDialBackoff))
	if p.lastErr == "" {
		t.Fatal("a first error is not kept")
	}
	mismatch := errors.New("peer id mismatch: expected 12D3KooWA, but remote key matches 12D3KooWB")
	s.dialFailed(p, mismatch)
	s.dialFailed(p, fmt.Errorf("failed to dial: %w", swarm.ErrDialBackoff))
	a, b := ma.StringCast("/ip4/127.0.0.1/tcp/1"), ma.StringCast("/ip4/127.0.0.1/udp/1/quic-v1")
	s.dialFailed(p, &swarm.DialError{Peer: "x", DialErrors: []swarm.TransportError{{Address: a, Cause: swarm.ErrDialBackoff}, {Address: b, Cause: swarm.ErrDialBackoff}}})
	if p.lastErr != mismatch.Error() {
		t.Fatalf("after backoffs: %q", p.lastErr)
	}
	mixed := &swarm.DialError{Peer: "x", DialErrors: []swarm.TransportError{{Address: a, Cause: swarm.ErrDialBackoff}, {Address: b, Cause: errors.New("connection refused")}}}
	s.dialFailed(p, mixed)
	if p.lastErr != mixed.Error() {
		t.Fatalf("a dial failing for another reason too: %q", p.lastErr)
	}
}
