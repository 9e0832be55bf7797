package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"

	"relay/protocol"
)

// legacyStore fills a store with local events and a replicated chain,
// returns what its reads give, and rewrites its events in layout 2's keys
// (legacyEventByCID's comment), marked 2. interrupt then undoes part of the
// move as a crash would leave it.
func legacyStore(t *testing.T, interrupt func(db *badger.DB)) (dir string, want storeReads) {
	t.Helper()
	dir = t.TempDir()
	s := openTest(t, testConfig(dir), counter{})
	submitMany(t, s, 40)
	away := testKey(2)
	var chain [][]byte
	var prev cid.Cid
	for i := uint64(1); i <= 25; i++ {
		raw, c := remoteEvent(t, away, i, prev, fmt.Sprint("remote ", i))
		chain, prev = append(chain, raw), c
	}
	if _, err := s.IngestChain(context.Background(), chain, verifyWith(away)); err != nil {
		t.Fatal(err)
	}
	want = readAll(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := openBadger(testConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefixEvent})
		var keys, vals [][]byte
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			keys, vals = append(keys, it.Item().KeyCopy(nil)), append(vals, v)
		}
		it.Close()
		for i, k := range keys {
			seq, c, raw, err := splitEventRecord(vals[i])
			if err != nil {
				return err
			}
			place := eventPlace(k)
			for _, kv := range [][2][]byte{
				{join(legacyEventByCID, c), join(u64(seq), raw)},
				{join(legacyRealmSeq, place), bytes.Clone(c)},
				{join(legacySequence, u64(seq)), bytes.Clone(c)},
			} {
				if err := txn.Set(kv[0], kv[1]); err != nil {
					return err
				}
			}
			for _, gone := range [][]byte{k, join(prefixEventByCID, c), sequenceKey(seq)} {
				if err := txn.Delete(gone); err != nil {
					return err
				}
			}
		}
		return txn.Set(keySchema, u64(2))
	})
	if err != nil {
		t.Fatal(err)
	}
	if interrupt != nil {
		interrupt(db)
	}
	return dir, want
}

// storeReads is everything the read methods give about the events.
type storeReads struct {
	since []*StoredEvent
	heads map[protocol.Realm]protocol.Head
	byCID map[string]*StoredEvent
	rng   map[protocol.Realm][]*StoredEvent
	raw   map[protocol.Realm][][]byte
	count uint64
}

func readAll(t *testing.T, s *Store) storeReads {
	t.Helper()
	var r storeReads
	var err error
	if r.since, err = s.Since(0, 0); err != nil {
		t.Fatal(err)
	}
	if r.heads, err = s.Heads(); err != nil {
		t.Fatal(err)
	}
	r.byCID = map[string]*StoredEvent{}
	for _, se := range r.since {
		got, err := s.EventByCID(se.CID)
		if err != nil {
			t.Fatal(err)
		}
		r.byCID[se.CID.String()] = got
		at, err := s.EventAt(protocol.Realm(se.Event.Realm), se.Event.Seq)
		if err != nil || !at.CID.Equals(se.CID) {
			t.Fatalf("EventAt %s %d: %v, %v", se.Event.Realm, se.Event.Seq, at, err)
		}
	}
	r.rng = map[protocol.Realm][]*StoredEvent{}
	r.raw = map[protocol.Realm][][]byte{}
	for realm := range r.heads {
		if r.rng[realm], err = s.Range(realm, 3, 0); err != nil {
			t.Fatal(err)
		}
		if r.raw[realm], err = s.RangeRaw(realm, 2, 7); err != nil {
			t.Fatal(err)
		}
	}
	r.count = countOf(t, s, "*")
	return r
}

func sameEvents(a, b []*StoredEvent) bool {
	return slices.EqualFunc(a, b, func(x, y *StoredEvent) bool {
		return x.CID.Equals(y.CID) && bytes.Equal(x.Raw, y.Raw) && x.Sequence == y.Sequence &&
			x.Event.Realm == y.Event.Realm && x.Event.Seq == y.Event.Seq
	})
}

func (r storeReads) check(t *testing.T, got storeReads) {
	t.Helper()
	if len(r.since) != 65 || !sameEvents(r.since, got.since) {
		t.Fatalf("Since: %d events, want the %d held before", len(got.since), len(r.since))
	}
	if fmt.Sprint(r.heads) != fmt.Sprint(got.heads) {
		t.Fatalf("heads %v, want %v", got.heads, r.heads)
	}
	for c, se := range r.byCID {
		if !sameEvents([]*StoredEvent{se}, []*StoredEvent{got.byCID[c]}) {
			t.Fatalf("EventByCID %s differs", c)
		}
	}
	for realm := range r.heads {
		if !sameEvents(r.rng[realm], got.rng[realm]) {
			t.Fatalf("Range of %s differs", realm)
		}
		if !slices.EqualFunc(r.raw[realm], got.raw[realm], bytes.Equal) || len(got.raw[realm]) != 7 {
			t.Fatalf("RangeRaw of %s differs", realm)
		}
	}
	if r.count != got.count {
		t.Fatalf("projection counts %d, want %d", got.count, r.count)
	}
}

// TestMigrateEvents: a store of layout 2 opens with every event where it
// was, read by every read method, its old keys gone, marked with this
// layout, and goes on; so does one whose move a crash cut short.
func TestMigrateEvents(t *testing.T) {
	half := func(pre []byte) func(db *badger.DB) {
		return func(db *badger.DB) {
			err := db.Update(func(txn *badger.Txn) error {
				it := txn.NewIterator(badger.IteratorOptions{Prefix: pre})
				var keys [][]byte
				for it.Rewind(); it.Valid(); it.Next() {
					keys = append(keys, it.Item().KeyCopy(nil))
				}
				it.Close()
				for _, k := range keys[:len(keys)/2] {
					if err := txn.Delete(k); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	copied := func(db *badger.DB) {
		// A first open copied every event, then died deleting the old
		// indexes: the copy is all there, and half of e/r/ and all of e/s/
		// are gone.
		s := &Store{db: db, log: quietLogger(), stop: make(chan struct{})}
		if n, err := s.copyLegacyEvents(); err != nil || n != 65 {
			t.Fatalf("copied %d: %v", n, err)
		}
		if err := s.deletePrefix(context.Background(), legacySequence); err != nil {
			t.Fatal(err)
		}
		half(legacyRealmSeq)(db)
	}
	partCopied := func(db *badger.DB) {
		// A first open died while copying: half the new records exist.
		s := &Store{db: db, log: quietLogger(), stop: make(chan struct{})}
		if _, err := s.copyLegacyEvents(); err != nil {
			t.Fatal(err)
		}
		half(prefixEvent)(db)
		half(prefixEventByCID)(db)
	}
	stopAt := func(step int) func(db *badger.DB) {
		return func(*badger.DB) {
			n := 0
			migrateStep = func() error {
				if n++; n == step {
					return errors.New("crash")
				}
				return nil
			}
		}
	}
	for _, tc := range []struct {
		name      string
		interrupt func(db *badger.DB)
	}{
		{"whole", nil},
		{"interrupted while copying", partCopied},
		{"interrupted while deleting", copied},
		{"stopped after the copy", stopAt(1)},
		{"stopped after the arrival index", stopAt(2)},
		{"stopped after the chain index", stopAt(3)},
		{"stopped after the records", stopAt(4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() { migrateStep = func() error { return nil } }()
			dir, want := legacyStore(t, tc.interrupt)
			if strings.HasPrefix(tc.name, "stopped") {
				if _, err := Open(testConfig(dir)); err == nil {
					t.Fatal("the move did not stop")
				}
				migrateStep = func() error { return nil }
				// An older binary now refuses the store: it is marked 3.
				db, err := openBadger(testConfig(dir))
				if err != nil {
					t.Fatal(err)
				}
				err = db.View(func(txn *badger.Txn) error {
					item, err := txn.Get(keySchema)
					if err != nil {
						return err
					}
					return item.Value(func(v []byte) error {
						if n := binary.BigEndian.Uint64(v); n != SchemaVersion {
							return fmt.Errorf("schema %d during the move, want %d", n, SchemaVersion)
						}
						return nil
					})
				})
				db.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			s := openTest(t, testConfig(dir), counter{})
			want.check(t, readAll(t, s))
			err := s.View(func(tx *Tx) error {
				for _, pre := range [][]byte{legacyEventByCID, legacyRealmSeq, legacySequence} {
					err := tx.Iterate(pre, false, func(k, _ []byte) error { return fmt.Errorf("old key %q left", k) })
					if err != nil {
						return err
					}
				}
				v, err := tx.Get(keySchema)
				if err != nil {
					return err
				}
				if n := binary.BigEndian.Uint64(v); n != SchemaVersion {
					return fmt.Errorf("schema %d after the move, want %d", n, SchemaVersion)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			se, err := s.Submit(context.Background(), draftFn("t.a", "after the move"))
			if err != nil {
				t.Fatal(err)
			}
			if se.Event.Seq != 41 || se.Sequence != 66 || !se.Event.Prev.Cid.Equals(want.heads[localRealm].CID) {
				t.Fatalf("next event at seq %d, sequence %d, prev %s", se.Event.Seq, se.Sequence, se.Event.Prev.Cid)
			}
			if err := s.Rebuild(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := countOf(t, s, "*"); n != 66 {
				t.Fatalf("rebuilt projection counts %d events, want 66", n)
			}
		})
	}
}
