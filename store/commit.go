package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"

	"relay/protocol"
)

// An op's life: queued until the committer picks it up (running) or its
// caller's context ends first (abandoned). The CAS decides the race.
const (
	opQueued int32 = iota
	opRunning
	opAbandoned
)

type op struct {
	state     atomic.Int32
	run       func(tx *Tx) (*StoredEvent, error)
	exclusive func() error  // runs alone on the committer between batches (Rebuild)
	done      chan opResult // buffered, so the committer never waits on a caller
	// events is how many events the op may append, when more than one:
	// its overlay is sized for them rather than grown write by write.
	events int
	// retried marks an op the store runs again and again by itself (an
	// unpark pass): a panic in it is logged with its stack once.
	retried bool

	tx  *Tx // set when the op is kept: its overlay goes to the writer
	res opResult
}

type opResult struct {
	ev  *StoredEvent
	err error
}

// writesPerEvent is about how many keys appending an event writes: the
// store's three (and the head and m/seq once an op) and a projector's few.
const writesPerEvent = 10

// keepWrites marks an op error whose writes must still commit: the evidence
// of an equivocation outlives the refusal.
type keepWrites struct{ err error }

func (k keepWrites) Error() string { return k.err.Error() }
func (k keepWrites) Unwrap() error { return k.err }

// batch is a run of ops the committer has run, in order, and hands to the
// writer as one unit. The writer commits it in one Badger transaction, or in
// several when it is too big for one (never splitting an op).
type batch struct {
	id         uint64 // hand-off order, from 1
	projectors []Projector
	ops        []*op // every op run, kept or failed, to ack after the commit
	// writes merges the kept ops' overlays, later ops winning; order lists
	// its keys by first write. Later ops read it until a snapshot holding
	// the batch replaces it; nothing changes it once the batch is handed off.
	writes map[string]write
	order  []string
	// size bounds the bytes of the batch's write-ahead record: every write
	// merged, replaced ones too.
	size int
}

// Submit runs fn on the committer, in a batch with other ops. If fn returns
// a draft, the local realm's next event is built from it, signed, stored at
// the next node sequence and run through every projector, all in the same
// transaction. Errors from fn and from projectors are returned unchanged and
// undo every write of the op. Submit returns once the batch is committed and
// synced. fn must not call Submit, Ingest or Rebuild: the committer would
// wait on itself.
//
// While authoring is held (HoldAuthoring), an op whose fn returns a draft
// is undone, waits for the hold to end and runs again: fn may run more
// than once.
func (s *Store) Submit(ctx context.Context, fn func(tx *Tx) (*protocol.Draft, error)) (*StoredEvent, error) {
	var deadline time.Time
	for {
		ev, err := s.do(ctx, &op{run: func(tx *Tx) (*StoredEvent, error) {
			d, err := fn(tx)
			if err != nil || d == nil {
				return nil, err
			}
			return s.author(tx, d)
		}})
		if !errors.Is(err, errHeld) {
			return ev, err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(AuthorHoldWait)
		}
		if err := s.awaitAuthoring(ctx, deadline); err != nil {
			return nil, err
		}
	}
}

// emptyMap is the canonical encoding of {}, the data of a draft without any.
var emptyMap = []byte{0xa0}

func (s *Store) author(tx *Tx, d *protocol.Draft) (*StoredEvent, error) {
	if s.cfg.Realm == "" || s.cfg.Key == nil {
		return nil, errors.New("store: authoring an event needs Config.Realm and Config.Key")
	}
	if s.authoringHeld() != nil {
		return nil, errHeld
	}
	realm := string(s.cfg.Realm)
	h := tx.head(realm)
	data := bytes.Clone(d.Data)
	if len(data) == 0 {
		data = emptyMap
	}
	ev := &protocol.Event{
		Realm:  realm,
		Seq:    h.Seq + 1,
		Type:   d.Type,
		At:     s.cfg.Now().UnixMilli(),
		Author: d.Author,
		Data:   data,
	}
	if h.Seq > 0 {
		ev.Prev = protocol.Link{Cid: h.CID}
	}
	raw, c, err := ev.Sign(s.cfg.Key)
	if err != nil {
		return nil, err
	}
	return tx.appendEvent(ev, c, raw)
}

// Ingest stores an already signed event of another realm, checked against the
// held chain of its realm: ErrDuplicate, ErrEquivocation (evidence kept),
// ErrGap, or protocol.ErrChainBroken when prev does not match. verify checks
// the signature on the committer, before anything about the event is stored,
// so forged evidence is never recorded.
func (s *Store) Ingest(ctx context.Context, raw []byte, verify func(*protocol.Event) error) (*StoredEvent, error) {
	if verify == nil {
		return nil, errors.New("store: Ingest needs a verify function")
	}
	ev, c, err := protocol.DecodeEvent(raw)
	if err != nil {
		return nil, err
	}
	return s.IngestDecoded(ctx, ev, c, raw, verify)
}

// IngestDecoded is Ingest of an event the caller already decoded with
// protocol.DecodeEvent from raw (its CID c): the gossip validator decodes
// to check the signature and need not pay for it twice.
func (s *Store) IngestDecoded(ctx context.Context, ev *protocol.Event, c cid.Cid, raw []byte, verify func(*protocol.Event) error) (*StoredEvent, error) {
	if verify == nil {
		return nil, errors.New("store: Ingest needs a verify function")
	}
	raw = bytes.Clone(raw)
	return s.do(ctx, &op{run: func(tx *Tx) (*StoredEvent, error) {
		h := tx.head(ev.Realm)
		switch {
		case ev.Seq > h.Seq+1:
			return nil, fmt.Errorf("%w: %s seq %d, holding %d", ErrGap, ev.Realm, ev.Seq, h.Seq)
		case ev.Seq <= h.Seq:
			held, err := tx.heldAt(ev.Realm, ev.Seq)
			if err != nil {
				return nil, err
			}
			if bytes.Equal(held.cid, c.Bytes()) {
				return nil, ErrDuplicate
			}
			if err := verify(ev); err != nil {
				return nil, err
			}
			prior, err := decodeEventRecord(held.record)
			if err != nil {
				return nil, err
			}
			tx.put(equivocationKey(ev.Realm, ev.Seq, prior.CID), prior.Raw)
			tx.put(equivocationKey(ev.Realm, ev.Seq, c), raw)
			return nil, keepWrites{fmt.Errorf("%w: %s seq %d: holding %s, offered %s",
				ErrEquivocation, ev.Realm, ev.Seq, prior.CID, c)}
		}
		if err := ev.Follows(h); err != nil {
			return nil, err
		}
		if err := verify(ev); err != nil {
			return nil, err
		}
		return tx.ingestEvent(ev, c, raw)
	}})
}

// IngestChain stores a run of one realm's events, in seq order, as one op:
// all of them or none. Events the store already holds at the start of the
// run are skipped (an event held under the same seq with another CID is an
// equivocation: evidence kept, ErrEquivocation). The rest must extend the
// held chain link by link. verify is called once, on the newest event, after
// the links are checked: its signature commits to every event before it, so
// it authenticates the whole run. It returns how many events were added.
func (s *Store) IngestChain(ctx context.Context, raws [][]byte, verify func(*protocol.Event) error) (int, error) {
	wait, err := s.QueueChain(ctx, raws, verify)
	if err != nil {
		return 0, err
	}
	return wait()
}

// QueueChain is IngestChain in two steps: it queues the run and returns at
// once with a function that waits for the outcome. Runs queued one after
// the other from one goroutine are stored in that order, so a caller can
// have the next run checked and projected while the last one is synced.
func (s *Store) QueueChain(ctx context.Context, raws [][]byte, verify func(*protocol.Event) error) (wait func() (int, error), err error) {
	if verify == nil {
		return nil, errors.New("store: IngestChain needs a verify function")
	}
	run := make([]Checked, len(raws))
	for i, raw := range raws {
		ev, c, err := protocol.DecodeEvent(raw)
		if err != nil {
			return nil, fmt.Errorf("event %d of the run: %w", i, err)
		}
		run[i] = Checked{ev, c, raw}
	}
	return s.QueueDecodedChain(ctx, run, verify)
}

// QueueDecodedChain is QueueChain of events its caller already decoded with
// protocol.DecodeEvent (the gossip validator does, to authenticate a run):
// the store trusts that each Event and CID are those of its Raw, and keeps
// a copy of Raw. Their signatures are left to verify, as in QueueChain,
// and the links between the events are checked here all the same.
func (s *Store) QueueDecodedChain(ctx context.Context, run []Checked, verify func(*protocol.Event) error) (wait func() (int, error), err error) {
	if verify == nil {
		return nil, errors.New("store: IngestChain needs a verify function")
	}
	if len(run) == 0 {
		return func() (int, error) { return 0, nil }, nil
	}
	evs := make([]*protocol.Event, len(run))
	cids := make([]cid.Cid, len(run))
	raws := make([][]byte, len(run))
	for i, d := range run {
		ev := d.Event
		if i > 0 && (ev.Realm != evs[0].Realm || ev.Seq != evs[i-1].Seq+1 || !ev.Prev.Defined() || !ev.Prev.Cid.Equals(cids[i-1])) {
			return nil, fmt.Errorf("%w: event %d of the run does not follow the one before", protocol.ErrChainBroken, i)
		}
		evs[i], cids[i], raws[i] = ev, d.CID, bytes.Clone(d.Raw)
	}
	added := 0
	o := &op{events: len(evs), run: func(tx *Tx) (*StoredEvent, error) {
		realm := evs[0].Realm
		h := tx.head(realm)
		i := 0
		for ; i < len(evs) && evs[i].Seq <= h.Seq; i++ {
			held, err := tx.heldAt(realm, evs[i].Seq)
			if err != nil {
				return nil, err
			}
			if bytes.Equal(held.cid, cids[i].Bytes()) {
				continue
			}
			// The run is authenticated by its newest event, and this one
			// is linked to it: check before recording evidence. Evidence
			// also carries its own signature, so that a peer weighing it
			// event by event takes it too.
			if err := verify(evs[len(evs)-1]); err != nil {
				return nil, err
			}
			if i < len(evs)-1 {
				if err := verify(evs[i]); err != nil {
					return nil, err
				}
			}
			prior, err := decodeEventRecord(held.record)
			if err != nil {
				return nil, err
			}
			tx.put(equivocationKey(realm, evs[i].Seq, prior.CID), prior.Raw)
			tx.put(equivocationKey(realm, evs[i].Seq, cids[i]), raws[i])
			return nil, keepWrites{fmt.Errorf("%w: %s seq %d: holding %s, offered %s",
				ErrEquivocation, realm, evs[i].Seq, prior.CID, cids[i])}
		}
		if i == len(evs) {
			return nil, ErrDuplicate
		}
		if evs[i].Seq > h.Seq+1 {
			return nil, fmt.Errorf("%w: %s seq %d, holding %d", ErrGap, realm, evs[i].Seq, h.Seq)
		}
		if err := evs[i].Follows(h); err != nil {
			return nil, err
		}
		if err := verify(evs[len(evs)-1]); err != nil {
			return nil, err
		}
		var last *StoredEvent
		start := i
		for ; i < len(evs); i++ {
			se, err := tx.ingestEvent(evs[i], cids[i], raws[i])
			if err != nil {
				return nil, fmt.Errorf("%s seq %d: %w", realm, evs[i].Seq, err)
			}
			last = se
		}
		added = len(evs) - start
		return last, nil
	}}
	if err := s.queue(ctx, o); err != nil {
		return nil, err
	}
	return func() (int, error) {
		_, err := s.await(ctx, o)
		if errors.Is(err, ErrDuplicate) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		return added, nil
	}, nil
}

// exclusive runs fn on the committer with no batch open.
func (s *Store) exclusive(ctx context.Context, fn func() error) error {
	if s.diskLow.Load() {
		return ErrDiskFull // exclusive ops (a rebuild's steps) write, and much
	}
	_, err := s.do(ctx, &op{exclusive: fn})
	return err
}

// do queues o and waits for its result.
func (s *Store) do(ctx context.Context, o *op) (*StoredEvent, error) {
	if err := s.queue(ctx, o); err != nil {
		return nil, err
	}
	return s.await(ctx, o)
}

// queue hands o to the committer; ops queued from one goroutine run in
// queue order.
func (s *Store) queue(ctx context.Context, o *op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o.done = make(chan opResult, 1)
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	if err := s.failure(); err != nil {
		return err
	}
	select {
	case s.ops <- o:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// await waits for the result of a queued op.
func (s *Store) await(ctx context.Context, o *op) (*StoredEvent, error) {
	select {
	case r := <-o.done:
		return r.ev, r.err
	case <-ctx.Done():
		if o.state.CompareAndSwap(opQueued, opAbandoned) {
			return nil, ctx.Err()
		}
		r := <-o.done // it ran: its writes may commit, so report how
		return r.ev, r.err
	}
}

// committer is the state of stage 1. Only the committer goroutine touches
// it (Rebuild included: it runs there).
type committer struct {
	s *Store
	// snap is a read-only Badger snapshot of committed state. It is
	// long-lived because opening a transaction waits for a commit in
	// flight; the writer opens the next one after each commit.
	snap    *badger.Txn
	pending []*batch // handed to the writer and not in snap, oldest first
	cur     *batch   // being filled
	lastID  uint64
	// recent keeps the writes of batches that left pending: for those
	// keys, what snap holds, without a Badger read.
	recent recentWrites

	// The node sequence and realm heads as every op kept so far left them,
	// committed or not. Trusted only while the store has not failed.
	seq   uint64
	heads map[string]protocol.Head
	// waiting counts each realm's parked events not yet projected nor
	// refused (x/pk/), as every op kept so far left them.
	waiting map[string]int
}

func newCommitter(s *Store) *committer {
	c := &committer{
		s:       s,
		snap:    s.db.NewTransaction(false),
		seq:     s.seq.Load(),
		heads:   maps.Clone(s.heads),
		waiting: s.waitingAtOpen,
	}
	if c.waiting == nil {
		c.waiting = map[string]int{}
	}
	s.waitingAtOpen = nil // the committer's now, and only its
	c.cur = c.newBatch()
	return c
}

func (c *committer) newBatch() *batch {
	c.lastID++
	// Sized for the writes of the batch before: grown a write at a time,
	// the merged overlay rehashed four or five times a batch during posts.
	n := 0
	if c.cur != nil {
		n = min(len(c.cur.order), maxBatchHint)
	}
	return &batch{id: c.lastID, writes: make(map[string]write, n), order: make([]string, 0, n)}
}

// maxBatchHint bounds the size a new batch is made for: after a catch-up
// range of thousands of writes, a small batch does not get a map that large.
const maxBatchHint = 512

// commitLoop is stage 1. It runs ops into the current batch and hands the
// batch to the writer as soon as the writer is free, so a lone writer pays
// one fsync per op while a crowd's ops pile up in the batch during the
// previous commit.
func (s *Store) commitLoop() {
	defer close(s.loopDone)
	c := s.c
	defer c.shutdown()
	for {
		o, ok := c.next()
		if !ok {
			return
		}
		if !o.state.CompareAndSwap(opQueued, opRunning) {
			continue
		}
		if o.exclusive != nil {
			c.exclusive(o)
			continue
		}
		c.run(o)
	}
}

// next returns the next queued op, handing the current batch to the writer
// whenever it is free or the batch is full. ok is false once ops is closed.
func (c *committer) next() (o *op, ok bool) {
	for {
		if len(c.cur.ops) == 0 {
			o, ok = <-c.s.ops
			return o, ok
		}
		// A free writer gets the batch now rather than after more ops: the
		// next batch is then built while this one commits.
		select {
		case c.s.handoff <- c.cur:
			c.handedOff()
			continue
		default:
		}
		if len(c.cur.ops) >= c.s.cfg.MaxBatch {
			c.handOff()
			continue
		}
		select {
		case o, ok = <-c.s.ops:
			return o, ok
		case c.s.handoff <- c.cur:
			c.handedOff()
		}
	}
}

// handOff hands the current batch to the writer, waiting until it takes it.
func (c *committer) handOff() {
	c.s.handoff <- c.cur
	c.handedOff()
}

func (c *committer) handedOff() {
	c.s.batching.added(0)
	c.pending = append(c.pending, c.cur)
	c.cur = c.newBatch()
}

// drain hands off the current batch and waits until the writer has
// finished everything handed to it.
func (c *committer) drain() {
	if len(c.cur.ops) > 0 {
		c.handOff()
	}
	// The writer receives only when idle, so once it takes this marker every
	// batch before it is committed (or failed) and acked.
	c.s.handoff <- nil
}

// refresh switches to the newest snapshot the writer published, if any, and
// drops the batches it holds. Called between ops only.
func (c *committer) refresh() {
	n := c.s.nextSnap.Swap(nil)
	if n == nil {
		return
	}
	if n.txn != nil {
		c.snap.Discard()
		c.snap = n.txn
	}
	i := 0
	for i < len(c.pending) && c.pending[i].id <= n.upTo {
		c.recent.add(c.pending[i].writes)
		i++
	}
	c.pending = slices.Delete(c.pending, 0, i)
}

// resnap replaces the snapshot with a fresh one. Only when drained: then
// nothing is in flight, and the new snapshot holds every batch.
func (c *committer) resnap() {
	if n := c.s.nextSnap.Swap(nil); n != nil {
		n.discard()
	}
	c.snap.Discard()
	c.snap = c.s.db.NewTransaction(false)
	clear(c.pending)
	c.pending = c.pending[:0]
	c.recent.reset() // direct writes may have changed anything
}

// recentWrites is a cache of committed writes in two generations: when the
// newer holds recentBytes of values it becomes the older and the older is
// dropped. A key is looked up in the newer first, so a hit is always the
// newest committed write of those the cache saw, and the cache sees every
// committed batch in order (resnap clears it when Badger is written
// directly). A batch of more than recentMaxWrites writes (a catch-up range,
// a restore) empties the cache instead: copying its thousands of writes
// cost more than the few reads they would serve, and dropping every entry,
// rather than skipping the batch, keeps any entry the batch overwrote from
// being served.
type recentWrites struct {
	cur, old map[string]write
	bytes    int
	size     int // entries the last full generation held: the next one's size hint
}

const (
	recentBytes     = 8 << 20
	recentMaxWrites = 4096
)

func (r *recentWrites) get(k string) (write, bool) {
	if w, ok := r.cur[k]; ok {
		return w, true
	}
	w, ok := r.old[k]
	return w, ok
}

func (r *recentWrites) add(writes map[string]write) {
	if len(writes) > recentMaxWrites {
		r.reset()
		return
	}
	if r.cur == nil {
		// Sized for a whole generation at once: growing a map of
		// thousands of entries by rehashing took about 4 % of the
		// committer's time during posts.
		r.cur = make(map[string]write, max(len(writes), r.size))
	}
	for k, w := range writes {
		r.cur[k] = w
		r.bytes += len(k) + len(w.val)
	}
	if r.bytes >= recentBytes {
		r.size = len(r.cur)
		r.old, r.cur, r.bytes = r.cur, nil, 0
	}
}

func (r *recentWrites) reset() { *r = recentWrites{} }

// shutdown finishes the pipeline when ops is closed.
func (c *committer) shutdown() {
	if len(c.cur.ops) > 0 {
		c.handOff()
	}
	close(c.s.handoff)
	<-c.s.writerDone
	c.snap.Discard()
	if n := c.s.nextSnap.Swap(nil); n != nil {
		n.discard()
	}
}

// exclusive runs o alone: the pipeline is drained first, and the snapshot
// renewed after, since o may write to Badger directly.
func (c *committer) exclusive(o *op) {
	c.drain()
	err := c.s.failure()
	if err == nil {
		err = c.s.runExclusive(o.exclusive)
		c.resnap()
	}
	o.done <- opResult{err: err}
}

// firstPanic reports whether a retried op's panic with this value is new
// to the log. It keeps at most maxPanicsNoted values.
func (s *Store) firstPanic(v string) bool {
	s.panicsMu.Lock()
	defer s.panicsMu.Unlock()
	if _, ok := s.panicsNoted[v]; ok {
		return false
	}
	if len(s.panicsNoted) >= maxPanicsNoted {
		return true
	}
	if s.panicsNoted == nil {
		s.panicsNoted = map[string]struct{}{}
	}
	s.panicsNoted[v] = struct{}{}
	return true
}

const maxPanicsNoted = 64

func (s *Store) runExclusive(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("store: exclusive op panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: %v", errPanic, r)
		}
	}()
	return fn()
}

func (s *Store) runOp(o *op, tx *Tx) (ev *StoredEvent, err error) {
	defer func() {
		if r := recover(); r != nil {
			if !o.retried || s.firstPanic(fmt.Sprint(r)) {
				s.log.Error("store: op panicked", "panic", r, "stack", string(debug.Stack()))
			} else {
				s.log.Debug("store: op panicked again", "panic", r)
			}
			ev, err = nil, fmt.Errorf("%w: %v", errPanic, r)
		}
		if err != nil {
			tx.end(false) // what is left of them
		}
	}()
	ev, err = o.run(tx)
	if err == nil && len(tx.order) > 0 && s.diskLow.Load() {
		// Refused only now, so that an op that writes nothing (a retry
		// answered from what is stored) still gets its answer.
		err = ErrDiskFull
	}
	if k := (keepWrites{}); err == nil || errors.As(err, &k) {
		if ferr := tx.end(true); ferr != nil {
			return nil, ferr
		}
	}
	return ev, err
}

// run runs one op into the current batch and keeps its overlay if it
// succeeds and would fit a Badger transaction of its own.
func (c *committer) run(o *op) {
	c.refresh()
	if err := c.s.failure(); err != nil {
		o.done <- opResult{err: err} // nothing it could read is trusted
		return
	}
	b := c.cur
	if len(b.ops) == 0 {
		b.projectors = c.s.projectorList()
	}
	layers := make([]map[string]write, 0, len(c.pending)+1)
	for _, p := range c.pending {
		layers = append(layers, p.writes)
	}
	hint := max(16, o.events*writesPerEvent)
	tx := &Tx{s: c.s, txn: c.snap, writes: make(map[string]write, hint), order: make([]string, 0, hint),
		layers: append(layers, b.writes), c: c, b: b, seq: c.seq}
	ev, err := c.s.runOp(o, tx)
	b.ops = append(b.ops, o)
	c.s.batching.added(len(b.ops))
	var k keepWrites
	switch {
	case err == nil:
		o.res = opResult{ev: ev}
	case errors.As(err, &k):
		o.res = opResult{err: k.err}
	default:
		o.res = opResult{err: err}
		return
	}
	// The writer cannot fail an op alone once later ops have read its
	// writes, so what Badger would refuse is refused here.
	if err := c.s.fits(tx); err != nil {
		o.res = opResult{err: fmt.Errorf("store: write: %w", err)}
		return
	}
	o.tx = tx
	if len(b.order) == 0 && len(tx.order) > 64 {
		b.writes = make(map[string]write, len(tx.order)) // the op's layer was b's empty map
	}
	for _, k := range tx.order {
		if _, ok := b.writes[k]; !ok {
			b.order = append(b.order, k)
		}
		w := tx.writes[k]
		b.writes[k] = w
		b.size += len(k) + len(w.val) + entryOverhead
	}
	c.seq = tx.seq
	for r, h := range tx.heads {
		c.heads[r] = h
	}
	for r, d := range tx.waitDelta {
		if c.waiting[r] += d; c.waiting[r] <= 0 {
			delete(c.waiting, r)
		}
	}
}
