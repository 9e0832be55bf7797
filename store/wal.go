package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// The write-ahead log makes a batch durable before Badger, which runs
// without SyncWrites, sees it: the writer appends the batch's writes as one
// record to the current segment and fdatasyncs it, then commits the same
// writes to Badger unsynced, then acks. Badger's own log is a memory-mapped
// file that it syncs with msync, which on this kind of machine costs about
// twice the CPU of an fdatasync after write(2) and grows with the pages a
// commit touches (write-protect faults and page cleaning); the writer is a
// single goroutine, so that cost capped every write path.
//
// Records are replayed into Badger at Open, before anything reads it. A
// record holds full values (sets and deletes, never increments), so
// replaying a suffix of the log in order leaves every key it touches as the
// last record left it, whatever part of it Badger had kept: that is why a
// segment may be replayed again, and why a segment is deleted only once
// Badger's files are synced past its last record, and only oldest first.
//
// Segment files are named by their first record number (16 hex digits,
// .wal); a record is
//
//	len (4, LE) ‖ crc32c of recno ‖ payload (4, LE) ‖ recno (8, LE) ‖ payload
//
// and its payload a sequence of entries: 0 ‖ uvarint klen ‖ key ‖ uvarint
// vlen ‖ value for a set, 1 ‖ uvarint klen ‖ key for a delete, and last, if
// needed, 2 ‖ zeros, which pads the record to a multiple of walAlign bytes.
// Every record so starts at a multiple of walAlign, and no header straddles
// a sector or a page: a write cut short, by a power loss at a sector or by
// a kill -9 at a page (the kernel copies a write page by page and stops
// between pages for a fatal signal), leaves a header whole or unwritten.
// Scanning stops at the first record that is short, fails its checksum or
// does not carry the next number: the torn tail of a crash. Only the
// newest segment may end that way, and only if no readable record follows.
// A segment may also end in zeros that no record reached: segments after
// the first are renamed from a file of zeros prepared in the background
// (prepare), so that an append overwrites allocated blocks and its
// fdatasync need not also commit a new file size. The log so holds the
// disk space of two whole segments at most: the current one and the spare.
type wal struct {
	dir   string // the segments' directory
	dbDir string // Badger's directory, synced by checkpoints
	// sync makes a segment's appended records durable: fdatasync where
	// there is one. Tests wrap it.
	sync func(*os.File) error
	// syncDB syncs Badger's files for a checkpoint: syncFiles. Tests wrap it.
	syncDB func(dir string) error
	// zeroFile makes a prepared segment's file: zeroFile. Tests wrap it.
	zeroFile func(name string, size int64) error
	// segSize is where the writer starts a new segment (walSegmentSize;
	// tests make it small).
	segSize int64

	ckmu sync.Mutex // one checkpoint at a time; taken before mu

	mu    sync.Mutex // guards everything below; the writer and checkpoints take it
	f     *os.File   // the current segment
	first uint64     // its first record number
	off   int64      // where the next record goes
	next  uint64     // the next record number
	buf   []byte
	// done are the segments older than f: every record in them is
	// committed to Badger, but maybe not yet synced there.
	done []uint64
	// spareReady says that spareName holds a zero-filled, synced file of
	// spareSize bytes, which the next segment is renamed from: appending
	// to it overwrites allocated blocks, so fdatasync writes the record
	// alone rather than the file's new size too (a journal commit). It is
	// made in the background once the current segment is half full.
	spareReady bool
	spareSize  int64
	preparing  bool
	prepared   sync.WaitGroup
	// prepareFailed holds off another try until the next segment starts:
	// a disk too full for a spare would otherwise be filled and emptied
	// again on every append.
	prepareFailed bool
	log           *slog.Logger
	// mark is the number of the last record Badger held at Open
	// (keyWALMark): replay skips the records up to it.
	mark uint64
	// zeroed says that f was prepared so. The first segment after Open is
	// not: once it holds firstPrepare bytes a spare is made, and the log
	// moves on to it as soon as it is ready.
	zeroed bool
}

// firstPrepare is how much of an unprepared segment is written before the
// next is prepared: a node that writes little never makes one.
const firstPrepare = 1 << 20

// spareName is the next segment's file while it is prepared; it does not
// end in walExt, so a crash leaves nothing replay reads.
const spareName = "next.spare"

const (
	walDirName    = "wal"
	walExt        = ".wal"
	walHeaderSize = 16
	// walSegmentSize is where the writer starts a new segment; a checkpoint
	// then syncs Badger's files and deletes the old one.
	walSegmentSize = 32 << 20
	// maxKeptBuffer bounds the record buffer the log keeps for the next
	// record.
	maxKeptBuffer = 4 << 20
	// entryOverhead bounds an entry's bytes besides its key and value.
	entryOverhead = 1 + 2*binary.MaxVarintLen32
	entrySet      = 0
	entryDelete   = 1
	entryPad      = 2
	// walAlign is what every record's size is a multiple of; a power of
	// two that divides a sector, and at least a header.
	walAlign = walHeaderSize
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errWALDamaged means a segment other than the newest holds a record that
// cannot be read: something other than a crash changed the log.
var errWALDamaged = errors.New("store: write-ahead log damaged")

func segmentName(first uint64) string { return fmt.Sprintf("%016x%s", first, walExt) }

// openWAL replays every record in dir's segments into db, makes Badger's
// files durable, deletes the replayed segments and starts a new one. It
// returns how many records it replayed.
func openWAL(db *badger.DB, dbDir string, log *slog.Logger) (*wal, int, error) {
	w := &wal{dir: filepath.Join(dbDir, walDirName), dbDir: dbDir, next: 1, segSize: walSegmentSize, sync: fsync, syncDB: syncFiles, zeroFile: zeroFile, log: log}
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return nil, 0, fmt.Errorf("store: wal: %w", err)
	}
	if err := syncDir(dbDir); err != nil { // the log's directory, new in an older store
		return nil, 0, err
	}
	if err := os.Remove(filepath.Join(w.dir, spareName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, 0, fmt.Errorf("store: wal: %w", err)
	}
	segs, err := w.segments()
	if err != nil {
		return nil, 0, err
	}
	mark, marked, err := walMark(db)
	if err != nil {
		return nil, 0, err
	}
	if marked && len(segs) > 0 && segs[0] > mark+1 {
		// Checkpoints delete a segment only once Badger's files are synced
		// past its records, and each record writes its number to Badger
		// with its writes: Badger lost records its files had.
		return nil, 0, fmt.Errorf("%w: Badger's files hold records up to %d, and the log begins at %d: records %d to %d are in neither (Badger's files were damaged or replaced)",
			errWALDamaged, mark, segs[0], mark+1, segs[0]-1)
	}
	w.mark = mark
	// Replaying every record still held, in order, leaves each key as the
	// last record left it whatever Badger kept (a power loss may cost
	// Badger any part of its unsynced commits). But if the log ends before
	// records Badger holds (its last records were damaged, and cut),
	// replaying the ones before would set keys back under the newer values
	// of those: then Badger is trusted up to its mark, and only the records
	// after it would be replayed (none). Only the newest segment may end
	// early (an older one that does is damage), so it alone is read first,
	// cutting a torn tail, to learn where the log ends.
	var from uint64
	if n := len(segs); marked && n > 0 {
		read, err := w.replay(db, segs[n-1], true, math.MaxUint64)
		if err != nil {
			return nil, 0, err
		}
		if segs[n-1]+uint64(read) <= mark {
			from = mark + 1
		}
	}
	replayed := 0
	for i, first := range segs {
		if i == 0 {
			w.next = first
		}
		if first != w.next {
			return nil, 0, fmt.Errorf("%w: segment %s follows record %d", errWALDamaged, segmentName(first), w.next-1)
		}
		n, err := w.replay(db, first, i == len(segs)-1, from)
		if err != nil {
			return nil, 0, err
		}
		if end := first + uint64(n); end > from { // records from..end-1 were applied
			replayed += int(end - max(from, first))
		}
		w.next += uint64(n)
	}
	if marked && w.next <= mark {
		w.warn("store: the write-ahead log ends before records the store holds; they are not replayed, and numbering goes on after them", "log_ends", w.next-1, "store_holds", mark)
		w.next = mark + 1
	}
	w.done = segs
	if len(segs) > 0 && segs[len(segs)-1] == w.next {
		// The newest segment holds no record: it becomes the current one
		// (emptied), rather than be retired under the same name.
		w.done = segs[:len(segs)-1]
	}
	if err := w.startSegment(); err != nil {
		return nil, 0, err
	}
	// What was replayed is in Badger unsynced; make it durable before the
	// segments that hold it go.
	if err := w.checkpoint(); err != nil {
		return nil, 0, err
	}
	return w, replayed, nil
}

// walMark reads the number of the last record whose writes Badger holds
// (keyWALMark); marked is false for a store written before it was kept.
func walMark(db *badger.DB) (mark uint64, marked bool, err error) {
	err = db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keyWALMark)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			mark, err = decodeU64(v)
			marked = err == nil
			return err
		})
	})
	if err != nil {
		return 0, false, fmt.Errorf("store: wal: reading the mark: %w", err)
	}
	return mark, marked, nil
}

// segments lists the first record numbers of the segments in dir, in order.
func (w *wal) segments() ([]uint64, error) {
	ents, err := os.ReadDir(w.dir)
	if err != nil {
		return nil, fmt.Errorf("store: wal: %w", err)
	}
	var out []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), walExt)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		n, err := strconv.ParseUint(name, 16, 64)
		if err != nil || len(name) != 16 {
			return nil, fmt.Errorf("%w: unexpected file %s", errWALDamaged, e.Name())
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// replay reads the records of one segment in order and commits to db, each
// in a transaction of its own as it was written, those numbered from on,
// and returns how many records it read. Every record but the one being
// written at a crash was synced before the next was begun, so only the
// newest segment may end in a torn record, and only at its end: the torn
// record is cut off (durably, so that the segment is whole once a newer one
// exists). Anything else unreadable is damage.
func (w *wal) replay(db *badger.DB, first uint64, newest bool, from uint64) (int, error) {
	name := filepath.Join(w.dir, segmentName(first))
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("store: wal: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return 0, fmt.Errorf("store: wal: %w", err)
	}
	n, off, want := 0, 0, first
	for off < len(data) {
		payload, size, ok := readRecord(data[off:], want)
		if !ok {
			if allZero(data[off:]) {
				break // the rest of a prepared segment, never written
			}
			if !newest || !tornTail(data[off:], want) || recordAfter(data[off+1:], want+1) {
				return n, fmt.Errorf("%w: segment %s: record %d at offset %d", errWALDamaged, segmentName(first), want, off)
			}
			if want <= w.mark {
				w.warn("store: the write-ahead log ends in a damaged record whose writes the store holds", "segment", segmentName(first), "record", want)
			} else {
				w.warn("store: the write-ahead log ended in a record cut short by a crash; it was never acknowledged", "segment", segmentName(first), "record", want)
			}
			if err := f.Truncate(int64(off)); err != nil {
				return n, fmt.Errorf("store: wal: %w", err)
			}
			if err := fsync(f); err != nil {
				return n, fmt.Errorf("store: wal: %w", err)
			}
			break
		}
		if want >= from {
			if err := applyRecord(db, payload); err != nil {
				return n, fmt.Errorf("store: wal: replaying record %d: %w", want, err)
			}
		}
		n++
		want++
		off += size
	}
	return n, nil
}

// tornTail reports whether rest, which does not start with a readable
// record numbered want and is not all zeros (replay stops at those before
// it asks), is what a crash leaves of that record's append: a header
// numbered want (or one never written: zeros) whose record runs past the
// end of the file or is followed by zeros only. A header is either the
// record's or zeros: see walAlign.
func tornTail(rest []byte, want uint64) bool {
	if len(rest) < walHeaderSize {
		return true // the header itself was cut short
	}
	size := binary.LittleEndian.Uint32(rest)
	recno := binary.LittleEndian.Uint64(rest[8:])
	if recno == 0 && size == 0 && binary.LittleEndian.Uint32(rest[4:]) == 0 {
		return true // the header sector never reached the disk
	}
	if recno != want {
		return false
	}
	end := uint64(walHeaderSize) + uint64(size)
	return end >= uint64(len(rest)) || allZero(rest[end:])
}

// recordAfter reports whether a readable record numbered recno starts
// anywhere in rest. A crash cannot leave one after a torn record: the next
// record is written only once the one before is synced. So one there means
// that a record in the middle was damaged (a header zeroed, a length
// changed), and what follows must not be cut off as a torn tail.
func recordAfter(rest []byte, recno uint64) bool {
	for i := 0; i+walHeaderSize <= len(rest); i++ {
		if binary.LittleEndian.Uint64(rest[i+8:]) != recno {
			continue
		}
		if _, _, ok := readRecord(rest[i:], recno); ok {
			return true
		}
	}
	return false
}

// readRecord reads the record numbered want at the front of data: its
// payload and its whole size.
func readRecord(data []byte, want uint64) (payload []byte, size int, ok bool) {
	if len(data) < walHeaderSize {
		return nil, 0, false
	}
	n := binary.LittleEndian.Uint32(data)
	sum := binary.LittleEndian.Uint32(data[4:])
	recno := binary.LittleEndian.Uint64(data[8:])
	if recno != want || uint64(n) > uint64(len(data)-walHeaderSize) {
		return nil, 0, false
	}
	end := walHeaderSize + int(n)
	if crc32.Checksum(data[8:end], castagnoli) != sum {
		return nil, 0, false
	}
	return data[walHeaderSize:end], end, true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// applyRecord commits a record's entries to db in one transaction.
func applyRecord(db *badger.DB, p []byte) error {
	txn := db.NewTransaction(true)
	defer txn.Discard()
	for len(p) > 0 {
		kind := p[0]
		p = p[1:]
		if kind == entryPad {
			break // the rest pads the record
		}
		key, rest, ok := readBytes(p)
		if !ok {
			return errors.New("bad entry")
		}
		p = rest
		var err error
		switch kind {
		case entrySet:
			var val []byte
			if val, p, ok = readBytes(p); !ok {
				return errors.New("bad entry")
			}
			err = txn.Set(key, val)
		case entryDelete:
			err = txn.Delete(key)
		default:
			return fmt.Errorf("bad entry kind %d", kind)
		}
		if err != nil {
			return err
		}
	}
	return txn.Commit()
}

func readBytes(p []byte) (b, rest []byte, ok bool) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return nil, nil, false
	}
	return p[k : k+int(n)], p[k+int(n):], true
}

// record collects one record's entries next to the Badger transaction that
// gets the same writes.
type record struct {
	buf []byte
}

// reset starts a record in buf, grown to hold size bytes of entries.
func (r *record) reset(buf []byte, size int) {
	if cap(buf) < walHeaderSize+size+walAlign {
		buf = make([]byte, 0, walHeaderSize+size+walAlign) // room to pad
	}
	r.buf = append(buf[:0], make([]byte, walHeaderSize)...)
}

func (r *record) add(k string, w write) {
	if r == nil {
		return
	}
	if w.del {
		r.buf = append(r.buf, entryDelete)
		r.buf = binary.AppendUvarint(r.buf, uint64(len(k)))
		r.buf = append(r.buf, k...)
		return
	}
	r.buf = append(r.buf, entrySet)
	r.buf = binary.AppendUvarint(r.buf, uint64(len(k)))
	r.buf = append(r.buf, k...)
	r.buf = binary.AppendUvarint(r.buf, uint64(len(w.val)))
	r.buf = append(r.buf, w.val...)
}

// pad ends the record b with a pad entry up to a multiple of walAlign
// bytes, if it is not one.
func pad(b []byte) []byte {
	n := -len(b) & (walAlign - 1)
	if n == 0 {
		return b
	}
	b = append(b, entryPad)
	return append(b, make([]byte, n-1)...)
}

// sealRecord fills in the header of the record b as number recno.
func sealRecord(b []byte, recno uint64) {
	binary.LittleEndian.PutUint32(b, uint32(len(b)-walHeaderSize))
	binary.LittleEndian.PutUint64(b[8:], recno)
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(b[8:], castagnoli))
}

// buffer hands out the wal's record buffer for reuse.
func (w *wal) buffer() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.buf
	w.buf = nil
	return b
}

// append writes the record and syncs it. It reports whether the log should
// move on to a new segment: this one is full, or it was not prepared and a
// prepared one is ready.
func (w *wal) append(r *record) (full bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := pad(r.buf)
	sealRecord(b, w.next)
	if _, err := w.f.WriteAt(b, w.off); err != nil {
		return false, fmt.Errorf("wal: %w", err)
	}
	if err := w.sync(w.f); err != nil {
		return false, fmt.Errorf("wal: sync: %w", err)
	}
	w.off += int64(len(b))
	w.next++
	if cap(b) <= maxKeptBuffer {
		w.buf = b // a batch or a catch-up range; an image is not kept
	}
	if w.off >= w.segSize/2 || (!w.zeroed && w.off >= firstPrepare) {
		w.prepare()
	}
	return w.off >= w.segSize || (!w.zeroed && w.spareFits()), nil
}

// warn logs a warning, when the log has a logger.
func (w *wal) warn(msg string, args ...any) {
	if w.log != nil {
		w.log.Warn(msg, args...)
	}
}

// nextRecord is the number the next appended record gets.
func (w *wal) nextRecord() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}

// prepare makes the next segment's file in the background, unless it is
// made or being made, or failed for the current segment. A failure only
// means that the next segment starts empty: the spare is removed, so that
// it holds no disk space, and no other is tried until then. Call with mu
// held.
func (w *wal) prepare() {
	if w.preparing || w.prepareFailed || w.spareFits() {
		return
	}
	if free, ok := readFree(w.dir); ok && free < 2*w.segSize+DefaultMinFreeBytes {
		// A spare would take the space the next appends need: the next
		// segment starts empty instead (spareFits false).
		return
	}
	w.preparing, w.spareReady = true, false
	size := w.segSize
	w.prepared.Go(func() {
		name := filepath.Join(w.dir, spareName)
		err := w.zeroFile(name, size)
		if err != nil {
			os.Remove(name)
			w.warn("store: wal: preparing the next segment failed; it starts empty", "err", err)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.preparing, w.prepareFailed = false, err != nil
		w.spareReady, w.spareSize = err == nil, size
	})
}

// spareFits reports whether a spare is ready for the next segment: made,
// and of the segment size (tests change it). Call with mu held.
func (w *wal) spareFits() bool { return w.spareReady && w.spareSize == w.segSize }

// zeroFile writes a file of size zero bytes and syncs it, a few MiB at a
// time, so that records synced meanwhile do not queue behind all of it.
func zeroFile(name string, size int64) error {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < size; {
		n := min(int64(len(zeros)), size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		if off += n; off%(4<<20) == 0 || off == size {
			if err := fsync(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// startSegment closes the current segment (its records all committed to
// Badger) and opens the next. Call with mu held or before the wal is shared.
func (w *wal) startSegment() error {
	if w.f != nil {
		if err := w.f.Close(); err != nil {
			return fmt.Errorf("store: wal: %w", err)
		}
		w.done = append(w.done, w.first)
	}
	name := filepath.Join(w.dir, segmentName(w.next))
	var f *os.File
	var err error
	zeroed := w.spareFits()
	w.spareReady, w.prepareFailed = false, false
	if zeroed {
		if err = os.Rename(filepath.Join(w.dir, spareName), name); err == nil {
			f, err = os.OpenFile(name, os.O_RDWR, 0)
		}
		if err != nil {
			// The spare is gone or unusable: start the segment empty.
			w.warn("store: wal: the prepared segment could not be used; it starts empty", "err", err)
			zeroed = false
		}
	}
	if !zeroed {
		f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	}
	if err != nil {
		return fmt.Errorf("store: wal: %w", err)
	}
	if err := syncDir(w.dir); err != nil {
		f.Close()
		return err
	}
	w.f, w.first, w.off, w.zeroed = f, w.next, 0, zeroed
	return nil
}

// rotateSegment starts a new segment; the caller checkpoints.
func (w *wal) rotateSegment() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.startSegment()
}

// checkpoint syncs Badger's files and then deletes the segments older than
// the current one, oldest first, each deletion durable before the next.
// Every record in them was committed to Badger before the sync began.
func (w *wal) checkpoint() error {
	w.ckmu.Lock()
	defer w.ckmu.Unlock()
	w.mu.Lock()
	done := slices.Clone(w.done)
	w.mu.Unlock()
	if len(done) == 0 {
		return nil
	}
	if err := w.syncDB(w.dbDir); err != nil {
		return err
	}
	for _, first := range done {
		if err := os.Remove(filepath.Join(w.dir, segmentName(first))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("store: wal: %w", err)
		}
		if err := syncDir(w.dir); err != nil {
			return err
		}
		w.mu.Lock()
		w.done = w.done[1:]
		w.mu.Unlock()
	}
	return nil
}

// checkpointAll makes everything committed to Badger so far durable there
// and leaves an empty segment: for writes made to Badger directly, which a
// later replay of older records must not undo. The pipeline must be idle.
func (w *wal) checkpointAll() error {
	w.mu.Lock()
	var err error
	if w.off > 0 {
		err = w.startSegment()
	}
	w.mu.Unlock()
	if err != nil {
		return err
	}
	if err := w.checkpoint(); err != nil {
		return err
	}
	// The current segment may be empty but Badger's direct writes still
	// need the sync.
	return w.syncDB(w.dbDir)
}

func (w *wal) close() error {
	w.prepared.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.f.Close()
}

// syncFiles fsyncs every regular file in dir, then dir itself: Badger's
// memtable logs (which it only msyncs with SyncWrites), tables, value log
// and manifest. An fsync through a second descriptor writes back pages
// dirtied through Badger's mappings too. A file deleted meanwhile was
// compacted or flushed away, which Badger made durable itself.
func syncFiles(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("store: sync: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("store: sync: %w", err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("store: sync %s: %w", e.Name(), err)
		}
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	if !dirSyncs {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("store: sync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("store: sync %s: %w", dir, err)
	}
	return nil
}

// rotateWAL starts a new segment on the writer and checkpoints the old ones
// in the background, one checkpoint at a time; a checkpoint still running
// takes the new segment's predecessors with it next time.
func (s *Store) rotateWAL() {
	if err := s.wal.rotateSegment(); err != nil {
		s.fail(err)
		return
	}
	if !s.ckRunning.CompareAndSwap(false, true) {
		return
	}
	s.checkpoints.Go(func() {
		defer s.ckRunning.Store(false)
		if err := s.wal.checkpoint(); err != nil {
			s.fail(err)
		}
	})
}

// syncDirect makes writes made to Badger outside the log durable, and
// retires every record before them, whose replay could undo them. Call it
// with the pipeline idle.
// A failure fails the store: after a failed fsync the kernel may have
// dropped the pages it could not write and call them clean, so a later
// checkpoint could not be trusted to retire the log.
func (s *Store) syncDirect() error {
	if s.wal == nil {
		return nil
	}
	s.checkpoints.Wait()
	if err := s.wal.checkpointAll(); err != nil {
		return s.fail(err)
	}
	return nil
}

func (s *Store) closeWAL() {
	if s.wal != nil {
		s.wal.close()
	}
}
