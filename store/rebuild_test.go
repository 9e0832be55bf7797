package store

import (
	"context"
	"errors"
	"testing"

	"github.com/ipfs/go-cid"
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
