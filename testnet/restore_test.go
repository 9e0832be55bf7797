package testnet

import (
	"os"
	"testing"
	"time"

	"relay/protocol"
)

// TestOlderCopyTakesItsOwnEvents: a realm started again on an older copy
// of its store (a backup put back) while its peer holds events it signed
// after the copy was taken takes those events back before it authors any.
// Before, its next write forked its own chain: the peer quarantined the
// realm and the write was lost there. A write sent right after the start
// waits and then lands after them.
func TestOlderCopyTakesItsOwnEvents(t *testing.T) {
	net, err := Start(Config{Realms: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	home := net.Realms[1]
	openThreads(t, home, 2)
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := home.Stop(); err != nil {
		t.Fatal(err)
	}
	backup := t.TempDir() + "/copy"
	if err := os.CopyFS(backup, os.DirFS(home.Dir)); err != nil {
		t.Fatal(err)
	}
	if err := net.Restart(1); err != nil {
		t.Fatal(err)
	}
	openThreads(t, home, 3) // after the copy
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := home.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(home.Dir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(home.Dir, os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	if err := net.Restart(1); err != nil {
		t.Fatal(err)
	}
	openThreads(t, home, 1) // at once: it waits for the chain, then lands
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	checkChains(t, net)
	for _, r := range net.Realms {
		if n := threadCount(t, r); n != 6 {
			t.Errorf("%s lists %d threads, want 6", r.Name, n)
		}
		realms, err := r.Node.Federation().Realms()
		if err != nil {
			t.Fatal(err)
		}
		for _, rs := range realms {
			if rs.Quarantined != "" {
				t.Errorf("%s quarantined %s: %s", r.Name, rs.Realm, rs.Quarantined)
			}
		}
		if alarms := r.Node.Federation().OwnChainAlarms(); len(alarms) > 0 {
			t.Errorf("%s raised own-chain alarms: %+v", r.Name, alarms)
		}
	}
	if h, _ := home.Node.Store().Heads(); h[protocol.Realm(home.Name)].Seq == 0 {
		t.Fatal("no head")
	}
}
