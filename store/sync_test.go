package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"relay/protocol"
)

// syncGate holds the syncer before each sync while armed.
type syncGate struct {
	armed   atomic.Bool
	held    chan struct{}
	release chan error
}

func gateSync(s *Store) *syncGate {
	g := &syncGate{held: make(chan struct{}), release: make(chan error)}
	s.beforeSync = func() error {
		if !g.armed.Load() {
			return nil
		}
		g.held <- struct{}{}
		return <-g.release
	}
	return g
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestSyncGatesAcksAndReads checks the third stage: a committed batch is
// neither acked, nor reported by Heads, nor visible to View until it is
// synced, while the writer goes on committing the next batch meanwhile.
func TestSyncGatesAcksAndReads(t *testing.T) {
	s := openTest(t, testConfig(""), counter{})
	g := gateSync(s)
	ctx := context.Background()
	if _, err := s.Submit(ctx, draftFn("t.a", "first")); err != nil {
		t.Fatal(err)
	}
	commits := s.commits.Load()

	g.armed.Store(true)
	a := submitAsync(s, draftFn("t.a", "held"))
	<-g.held // a's batch is committed; its sync is held
	if heads, _ := s.Heads(); heads[localRealm].Seq != 1 {
		t.Fatalf("head %d reported before the sync", heads[localRealm].Seq)
	}
	viewed := make(chan uint64, 1)
	go func() {
		var n uint64
		s.View(func(tx *Tx) error {
			v, err := tx.Get(headKey(string(localRealm)))
			if err != nil {
				return err
			}
			h, err := decodeHead(v)
			n = h.Seq
			return err
		})
		viewed <- n
	}()
	b := submitAsync(s, draftFn("t.a", "behind"))
	waitFor(t, "the next batch to commit during the held sync", func() bool { return s.commits.Load() >= commits+2 })
	select {
	case r := <-a:
		t.Fatalf("acked before the sync: %v", r.err)
	case n := <-viewed:
		t.Fatalf("View returned before the sync, seeing seq %d", n)
	case <-time.After(50 * time.Millisecond):
	}
	g.release <- nil
	if r := <-a; r.err != nil || r.se.Event.Seq != 2 {
		t.Fatalf("a: %v", r.err)
	}
	// b's batch was committed while a's sync was held; its own sync is next.
	// The View may have begun after b's commit began, and then waits for it.
	<-g.held
	g.armed.Store(false)
	g.release <- nil
	if n := <-viewed; n < 2 {
		t.Fatalf("View saw seq %d after the sync", n)
	}
	if r := <-b; r.err != nil || r.se.Event.Seq != 3 {
		t.Fatalf("b: %v", r.err)
	}
	if heads, _ := s.Heads(); heads[localRealm].Seq != 3 || s.Sequence() != 3 {
		t.Fatalf("heads %v, sequence %d", heads, s.Sequence())
	}
}

// TestSyncFailure checks that a failed sync fails the store: the ops it
// would have made durable get ErrFailed, so do the ops committed while it
// ran (a later sync could report success for data the failure lost), every
// later write, and a read that would see what was not synced.
func TestSyncFailure(t *testing.T) {
	s := openTest(t, testConfig(""), counter{})
	g := gateSync(s)
	ctx := context.Background()
	if _, err := s.Submit(ctx, draftFn("t.a", "kept")); err != nil {
		t.Fatal(err)
	}
	commits := s.commits.Load()
	g.armed.Store(true)
	a := submitAsync(s, draftFn("t.a", "lost"))
	<-g.held
	b := submitAsync(s, draftFn("t.a", "behind"))
	waitFor(t, "the next batch to commit during the held sync", func() bool { return s.commits.Load() >= commits+2 })
	g.armed.Store(false)
	g.release <- errors.New("disk on fire")
	for _, r := range []submitResult{<-a, <-b} {
		if !errors.Is(r.err, ErrFailed) || !strings.Contains(r.err.Error(), "disk on fire") {
			t.Fatalf("got %v; want ErrFailed", r.err)
		}
	}
	if _, err := s.Submit(ctx, draftFn("t.a", "after")); !errors.Is(err, ErrFailed) {
		t.Fatalf("Submit after a failed sync: %v", err)
	}
	if st := s.State(); st.Status != "failed" || st.Sequence != 1 {
		t.Fatalf("state %+v", st)
	}
	if err := s.View(func(*Tx) error { return nil }); !errors.Is(err, ErrFailed) {
		t.Fatalf("View of unsynced state on a failed store: %v", err)
	}
}

// TestWatcherMayRead checks that a watcher can read the events it is told
// of: the syncer makes them visible before it calls the watchers.
func TestWatcherMayRead(t *testing.T) {
	s := openTest(t, testConfig(""), counter{})
	read := make(chan error, 1)
	s.Watch(func(evs []*StoredEvent) {
		_, err := s.EventByCID(evs[0].CID)
		read <- err
	})
	if _, err := s.Submit(context.Background(), draftFn("t.a", "seen")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher's read never returned")
	}
}

// TestRotationCounted pins the Badger debug line the store learns of
// memtable rotations by: should Badger change it, the rotated-out
// write-ahead logs would no longer be synced at the rotation.
func TestRotationCounted(t *testing.T) {
	logs := &badgerLogs{dir: t.TempDir()}
	opts := badger.DefaultOptions(logs.dir).WithMemTableSize(1 << 20).WithValueThreshold(1 << 16).
		WithLogger(badgerLogger{l: quietLogger(), logs: logs})
	db, err := badger.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	val := make([]byte, 1024)
	for i := 0; i < 4096 && logs.rotations.Load() == 0; i++ {
		if err := db.Update(func(txn *badger.Txn) error { return txn.Set(fmt.Appendf(nil, "k%06d", i), val) }); err != nil {
			t.Fatal(err)
		}
	}
	if logs.rotations.Load() == 0 {
		t.Fatal("4 MiB through a 1 MiB memtable and no rotation seen")
	}
	if err := logs.failure(); err != nil {
		t.Fatal(err)
	}
}

// TestSyncAfterRotation checks that writes across memtable rotations and
// values in Badger's value log are all kept through a reopen.
func TestSyncAfterRotation(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.memTableSize = 1 << 20
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Register(counter{})
	ctx := context.Background()
	body := strings.Repeat("x", 20_000)
	const n = 150
	for i := 0; i < n; i++ {
		if _, err := s.Submit(ctx, draftFn("t.a", body)); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 { // a value for Badger's value log
			big := strings.Repeat("v", 100_000)
			if _, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) {
				return nil, setFn(fmt.Sprintf("l/big/%d", i), big)(tx)
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s.logs.rotations.Load() == 0 {
		t.Fatal("no rotation seen")
	}
	if err := s.logs.failure(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, testConfig(dir), counter{})
	if s.Sequence() != n {
		t.Fatalf("reopened at Sequence %d", s.Sequence())
	}
	if c := counts(t, s); c["*"] != n {
		t.Fatalf("counts %v", c)
	}
	s.View(func(tx *Tx) error {
		if v, err := tx.Get([]byte("l/big/100")); err != nil || len(v) != 100_000 {
			t.Errorf("big value: %d bytes, %v", len(v), err)
		}
		return nil
	})
}
