package parley

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"relay/store"
)

// records is the forum's memory of its hot records, beside the store: the
// decoded threads and boards every post reads and writes, and what a post's
// op left for its poster.
type records struct {
	threads recordCache[threadRec]
	boards  recordCache[Board]
	heads   recordCache[msgHead]  // messages, as far as a reply to one checks them
	exts    recordCache[[]string] // the extensions each line used

	mu    sync.Mutex
	posts map[*store.Tx]*posted
}

// maxCached is how many records of one kind stay decoded: enough for every
// thread a crowd of agents writes to at once.
const maxCached = 4096

func newRecords() *records {
	return &records{
		threads: recordCache[threadRec]{max: maxCached, clone: cloneThread},
		boards:  recordCache[Board]{max: maxCached, clone: func(b Board) Board { return b }},
		heads:   recordCache[msgHead]{max: maxCached, clone: func(h msgHead) msgHead { return h }},
		exts:    recordCache[[]string]{max: maxCached, clone: slices.Clone[[]string]},
		posts:   make(map[*store.Tx]*posted),
	}
}

// msgHead is what a reply checks of the message it answers, decoded from
// the message's record.
type msgHead struct {
	Thread    rid    `json:"thread"`
	Identity  string `json:"identity"`
	Extension string `json:"extension,omitempty"`
}

func headOf(m *messageRec) msgHead {
	return msgHead{Thread: m.Thread, Identity: m.Identity, Extension: m.Extension}
}

func cloneThread(t threadRec) threadRec {
	if t.ConfirmedAt != nil {
		at := *t.ConfirmedAt
		t.ConfirmedAt = &at
	}
	return t
}

// recordCache keeps JSON records decoded, each with the exact bytes it was
// read or written as. A read still asks the transaction for the record's
// bytes, and uses the decoded value only when they are the same bytes: the
// value is then the one those bytes decode to, whatever the transaction saw
// (an earlier op's uncommitted write, the committed state after a failed op
// dropped its own, a rebuild). So the cache needs no hook into the store's
// commits and failures; a miss decodes, as without it.
//
// Written values are kept as they were written, not decoded back: that
// relies on the JSON of a record decoding to the record it came from.
// Records hold strings, integers, booleans and UTC times of the projector
// (protocol.Event.Time), for which it does; every test binary checks it on
// every hit (verifyCache).
type recordCache[T any] struct {
	max   int
	clone func(T) T // a copy its taker may change without touching the cache

	mu sync.Mutex
	m  map[string]cachedRecord[T]
}

type cachedRecord[T any] struct {
	raw []byte
	v   T
}

// verifyCache makes every cache hit prove itself against a fresh decode of
// its bytes. On in test binaries only.
var verifyCache = testing.Testing()

// errCacheMismatch is a cached record that differs from what its bytes
// decode to: the cache would have served a wrong value.
var errCacheMismatch = errors.New("parley: cached record differs from its bytes")

// get reads the record at k through tx into *v, which must be the zero
// value; found is false when there is none.
func (c *recordCache[T]) get(tx *store.Tx, k []byte, v *T) (found bool, err error) {
	raw, err := tx.Get(k)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	e, ok := c.m[string(k)]
	c.mu.Unlock()
	if ok && bytes.Equal(e.raw, raw) {
		if verifyCache {
			var d T
			if err := json.Unmarshal(raw, &d); err != nil || !reflect.DeepEqual(d, e.v) {
				return true, fmt.Errorf("%w: %q: %+v, decoded %+v", errCacheMismatch, k, e.v, d)
			}
		}
		*v = c.clone(e.v)
		return true, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, err
	}
	c.keep(k, raw, *v) // raw is the transaction's copy: ours now
	return true, nil
}

// set writes v at k through tx.
func (c *recordCache[T]) set(tx *store.Tx, k []byte, v *T) error {
	return withRecordJSON(v, func(b []byte) error {
		if err := tx.Set(k, b); err != nil {
			return err
		}
		c.keep(k, bytes.Clone(b), *v)
		return nil
	})
}

// setAs writes rec at k through tx and keeps v, which must be what the
// record's JSON decodes to as a T, for it.
func (c *recordCache[T]) setAs(tx *store.Tx, k []byte, rec any, v T) error {
	return withRecordJSON(rec, func(b []byte) error {
		if err := tx.Set(k, b); err != nil {
			return err
		}
		c.keep(k, bytes.Clone(b), v)
		return nil
	})
}

func (c *recordCache[T]) keep(k, raw []byte, v T) {
	v = c.clone(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]cachedRecord[T])
	}
	if _, ok := c.m[string(k)]; !ok && len(c.m) >= c.max {
		for old := range c.m { // any one: a miss only costs a decode
			delete(c.m, old)
			break
		}
	}
	c.m[string(k)] = cachedRecord[T]{raw: raw, v: v}
}

// posted is what a post's op wrote for its message and thread, handed from
// the projector, on the committer, to the poster once Submit returns: the
// answer is built from it instead of reading both back.
//
// It also hands the projector the thread as the op read it, so that the
// projector need not read it again: an op's transaction sees a key change
// only by the op's own writes, and this op writes the thread only after the
// projector has taken it.
type posted struct {
	tx   *store.Tx
	read *threadRec // the thread the message joins, as the op read it through tx

	ok     bool // the projector filled msg and thread
	msg    messageRec
	thread threadRec
}

// expect registers the post whose event tx is about to append.
func (r *records) expect(tx *store.Tx) *posted {
	h := &posted{tx: tx}
	r.mu.Lock()
	r.posts[tx] = h
	r.mu.Unlock()
	return h
}

// take hands the projector the post registered for tx, if any, and
// unregisters it.
func (r *records) take(tx *store.Tx) *posted {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.posts[tx]
	if h != nil {
		delete(r.posts, tx)
	}
	return h
}

// forget unregisters h if the projector never took it (the op failed first).
func (r *records) forget(h *posted) {
	r.mu.Lock()
	if r.posts[h.tx] == h {
		delete(r.posts, h.tx)
	}
	r.mu.Unlock()
}
