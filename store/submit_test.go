package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"relay/protocol"
)

type submitStep struct {
	fn        func(tx *Tx) (*protocol.Draft, error)
	wantErr   func(error) bool // nil: no error
	wantEvent bool
}

type submitTest struct {
	name  string
	steps []submitStep
	// keys that must hold these values afterwards ("" = absent)
	want   map[string]string
	events uint64 // node Sequence afterwards
}

var errBoom = errors.New("boom")

func isRefusal(err error) bool {
	var r *protocol.Refusal
	return errors.As(err, &r) && r.Reason == protocol.ReasonThreadClosed
}

func setFn(kv ...string) func(tx *Tx) error {
	return func(tx *Tx) error {
		for i := 0; i < len(kv); i += 2 {
			if err := tx.Set([]byte(kv[i]), []byte(kv[i+1])); err != nil {
				return err
			}
		}
		return nil
	}
}

func idFn(name string) func(tx *Tx) (*protocol.Draft, error) {
	return func(tx *Tx) (*protocol.Draft, error) {
		n, err := tx.NextID(name)
		if err != nil {
			return nil, err
		}
		return nil, tx.Set([]byte("l/last/"+name), fmt.Appendf(nil, "%d", n))
	}
}

var submitTests = []submitTest{
	{
		name: "draft events chain",
		steps: []submitStep{
			{fn: draftFn("t.a", "one"), wantEvent: true},
			{fn: draftFn("t.b", "two"), wantEvent: true},
			{fn: draftFn("t.a", "three"), wantEvent: true},
		},
		events: 3,
	},
	{
		name: "fn error leaves no writes",
		steps: []submitStep{
			{fn: func(tx *Tx) (*protocol.Draft, error) {
				if err := setFn("l/tok/1", "x")(tx); err != nil {
					return nil, err
				}
				return nil, protocol.Refuse(protocol.ReasonThreadClosed)
			}, wantErr: isRefusal},
			{fn: func(tx *Tx) (*protocol.Draft, error) {
				setFn("l/tok/2", "y")(tx)
				d, _ := draftFn("t.a", "x")(tx)
				return d, errBoom
			}, wantErr: func(err error) bool { return err == errBoom }},
		},
		want:   map[string]string{"l/tok/1": "", "l/tok/2": "", "m/seq": ""},
		events: 0,
	},
	{
		name: "local-only write",
		steps: []submitStep{
			{fn: func(tx *Tx) (*protocol.Draft, error) { return nil, setFn("l/tok/1", "secret")(tx) }},
			{fn: func(tx *Tx) (*protocol.Draft, error) { return nil, tx.Delete([]byte("l/tok/1")) }},
			{fn: func(tx *Tx) (*protocol.Draft, error) { return nil, setFn("l/tok/2", "kept")(tx) }},
		},
		want: map[string]string{"l/tok/1": "", "l/tok/2": "kept"},
	},
	{
		name: "local write and event together",
		steps: []submitStep{
			{fn: func(tx *Tx) (*protocol.Draft, error) {
				if err := setFn("l/tok/1", "v")(tx); err != nil {
					return nil, err
				}
				return draftFn("t.a", "x")(tx)
			}, wantEvent: true},
		},
		want:   map[string]string{"l/tok/1": "v"},
		events: 1,
	},
	{
		name: "NextID dense and rolled back",
		steps: []submitStep{
			{fn: idFn("th")},
			{fn: idFn("th")},
			{fn: func(tx *Tx) (*protocol.Draft, error) {
				if _, err := tx.NextID("th"); err != nil {
					return nil, err
				}
				return nil, errBoom
			}, wantErr: func(err error) bool { return err == errBoom }},
			{fn: idFn("th")},
			{fn: idFn("msg")},
		},
		want: map[string]string{"l/last/th": "3", "l/last/msg": "1"},
	},
	{
		name: "panic fails the op only",
		steps: []submitStep{
			{fn: func(tx *Tx) (*protocol.Draft, error) {
				setFn("l/p", "x")(tx)
				panic("kaboom")
			}, wantErr: func(err error) bool { return err != nil && strings.Contains(err.Error(), "kaboom") }},
			{fn: draftFn("t.a", "after"), wantEvent: true},
		},
		want:   map[string]string{"l/p": ""},
		events: 1,
	},
	{
		name: "reserved keys refused",
		steps: []submitStep{
			{fn: func(tx *Tx) (*protocol.Draft, error) { return nil, tx.Set([]byte("e/h/home"), []byte("x")) },
				wantErr: func(err error) bool { return errors.Is(err, ErrReservedKey) }},
			{fn: func(tx *Tx) (*protocol.Draft, error) { return nil, tx.Delete([]byte("m/seq")) },
				wantErr: func(err error) bool { return errors.Is(err, ErrReservedKey) }},
		},
	},
	{
		name: "invalid draft refused",
		steps: []submitStep{
			{fn: func(*Tx) (*protocol.Draft, error) { return &protocol.Draft{Type: ""}, nil },
				wantErr: func(err error) bool { return errors.Is(err, protocol.ErrInvalidEvent) }},
			{fn: func(*Tx) (*protocol.Draft, error) { return &protocol.Draft{Type: "t.empty"}, nil }, wantEvent: true},
		},
		events: 1,
	},
}

func TestSubmit(t *testing.T) {
	for _, tc := range submitTests {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, testConfig(""), counter{})
			ctx := context.Background()
			for i, st := range tc.steps {
				se, err := s.Submit(ctx, st.fn)
				switch {
				case st.wantErr == nil && err != nil:
					t.Fatalf("step %d: %v", i, err)
				case st.wantErr != nil && !st.wantErr(err):
					t.Fatalf("step %d: unexpected error %v", i, err)
				case st.wantEvent != (se != nil):
					t.Fatalf("step %d: event %v, want one: %v", i, se, st.wantEvent)
				}
			}
			for k, want := range tc.want {
				var got []byte
				err := s.View(func(tx *Tx) error {
					var err error
					got, err = tx.Get([]byte(k))
					return err
				})
				if want == "" {
					if !errors.Is(err, ErrNotFound) {
						t.Errorf("%s = %q, %v; want absent", k, got, err)
					}
				} else if err != nil || string(got) != want {
					t.Errorf("%s = %q, %v; want %q", k, got, err, want)
				}
			}
			if got := s.Sequence(); got != tc.events {
				t.Fatalf("Sequence %d, want %d", got, tc.events)
			}
			evs := checkChain(t, s, localRealm, pub(testKey(1)))
			for i, se := range evs {
				if se.Sequence != uint64(i+1) {
					t.Fatalf("event %d has Sequence %d", i+1, se.Sequence)
				}
				if at, err := s.EventAt(localRealm, se.Event.Seq); err != nil || at.CID != se.CID {
					t.Fatalf("EventAt %d: %v", se.Event.Seq, err)
				}
			}
			if c := counts(t, s); c["*"] != tc.events {
				t.Fatalf("projector counted %d events, want %d", c["*"], tc.events)
			}
		})
	}
}

func TestSubmitConcurrentBatches(t *testing.T) {
	s := openTest(t, testConfig(t.TempDir()), counter{})
	const n = 200
	before := s.commits.Load()
	var wg sync.WaitGroup
	seqs := make([]uint64, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			se, err := s.Submit(context.Background(), draftFn("t.c", fmt.Sprint(i)))
			if err == nil {
				seqs[i] = se.Event.Seq
			}
			errs[i] = err
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if seen[seqs[i]] {
			t.Fatalf("seq %d twice", seqs[i])
		}
		seen[seqs[i]] = true
	}
	commits := s.commits.Load() - before
	t.Logf("%d ops in %d commits", n, commits)
	if commits >= n {
		t.Fatalf("%d commits for %d ops: no batching", commits, n)
	}
	checkChain(t, s, localRealm, pub(testKey(1)))
	if c := counts(t, s); c["*"] != n || s.Sequence() != n {
		t.Fatalf("counted %d, Sequence %d, want %d", c["*"], s.Sequence(), n)
	}
}

// TestBatchSplit queues events too large to share one Badger transaction;
// the committer must split the batch and still ack every op.
func TestBatchSplit(t *testing.T) {
	s := openTest(t, testConfig(""), counter{})
	maxSize := 15 * s.opts.MemTableSize / 100 // Badger's limit on a transaction (fits)
	big := strings.Repeat("x", 200<<10)
	n := int(2*maxSize/int64(len(big))) + 1 // events of ~200 KB: twice Badger's transaction limit
	release := pause(t, s)
	before := s.commits.Load()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.Submit(context.Background(), draftFn("t.big", big+fmt.Sprint(i)))
		})
	}
	waitQueued(t, s, n)
	release()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if commits := s.commits.Load() - before; commits < 2 {
		t.Fatalf("%d commits: the batch was never split", commits)
	}
	checkChain(t, s, localRealm, pub(testKey(1)))
	if c := counts(t, s); c["t.big"] != uint64(n) {
		t.Fatalf("counted %d", c["t.big"])
	}

	// One op too large for any transaction fails alone.
	_, err := s.Submit(context.Background(), func(tx *Tx) (*protocol.Draft, error) {
		for i := range int(maxSize/int64(len(big))) + 1 {
			if err := tx.Set(fmt.Appendf(nil, "l/huge/%d", i), []byte(big)); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if err == nil {
		t.Fatalf("an op past Badger's %d-byte transaction limit committed", maxSize)
	}
	if _, err := s.Submit(context.Background(), draftFn("t.a", "after")); err != nil {
		t.Fatal(err)
	}
	checkChain(t, s, localRealm, pub(testKey(1)))
}

// TestOverlayVisibility checks what an op reads: earlier ops of its batch,
// its own writes, and not a failed op's writes.
func TestOverlayVisibility(t *testing.T) {
	s := openTest(t, testConfig(""))
	ctx := context.Background()
	if _, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) {
		return nil, setFn("l/a/1", "c1", "l/a/3", "c3", "l/a/5", "c5")(tx)
	}); err != nil {
		t.Fatal(err)
	}
	release := pause(t, s)
	var wg sync.WaitGroup
	submit := func(fn func(tx *Tx) (*protocol.Draft, error)) {
		wg.Go(func() { s.Submit(ctx, fn) })
	}
	// Ops queue in this order and share one batch.
	submit(func(tx *Tx) (*protocol.Draft, error) { return nil, setFn("l/a/2", "b2")(tx) })
	waitQueued(t, s, 1)
	submit(func(tx *Tx) (*protocol.Draft, error) { setFn("l/a/4", "failed")(tx); return nil, errBoom })
	waitQueued(t, s, 2)
	var fwd, rev, keys []string
	var got []byte
	submit(func(tx *Tx) (*protocol.Draft, error) {
		setFn("l/a/6", "o6", "l/a/1", "o1")(tx)
		tx.Delete([]byte("l/a/3"))
		collect := func(out *[]string) func(k, v []byte) error {
			return func(k, v []byte) error {
				*out = append(*out, string(k[len("l/a/"):])+"="+string(v))
				if len(*out) == 10 {
					return ErrStop
				}
				return nil
			}
		}
		if err := tx.Iterate([]byte("l/a/"), false, collect(&fwd)); err != nil {
			return nil, err
		}
		if err := tx.Iterate([]byte("l/a/"), true, collect(&rev)); err != nil {
			return nil, err
		}
		err := tx.IterateKeys([]byte("l/a/"), func(k []byte) error {
			keys = append(keys, string(k[len("l/a/"):]))
			return nil
		})
		if err != nil {
			return nil, err
		}
		got, err = tx.Get([]byte("l/a/2"))
		return nil, err
	})
	waitQueued(t, s, 3)
	release()
	wg.Wait()
	want := "1=o1 2=b2 5=c5 6=o6"
	if g := strings.Join(fwd, " "); g != want {
		t.Errorf("forward: %s, want %s", g, want)
	}
	if g := strings.Join(rev, " "); g != "6=o6 5=c5 2=b2 1=o1" {
		t.Errorf("reverse: %s", g)
	}
	if g := strings.Join(keys, " "); g != "1 2 5 6" {
		t.Errorf("keys: %s", g)
	}
	if !bytes.Equal(got, []byte("b2")) {
		t.Errorf("Get of an earlier op's write: %q", got)
	}
}

func TestContextCancelledWhileQueued(t *testing.T) {
	s := openTest(t, testConfig(""))
	release := pause(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	ran := false
	done := make(chan error)
	go func() {
		_, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) { ran = true; return nil, nil })
		done <- err
	}()
	waitQueued(t, s, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	release()
	if _, err := s.Submit(context.Background(), draftFn("t.a", "x")); err != nil {
		t.Fatal(err)
	}
	if ran {
		t.Fatal("an abandoned op ran")
	}
}

func TestViewIsReadOnly(t *testing.T) {
	s := openTest(t, testConfig(""))
	err := s.View(func(tx *Tx) error {
		if err := tx.Set([]byte("l/x"), nil); !errors.Is(err, ErrReadOnly) {
			return fmt.Errorf("Set: %v", err)
		}
		if err := tx.Delete([]byte("l/x")); !errors.Is(err, ErrReadOnly) {
			return fmt.Errorf("Delete: %v", err)
		}
		if _, err := tx.NextID("x"); !errors.Is(err, ErrReadOnly) {
			return fmt.Errorf("NextID: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestClose(t *testing.T) {
	s := openTest(t, testConfig(t.TempDir()))
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			_, err := s.Submit(context.Background(), draftFn("t.a", "x"))
			if err != nil && !errors.Is(err, ErrClosed) {
				t.Error(err)
			}
		})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := s.Submit(context.Background(), draftFn("t.a", "x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close: %v", err)
	}
	if _, err := s.EventAt(localRealm, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
	if st := s.State(); st.Status != "closed" {
		t.Fatalf("status %q", st.Status)
	}
}
