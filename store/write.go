package store

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/skl"
)

// snapshot is a read-only transaction the writer opened right after a
// commit, holding every batch up to upTo, for the committer to read through.
// txn is nil when the batches since the committer's snapshot wrote nothing:
// that snapshot holds them all already, and only upTo moves on.
type snapshot struct {
	txn  *badger.Txn
	upTo uint64
}

// discard ends the snapshot's transaction, if it has one.
func (n *snapshot) discard() {
	if n.txn != nil {
		n.txn.Discard()
	}
}

// writeLoop is stage 2, the only goroutine that commits ops: it takes
// batches in order, moves the kept ops' overlays into Badger, commits
// (synced), acks, and publishes a snapshot for the committer.
func (s *Store) writeLoop() {
	defer close(s.writerDone)
	for b := range s.handoff {
		if b != nil { // nil: the committer's drain marker
			start := time.Now()
			s.write(b)
			s.batching.linger(len(b.ops), time.Since(start))
		}
	}
}

// write commits a batch, split if it must be, and acks its ops; a failed
// commit fails the store and every op of the batch not yet acked.
func (s *Store) write(b *batch) {
	ops := b.ops
	if err := s.failure(); err != nil {
		ackAll(ops, err)
		return
	}
	committed, err := s.commitWhole(b)
	if errors.Is(err, errSplit) {
		committed, err = false, nil
		for len(ops) > 0 && err == nil {
			var n int
			var wrote bool
			n, wrote, err = s.commitPart(ops)
			committed = committed || wrote
			ops = ops[n:]
		}
	}
	if err != nil {
		ackAll(ops, s.fail(err))
		return
	}
	if committed {
		// Nothing is in flight now, so this does not wait on Badger.
		snap := &snapshot{txn: s.db.NewTransaction(false), upTo: b.id}
		if old := s.nextSnap.Swap(snap); old != nil {
			old.discard() // the committer never took it
		}
		return
	}
	// A batch that wrote nothing moves upTo on all the same, so that the
	// committer drops it from the batches it reads through: a run of ops
	// that all fail would otherwise keep every one of them. The writer
	// is the only one that publishes, so the snapshot not yet taken, if
	// any, holds this batch too.
	snap := &snapshot{upTo: b.id}
	if old := s.nextSnap.Swap(nil); old != nil {
		snap.txn = old.txn
	}
	s.nextSnap.Store(snap)
}

// errSplit is commitWhole's way to say that the batch is too big for one
// transaction and that nothing was done.
var errSplit = errors.New("store: split the batch")

// commitWhole commits the batch in one transaction from its merged overlay,
// which Badger gets as fewer writes than the ops' overlays one by one, and
// acks its ops.
func (s *Store) commitWhole(b *batch) (wrote bool, err error) {
	if len(b.order) > 0 {
		txn, rec, err := s.beginTxn(b.size)
		defer txn.Discard()
		if err != nil {
			return false, err
		}
		for _, k := range b.order {
			w := b.writes[k]
			if err := setWrite(txn, k, w); err != nil {
				if errors.Is(err, badger.ErrTxnTooBig) {
					return false, errSplit
				}
				return false, fmt.Errorf("write: %w", err)
			}
			rec.add(k, w)
		}
		if err := s.commitTxn(txn, rec); err != nil {
			return false, err
		}
	}
	s.done(b.ops)
	return len(b.order) > 0, nil
}

// commitPart commits the longest run of ops from the start of ops that fits
// one Badger transaction, publishes the heads and sequence they reach and
// acks them. It returns how many ops it took (at least one) and whether it
// committed any write.
func (s *Store) commitPart(ops []*op) (n int, wrote bool, err error) {
	txn, rec, err := s.beginTxn(0)
	defer func() { txn.Discard() }()
	if err != nil {
		return 0, false, err
	}
	writes := 0
	for ; n < len(ops); n++ {
		o := ops[n]
		if o.tx == nil {
			continue
		}
		ferr := o.tx.flushTo(txn, rec)
		if ferr == nil {
			writes += len(o.tx.order)
			continue
		}
		if !errors.Is(ferr, badger.ErrTxnTooBig) || !anyKept(ops[:n]) {
			// fits let through what Badger refuses: later ops may have
			// read these writes, so o cannot fail alone.
			return 0, false, fmt.Errorf("write: %w", ferr)
		}
		// txn holds part of o's writes, which cannot be taken back: start
		// again with the ops before o and leave o to the next part.
		txn.Discard()
		if txn, rec, err = s.beginTxn(0); err != nil {
			return 0, false, err
		}
		writes = 0
		for _, k := range ops[:n] {
			if k.tx == nil {
				continue
			}
			if ferr := k.tx.flushTo(txn, rec); ferr != nil {
				return 0, false, fmt.Errorf("write: %w", ferr) // it fitted a moment ago
			}
			writes += len(k.tx.order)
		}
		break
	}
	if writes > 0 {
		if err := s.commitTxn(txn, rec); err != nil {
			return 0, false, err
		}
	}
	s.done(ops[:n])
	return n, writes > 0, nil
}

// beginTxn starts a write transaction and its write-ahead record (nil in
// memory), with room for size bytes of entries. Both carry the record's
// number under keyWALMark, so that Open knows which records Badger holds
// (wal.go): only the writer appends, so the number is the next one.
func (s *Store) beginTxn(size int) (*badger.Txn, *record, error) {
	txn := s.db.NewTransaction(true)
	rec := s.newRecord(size)
	if rec == nil {
		return txn, nil, nil
	}
	mark := write{val: u64(s.wal.nextRecord())}
	if err := setWrite(txn, string(keyWALMark), mark); err != nil {
		return txn, nil, fmt.Errorf("write: %w", err)
	}
	rec.add(string(keyWALMark), mark)
	return txn, rec, nil
}

// newRecord starts the write-ahead record of a transaction, with room for
// size bytes of entries; nil when the store has no log (in memory).
func (s *Store) newRecord(size int) *record {
	if s.wal == nil {
		return nil
	}
	r := &record{}
	r.reset(s.wal.buffer(), size)
	return r
}

// commitTxn makes txn's writes durable and commits them: rec, which holds
// the same writes, is appended to the write-ahead log and synced first, so
// that nothing Badger shows readers can be lost by a crash.
func (s *Store) commitTxn(txn *badger.Txn, rec *record) error {
	var err error
	if s.beforeCommit != nil {
		err = s.beforeCommit()
	}
	full := false
	if err == nil && rec != nil {
		full, err = s.wal.append(rec)
	}
	if err == nil {
		err = txn.Commit()
	}
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	s.commits.Add(1)
	if full {
		s.rotateWAL()
	}
	return nil
}

// done publishes the heads and sequence committed ops reach and acks them.
func (s *Store) done(ops []*op) {
	s.publish(ops)
	var added []*StoredEvent
	parked := 0
	for _, o := range ops {
		if o.tx != nil {
			added = append(added, o.tx.added...)
			parked += o.tx.parked
		}
		o.tx = nil
		o.done <- o.res
	}
	if parked > 0 {
		// Counted once committed, so that a pass that read the count
		// before its snapshot sees every parking it counts; and a record
		// committed while they were in flight may be what they wait for.
		s.parkGen.Add(uint64(parked))
		s.wakeUnpark()
	}
	if len(added) > 0 {
		for _, w := range s.watcherList() {
			w(added)
		}
		// Events of other realms may bring what a parked event waits for.
		for _, se := range added {
			if se.Event.Realm != string(s.cfg.Realm) {
				s.wakeUnpark()
				break
			}
		}
	}
}

func anyKept(ops []*op) bool {
	for _, o := range ops {
		if o.tx != nil {
			return true
		}
	}
	return false
}

// publish advances the committed heads, sequence and parked counts past
// the kept ops.
func (s *Store) publish(ops []*op) {
	s.headsMu.Lock()
	defer s.headsMu.Unlock()
	for _, o := range ops {
		if o.tx == nil {
			continue
		}
		for r, h := range o.tx.heads {
			s.heads[r] = h
		}
		for r, d := range o.tx.waitDelta {
			if s.parkedN[r] += d; s.parkedN[r] <= 0 {
				delete(s.parkedN, r)
			}
		}
		s.seq.Store(o.tx.seq)
	}
}

func ackAll(ops []*op, err error) {
	for _, o := range ops {
		o.tx = nil
		o.done <- opResult{err: err}
	}
}

// failure is a failed store's error, or nil.
func (s *Store) failure() error {
	if f := s.failed.Load(); f != nil {
		return *f
	}
	return nil
}

// fail puts the store in the failed state (the first cause stays) and
// returns the error every op from now on gets.
func (s *Store) fail(cause error) error {
	err := fmt.Errorf("%w: %w", ErrFailed, cause)
	if s.failed.CompareAndSwap(nil, &err) {
		s.log.Error("store: commit failed; refusing writes until reopened", "err", cause)
	}
	return s.failure()
}

// badgerPrefix marks Badger's internal keys, which it refuses in a
// transaction.
const badgerPrefix = "!badger!"

// fits checks an op's overlay against what Badger's transaction accepts
// (see Txn.modify and checkSize in Badger): each key and value alone, and
// the whole overlay in a transaction of its own.
func (s *Store) fits(tx *Tx) error {
	maxSize := 15 * s.opts.MemTableSize / 100
	maxCount := maxSize / int64(skl.MaxNodeSize)
	threshold := s.opts.ValueThreshold
	// A transaction starts with its commit marker counted.
	count, size := int64(1), int64(len(badgerPrefix+"txn")+10)
	for _, k := range tx.order {
		v := int64(len(tx.writes[k].val))
		switch {
		case strings.HasPrefix(k, badgerPrefix):
			return fmt.Errorf("%w: key %q: prefix reserved by Badger", errFault, k)
		case v > s.opts.ValueLogFileSize, s.opts.InMemory && v > threshold:
			return fmt.Errorf("%w: value of %d bytes under %q is too large", errFault, v, k)
		}
		count++
		if v < threshold {
			size += int64(len(k)) + v + 2 + 10 // metas, version
		} else {
			size += int64(len(k)) + 12 + 2 + 10 // value pointer, metas, version
		}
	}
	if count >= maxCount || size >= maxSize {
		return fmt.Errorf("op too large for one transaction (%d writes, ~%d bytes): %w", count-1, size, badger.ErrTxnTooBig)
	}
	return nil
}
