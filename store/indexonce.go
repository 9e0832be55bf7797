package store

import (
	"context"
	"errors"

	"relay/protocol"
)

// indexChunk is how many records one transaction of IndexOnce indexes.
const indexChunk = 512

// IndexOnce makes an index of the local records under prefix for a store
// written before the index was: unless done is set already, it shows every
// record to index, a chunk of them per transaction, and then sets done.
// One transaction for all of them would hold every index key and could
// grow past what Badger takes (ErrTxnTooBig), and the node would not open.
// index writes only the record's index keys, and must be idempotent: a
// chunk runs again when the node stops before done is set.
func (s *Store) IndexOnce(ctx context.Context, prefix, done []byte, index func(tx *Tx, key, val []byte) error) error {
	err := s.View(func(tx *Tx) error {
		_, err := tx.Get(done)
		return err
	})
	if !errors.Is(err, ErrNotFound) {
		return err // nil: indexed already
	}
	from := prefix
	for from != nil {
		var next []byte
		_, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) {
			next = nil
			n := 0
			return nil, tx.IterateFrom(prefix, from, func(k, v []byte) error {
				if n == indexChunk {
					next = k
					return ErrStop
				}
				n++
				return index(tx, k, v)
			})
		})
		if err != nil {
			return err
		}
		from = next
	}
	_, err = s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) {
		return nil, tx.Set(done, []byte{1})
	})
	return err
}
