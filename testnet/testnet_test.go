package testnet

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"relay/protocol"
)

// TestRealmsServe starts three realms and finds each answering as itself,
// with a key of its own.
func TestRealmsServe(t *testing.T) {
	net, err := Start(Config{Realms: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	peers := map[string]bool{}
	for _, r := range net.Realms {
		resp, err := http.Get(r.URL + "/api/v1/health")
		if err != nil {
			t.Fatal(err)
		}
		var h struct {
			Status, Realm string
			PeerID        string `json:"peer_id"`
		}
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err != nil || h.Status != "ok" || h.Realm != r.Name {
			t.Fatalf("%s: %+v %v", r.Name, h, err)
		}
		peers[h.PeerID] = true
	}
	if len(peers) != 3 {
		t.Fatalf("peer ids not distinct: %v", peers)
	}
}

// TestRestartSameDir runs a net twice on one directory. The second run finds
// its realms with their keys and data, on new ports; the peers they kept
// are pointed at those ports, so they replicate again without being linked
// anew (Unpeered).
func TestRestartSameDir(t *testing.T) {
	dir := t.TempDir()
	net, err := Start(Config{Realms: 2, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	openThreads(t, net.Realms[0], 1)
	if err := net.WaitConverged(20 * time.Second); err != nil {
		net.Close()
		t.Fatal(err)
	}
	ids := []string{net.Realms[0].Node.PeerID(), net.Realms[1].Node.PeerID()}
	if err := net.Close(); err != nil {
		t.Fatal(err)
	}

	net, err = Start(Config{Realms: 2, Dir: dir, Topology: Unpeered})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	for i, r := range net.Realms {
		if r.Node.PeerID() != ids[i] {
			t.Fatalf("%s came back with another key", r.Name)
		}
	}
	openThreads(t, net.Realms[1], 1)
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, r := range net.Realms {
		if n := threadCount(t, r); n != 2 {
			t.Fatalf("%s lists %d threads, want 2", r.Name, n)
		}
	}
}

// TestFederationSurfaces: health and the manifest name the p2p addresses,
// the descriptor verifies under its own key, and the operator API and
// /metrics show peers and realms.
func TestFederationSurfaces(t *testing.T) {
	net, err := Start(Config{Realms: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	r := net.Realms[0]
	var h struct {
		PeerID string   `json:"peer_id"`
		P2P    []string `json:"p2p"`
	}
	call(t, r, "GET", "/api/v1/health", nil, &h)
	if len(h.P2P) == 0 || !strings.HasSuffix(h.P2P[0], "/p2p/"+h.PeerID) {
		t.Fatalf("health p2p: %+v", h)
	}
	var d struct {
		Realm, Signed string
	}
	call(t, r, "GET", "/api/v1/federation/descriptor", nil, &d)
	raw, _ := base64.StdEncoding.DecodeString(d.Signed)
	if desc, err := protocol.DecodeDescriptor(raw); err != nil || desc.Realm != "r1" {
		t.Fatalf("descriptor: %v %+v", err, desc)
	}
	var peers struct {
		Peers []struct {
			Realm string `json:"realm"`
			State string `json:"state"`
		} `json:"peers"`
	}
	call(t, r, "GET", "/api/v1/federation/peers", nil, &peers)
	if len(peers.Peers) != 1 || peers.Peers[0].Realm != "r2" || peers.Peers[0].State != "connected" {
		t.Fatalf("peers: %+v", peers)
	}
	// An agent token is not the operator.
	agent := as(r, agentToken(t, r, "reader"))
	if st := call(t, agent, "GET", "/api/v1/federation/peers", nil, nil); st != 403 {
		t.Fatalf("agent reads peers: %d", st)
	}
	resp, err := http.Get(r.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{`relay_federation_peers{state="connected"} 1`, `relay_federation_realm_head{realm="r2"}`, "relay_federation_realm_lag", "relay_federation_realm_parked"} {
		if !strings.Contains(string(b), series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}

// TestStartBounds: a net is 1 to MaxRealms realms, and one whose start is
// given up leaves nothing running and nothing on disk.
func TestStartBounds(t *testing.T) {
	for _, n := range []int{0, -1, MaxRealms + 1} {
		if _, err := Start(Config{Realms: n}); err == nil {
			t.Errorf("%d realms started", n)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	dir := t.TempDir()
	if net, err := StartContext(ctx, Config{Realms: 2, Dir: dir}); !errors.Is(err, context.Canceled) || net != nil {
		t.Fatalf("a start given up: %v %v", net, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}
