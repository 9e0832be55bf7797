package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// syncItem is what the writer hands the syncer: a committed (or refused)
// run of ops to ack once durable, or a drain marker.
type syncItem struct {
	id    uint64 // the batch the ops complete; 0 for a drain
	ops   []*op
	wrote bool          // Badger holds writes of these ops that must be synced first
	big   bool          // one of those writes went to the value log
	err   error         // ack every op with this instead (nothing to sync)
	drain chan struct{} // closed once every item before it is acked
}

// syncLoop is stage 3: it takes every item the writer has queued, syncs the
// disk once for all of them, then publishes the heads and sequence they
// reach, acks their ops and tells the watchers, in hand-off order. While it
// syncs, the writer commits the next batches, so a crowd shares one fsync.
func (s *Store) syncLoop() {
	defer close(s.syncerDone)
	var round []syncItem
	for it := range s.syncCh {
		round = append(round[:0], it)
	more:
		for {
			select {
			case it, ok := <-s.syncCh:
				if !ok {
					break more
				}
				round = append(round, it)
			default:
				break more
			}
		}
		s.finish(round)
		clear(round)
	}
}

// finish makes a round durable and answers it.
func (s *Store) finish(round []syncItem) {
	var wrote, big bool
	for _, it := range round {
		wrote = wrote || it.wrote
		big = big || it.big
	}
	var syncErr error
	if wrote {
		if err := s.syncDisk(big); err != nil {
			syncErr = s.fail(fmt.Errorf("sync: %w", err))
		} else {
			s.syncs.Add(1)
		}
	}
	var added []*StoredEvent
	var drains []chan struct{}
	var upTo uint64
	for _, it := range round {
		upTo = max(upTo, it.id)
		switch {
		case it.drain != nil:
			drains = append(drains, it.drain)
		case it.err != nil:
			ackAll(it.ops, it.err)
		case syncErr != nil:
			// Refusals too: they may rest on writes the sync lost.
			ackAll(it.ops, syncErr)
		default:
			s.publish(it.ops)
			for _, o := range it.ops {
				if o.tx != nil {
					added = append(added, o.tx.added...)
				}
				o.tx = nil
				o.done <- o.res
			}
		}
	}
	if len(added) > 0 {
		for _, w := range s.watcherList() {
			w(added)
		}
	}
	s.durableMu.Lock()
	if upTo > s.syncedID.Load() {
		s.syncedID.Store(upTo)
	}
	s.durableCond.Broadcast()
	s.durableMu.Unlock()
	for _, d := range drains {
		close(d)
	}
}

// waitDurable waits until every batch the writer had begun to commit when
// it was called is synced. View calls it after opening its snapshot, which
// then holds durable state only: a reader never sees what a crash could
// still take back, nor hands it on (to a peer, a feed, a mirror). Under a
// steady load that is at most about one fsync.
func (s *Store) waitDurable() {
	target := s.writingID.Load()
	if s.syncedID.Load() >= target {
		return
	}
	s.durableMu.Lock()
	defer s.durableMu.Unlock()
	for s.syncedID.Load() < target && s.failure() == nil {
		s.durableCond.Wait()
	}
}

// syncDisk makes every committed write durable. Badger's Sync flushes the
// write-ahead log of the current memtable and the current value log file;
// writes that went to a memtable Badger has since rotated out (not yet
// flushed to a table, which Badger syncs itself) or to an older value log
// file are synced here, file by file, whenever a rotation may have happened
// since the last such pass.
func (s *Store) syncDisk(big bool) error {
	s.diskMu.Lock()
	defer s.diskMu.Unlock()
	if s.beforeSync != nil {
		if err := s.beforeSync(); err != nil {
			return err
		}
	}
	if s.opts.InMemory {
		return nil
	}
	if err := s.db.Sync(); err != nil {
		return err
	}
	// Read after Sync: a rotation counted later happened after Sync took the
	// memtable, so Sync covered every write made before it.
	rot := s.rotations.Load()
	if rot == s.syncedRotations && !big {
		return nil
	}
	if err := syncLogFiles(s.opts.Dir, s.opts.ValueDir); err != nil {
		return err
	}
	s.syncedRotations = rot
	return nil
}

// syncLogFiles fsyncs every write-ahead log and value log file Badger has
// in dirs. A file removed meanwhile was flushed to a table (or garbage
// collected) by Badger, which synced its content first.
func syncLogFiles(dirs ...string) error {
	seen := map[string]bool{}
	for _, dir := range dirs {
		if dir == "" || seen[dir] {
			continue
		}
		seen[dir] = true
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			name := e.Name()
			if !strings.HasSuffix(name, ".mem") && !strings.HasSuffix(name, ".vlog") {
				continue
			}
			if err := syncFile(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// isRotation tells Badger's debug line for a memtable handed to the flusher,
// the moment a new write-ahead log takes over.
func isRotation(format string) bool {
	return strings.HasPrefix(format, "Flushing memtable, mt.size=")
}
