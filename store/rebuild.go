package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Rebuild deletes every registered projector's prefixes and replays all
// events in Sequence order through the projectors, MaxBatch events per
// transaction. It runs alone on the committer, the pipeline drained: Submit
// and Ingest wait until it ends. Readers meanwhile see projections part-way rebuilt. An m/rebuilding
// marker stays set until the replay completes, so a crash or an abort (ctx,
// Close) shows as State().Status "rebuild-needed" after the next Open.
func (s *Store) Rebuild(ctx context.Context) error {
	return s.exclusive(ctx, func() error { return s.rebuild(ctx) })
}

func (s *Store) rebuild(ctx context.Context) error {
	if err := s.interrupted(ctx); err != nil {
		return err // before the marker: nothing has been touched yet
	}
	projectors := s.projectorList()
	s.rebuilding.Store(true)
	defer s.rebuilding.Store(false)
	s.rebuildNeeded.Store(true)
	err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(keyRebuilding, []byte{1}) })
	if err == nil {
		err = s.syncDirect()
	}
	if err != nil {
		return fmt.Errorf("store: rebuild: %w", err)
	}
	for _, p := range projectors {
		for _, pre := range p.Prefixes() {
			if err := s.deletePrefix(ctx, pre); err != nil {
				return fmt.Errorf("store: rebuild: clearing %q: %w", pre, err)
			}
		}
	}
	// The deletes bypass the log: durable now, so that no crash keeps a
	// later write without them.
	if err := s.syncDirect(); err != nil {
		return fmt.Errorf("store: rebuild: %w", err)
	}
	s.c.resnap() // the replay must read the cleared projections
	var after uint64
	for {
		if err := s.interrupted(ctx); err != nil {
			return err
		}
		evs, err := s.arrived(false, after+1, s.cfg.MaxBatch)
		if err != nil {
			return fmt.Errorf("store: rebuild: %w", err)
		}
		if len(evs) == 0 {
			break
		}
		ops := make([]*op, len(evs))
		for i, se := range evs {
			ops[i] = &op{done: make(chan opResult, 1), run: func(tx *Tx) (*StoredEvent, error) {
				for _, p := range projectors {
					if err := p.Apply(tx, se); err != nil {
						return nil, err
					}
				}
				return nil, nil
			}}
			s.c.run(ops[i])
		}
		s.c.drain() // commit the chunk before reading the next
		for i, o := range ops {
			if r := <-o.done; r.err != nil {
				return fmt.Errorf("store: rebuild: event %d (%s): %w", evs[i].Sequence, evs[i].CID, r.err)
			}
		}
		after = evs[len(evs)-1].Sequence
	}
	err = s.db.Update(func(txn *badger.Txn) error { return txn.Delete(keyRebuilding) })
	if err == nil {
		err = s.syncDirect()
	}
	if err != nil {
		return fmt.Errorf("store: rebuild: %w", err)
	}
	s.rebuildNeeded.Store(false)
	s.log.Info("store: rebuilt projections", "events", after, "projectors", len(projectors))
	return nil
}

func (s *Store) interrupted(ctx context.Context) error {
	select {
	case <-s.stop:
		return ErrClosed
	default:
		return ctx.Err()
	}
}

// deletePrefix deletes every key under pre in chunks, so a large projection
// never needs one giant transaction. Deletes are idempotent, so a chunk cut
// short by ErrTxnTooBig is simply committed and continued.
func (s *Store) deletePrefix(ctx context.Context, pre []byte) error {
	const chunk = 10000
	for {
		if err := s.interrupted(ctx); err != nil {
			return err
		}
		var keys [][]byte
		err := s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: pre})
			defer it.Close()
			for it.Seek(pre); it.ValidForPrefix(pre) && len(keys) < chunk; it.Next() {
				keys = append(keys, it.Item().KeyCopy(nil))
			}
			return nil
		})
		if err != nil || len(keys) == 0 {
			return err
		}
		txn := s.db.NewTransaction(true)
		for _, k := range keys {
			err := txn.Delete(k)
			if errors.Is(err, badger.ErrTxnTooBig) {
				if err = txn.Commit(); err != nil {
					return err
				}
				txn = s.db.NewTransaction(true)
				err = txn.Delete(k)
			}
			if err != nil {
				txn.Discard()
				return err
			}
		}
		if err := txn.Commit(); err != nil {
			return err
		}
	}
}
