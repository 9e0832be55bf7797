package testnet

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
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
