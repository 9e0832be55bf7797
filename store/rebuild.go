package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Rebuild deletes every registered projector's prefixes and replays all
// events in Sequence order through the projectors, MaxBatch events per
// transaction. It runs alone on the committer, the pipeline drained: Submit
// and Ingest wait until it ends. Readers meanwhile see projections part-way rebuilt. An m/rebuilding
// marker stays set until the replay completes, so a crash or an abort (ctx,
// Close) shows as State().Status "rebuild-needed" after the next Open.
//
// The marker also holds how far the replay got, written in the same
// transaction as each chunk's projections: a rebuild cut short is taken up
// where it stopped by the next one, if that one rebuilds for the same
// projector versions, instead of starting again from the first event.
func (s *Store) Rebuild(ctx context.Context) error {
	return s.exclusive(ctx, func() error { return s.rebuild(ctx) })
}

// rebuildReport is how often a rebuild logs its progress.
const rebuildReport = 10 * time.Second

func (s *Store) rebuild(ctx context.Context) error {
	if err := s.interrupted(ctx); err != nil {
		return err // before the marker: nothing has been touched yet
	}
	projectors := s.projectorList()
	versions := projectionVersions(projectors)
	s.rebuilding.Store(true)
	defer s.rebuilding.Store(false)
	s.rebuildNeeded.Store(true)
	total := s.Sequence()
	after, err := s.rebuiltUpTo(versions)
	if err != nil {
		return fmt.Errorf("store: rebuild: %w", err)
	}
	if after > 0 {
		s.log.Info("store: taking up a rebuild cut short", "events", after, "of", s.Sequence())
	} else {
		if err := s.setDirect(keyRebuilding, rebuildMark(0, total, versions)); err != nil {
			return fmt.Errorf("store: rebuild: %w", err)
		}
		for _, p := range projectors {
			for _, pre := range p.Prefixes() {
				if err := s.deletePrefix(ctx, pre); err != nil {
					return fmt.Errorf("store: rebuild: clearing %q: %w", pre, err)
				}
			}
		}
		// The deletes bypass the log: durable now, so that no crash keeps
		// a later write without them.
		if err := s.syncDirect(); err != nil {
			return fmt.Errorf("store: rebuild: %w", err)
		}
	}
	s.c.resnap() // the replay must read the cleared projections
	// Every exit waits for the chunks handed to the writer: the committer
	// renews its snapshot after an exclusive op, which needs nothing in
	// flight.
	defer s.c.drain()
	// A chunk is handed to the writer as soon as it has run, and the next
	// one runs while it commits: the events are all committed, so reading
	// them needs no commit of the projections before.
	var prev []*op
	var prevEvs []*StoredEvent
	check := func() error {
		for i, o := range prev {
			if r := <-o.done; r.err != nil {
				return fmt.Errorf("store: rebuild: event %d (%s): %w", prevEvs[i].Sequence, prevEvs[i].CID, r.err)
			}
		}
		prev, prevEvs = nil, nil
		return nil
	}
	report := time.Now().Add(rebuildReport)
	for {
		if err := s.interrupted(ctx); err != nil {
			return err
		}
		if time.Now().After(report) {
			s.log.Info("store: rebuilding projections", "events", after, "of", total)
			report = time.Now().Add(rebuildReport)
		}
		evs, err := s.arrived(false, after+1, s.cfg.MaxBatch)
		if err != nil {
			return fmt.Errorf("store: rebuild: %w", err)
		}
		if len(evs) == 0 {
			break
		}
		ops := make([]*op, len(evs))
		failed := false
		for i, se := range evs {
			ops[i] = &op{done: make(chan opResult, 1), run: func(tx *Tx) (*StoredEvent, error) {
				tx.replaying = true
				for _, p := range projectors {
					if err := p.Apply(tx, se); err != nil {
						return nil, err
					}
				}
				// How far the projections are rebuilt, in the transaction
				// that commits this event's, however the batch is split.
				tx.put(keyRebuilding, rebuildMark(se.Sequence, total, versions))
				return nil, nil
			}}
			s.c.run(ops[i])
			if ops[i].res.err != nil {
				// No later event may be replayed: its mark would record
				// this one as rebuilt, and a rebuild taken up would skip it.
				ops, evs, failed = ops[:i+1], evs[:i+1], true
				break
			}
		}
		// The writer takes a batch only when idle, so once it has this
		// chunk the one before is committed and acked. A failure found
		// then stops the replay with this chunk committed too; the store
		// stays marked for a rebuild all the same.
		s.c.handOff()
		if err := check(); err != nil {
			return err
		}
		prev, prevEvs = ops, evs
		if failed {
			s.c.drain()
			return check()
		}
		after = evs[len(evs)-1].Sequence
	}
	s.c.drain()
	if err := check(); err != nil {
		return err
	}
	err = s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(keyProjection, versions); err != nil {
			return err
		}
		return txn.Delete(keyRebuilding)
	})
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

// rebuildMark is m/rebuilding's value: the sequence up to which a rebuild
// has replayed the events, the store's sequence when it began, and the
// projector versions it is for.
func rebuildMark(upTo, of uint64, versions []byte) []byte {
	return append(binary.BigEndian.AppendUint64(u64(upTo), of), versions...)
}

// rebuiltUpTo returns how far a rebuild cut short had replayed the events
// for projectors of versions: 0 when none was, when it was for other
// versions, when the store holds events it did not know of, or when its
// marker predates the count.
func (s *Store) rebuiltUpTo(versions []byte) (uint64, error) {
	var upTo uint64
	err := s.View(func(tx *Tx) error {
		v, err := tx.Get(keyRebuilding)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			return err
		case len(v) < 16 || !bytes.Equal(v[16:], versions) || binary.BigEndian.Uint64(v[8:]) != s.Sequence():
			return nil
		}
		upTo = min(binary.BigEndian.Uint64(v), s.Sequence())
		return nil
	})
	return upTo, err
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
// never needs one giant transaction. The keys are read in one pass over a
// snapshot taken first: a new iteration from the prefix for every chunk
// would walk over the tombstones of every chunk before it. Deletes are
// idempotent, so a chunk cut short by ErrTxnTooBig is simply committed and
// continued.
func (s *Store) deletePrefix(ctx context.Context, pre []byte) error {
	const chunk = 10000
	snap := s.db.NewTransaction(false)
	defer snap.Discard()
	it := snap.NewIterator(badger.IteratorOptions{Prefix: pre})
	defer it.Close()
	if err := s.interrupted(ctx); err != nil {
		return err
	}
	keys := make([][]byte, 0, chunk)
	del := func() error {
		if len(keys) == 0 {
			return nil
		}
		txn := s.db.NewTransaction(true)
		defer func() { txn.Discard() }()
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
				return err
			}
		}
		keys = keys[:0]
		return txn.Commit()
	}
	for it.Seek(pre); it.ValidForPrefix(pre); it.Next() {
		keys = append(keys, it.Item().KeyCopy(nil))
		if len(keys) < chunk {
			continue
		}
		if err := s.interrupted(ctx); err != nil {
			return err
		}
		if err := del(); err != nil {
			return err
		}
	}
	return del()
}

// projectionVersions names projectors and their versions, in a fixed
// order: what the projections of a store are made by.
func projectionVersions(projectors []Projector) []byte {
	var names []string
	for _, p := range projectors {
		v := fmt.Sprintf("%T", p)
		if pv, ok := p.(Versioned); ok {
			v = pv.ProjectionVersion()
		}
		names = append(names, v)
	}
	slices.Sort(names)
	return []byte(strings.Join(names, "\n"))
}

// EnsureProjections rebuilds the projections unless the registered
// projectors made them: when they were made by other versions (an upgrade
// that changed what a projector derives), by projectors not known then, or
// when a rebuild was cut short. Call it once every projector is registered,
// before the first Submit; a store without events only records the
// versions. It reports whether it rebuilt.
func (s *Store) EnsureProjections(ctx context.Context) (rebuilt bool, err error) {
	want := projectionVersions(s.projectorList())
	var have []byte
	err = s.View(func(tx *Tx) error {
		v, err := tx.Get(keyProjection)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		have = v
		return err
	})
	if err != nil {
		return false, err
	}
	// Parked events are tried again once the projections are as this
	// binary makes them: before, a pass could project them with the
	// projectors half registered.
	changed := !bytes.Equal(have, want) || s.rebuildNeeded.Load()
	defer func() {
		if err == nil {
			// What a projector refused, a new version may not: those
			// events wait again, and the pass below tries them.
			if err = s.retryRefused(ctx, want); err != nil {
				return
			}
			// What the projectors of this binary name as scopes.
			if err = s.scopeParked(ctx, changed); err != nil {
				return
			}
			s.projectorsSet.Store(true)
			s.Unpark(ctx)
			s.warnOwnParked()
		}
	}()
	if bytes.Equal(have, want) && !s.rebuildNeeded.Load() {
		return false, nil
	}
	if s.Sequence() == 0 && !s.rebuildNeeded.Load() {
		return false, s.exclusive(ctx, func() error { return s.setDirect(keyProjection, want) })
	}
	s.log.Info("store: rebuilding projections", "events", s.Sequence(),
		"made_by", strings.ReplaceAll(string(have), "\n", ", "), "now", strings.ReplaceAll(string(want), "\n", ", "))
	return true, s.Rebuild(ctx)
}

// setDirect writes a store key to Badger outside the log and makes it
// durable. Only on the committer, the pipeline drained (exclusive).
func (s *Store) setDirect(k, v []byte) error {
	err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(k, v) })
	if err == nil {
		err = s.syncDirect()
	}
	return err
}
