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

	ops   map[*store.Tx]*opChanges // on the committer only, as spare
	spare *opChanges
}

// maxCached is how many records of one kind stay decoded: enough for every
// thread a crowd of agents writes to at once.
const maxCached = 4096

func newRecords() *records {
	r := &records{posts: make(map[*store.Tx]*posted), ops: make(map[*store.Tx]*opChanges)}
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

// opChanges are the threads and boards an op changed, as they stand after
// its latest event: every message changes its thread and board, and an op
// that appends many events (a catch-up run, a restore) would otherwise
// encode and write both for each. They are written once, when the op ends
// (store.Tx.Finally), and until then read from here: the transaction holds
// them as they were before the op, never newer. An op usually changes one
// thread and one board, so they are kept in slices, indexed by a map only
// when many; and the committer reuses one opChanges op after op.
type opChanges struct {
	r       *records
	tx      *store.Tx
	end     func(ok bool) error // c.finish, made once
	threads []threadRec         // in first-change order, so writes are in a fixed order
	// was holds threads[i]'s order keys as stored before the op (nil
	// for a thread it opened), to move them when they change.
	was    [][2][]byte
	boards []Board
	keys   [][]byte      // boards[i]'s key, when the op read the board
	index  map[opKey]int // nil while few
}

type opKey struct {
	board bool
	id    rid
}

// indexAbove is how many records an op changes before they are indexed.
const indexAbove = 16

// changed returns tx's op changes, registering them with tx on first use.
func (r *records) changed(tx *store.Tx) *opChanges {
	if c := r.ops[tx]; c != nil {
		return c
	}
	c := r.spare
	if c == nil {
		c = &opChanges{r: r}
		c.end = c.finish
	}
	r.spare = nil
	c.tx = tx
	r.ops[tx] = c
	tx.Finally(c.end)
	return c
}

// finish writes the changes when the op's writes are kept, and lets them go.
func (c *opChanges) finish(ok bool) error {
	var err error
	if ok {
		err = c.write()
	}
	r := c.r
	delete(r.ops, c.tx)
	c.tx = nil
	clear(c.threads) // no strings kept alive
	clear(c.boards)
	clear(c.keys)
	clear(c.was)
	c.threads, c.boards, c.keys, c.was, c.index = c.threads[:0], c.boards[:0], c.keys[:0], c.was[:0], nil
	if cap(c.threads) <= indexAbove && cap(c.boards) <= indexAbove {
		r.spare = c
	}
	return err
}

func (c *opChanges) find(k opKey) (int, bool) {
	if c.index != nil {
		i, ok := c.index[k]
		return i, ok
	}
	if k.board {
		for i := range c.boards {
			if c.boards[i].id() == k.id {
				return i, true
			}
		}
		return 0, false
	}
	for i := range c.threads {
		if c.threads[i].id() == k.id {
			return i, true
		}
	}
	return 0, false
}

func (c *opChanges) add(k opKey, i int) {
	if c.index == nil && len(c.threads)+len(c.boards) > indexAbove {
		c.index = make(map[opKey]int, 2*indexAbove)
		for j := range c.threads {
			c.index[opKey{false, c.threads[j].id()}] = j
		}
		for j := range c.boards {
			c.index[opKey{true, c.boards[j].id()}] = j
		}
	}
	if c.index != nil {
		c.index[k] = i
	}
}

// thread returns the op's thread id, if the op changed it.
func (c *opChanges) thread(id rid) (threadRec, bool) {
	if i, ok := c.find(opKey{false, id}); ok {
		return cloneThread(c.threads[i]), true
	}
	return threadRec{}, false
}

// board returns the op's board id, if the op changed it.
func (c *opChanges) board(id rid) (Board, bool) {
	if i, ok := c.find(opKey{true, id}); ok {
		return c.boards[i], true
	}
	return Board{}, false
}

// setThread keeps t; stored is the thread as stored before the op (nil for
// a new one), read when the op first changes the thread.
func (c *opChanges) setThread(t, stored *threadRec) {
	k := opKey{false, t.id()}
	if i, ok := c.find(k); ok {
		c.threads[i] = cloneThread(*t)
		return
	}
	var was [2][]byte
	if stored != nil {
		was = [2][]byte{threadAtKey(stored), boardAtKey(stored)}
	}
	c.threads = append(c.threads, cloneThread(*t))
	c.was = append(c.was, was)
	c.add(k, len(c.threads)-1)
}

// setBoard keeps b; key is its record's key, or nil.
func (c *opChanges) setBoard(b Board, key []byte) {
	k := opKey{true, b.id()}
	if i, ok := c.find(k); ok {
		c.boards[i] = b
		return
	}
	c.boards = append(c.boards, b)
	c.keys = append(c.keys, key)
	c.add(k, len(c.boards)-1)
}

// write stores the changed records through the op's tx, each once: boards
// first, as a message's op wrote them before.
func (c *opChanges) write() error {
	for i := range c.boards {
		b, k := &c.boards[i], c.keys[i]
		if k == nil {
			k = ridKey(pfxBoard, b.id())
		}
		if err := c.r.boards.set(c.tx, k, b); err != nil {
			return err
		}
	}
	for i := range c.threads {
		t := &c.threads[i]
		if err := c.r.threads.set(c.tx, ridKey(pfxThread, t.id()), t); err != nil {
			return err
		}
		for j, k := range [2][]byte{threadAtKey(t), boardAtKey(t)} {
			if was := c.was[i][j]; was != nil {
				if bytes.Equal(was, k) {
					continue
				}
				if err := c.tx.Delete(was); err != nil {
					return err
				}
			}
			if err := c.tx.Set(k, nil); err != nil {
				return err
			}
		}
	}
	return nil
}
