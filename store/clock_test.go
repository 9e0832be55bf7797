package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

func clockGet(t *testing.T, txn *badger.Txn, k string) string {
	t.Helper()
	item, err := txn.Get([]byte(k))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// TestClock: a reader sees the commits that returned before it began and
// none after, whatever it reads while they land; the floor below which
// Badger may drop hidden versions stays at the oldest reader's version.
func TestClock(t *testing.T) {
	db, err := openBadger(testConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := newClock(db)
	set := func(k, v string) {
		t.Helper()
		if err := c.update(func(txn *badger.Txn) error { return txn.Set([]byte(k), []byte(v)) }); err != nil {
			t.Fatal(err)
		}
	}
	set("k", "1")
	old := c.read()
	set("k", "2")
	set("other", "x")
	if got := clockGet(t, old, "k"); got != "1" {
		t.Fatalf("an older reader reads %q, want 1", got)
	}
	if got := clockGet(t, old, "other"); got != "" {
		t.Fatalf("an older reader sees a later key: %q", got)
	}
	if f := c.floor(); f != old.ReadTs() {
		t.Fatalf("floor %d with a reader at %d", f, old.ReadTs())
	}
	now := c.read()
	if got := clockGet(t, now, "k"); got != "2" {
		t.Fatalf("a new reader reads %q, want 2", got)
	}

	// A commit not yet returned is invisible: its version is newer than
	// the one readers start at.
	txn := c.write()
	if err := txn.Set([]byte("k"), []byte("3")); err != nil {
		t.Fatal(err)
	}
	if next := c.read(); next.ReadTs() != now.ReadTs() {
		t.Fatalf("a reader opened before the commit reads at %d, want %d", next.ReadTs(), now.ReadTs())
	} else {
		c.done(next)
	}
	if err := c.commit(txn); err != nil {
		t.Fatal(err)
	}
	txn.Discard()
	c.done(old)
	if f := c.floor(); f != now.ReadTs() {
		t.Fatalf("floor %d, want the remaining reader's %d", f, now.ReadTs())
	}
	c.done(now)
	if f, last := c.floor(), c.last.Load(); f != last {
		t.Fatalf("floor %d without readers, want the last commit %d", f, last)
	}
	if len(c.readers) != 0 {
		t.Fatalf("readers left: %v", c.readers)
	}
}

// TestClockContinuesVersions: a store reopened, Badger's own mode before it
// included, commits above every version already written, so what it writes
// is what readers see.
func TestClockContinuesVersions(t *testing.T) {
	dir := t.TempDir()
	opts := badger.DefaultOptions(dir).WithLogger(nil)
	db, err := badger.Open(opts) // as stores were written before managed mode
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte(fmt.Sprint(i))) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		db, err := badger.OpenManaged(opts)
		if err != nil {
			t.Fatal(err)
		}
		c := newClock(db)
		want := fmt.Sprint("managed ", round)
		if err := c.update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte(want)) }); err != nil {
			t.Fatal(err)
		}
		if err := c.view(func(txn *badger.Txn) error {
			if got := clockGet(t, txn, "k"); got != want {
				return fmt.Errorf("round %d reads %q, want %q", round, got, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestClockLetsBadgerDropHiddenVersions: versions no reader can see go at
// the next compaction.
func TestClockLetsBadgerDropHiddenVersions(t *testing.T) {
	// Compactions only when asked (Flatten), of level 0 as soon as it
	// holds two tables.
	opts := badger.DefaultOptions(t.TempDir()).WithLogger(nil).
		WithNumCompactors(0).WithNumLevelZeroTables(1).WithNumLevelZeroTablesStall(10)
	var db *badger.DB
	var c *clock
	open := func() {
		t.Helper()
		var err error
		if db, err = badger.OpenManaged(opts); err != nil {
			t.Fatal(err)
		}
		c = newClock(db)
	}
	set := func(k string, n int) {
		t.Helper()
		for i := range n {
			if err := c.update(func(txn *badger.Txn) error { return txn.Set([]byte(k), []byte(fmt.Sprint(i))) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	versions := func() int {
		t.Helper()
		n := 0
		err := c.view(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{AllVersions: true, Prefix: []byte("k")})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				n++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 2 { // two level-0 tables: closing flushes the memtable
		open()
		set("k", 50)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	open()
	defer db.Close()
	if n := versions(); n != 100 {
		t.Fatalf("%d versions before a compaction, want 100", n)
	}
	set("other", discardEvery) // to the floor's next move
	if err := db.Flatten(1); err != nil {
		t.Fatal(err)
	}
	if n := versions(); n != 1 {
		t.Fatalf("%d versions after a compaction, want 1", n)
	}
}
