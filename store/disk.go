package store

import (
	"errors"
	"time"
)

// The disk running out.
//
// Badger writes its memtable's log and its tables through memory maps of
// files it sizes up front and leaves sparse: a write into a hole that the
// file system cannot back faults (SIGBUS), which ends the process where a
// write(2) would have returned ENOSPC. The store's own log fails cleanly,
// but Badger may fault first. So the store watches the free space of its
// disk and refuses writes (ErrDiskFull) while less than MinFreeBytes are
// free beyond what flushing its memtables will write, taking them again
// once MinFreeBytes more is: the node keeps serving reads and says why, and
// nothing it acknowledged is at risk. It narrows the window rather than
// closes it: a compaction that needs more than the margin, or a burst
// within one reading of the free space, can still meet a full disk.

// ErrDiskFull is returned by every write while the disk holding the store
// has less than Config.MinFreeBytes free.
var ErrDiskFull = errors.New("store: the disk holding the store is nearly full")

// DefaultMinFreeBytes is the free space under which writes are refused.
const DefaultMinFreeBytes = 64 << 20

// readFree reads the free space of the disk holding a directory, and
// readMemtables the space Badger's memtable logs there take; tests replace
// them.
var (
	readFree      = freeBytes
	readMemtables = memtableBytes
)

// diskPoll is how often the free space is read.
var diskPoll = 500 * time.Millisecond

// minFree is the configured floor, or 0 when the store does not watch
// (in memory, or turned off).
func (s *Store) minFree() int64 {
	if s.opts.InMemory || s.cfg.MinFreeBytes < 0 {
		return 0
	}
	if s.cfg.MinFreeBytes == 0 {
		return DefaultMinFreeBytes
	}
	return s.cfg.MinFreeBytes
}

// checkDisk reads the free space and sets or clears the refusal.
func (s *Store) checkDisk() {
	floor := s.minFree()
	free, ok := readFree(s.cfg.Dir)
	if floor == 0 || !ok {
		return
	}
	// Flushing a memtable writes a table about as large as its log: the
	// disk must keep room for that beyond the floor, or the flush itself
	// meets the full disk.
	need := floor + readMemtables(s.cfg.Dir)
	s.diskFree.Store(free)
	switch low := s.diskLow.Load(); {
	case !low && free < need:
		s.diskLow.Store(true)
		s.log.Error("store: the disk is nearly full; writes are refused until space is freed", "dir", s.cfg.Dir, "free_bytes", free, "needed_bytes", need)
	case low && free >= need+floor:
		s.diskLow.Store(false)
		s.log.Info("store: the disk has room again; writes are taken", "dir", s.cfg.Dir, "free_bytes", free)
	}
}

// watchDisk checks the free space every diskPoll until the store closes.
func (s *Store) watchDisk() {
	defer close(s.diskDone)
	if s.minFree() == 0 {
		return
	}
	t := time.NewTicker(diskPoll)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.checkDisk()
		}
	}
}

// DiskLow reports whether writes are refused for want of disk space, and
// the free bytes last read (0 when not watched).
func (s *Store) DiskLow() (low bool, free int64) { return s.diskLow.Load(), s.diskFree.Load() }

// CheckDisk reads the free space now, as the watch does every diskPoll,
// and reports as DiskLow does: for a bulk writer (an import) that can fill
// a disk between two readings.
func (s *Store) CheckDisk() (low bool, free int64) {
	s.checkDisk()
	return s.DiskLow()
}
