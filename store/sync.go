package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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

// finish makes a round durable and answers it. Once the store has failed,
// nothing more is acked as durable: a sync after a failed one may report
// success for data the failure lost, and the ops since may rest on it.
func (s *Store) finish(round []syncItem) {
	var wrote, big bool
	for _, it := range round {
		wrote = wrote || it.wrote
		big = big || it.big
	}
	err := s.failure()
	if err == nil && wrote {
		if serr := s.syncDisk(big); serr != nil {
			err = s.fail(fmt.Errorf("sync: %w", serr))
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
		case err != nil:
			// Refusals too: they may rest on writes the sync lost.
			ackAll(it.ops, err)
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
	// Readers first: a watcher may read what it is told of.
	s.durableMu.Lock()
	if err == nil && upTo > s.durableID.Load() {
		s.durableID.Store(upTo)
	}
	s.durableCond.Broadcast()
	s.durableMu.Unlock()
	if len(added) > 0 {
		for _, w := range s.watcherList() {
			w(added)
		}
	}
	for _, d := range drains {
		close(d)
	}
}

// waitDurable waits until every batch the writer had begun to commit when
// it was called is synced. View calls it after opening its snapshot, which
// then holds durable state only: a reader never sees what a crash could
// still take back, nor hands it on (to a peer, a feed, a mirror). Under a
// steady load that is at most about one fsync. On a failed store the
// batches not synced never will be: it returns the failure.
func (s *Store) waitDurable() error {
	target := s.writingID.Load()
	if s.durableID.Load() >= target {
		return nil
	}
	s.durableMu.Lock()
	defer s.durableMu.Unlock()
	for s.durableID.Load() < target {
		if err := s.failure(); err != nil {
			return err
		}
		s.durableCond.Wait()
	}
	return nil
}

// syncDisk makes every committed write durable. Badger's Sync flushes the
// write-ahead log of the current memtable, then the current value log file.
// The logs of memtables Badger rotated out were synced at the rotation
// (badgerLogger), before any write reached the next log, so that a crash
// keeps a prefix of the commits. Values of Badger's value log (≥ its
// ValueThreshold, 1 MiB) may lie in older value log files: after a round
// that wrote one, every value log file is synced, before the write-ahead
// log that points into them.
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
	if err := s.logs.failure(); err != nil {
		return fmt.Errorf("syncing a rotated write-ahead log: %w", err)
	}
	if big {
		if err := syncFiles(s.opts.ValueDir, ".vlog"); err != nil {
			return err
		}
	}
	return s.db.Sync()
}

// badgerLogs syncs the write-ahead logs of rotated memtables. Badger tells
// of a rotation in a debug line, under its write lock, just before it opens
// the next log: syncing every log file present then makes the old log
// durable before any write goes to the new one.
type badgerLogs struct {
	dir       string
	rotations atomic.Uint64
	err       atomic.Pointer[error]
}

func (b *badgerLogs) rotated() {
	b.rotations.Add(1)
	if b.dir == "" {
		return // in memory
	}
	if err := syncFiles(b.dir, ".mem"); err != nil {
		b.err.CompareAndSwap(nil, &err)
	}
}

func (b *badgerLogs) failure() error {
	if e := b.err.Load(); e != nil {
		return *e
	}
	return nil
}

// syncFiles fsyncs every file of dir whose name ends in suffix. A file
// removed meanwhile was flushed to a table (or garbage collected) by
// Badger, which synced its content first.
func syncFiles(dir, suffix string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), suffix) {
			continue
		}
		if err := syncFile(filepath.Join(dir, e.Name())); err != nil {
			return err
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
// just before a new write-ahead log takes over.
func isRotation(format string) bool {
	return strings.HasPrefix(format, "Flushing memtable, mt.size=")
}
