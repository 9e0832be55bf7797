package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ipfs/go-cid"

	"relay/protocol"
)

// commitGate holds the writer before a commit while armed, so a test can
// act while a batch is in flight, then let the commit go on or fail it.
type commitGate struct {
	armed   atomic.Bool
	held    chan struct{}
	release chan error
}

func gate(s *Store) *commitGate {
	g := &commitGate{held: make(chan struct{}), release: make(chan error)}
	s.beforeCommit = func() error {
		if !g.armed.Load() {
			return nil
		}
		g.held <- struct{}{}
		return <-g.release
	}
	return g
}

type submitResult struct {
	se  *StoredEvent
	err error
}

func submitAsync(s *Store, fn func(*Tx) (*protocol.Draft, error)) <-chan submitResult {
	ch := make(chan submitResult, 1)
	go func() {
		se, err := s.Submit(context.Background(), fn)
		ch <- submitResult{se, err}
	}()
	return ch
}

// TestPipelineReadsInFlight checks that an op run while the batch before it
// commits reads that batch's writes and head, and is acked after it.
func TestPipelineReadsInFlight(t *testing.T) {
	s := openTest(t, testConfig(""), counter{})
	g := gate(s)
	ctx := context.Background()
	if _, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) {
		return nil, setFn("l/k/1", "c1", "l/k/3", "c3")(tx)
	}); err != nil {
		t.Fatal(err)
	}

	g.armed.Store(true)
	a := submitAsync(s, func(tx *Tx) (*protocol.Draft, error) {
		if err := setFn("l/k/2", "a2", "l/k/3", "a3")(tx); err != nil {
			return nil, err
		}
		return draftFn("t.a", "a")(tx)
	})
	<-g.held // a's batch is committing
	var got, rev []string
	ran := make(chan struct{})
	b := submitAsync(s, func(tx *Tx) (*protocol.Draft, error) {
		defer close(ran)
		for _, r := range []bool{false, true} {
			err := tx.Iterate([]byte("l/k/"), r, func(k, v []byte) error {
				if r {
					rev = append(rev, string(k)+"="+string(v))
				} else {
					got = append(got, string(k)+"="+string(v))
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		return draftFn("t.b", "b")(tx)
	})
	<-ran
	select {
	case r := <-b:
		t.Fatalf("acked before the batch before it committed: %v", r.err)
	default:
	}
	g.armed.Store(false)
	g.release <- nil
	ra, rb := <-a, <-b
	if ra.err != nil || rb.err != nil {
		t.Fatal(ra.err, rb.err)
	}
	if want := "l/k/1=c1 l/k/2=a2 l/k/3=a3"; strings.Join(got, " ") != want {
		t.Fatalf("read %q, want %q", strings.Join(got, " "), want)
	}
	if want := "l/k/3=a3 l/k/2=a2 l/k/1=c1"; strings.Join(rev, " ") != want {
		t.Fatalf("read in reverse %q, want %q", strings.Join(rev, " "), want)
	}
	if rb.se.Event.Seq != 2 || !rb.se.Event.Prev.Equals(ra.se.CID) || rb.se.Sequence != 2 {
		t.Fatalf("b at seq %d Sequence %d, prev %v; a is %s", rb.se.Event.Seq, rb.se.Sequence, rb.se.Event.Prev, ra.se.CID)
	}
	checkChain(t, s, localRealm, pub(testKey(1)))
	if c := counts(t, s); c["*"] != 2 {
		t.Fatalf("counts %v", c)
	}
}

// TestCommitFailure fails a commit while the next batch is built on it:
// both fail, the store refuses writes from then on, and reopening recovers
// the last good state.
func TestCommitFailure(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	s.Register(counter{})
	g := gate(s)
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.Submit(ctx, draftFn("t.a", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	heads, _ := s.Heads()

	g.armed.Store(true)
	a := submitAsync(s, draftFn("t.a", "lost"))
	<-g.held
	ran := make(chan struct{})
	b := submitAsync(s, func(tx *Tx) (*protocol.Draft, error) {
		close(ran)
		return draftFn("t.a", "behind")(tx)
	})
	<-ran
	g.release <- errors.New("disk on fire")
	for _, r := range []submitResult{<-a, <-b} {
		if !errors.Is(r.err, ErrFailed) || !strings.Contains(r.err.Error(), "disk on fire") || r.se != nil {
			t.Fatalf("got %v, %v; want ErrFailed", r.se, r.err)
		}
	}
	if _, err := s.Submit(ctx, func(*Tx) (*protocol.Draft, error) {
		t.Error("an op ran on a failed store")
		return nil, nil
	}); !errors.Is(err, ErrFailed) {
		t.Fatalf("Submit after failure: %v", err)
	}
	raw, _ := remoteEvent(t, testKey(2), 1, cid.Undef, "r")
	if _, err := s.Ingest(ctx, raw, verifyWith(testKey(2))); !errors.Is(err, ErrFailed) {
		t.Fatalf("Ingest after failure: %v", err)
	}
	if err := s.Rebuild(ctx); !errors.Is(err, ErrFailed) {
		t.Fatalf("Rebuild after failure: %v", err)
	}
	if st := s.State(); st.Status != "failed" || st.Sequence != 3 {
		t.Fatalf("state %+v", st)
	}
	if got, _ := s.Heads(); !maps.Equal(got, heads) {
		t.Fatalf("heads %v, had %v", got, heads)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, testConfig(dir), counter{})
	if s.Sequence() != 3 {
		t.Fatalf("reopened at Sequence %d", s.Sequence())
	}
	if se, err := s.Submit(ctx, draftFn("t.a", "after")); err != nil || se.Event.Seq != 4 {
		t.Fatalf("Submit after reopen: %v", err)
	}
	checkChain(t, s, localRealm, pub(testKey(1)))
	if c := counts(t, s); c["*"] != 4 {
		t.Fatalf("counts %v", c)
	}
}

// TestBadgerRefusalFailsAlone checks that what Badger would refuse fails the
// op that wrote it alone: the ops around it, run before and after it while
// a batch is in flight, commit.
func TestBadgerRefusalFailsAlone(t *testing.T) {
	s := openTest(t, testConfig(""), counter{})
	release := pause(t, s)
	ok1 := submitAsync(s, draftFn("t.a", "before"))
	waitQueued(t, s, 1)
	bad := submitAsync(s, func(tx *Tx) (*protocol.Draft, error) {
		if err := tx.Set([]byte("!badger!mine"), []byte("x")); err != nil {
			return nil, err
		}
		return draftFn("t.a", "bad")(tx)
	})
	waitQueued(t, s, 2)
	ok2 := submitAsync(s, draftFn("t.a", "after"))
	waitQueued(t, s, 3)
	release()
	if r := <-bad; r.err == nil {
		t.Fatal("Badger's internal prefix was written")
	}
	r1, r2 := <-ok1, <-ok2
	if r1.err != nil || r2.err != nil {
		t.Fatal(r1.err, r2.err)
	}
	if r2.se.Event.Seq != 2 || !r2.se.Event.Prev.Equals(r1.se.CID) {
		t.Fatalf("the op after the refused one is at seq %d", r2.se.Event.Seq)
	}
	checkChain(t, s, localRealm, pub(testKey(1)))
}

// TestPipelineDropsWritelessBatches: batches whose ops wrote nothing (all
// refused, say) leave the committer's list of batches to read through as
// batches that wrote do, rather than pile up until the next write.
func TestPipelineDropsWritelessBatches(t *testing.T) {
	s := openTest(t, testConfig(t.TempDir()), counter{})
	ctx := context.Background()
	if _, err := s.Submit(ctx, draftFn("t.a", "first")); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if _, err := s.Submit(ctx, func(*Tx) (*protocol.Draft, error) { return nil, refused }); !errors.Is(err, refused) {
					t.Errorf("a refused op: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	// The batch before this op's is the last one it can still hold.
	var pending int
	if _, err := s.Submit(ctx, func(*Tx) (*protocol.Draft, error) {
		pending = len(s.c.pending)
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if pending > 1 {
		t.Fatalf("%d batches that wrote nothing still read through", pending)
	}
	if _, err := s.Submit(ctx, draftFn("t.a", "second")); err != nil {
		t.Fatal(err)
	}
	if c := counts(t, s)["*"]; c != 2 {
		t.Fatalf("counted %d, want 2", c)
	}
}
