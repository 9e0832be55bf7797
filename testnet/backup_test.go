package testnet

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

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
	if _, err := realm.Import(ctx, realm.ImportConfig{DataDir: dst, In: &buf}); err != nil {
		t.Fatal(err)
	}
	cfg := realm.DefaultConfig()
	cfg.P2PAddrs = nil
	cfg.DataDir = dst
	n, err := realm.Open(cfg)
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
}
