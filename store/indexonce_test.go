package store

import (
	"context"
	"encoding/binary"
	"testing"

	"relay/protocol"
)

// TestIndexOnce: every record, over several chunks, is shown to index
// once, in key order, and the mark stops a second run.
func TestIndexOnce(t *testing.T) {
	s := openTest(t, testConfig(""))
	ctx := context.Background()
	const n = 2*indexChunk + 3
	_, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) {
		for i := range n {
			if err := tx.Set(binary.BigEndian.AppendUint64([]byte("l/rec/"), uint64(i)), []byte("r")); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var seen []uint64
	index := func(tx *Tx, k, _ []byte) error {
		i := binary.BigEndian.Uint64(k[len("l/rec/"):])
		seen = append(seen, i)
		return tx.Set(binary.BigEndian.AppendUint64([]byte("l/ix/"), i), nil)
	}
	for range 2 {
		if err := s.IndexOnce(ctx, []byte("l/rec/"), []byte("l/done"), index); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d records indexed, want %d", len(seen), n)
	}
	for i, got := range seen {
		if got != uint64(i) {
			t.Fatalf("record %d indexed as %d-th", got, i)
		}
	}
	keys := 0
	if err := s.View(func(tx *Tx) error {
		return tx.IterateKeys([]byte("l/ix/"), func([]byte) error { keys++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if keys != n {
		t.Errorf("%d index keys, want %d", keys, n)
	}
}
