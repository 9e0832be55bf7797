package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"

	"relay/protocol"
)

// cancelling is a counter that cancels a Rebuild part-way through its replay.
type cancelling struct {
	counter
	cancel func()
	armed  *bool
}

func (c cancelling) Apply(tx *Tx, ev *StoredEvent) error {
	if *c.armed && ev.Sequence == 3 {
		c.cancel()
	}
	return c.counter.Apply(tx, ev)
}

func TestRebuildInterrupted(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.MaxBatch = 2
	ctx, cancel := context.WithCancel(context.Background())
	armed := false
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Register(cancelling{cancel: cancel, armed: &armed})
	for range 6 {
		if _, err := s.Submit(context.Background(), draftFn("t.a", "x")); err != nil {
			t.Fatal(err)
		}
	}
	armed = true // queueing the Rebuild orders this before the committer reads it
	if err := s.Rebuild(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Rebuild: %v", err)
	}
	if st := s.State(); st.Status != "rebuild-needed" {
		t.Fatalf("status %q", st.Status)
	}
	if got := counts(t, s)["*"]; got == 6 {
		t.Fatalf("the interrupted rebuild finished anyway")
	}
	s.Close()

	s = openTest(t, cfg, counter{})
	if st := s.State(); st.Status != "rebuild-needed" {
		t.Fatalf("after reopen, status %q", st.Status)
	}
	if err := s.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := s.State(); st.Status != "ok" || counts(t, s)["*"] != 6 {
		t.Fatalf("status %q, counts %v", st.Status, counts(t, s))
	}
}

func TestRegisterRefusesPrefixOutsideP(t *testing.T) {
	s := openTest(t, testConfig(""))
	defer func() {
		if recover() == nil {
			t.Fatal("a projector owning e/ was registered")
		}
	}()
	s.Register(badPrefix{})
}

type badPrefix struct{ counter }

func (badPrefix) Prefixes() [][]byte { return [][]byte{[]byte("e/")} }

func TestIngestNeedsVerify(t *testing.T) {
	s := openTest(t, testConfig(""))
	raw, _ := remoteEvent(t, testKey(2), 1, cid.Undef, "r")
	if _, err := s.Ingest(context.Background(), raw, nil); err == nil {
		t.Fatal("stored an event nobody verified")
	}
}

// countingBy is a counter whose records depend on its version: version 2
// counts every event twice, so a store projected by version 1 is wrong for
// version 2 until rebuilt.
type countingBy struct{ version int }

func (c countingBy) ProjectionVersion() string { return fmt.Sprintf("count/%d", c.version) }
func (countingBy) Prefixes() [][]byte          { return [][]byte{counterPrefix} }

func (c countingBy) Apply(tx *Tx, ev *StoredEvent) error {
	for range c.version {
		if err := (counter{}).Apply(tx, ev); err != nil {
			return err
		}
	}
	return nil
}

// TestEnsureProjections: projections are rebuilt when the projectors that
// made them were other versions, unknown, or a rebuild was cut short, and
// left alone otherwise.
func TestEnsureProjections(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir())
	reopen := func(ps ...Projector) *Store {
		s, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			s.Register(p)
		}
		return s
	}
	ensure := func(s *Store, want bool) {
		t.Helper()
		rebuilt, err := s.EnsureProjections(ctx)
		if err != nil || rebuilt != want {
			t.Fatalf("EnsureProjections: rebuilt %v, %v; want rebuilt %v", rebuilt, err, want)
		}
	}

	s := reopen(countingBy{1})
	ensure(s, false) // no events: the versions are only recorded
	submitMany(t, s, 4)
	ensure(s, false)
	s.Close()

	s = reopen(countingBy{1})
	ensure(s, false) // the same versions: nothing to do
	if c := counts(t, s)["*"]; c != 4 {
		t.Fatalf("counted %d", c)
	}
	s.Close()

	s = reopen(countingBy{2})
	ensure(s, true) // a new version
	if c := counts(t, s)["*"]; c != 8 {
		t.Fatalf("after the rebuild for version 2, counted %d, want 8", c)
	}
	s.Close()

	s = reopen(countingBy{2}, counter{})
	ensure(s, true) // a projector the projections were not made by
	if c := counts(t, s)["*"]; c != 12 {
		t.Fatalf("after the rebuild for a new projector, counted %d, want 12", c)
	}
	s.Close()

	// A store whose projections predate recorded versions is rebuilt too.
	s = reopen(countingBy{2}, counter{})
	if err := s.exclusive(ctx, func() error {
		if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(keyProjection) }); err != nil {
			return err
		}
		return s.syncDirect()
	}); err != nil {
		t.Fatal(err)
	}
	ensure(s, true)
	ensure(s, false)

	// A rebuild cut short (its marker set, the projections cleared) is done
	// again at the next open.
	if err := s.exclusive(ctx, func() error {
		if err := s.setDirect(keyRebuilding, []byte{1}); err != nil {
			return err
		}
		return s.deletePrefix(ctx, counterPrefix)
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = reopen(countingBy{2}, counter{})
	if st := s.State(); st.Status != "rebuild-needed" {
		t.Fatalf("after a rebuild cut short, status %q", st.Status)
	}
	ensure(s, true)
	if st, c := s.State(), counts(t, s)["*"]; st.Status != "ok" || c != 12 {
		t.Fatalf("after the rebuild: status %q, counted %d, want 12", st.Status, c)
	}
	s.Close()
}

// TestDeletePrefixManyChunks deletes a prefix of more keys than one chunk
// holds, and nothing beside it.
func TestDeletePrefixManyChunks(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, testConfig(t.TempDir()))
	const n, per = 25_000, 5_000
	for i := 0; i < n; i += per {
		if _, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) {
			for j := i; j < i+per; j++ {
				if err := tx.Set(fmt.Appendf(nil, "p/del/%06d", j), []byte{1}); err != nil {
					return nil, err
				}
			}
			return nil, tx.Set([]byte("p/delx"), []byte{1}) // shares the prefix's bytes but not the prefix
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.exclusive(ctx, func() error { return s.deletePrefix(ctx, []byte("p/del/")) }); err != nil {
		t.Fatal(err)
	}
	var left []string
	if err := s.View(func(tx *Tx) error {
		return tx.Iterate([]byte("p/del"), false, func(k, _ []byte) error {
			left = append(left, string(k))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0] != "p/delx" {
		t.Fatalf("left under p/del: %d keys, first %q; want only p/delx", len(left), left[:min(len(left), 1)])
	}
}

// failingAt is a counter whose Apply fails at one event while armed.
type failingAt struct {
	counter
	seq   uint64
	armed *atomic.Bool
}

func (f failingAt) Apply(tx *Tx, ev *StoredEvent) error {
	if f.armed.Load() && ev.Sequence == f.seq {
		return errors.New("projector refuses")
	}
	return f.counter.Apply(tx, ev)
}

// TestRebuildProjectorFails: a projector failing part-way through the
// replay, while chunks before it commit behind, stops the rebuild with its
// error and the event, leaves the store marked for a rebuild and usable,
// and a later rebuild completes.
func TestRebuildProjectorFails(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir())
	cfg.MaxBatch = 2
	armed := new(atomic.Bool)
	s := openTest(t, cfg, failingAt{seq: 7, armed: armed})
	submitMany(t, s, 12)
	armed.Store(true)
	err := s.Rebuild(ctx)
	if err == nil || !strings.Contains(err.Error(), "event 7") || !strings.Contains(err.Error(), "projector refuses") {
		t.Fatalf("Rebuild: %v", err)
	}
	if st := s.State(); st.Status != "rebuild-needed" {
		t.Fatalf("status %q", st.Status)
	}
	armed.Store(false)
	if _, err := s.Submit(ctx, draftFn("t.a", "after")); err != nil {
		t.Fatalf("a submit after the failed rebuild: %v", err)
	}
	if err := s.Rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	if st, c := s.State(), counts(t, s)["*"]; st.Status != "ok" || c != 13 {
		t.Fatalf("after the second rebuild: status %q, counted %d, want 13", st.Status, c)
	}
}

// countingFrom is countingBy that counts the events it projects, and
// cancels at sequence at when cancel is set.
type countingFrom struct {
	countingBy
	applied *atomic.Int64
	at      uint64
	cancel  func()
}

func (c countingFrom) Apply(tx *Tx, ev *StoredEvent) error {
	c.applied.Add(1)
	if c.cancel != nil && ev.Sequence == c.at {
		c.cancel()
	}
	return c.countingBy.Apply(tx, ev)
}

// TestRebuildTakenUp: a rebuild cut short is taken up where it stopped by
// the next one for the same projector versions, and the projections end as
// a whole rebuild makes them.
func TestRebuildTakenUp(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.MaxBatch = 2
	s := openTest(t, cfg, countingBy{1})
	if _, err := s.EnsureProjections(context.Background()); err != nil {
		t.Fatal(err)
	}
	submitMany(t, s, 6)
	s.Close()

	ctx, cancel := context.WithCancel(context.Background())
	var first, second atomic.Int64
	s = openTest(t, cfg, countingFrom{countingBy: countingBy{2}, applied: &first, at: 3, cancel: cancel})
	if _, err := s.EnsureProjections(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("the first rebuild: %v", err)
	}
	if st := s.State(); st.Status != "rebuild-needed" || first.Load() == 6 {
		t.Fatalf("status %q after %d events", st.Status, first.Load())
	}
	s.Close()

	s = openTest(t, cfg, countingFrom{countingBy: countingBy{2}, applied: &second})
	if rebuilt, err := s.EnsureProjections(context.Background()); err != nil || !rebuilt {
		t.Fatalf("the second rebuild: %v %v", rebuilt, err)
	}
	if n := second.Load(); n == 0 || n+first.Load() != 6 {
		t.Fatalf("projected %d events, then %d more, of 6", first.Load(), n)
	}
	if st, c := s.State(), counts(t, s); st.Status != "ok" || c["*"] != 12 || c["t.a"]+c["t.b"] != 12 {
		t.Fatalf("status %q, counts %v", st.Status, c)
	}
	s.Close()

	// Done: the next start finds nothing to rebuild.
	s = openTest(t, cfg, countingFrom{countingBy: countingBy{2}, applied: &second})
	if rebuilt, err := s.EnsureProjections(context.Background()); err != nil || rebuilt {
		t.Fatalf("after it: %v %v", rebuilt, err)
	}
}

// failingV is failingAt with a version.
type failingV struct {
	failingAt
	v string
}

func (f failingV) ProjectionVersion() string { return f.v }

// TestRebuildTakenUpAtAFailure: a rebuild stopped by an event that
// fails to project (a transient fault here) must not be taken up past that
// event by the next start of the same binary.
func TestRebuildTakenUpAtAFailure(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir())
	cfg.MaxBatch = 2
	armed := new(atomic.Bool)
	s := openTest(t, cfg, failingV{failingAt{seq: 7, armed: armed}, "f/1"})
	if _, err := s.EnsureProjections(ctx); err != nil {
		t.Fatal(err)
	}
	submitMany(t, s, 12)
	s.Close()

	armed.Store(true)
	s = openTest(t, cfg, failingV{failingAt{seq: 7, armed: armed}, "f/2"})
	if _, err := s.EnsureProjections(ctx); err == nil || !strings.Contains(err.Error(), "event 7") {
		t.Fatalf("first start of f/2: %v", err)
	}
	s.Close()

	armed.Store(false) // the fault is gone; the same binary starts again
	s = openTest(t, cfg, failingV{failingAt{seq: 7, armed: armed}, "f/2"})
	if _, err := s.EnsureProjections(ctx); err != nil {
		t.Fatal(err)
	}
	if st, c := s.State(), counts(t, s)["*"]; st.Status != "ok" || c != 12 {
		t.Fatalf("after the resumed rebuild: status %q, counted %d of 12 events", st.Status, c)
	}
}
