package testnet

import (
	"encoding/json"
	"net/http"
	"testing"
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
