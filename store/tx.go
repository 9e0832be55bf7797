package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"

	"relay/protocol"
)

// maxKeySize is Badger's own limit, checked here so that a bad key fails the
// op that wrote it rather than the flush of a batch.
const maxKeySize = 65000

// Tx is the view one op (or one View) has of the store. In an op it buffers
// its own writes (the overlay), handed on only if the op succeeds; reads see
// the overlay, then ops run before it and not yet committed, then committed
// state.
type Tx struct {
	s        *Store
	txn      *badger.Txn // committed state: the View's or the committer's snapshot
	readOnly bool
	// replaying: the op replays a held event into rebuilt projections.
	replaying bool

	writes map[string]write // the op's overlay
	order  []string         // first-write order, so flushes are deterministic
	// layers are the writes of earlier ops that txn does not hold: batches
	// handed to the writer, then the current batch. Oldest first.
	layers []map[string]write
	c      *committer // its heads are those of the ops before this one
	b      *batch

	// The op's moves of the node sequence and realm heads, published only if
	// the op is kept and its batch commits.
	seq       uint64
	heads     map[string]protocol.Head
	added     []*StoredEvent // events the op appended, in order
	parked    int            // events the op parked (park.go)
	waitDelta map[string]int // its change of the committer's waiting counts

	finally []func(ok bool) error  // see Finally
	first   [1]func(ok bool) error // finally's first, without an allocation
}

// ReadOnly reports whether tx is a View's: it sees committed state only
// and belongs to no op.
func (tx *Tx) ReadOnly() bool { return tx.readOnly }

// Replaying reports whether tx replays an event the log holds into
// rebuilt projections: in the order it was taken, without Dependent's
// checks, so a record it refers to may come only later.
func (tx *Tx) Replaying() bool { return tx.replaying }

type write struct {
	val []byte
	del bool
}

// Get returns a copy of the value stored under key, or ErrNotFound.
func (tx *Tx) Get(key []byte) ([]byte, error) {
	w, ok, err := tx.unflushed(key)
	switch {
	case err != nil:
		return nil, err
	case ok && w.del:
		return nil, ErrNotFound
	case ok:
		return bytes.Clone(w.val), nil
	}
	item, err := tx.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read: %w", errFault, err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: read: %w", errFault, err)
	}
	return v, nil
}

// Peek calls fn with the value stored under key and returns what fn
// returns, or ErrNotFound without calling fn. It is Get without the copy,
// for a reader that only looks (compares, decodes): fn must not change val
// nor keep it once it returns.
func (tx *Tx) Peek(key []byte, fn func(val []byte) error) error {
	w, ok, err := tx.unflushed(key)
	switch {
	case err != nil:
		return err
	case ok && w.del:
		return ErrNotFound
	case ok:
		return fn(w.val)
	}
	item, err := tx.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("%w: read: %w", errFault, err)
	}
	var fnErr error
	if err := item.Value(func(v []byte) error { fnErr = fn(v); return fnErr }); err != nil && err != fnErr {
		return fmt.Errorf("%w: read: %w", errFault, err)
	}
	return fnErr
}

// unflushed finds the newest write to key that txn may not hold: the op's
// own, then earlier ops' not yet committed, then recently committed ones.
func (tx *Tx) unflushed(key []byte) (w write, ok bool, err error) {
	w, ok = tx.writes[string(key)]
	for i := len(tx.layers) - 1; !ok && i >= 0; i-- {
		w, ok = tx.layers[i][string(key)]
	}
	if !ok && tx.c != nil {
		if w, ok = tx.c.recent.get(string(key)); ok && verifyRecent {
			if err := tx.checkRecent(key, w); err != nil {
				return write{}, false, err
			}
		}
	}
	return w, ok, nil
}

// verifyRecent makes every hit of the committer's cache of committed writes
// prove itself against the snapshot. On in test binaries only.
var verifyRecent = testing.Testing()

// errRecentStale is a cached committed write that differs from the
// snapshot: the cache missed a write (only verifyRecent finds it).
var errRecentStale = errors.New("store: cached committed write differs from the snapshot")

func (tx *Tx) checkRecent(key []byte, w write) error {
	item, err := tx.txn.Get(key)
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		if !w.del {
			return fmt.Errorf("%w: %q is not in the snapshot", errRecentStale, key)
		}
		return nil
	case err != nil:
		return err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return err
	}
	if w.del || !bytes.Equal(v, w.val) {
		return fmt.Errorf("%w: %q", errRecentStale, key)
	}
	return nil
}

// GetJSON decodes the JSON record at key into v; found is false when there
// is none. Projections and local tables keep their records as JSON.
func (tx *Tx) GetJSON(key []byte, v any) (found bool, err error) {
	b, err := tx.Get(key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, json.Unmarshal(b, v)
}

// Set stores val under key when the op succeeds. Keys under e/, m/ and x/
// belong to the store (ErrReservedKey).
func (tx *Tx) Set(key, val []byte) error {
	if err := tx.checkWrite(key); err != nil {
		return err
	}
	tx.put(key, bytes.Clone(val))
	return nil
}

// SetOwned is Set of a value its caller hands over, built for this write:
// the store keeps val itself rather than a copy, so val must not change
// afterwards. A caller that keeps val too (a cache of what it wrote) saves
// a copy of every record.
func (tx *Tx) SetOwned(key, val []byte) error {
	if err := tx.checkWrite(key); err != nil {
		return err
	}
	tx.put(key, val)
	return nil
}

// Finally registers fn to run once the op's function, and the projectors
// of the events it appended, have returned. ok says that the op succeeded
// so far: fn may then still write through tx, and its error fails the op.
// The op's writes can still fail after (too large for a transaction, a
// failed commit), so fn must not take ok for durable: what it keeps in
// memory must prove itself against the store, as reccache does. Without ok (the op failed, or an earlier fn did) fn only
// lets go of what it holds. A projector that changes one record for many
// events of an op (a catch-up run, a restore) writes it once there.
// Functions run in the order registered, on the committer.
func (tx *Tx) Finally(fn func(ok bool) error) {
	if tx.finally == nil {
		tx.finally = tx.first[:0]
	}
	tx.finally = append(tx.finally, fn)
}

// end runs the op's Finally functions, each once, even if one panics (the
// caller's recover then runs the rest without ok).
func (tx *Tx) end(ok bool) error {
	var first error
	for len(tx.finally) > 0 {
		fn := tx.finally[0]
		tx.finally = tx.finally[1:]
		if err := fn(ok && first == nil); err != nil && ok && first == nil {
			first = err
		}
	}
	return first
}

// Delete removes key when the op succeeds.
func (tx *Tx) Delete(key []byte) error {
	if err := tx.checkWrite(key); err != nil {
		return err
	}
	tx.del(key)
	return nil
}

func (tx *Tx) checkWrite(key []byte) error {
	switch {
	case tx.readOnly:
		return ErrReadOnly
	case len(key) == 0 || len(key) > maxKeySize:
		return fmt.Errorf("store: key length %d", len(key))
	case isReserved(key):
		return fmt.Errorf("%w: %q", ErrReservedKey, key)
	}
	return nil
}

// put and del skip the reserved-key check: the store writes e/, m/ and x/.
// put keeps val, which must not change afterwards.
func (tx *Tx) put(key, val []byte) {
	k := string(key)
	if _, ok := tx.writes[k]; !ok {
		tx.order = append(tx.order, k)
	}
	tx.writes[k] = write{val: val}
}

func (tx *Tx) del(key []byte) {
	k := string(key)
	if _, ok := tx.writes[k]; !ok {
		tx.order = append(tx.order, k)
	}
	tx.writes[k] = write{del: true}
}

// NextID returns the next value of a dense per-name counter (1, 2, 3 …).
// The increment is one of the op's writes: it is rolled back with the op, so
// an id is never skipped nor handed out twice.
func (tx *Tx) NextID(name string) (uint64, error) {
	if tx.readOnly {
		return 0, ErrReadOnly
	}
	if name == "" {
		return 0, fmt.Errorf("store: NextID needs a name")
	}
	key := idKey(name)
	var n uint64
	switch v, err := tx.Get(key); {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return 0, err
	default:
		if n, err = decodeU64(v); err != nil {
			return 0, err
		}
	}
	n++
	tx.put(key, u64(n))
	return n, nil
}

// Iterate calls fn for every key with prefix, in ascending key order or
// descending when reverse, until fn returns an error; ErrStop ends it
// quietly. It sees committed state, earlier ops not yet committed and this
// op's own writes as they were when Iterate began: writes fn makes during the
// iteration are kept but not visited. key and val are copies.
func (tx *Tx) Iterate(prefix []byte, reverse bool, fn func(key, val []byte) error) error {
	return tx.iterate(prefix, nil, reverse, false, fn)
}

// IterateKeys is Iterate forward for an index whose keys say all it
// holds: fn gets each key (a copy) and no value, which is neither read
// nor copied.
func (tx *Tx) IterateKeys(prefix []byte, fn func(key []byte) error) error {
	return tx.iterate(prefix, nil, false, true, func(k, _ []byte) error { return fn(k) })
}

// IterateFrom is Iterate forward from the first key with prefix that is
// not below from.
func (tx *Tx) IterateFrom(prefix, from []byte, fn func(key, val []byte) error) error {
	return tx.iterate(prefix, from, false, false, fn)
}

func (tx *Tx) iterate(prefix, from []byte, reverse, keysOnly bool, fn func(key, val []byte) error) error {
	// The uncommitted writes under prefix, newest winning, in visiting
	// order, merged below with Badger's iterator; they shadow stored keys.
	snapshot := make(map[string]write)
	merge := func(l map[string]write) {
		for k, w := range l {
			if strings.HasPrefix(k, string(prefix)) && k >= string(from) {
				snapshot[k] = w
			}
		}
	}
	for _, l := range tx.layers {
		merge(l)
	}
	merge(tx.writes)
	over := slices.Sorted(maps.Keys(snapshot))
	if reverse {
		slices.Reverse(over)
	}

	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.Reverse = reverse
	opts.PrefetchValues = !keysOnly
	it := tx.txn.NewIterator(opts)
	defer it.Close()
	if bytes.Compare(from, prefix) > 0 {
		it.Seek(from) // forward only
	} else {
		seekFirst(it, prefix, reverse)
	}

	for {
		stored := it.ValidForPrefix(prefix)
		if !stored && len(over) == 0 {
			return nil
		}
		fromOverlay := !stored
		if stored && len(over) > 0 {
			c := bytes.Compare([]byte(over[0]), it.Item().Key())
			if reverse {
				c = -c
			}
			if c == 0 {
				it.Next() // shadowed
			}
			fromOverlay = c <= 0
		}
		var key, val []byte
		if fromOverlay {
			k := over[0]
			over = over[1:]
			w := snapshot[k]
			if w.del {
				continue
			}
			key = []byte(k)
			if !keysOnly {
				val = bytes.Clone(w.val)
			}
		} else {
			item := it.Item()
			key = item.KeyCopy(nil)
			if !keysOnly {
				v, err := item.ValueCopy(nil)
				if err != nil {
					return fmt.Errorf("%w: read: %w", errFault, err)
				}
				val = v
			}
			it.Next()
		}
		if err := fn(key, val); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
}

// seekFirst positions it on the first key with prefix in iteration order.
// Badger's reverse Seek finds the greatest key <= its argument, so it seeks
// to the prefix's successor and steps off it if that key exists.
func seekFirst(it *badger.Iterator, prefix []byte, reverse bool) {
	if !reverse {
		it.Seek(prefix)
		return
	}
	succ := successor(prefix)
	if succ == nil {
		it.Rewind()
		return
	}
	it.Seek(succ)
	if it.Valid() && bytes.Equal(it.Item().Key(), succ) {
		it.Next()
	}
}

// flushTo moves the overlay into txn. On an error txn holds part of it and
// must be discarded.
func (tx *Tx) flushTo(txn *badger.Txn, rec *record) error {
	for _, k := range tx.order {
		w := tx.writes[k]
		if err := setWrite(txn, k, w); err != nil {
			return err
		}
		if rec != nil {
			rec.add(k, w)
		}
	}
	return nil
}

func setWrite(txn *badger.Txn, k string, w write) error {
	if w.del {
		return txn.Delete([]byte(k))
	}
	return txn.Set([]byte(k), w.val)
}

// head returns the realm's head as this op sees it.
func (tx *Tx) head(realm string) protocol.Head {
	if h, ok := tx.heads[realm]; ok {
		return h
	}
	return tx.c.heads[realm]
}

// held is how many events the store holds as the op sees them: the sum of
// its realms' heads, chains being dense.
func (tx *Tx) held() uint64 {
	var n uint64
	for r, h := range tx.c.heads {
		if _, ok := tx.heads[r]; !ok {
			n += h.Seq
		}
	}
	for _, h := range tx.heads {
		n += h.Seq
	}
	return n
}

// appendEvent stores a checked, signed event at the next node sequence and
// runs every projector on it. Projector errors are returned unchanged.
func (tx *Tx) appendEvent(ev *protocol.Event, c cid.Cid, raw []byte) (*StoredEvent, error) {
	key := tx.link(ev, c)
	tx.seq++
	se := &StoredEvent{Event: ev, CID: c, Raw: raw, Sequence: tx.seq}
	return se, tx.project(se, key)
}

// link makes ev, at CID c, its realm's head and indexes it by CID; it
// returns the event's key, where its record goes.
func (tx *Tx) link(ev *protocol.Event, c cid.Cid) []byte {
	h := protocol.Head{Seq: ev.Seq, CID: c}
	if tx.heads == nil {
		tx.heads = make(map[string]protocol.Head, 1)
	}
	tx.heads[ev.Realm] = h
	key := eventKey(ev.Realm, ev.Seq)
	tx.put(cidKey(c), eventPlace(key))
	tx.put(headKey(ev.Realm), encodeHead(h))
	return key
}

// project stores se's record at key with its node sequence, indexes it in
// arrival order and runs every projector on it.
func (tx *Tx) project(se *StoredEvent, key []byte) error {
	tx.put(key, encodeEventRecord(se.Sequence, se.CID.Bytes(), se.Raw))
	tx.put(sequenceKey(se.Sequence), eventPlace(key))
	tx.put(keySequence, u64(se.Sequence))
	for _, p := range tx.b.projectors {
		if err := p.Apply(tx, se); err != nil {
			return err
		}
	}
	tx.added = append(tx.added, se)
	return nil
}
