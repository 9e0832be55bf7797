package testnet

import (
	"os"
	"strings"
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
	net, home := olderCopy(t, 3, false)
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

// TestLongerForkIsSeen: a realm that forked its chain with a branch longer
// than what a peer holds of it (a node started on an older copy while its
// peers were out of reach, writing on) is found out by that peer: the
// peer's catch-up fails at a link, and the peer then compares the realm's
// event at its own head's seq, finds the equivocation and quarantines the
// realm. Before, the peer only counted catch-up refusals, for ever.
func TestLongerForkIsSeen(t *testing.T) {
	net, home := olderCopy(t, 1, true)
	openThreads(t, home, 3) // a branch longer than the peer's copy, after the start hold
	net.Heal(0, 1)
	peer := net.Realms[0]
	deadline := time.Now().Add(20 * time.Second)
	for {
		realms, err := peer.Node.Federation().Realms()
		if err != nil {
			t.Fatal(err)
		}
		for _, rs := range realms {
			if rs.Realm == home.Name && strings.Contains(rs.Quarantined, "equivocation") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not find %s's fork out: %+v", peer.Name, home.Name, realms)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// olderCopy runs two realms, r2 opening 2 threads, then `after` more once a
// copy of its data directory was taken, and starts r2 again on that copy.
// cut keeps the two apart from before that start (until the caller heals
// them). It returns the net (closed when the test ends) and r2.
func olderCopy(t *testing.T, after int, cut bool) (*Net, *Realm) {
	t.Helper()
	net, err := Start(Config{Realms: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
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
	openThreads(t, home, after) // after the copy: the peer holds them
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if cut {
		net.Cut(0, 1)
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
	if cut {
		net.Cut(0, 1) // the new node's side too
	}
	return net, home
}
