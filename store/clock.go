package store

import (
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
)

// clock hands out Badger's timestamps. Badger runs in managed mode: the
// store, not Badger, says at which version a transaction reads and at which
// it commits. In Badger's own mode a transaction opened for reading waits
// until every commit in flight has reached the memtable, and a commit's
// end is published by a goroutine of Badger's. Under load that wait put a
// goroutine switch on the writer's path after every commit (the
// committer's next snapshot) and in front of every read. Here a reader
// reads at the newest version whose commit has returned, which never waits:
// the writes of a commit in flight carry a newer version and stay
// invisible until it returns, whole.
//
// Badger then discards the versions a newer one hides only below the
// version the store allows (SetDiscardTs), which must not pass the oldest
// version a reader still reads at: the clock keeps a count of readers per
// version.
type clock struct {
	db *badger.DB

	commitMu sync.Mutex // one commit at a time, in version order
	next     uint64     // the version the next commit takes; guarded by commitMu
	last     atomic.Uint64

	mu      sync.Mutex // guards readers
	readers map[uint64]int
}

// discardEvery is how many commits pass between two moves of the version
// below which Badger may drop hidden versions.
const discardEvery = 64

func newClock(db *badger.DB) *clock {
	v := db.MaxVersion()
	c := &clock{db: db, next: v + 1, readers: make(map[uint64]int)}
	c.last.Store(v)
	return c
}

// read opens a read-only transaction on every write committed so far. Its
// caller must end it with done.
func (c *clock) read() *badger.Txn {
	c.mu.Lock()
	v := c.last.Load()
	c.readers[v]++
	c.mu.Unlock()
	return c.db.NewTransactionAt(v, false)
}

// done discards a transaction read opened.
func (c *clock) done(txn *badger.Txn) {
	v := txn.ReadTs()
	txn.Discard()
	c.mu.Lock()
	if c.readers[v] <= 1 {
		delete(c.readers, v)
	} else {
		c.readers[v]--
	}
	c.mu.Unlock()
}

// view runs fn on a read transaction.
func (c *clock) view(fn func(txn *badger.Txn) error) error {
	txn := c.read()
	defer c.done(txn)
	return fn(txn)
}

// write opens a transaction for blind writes, to be committed by commit.
func (c *clock) write() *badger.Txn {
	return c.db.NewTransactionAt(c.last.Load(), true)
}

// commit commits txn at the next version; readers see its writes once it
// has returned, all at once.
func (c *clock) commit(txn *badger.Txn) error {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	v := c.next
	c.next++
	if err := txn.CommitAt(v, nil); err != nil {
		return err
	}
	c.last.Store(v)
	if v%discardEvery == 0 {
		c.db.SetDiscardTs(c.floor())
	}
	return nil
}

// update runs fn on a write transaction and commits it.
func (c *clock) update(fn func(txn *badger.Txn) error) error {
	txn := c.write()
	defer txn.Discard()
	if err := fn(txn); err != nil {
		return err
	}
	return c.commit(txn)
}

// batch runs fn on a write batch, which splits what does not fit one
// transaction, and flushes it at the next version.
func (c *clock) batch(fn func(wb *badger.WriteBatch) error) error {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	v := c.next
	c.next++
	wb := c.db.NewWriteBatchAt(v)
	if err := fn(wb); err != nil {
		wb.Cancel()
		return err
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	c.last.Store(v)
	return nil
}

// floor is the oldest version a reader reads at, or the newest committed
// one without readers: Badger keeps, for every key, its newest version at
// or below it and every version above.
func (c *clock) floor() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	low := c.last.Load()
	for v := range c.readers {
		low = min(low, v)
	}
	return low
}
