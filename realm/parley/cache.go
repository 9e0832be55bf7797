package parley

import (
	"bytes"
	"slices"
	"sync"
	"testing"

	"relay/realm/internal/reccache"
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
	r := &records{posts: make(map[*store.Tx]*posted)}
	r.threads.Cache = reccache.Cache[threadRec]{Max: maxCached, Clone: cloneThread, Verify: verifyCache}
	r.boards.Cache = reccache.Cache[Board]{Max: maxCached, Verify: verifyCache}
	r.heads.Cache = reccache.Cache[msgHead]{Max: maxCached, Verify: verifyCache}
	r.exts.Cache = reccache.Cache[[]string]{Max: maxCached, Clone: slices.Clone[[]string], Verify: verifyCache}
	return r
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

// recordCache is a reccache.Cache of records the projector writes with
// the forum's encoders (withRecordJSON). Written values are kept as they
// were written, not decoded back: that relies on the JSON of a record
// decoding to the record it came from. Records hold strings, integers,
// booleans and UTC times of the projector (protocol.Event.Time), for which
// it does; every test binary checks it on every hit (verifyCache).
type recordCache[T any] struct{ reccache.Cache[T] }

// verifyCache makes every cache hit prove itself against a fresh decode of
// its bytes. On in test binaries only.
var verifyCache = testing.Testing()

// set writes v at k through tx.
func (c *recordCache[T]) set(tx *store.Tx, k []byte, v *T) error {
	return c.setAs(tx, k, v, *v)
}

// setAs writes rec at k through tx and keeps v, which must be what the
// record's JSON decodes to as a T, for it. The store and the cache share
// one copy of the bytes: neither changes them.
func (c *recordCache[T]) setAs(tx *store.Tx, k []byte, rec any, v T) error {
	return withRecordJSON(rec, func(b []byte) error {
		raw := bytes.Clone(b)
		if err := tx.SetOwned(k, raw); err != nil {
			return err
		}
		c.Keep(k, raw, v)
		return nil
	})
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
