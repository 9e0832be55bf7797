package testnet

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"relay/federation"
	"relay/protocol"
	"relay/realm"
)

// TestExportFederatedRealm: a realm holding other realms' chains exports
// them with their pinned keys, and a fresh directory imports every chain.
func TestExportFederatedRealm(t *testing.T) {
	net, err := Start(Config{Realms: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range net.Realms {
		openThreads(t, r, 3)
	}
	if err := net.WaitConverged(20 * time.Second); err != nil {
		net.Close()
		t.Fatal(err)
	}
	r1 := net.Realms[0]
	want, _ := r1.Node.Store().Heads()
	if err := r1.Stop(); err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	var buf bytes.Buffer
	ctx := context.Background()
	if _, err := realm.Export(ctx, realm.ExportConfig{DataDir: r1.Dir, Out: &buf, WithKey: true}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	res, err := realm.Import(ctx, realm.ImportConfig{DataDir: dst, In: &buf})
	if err != nil {
		t.Fatal(err)
	}
	cfg := realm.DefaultConfig()
	cfg.P2PAddrs = nil
	cfg.DataDir = dst
	n, err := realm.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	got, _ := n.Store().Heads()
	for _, r := range []protocol.Realm{"r1", "r2", "r3"} {
		if got[r] != want[r] {
			t.Fatalf("restored %s head %+v, want %+v", r, got[r], want[r])
		}
	}
	// The other realms' keys are pinned as they were at r1: another key
	// cannot claim r2 or r3 at the restored node.
	pinned, err := federation.PinnedKeys(n.Store())
	if err != nil {
		t.Fatal(err)
	}
	if res.Pinned != 2 || len(pinned) != 2 {
		t.Fatalf("pinned %d realms: %v", res.Pinned, pinned)
	}
	for _, r := range net.Realms[1:] {
		id, err := peer.IDFromPublicKey(mustLibp2pKey(t, pinned[protocol.Realm(r.Name)]))
		if err != nil || id != r.Node.Federation().PeerID() {
			t.Fatalf("%s pinned to %s, its peer id is %s (%v)", r.Name, id, r.Node.Federation().PeerID(), err)
		}
	}
}

func mustLibp2pKey(t *testing.T, pub ed25519.PublicKey) crypto.PubKey {
	t.Helper()
	k, err := crypto.UnmarshalEd25519PublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
