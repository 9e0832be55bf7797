package testnet

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"relay/protocol"
	"relay/realm"
	"relay/store"
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
		noQuarantine(t, r)
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
	net, home := stoppedHome(t, 2)
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

// TestRestoredWaitsForAPeer: a federated realm imported from an export
// writes nothing before it compared its chain with a peer's: peers are not
// exported, so without the mark the import leaves it would write at once
// and fork the chain its peers hold beyond the export. Once the operator
// names a peer, it takes its newer events back and writes after them.
func TestRestoredWaitsForAPeer(t *testing.T) {
	net, home, export := exportedRealm(t)
	ctx := context.Background()
	if err := net.Restart(1); err != nil {
		t.Fatal(err)
	}
	openThreads(t, home, 2) // after the export: the peer holds them
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := home.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(home.Dir); err != nil {
		t.Fatal(err)
	}
	if _, err := realm.Import(ctx, realm.ImportConfig{DataDir: home.Dir, In: export}); err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { store.AuthorHoldWait = d }(store.AuthorHoldWait)
	store.AuthorHoldWait = 200 * time.Millisecond // a refused write says so at once
	if err := net.Restart(1); err != nil {
		t.Fatal(err)
	}
	post := func() int {
		return call(t, home, "POST", "/api/v1/boards/lobby/threads", map[string]any{"kind": "ask", "body": "after the restore"}, nil)
	}
	if st := post(); st != http.StatusServiceUnavailable {
		t.Fatalf("a write before any peer was compared: %d, want 503", st)
	}
	if !home.Node.Federation().OwnRestored() {
		t.Fatal("the restored realm does not say it waits")
	}
	if err := net.Link(0, 1); err != nil { // the operator names its peer
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st := post(); st == http.StatusOK || st == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the restored realm still refuses writes after its peer was named")
		}
	}
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	checkChains(t, net)
	for _, r := range net.Realms {
		noQuarantine(t, r)
	}
	if a, b := threadCount(t, net.Realms[0]), threadCount(t, home); a != 4 || b != 4 {
		t.Fatalf("threads: %d at %s, %d at %s; want 4 at both", a, net.Realms[0].Name, b, home.Name)
	}
	if home.Node.Federation().OwnRestored() {
		t.Fatal("the restored realm still says it waits")
	}
	// The mark is gone from the store: a restart does not wait for a peer
	// again (beyond the start's own short hold).
	if err := net.Restart(1); err != nil {
		t.Fatal(err)
	}
	if home.Node.Federation().OwnRestored() {
		t.Fatal("after a restart the realm waits as restored again")
	}
}

// TestRestoredIsLatest: the operator's word that no peer holds newer
// events of a restored realm removes the import's mark: the realm writes
// at once, then and at every later start.
func TestRestoredIsLatest(t *testing.T) {
	_, _, export := exportedRealm(t)
	ctx := context.Background()
	dir := t.TempDir() + "/restored"
	if _, err := realm.Import(ctx, realm.ImportConfig{DataDir: dir, In: export}); err != nil {
		t.Fatal(err)
	}
	waits := func(latest bool) bool {
		t.Helper()
		cfg := realm.DefaultConfig()
		cfg.DataDir, cfg.HTTPAddr, cfg.P2PAddrs = dir, "127.0.0.1:0", []string{"/ip4/127.0.0.1/tcp/0"}
		cfg.RestoredIsLatest = latest
		n, err := realm.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		return n.Federation().OwnRestored()
	}
	if !waits(false) {
		t.Fatal("a restored realm does not wait for a peer")
	}
	if waits(true) {
		t.Fatal("a restored realm waits though the operator said it is the latest")
	}
	if waits(false) {
		t.Fatal("the mark outlived the operator's word")
	}
}

// exportedRealm runs two realms, r2 opening a thread, and exports r2 (with
// its key) once it stopped. It returns the net (closed when the test
// ends), r2, stopped, and the export.
func exportedRealm(t *testing.T) (*Net, *Realm, *bytes.Buffer) {
	t.Helper()
	net, home := stoppedHome(t, 1)
	var export bytes.Buffer
	if _, err := realm.Export(context.Background(), realm.ExportConfig{DataDir: home.Dir, Out: &export, WithKey: true}); err != nil {
		t.Fatal(err)
	}
	return net, home, &export
}

// stoppedHome runs two realms, r2 opening threads threads, and stops r2
// once the two converged. It returns the net (closed when the test ends)
// and r2.
func stoppedHome(t *testing.T, threads int) (*Net, *Realm) {
	t.Helper()
	net, err := Start(Config{Realms: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	home := net.Realms[1]
	openThreads(t, home, threads)
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := home.Stop(); err != nil {
		t.Fatal(err)
	}
	return net, home
}
