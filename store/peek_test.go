package store

import (
	"context"
	"errors"
	"testing"

	"relay/protocol"
)

// peekTests are where a key's newest value can be when an op reads it:
// the op's own writes, an earlier op's in the same batch, committed state,
// and deleted or never written.
var peekTests = []struct {
	name  string
	key   string
	want  string // "" for ErrNotFound
	setup []func(*Tx) error
}{
	{"committed", "l/k/committed", "old", nil},
	{"own write", "l/k/committed", "mine", []func(*Tx) error{func(tx *Tx) error { return tx.Set([]byte("l/k/committed"), []byte("mine")) }}},
	{"own owned write", "l/k/owned", "handed over", []func(*Tx) error{func(tx *Tx) error {
		return tx.SetOwned([]byte("l/k/owned"), []byte("handed over"))
	}}},
	{"own delete", "l/k/committed", "", []func(*Tx) error{func(tx *Tx) error { return tx.Delete([]byte("l/k/committed")) }}},
	{"empty value", "l/k/empty", "", nil},
	{"missing", "l/k/none", "", nil},
}

// Peek sees what Get sees, without a copy, wherever the value is.
func TestPeekAgreesWithGet(t *testing.T) {
	s := openTest(t, testConfig(""))
	ctx := context.Background()
	if _, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) {
		if err := tx.Set([]byte("l/k/committed"), []byte("old")); err != nil {
			return nil, err
		}
		return nil, tx.Set([]byte("l/k/empty"), nil)
	}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range peekTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) {
				for _, f := range tt.setup {
					if err := f(tx); err != nil {
						return nil, err
					}
				}
				got, gerr := tx.Get([]byte(tt.key))
				var peeked string
				calls := 0
				perr := tx.Peek([]byte(tt.key), func(v []byte) error { calls++; peeked = string(v); return nil })
				if !errors.Is(perr, gerr) && (perr != nil || gerr != nil) {
					t.Errorf("Peek: %v, Get: %v", perr, gerr)
				}
				if gerr == nil && (peeked != string(got) || calls != 1) {
					t.Errorf("Peek saw %q in %d calls, Get %q", peeked, calls, got)
				}
				if string(got) != tt.want {
					t.Errorf("Get %q, want %q", got, tt.want)
				}
				return nil, errors.New("undo") // leave the committed state to the next case
			})
			if err == nil || err.Error() != "undo" {
				t.Fatal(err)
			}
		})
	}
	// Peek returns fn's error, and reads committed state from a View too.
	errFn := errors.New("from fn")
	err := s.View(func(tx *Tx) error {
		if err := tx.Peek([]byte("l/k/committed"), func([]byte) error { return errFn }); !errors.Is(err, errFn) {
			t.Errorf("Peek returned %v, want fn's error", err)
		}
		return tx.Peek([]byte("l/k/committed"), func(v []byte) error {
			if string(v) != "old" {
				t.Errorf("View: Peek saw %q", v)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A value set with SetOwned commits as one set with Set, and a later op
// reads it from the batch or from Badger alike.
func TestSetOwnedCommits(t *testing.T) {
	s := openTest(t, testConfig(""))
	ctx := context.Background()
	if _, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) {
		return nil, tx.SetOwned([]byte("l/k/owned"), []byte("value"))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) {
		return nil, tx.SetOwned([]byte("x/reserved"), []byte("no"))
	}); !errors.Is(err, ErrReservedKey) {
		t.Fatalf("SetOwned of a reserved key: %v", err)
	}
	err := s.View(func(tx *Tx) error {
		v, err := tx.Get([]byte("l/k/owned"))
		if string(v) != "value" {
			t.Errorf("got %q", v)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
