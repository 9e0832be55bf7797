package reccache

import (
	"context"
	"errors"
	"testing"

	"relay/protocol"
	"relay/store"
)

type rec struct {
	N    int      `json:"n"`
	Tags []string `json:"tags"`
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	cfg := store.DefaultConfig("")
	cfg.InMemory = true
	s, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// set writes raw at key, as a projector's op would.
func set(t *testing.T, s *store.Store, key, raw string) {
	t.Helper()
	if _, err := s.Submit(context.Background(), func(tx *store.Tx) (*protocol.Draft, error) {
		return nil, tx.Set([]byte(key), []byte(raw))
	}); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, s *store.Store, c *Cache[rec], key string) (rec, bool, error) {
	t.Helper()
	var v rec
	var found bool
	err := s.View(func(tx *store.Tx) error {
		var err error
		found, err = c.Get(tx, []byte(key), &v)
		return err
	})
	return v, found, err
}

// A kept value serves only the bytes it was kept with: other bytes at the
// key (another op's write, a failed op's dropped one) are decoded afresh.
func TestServesOnlyItsBytes(t *testing.T) {
	s := openStore(t)
	c := &Cache[rec]{Verify: true}
	set(t, s, "l/r/1", `{"n":1}`)
	c.Keep([]byte("l/r/1"), []byte(`{"n":1}`), rec{N: 1})
	if v, ok, err := get(t, s, c, "l/r/1"); err != nil || !ok || v.N != 1 {
		t.Fatalf("hit: %+v %v %v", v, ok, err)
	}
	set(t, s, "l/r/1", `{"n":2}`)
	if v, ok, err := get(t, s, c, "l/r/1"); err != nil || !ok || v.N != 2 {
		t.Fatalf("other bytes: %+v %v %v", v, ok, err)
	}
	if _, ok, err := get(t, s, c, "l/r/none"); ok || err != nil {
		t.Fatalf("missing key: %v %v", ok, err)
	}
}

// Verify catches a value kept for bytes that decode to something else.
func TestVerifyCatchesAWrongValue(t *testing.T) {
	s := openStore(t)
	c := &Cache[rec]{Verify: true}
	set(t, s, "l/r/1", `{"n":1}`)
	c.Keep([]byte("l/r/1"), []byte(`{"n":1}`), rec{N: 7})
	if _, _, err := get(t, s, c, "l/r/1"); !errors.Is(err, ErrMismatch) {
		t.Fatalf("got %v, want ErrMismatch", err)
	}
}

// Clone keeps a taker's changes out of the cache; Max bounds it.
func TestCloneAndMax(t *testing.T) {
	s := openStore(t)
	c := &Cache[rec]{Max: 2, Verify: true, Clone: func(r rec) rec {
		r.Tags = append([]string(nil), r.Tags...)
		return r
	}}
	for _, k := range []string{"l/r/1", "l/r/2", "l/r/3"} {
		set(t, s, k, `{"n":1,"tags":["a"]}`)
		v, _, err := get(t, s, c, k)
		if err != nil {
			t.Fatal(err)
		}
		v.Tags[0] = "changed"
	}
	if n := c.Len(); n != 2 {
		t.Fatalf("holds %d records, want 2", n)
	}
	for _, k := range []string{"l/r/1", "l/r/2", "l/r/3"} {
		if v, _, err := get(t, s, c, k); err != nil || v.Tags[0] != "a" {
			t.Fatalf("%s: %+v %v", k, v, err)
		}
	}
}
