package store

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Layouts 1 and 2 kept events by CID, with a realm's chain and the arrival
// order as indexes of CIDs:
//
//	e/c/<cid bytes>            → node sequence (8 BE) ‖ raw signed event
//	e/r/<realm>\x00<seq 8 BE>  → cid bytes
//	e/s/<sequence 8 BE>        → cid bytes
//
// so that reading a range of a chain (catch-up) cost a point read per event.
var (
	legacyEventByCID = []byte("e/c/")
	legacyRealmSeq   = []byte("e/r/")
	legacySequence   = []byte("e/s/")
)

// migrateEvents moves the events of a store of layout 2 or older to the
// current layout, and reports how many it moved. It runs in Open, after the
// write-ahead log's replay and before anything else reads or writes; the
// store is already marked with the new layout, so that older binaries
// refuse it from the start.
//
// It can be interrupted anywhere and run again (legacyEventsLeft tells the
// next Open): it first copies every event to its new keys (copying again
// what a crash lost is harmless) and syncs; then it deletes the old
// indexes, syncs, and only then the old records, which the copy reads, and
// syncs.
func (s *Store) migrateEvents() (int, error) {
	moved, err := s.copyLegacyEvents()
	if err != nil {
		return moved, err
	}
	if err := s.syncDirect(); err != nil {
		return moved, err
	}
	for _, pre := range [][]byte{legacySequence, legacyRealmSeq, legacyEventByCID} {
		if err := migrateStep(); err != nil {
			return moved, err
		}
		if err := s.deletePrefix(context.Background(), pre); err != nil {
			return moved, fmt.Errorf("clearing %q: %w", pre, err)
		}
		if err := s.syncDirect(); err != nil {
			return moved, err
		}
	}
	return moved, migrateStep()
}

// migrateStep is called after each durable step of migrateEvents; a test
// stops the move there, as a crash would.
var migrateStep = func() error { return nil }

// copyLegacyEvents writes every event the old chain indexes name under its
// new keys, a chunk at a time.
func (s *Store) copyLegacyEvents() (int, error) {
	const chunk = 4096
	moved := 0
	from := legacyRealmSeq
	for {
		var next []byte
		wb := s.db.NewWriteBatch()
		err := s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: legacyRealmSeq})
			defer it.Close()
			n := 0
			for it.Seek(from); it.ValidForPrefix(legacyRealmSeq); it.Next() {
				if n == chunk {
					next = it.Item().KeyCopy(nil)
					return nil
				}
				place := it.Item().KeyCopy(nil)[len(legacyRealmSeq):]
				c, err := it.Item().ValueCopy(nil)
				if err != nil {
					return err
				}
				item, err := txn.Get(join(legacyEventByCID, c))
				if err != nil {
					return fmt.Errorf("event %x of %q: %w", c, place, err)
				}
				v, err := item.ValueCopy(nil)
				if err != nil {
					return err
				}
				if len(v) < 8 {
					return fmt.Errorf("corrupt event record %x", c)
				}
				seq := binary.BigEndian.Uint64(v)
				for _, kv := range [][2][]byte{
					{placeKey(place), encodeEventRecord(seq, c, v[8:])},
					{join(prefixEventByCID, c), place},
					{sequenceKey(seq), place},
				} {
					if err := wb.Set(kv[0], kv[1]); err != nil {
						return err
					}
				}
				n++
				moved++
			}
			return nil
		})
		if err == nil {
			err = wb.Flush()
		} else {
			wb.Cancel()
		}
		if err != nil {
			return moved, fmt.Errorf("store: moving events to layout %d: %w", SchemaVersion, err)
		}
		if next == nil {
			return moved, nil
		}
		from = next
	}
}

// legacyEventsLeft reports whether any key of the old event layout is left:
// a move that a crash cut short.
func (s *Store) legacyEventsLeft() bool {
	left := false
	s.db.View(func(txn *badger.Txn) error {
		for _, pre := range [][]byte{legacyEventByCID, legacyRealmSeq, legacySequence} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: pre})
			it.Seek(pre)
			left = left || it.ValidForPrefix(pre)
			it.Close()
		}
		return nil
	})
	return left
}
