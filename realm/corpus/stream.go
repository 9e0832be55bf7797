package corpus

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/internal/clientaddr"
	"relay/store"
)

// The live stream, GET /corpus/stream.
//
// Writers call Notify once their event is durable; it closes the feed's
// current channel and puts a fresh one in its place, so it never blocks and
// no subscriber, however slow, holds up a writer. A stream takes the
// channel before it reads, so a change committed during its read closes the
// channel it then waits on and it reads again: no wake-up is lost.
//
// Each stream reads the change feed itself, after its own cursor, up to the
// committed sequence, so a slow subscriber falls behind and catches up but
// never loses an event. The newest changes are kept in memory (tail), so
// the streams that keep up share one store read per change instead of a
// thousand; a stream behind the tail reads p/co/ch. Under a burst a stream
// reads at most every streamBatch, one read then carrying many changes; and
// it checks the committed sequence every second in case an event came by a
// path that did not notify. A View is never held while writing to a
// client.
//
// Lock order: tail.fillMu, then tail.mu.

const (
	// DefaultStreamHeartbeat is how long a stream stays silent before it
	// writes a comment line, so proxies and clients keep it open.
	DefaultStreamHeartbeat = 15 * time.Second
	// DefaultMaxStreams bounds the streams open at once.
	DefaultMaxStreams = 10000
	// DefaultMaxStreamsPerAddr bounds the streams of one client address,
	// so that one client cannot take every stream there is.
	DefaultMaxStreamsPerAddr = DefaultMaxStreams / 10

	streamBatch = 20 * time.Millisecond
	streamChunk = 256 // changes written per flush
	streamPoll  = time.Second
	// streamWriteTimeout cuts a client that does not read what it was sent.
	streamWriteTimeout = time.Minute
	streamRetryMillis  = 3000
)

// feed wakes the open streams when the corpus changes.
type feed struct {
	tail      tail
	changed   atomic.Pointer[chan struct{}]
	done      chan struct{} // closed by CloseStreams
	closeOnce sync.Once
	open      atomic.Int64
	heartbeat time.Duration
	max       int64
	perAddr   int

	addrMu sync.Mutex
	byAddr map[string]int // open streams by client address (streamAddr), loopback not counted
}

func newFeed(cfg Config) *feed {
	f := &feed{done: make(chan struct{}), heartbeat: cfg.StreamHeartbeat, max: int64(cfg.MaxStreams), perAddr: cfg.MaxStreamsPerAddr, byAddr: map[string]int{}}
	f.tail.maxEntries, f.tail.maxBytes = tailEntries, tailBytes
	if f.heartbeat <= 0 {
		f.heartbeat = DefaultStreamHeartbeat
	}
	if f.max <= 0 {
		f.max = DefaultMaxStreams
	}
	if f.perAddr <= 0 {
		f.perAddr = DefaultMaxStreamsPerAddr
	}
	ch := make(chan struct{})
	f.changed.Store(&ch)
	return f
}

// wait returns the channel the next Notify closes.
func (f *feed) wait() <-chan struct{} { return *f.changed.Load() }

func (f *feed) notify() {
	ch := make(chan struct{})
	close(*f.changed.Swap(&ch))
}

// Notify wakes the open streams: call it after an event is durable (a
// local write, or one ingested from a peer).
func (s *Service) Notify() { s.feed.notify() }

// CloseStreams ends every open stream, and any opened later at once: call
// it when the node shuts down, since streams never go idle on their own.
func (s *Service) CloseStreams() { s.feed.closeOnce.Do(func() { close(s.feed.done) }) }

// OpenStreams is the number of streams open now.
func (s *Service) OpenStreams() int { return int(s.feed.open.Load()) }

type streamIn struct {
	After       *uint64 `json:"after,omitempty" jsonschema:"exclusive sequence cursor; wins over Last-Event-ID"`
	LastEventID string  `json:"last_event_id,omitempty" jsonschema:"the Last-Event-ID header: resume after that sequence"`
}

// StreamOut opens the stream. Over HTTP it is the event stream itself; a
// JSON transport gets where to open it.
type StreamOut struct {
	URL       string `json:"url"`
	MediaType string `json:"media_type"`
	After     uint64 `json:"after" jsonschema:"the stream starts after this sequence"`
	s         *Service
}

func (s *Service) openStream(ctx context.Context, c *api.Call, in streamIn) (StreamOut, error) {
	after := s.st.Sequence()
	switch {
	case in.After != nil:
		after = *in.After
	case in.LastEventID != "":
		n, err := strconv.ParseUint(strings.TrimSpace(in.LastEventID), 10, 64)
		if err != nil {
			return StreamOut{}, invalid("Last-Event-ID is the id of an event this stream sent: a sequence.").With("field", "Last-Event-ID")
		}
		after = n
	}
	return StreamOut{URL: "/corpus/stream?after=" + strconv.FormatUint(after, 10), MediaType: "text/event-stream", After: after, s: s}, nil
}

// WriteHTTP serves the stream until the client leaves or the node shuts
// down.
func (o StreamOut) WriteHTTP(w http.ResponseWriter, r *http.Request) error {
	if !accepts(r.Header.Get("Accept"), "text/event-stream") {
		return notAcceptable("text/event-stream")
	}
	f := o.s.feed
	addr := streamAddr(r.RemoteAddr)
	if !f.take(addr) {
		return protocol.Refusef(protocol.ReasonRateLimited, "This address holds %d open streams, as many as one client may; close one, or poll /corpus/changes.jsonl.", f.perAddr).
			With("limit_streams", f.perAddr)
	}
	defer f.give(addr)
	if f.open.Add(1) > f.max {
		f.open.Add(-1)
		return protocol.Refusef(protocol.ReasonUnavailable, "Too many open streams; retry later, or poll /corpus/changes.jsonl.")
	}
	defer f.open.Add(-1)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // no buffering in a reverse proxy either
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	st := &stream{s: o.s, w: w, rc: http.NewResponseController(w), scanned: o.After}
	st.run(r.Context())
	return nil
}

// streamAddr is what a client's open streams are counted by
// (clientaddr.Key), or "" for loopback, which is not bounded: local tools,
// and a reverse proxy on the same machine, which has limits of its own.
func streamAddr(remote string) string {
	if clientaddr.Loopback(remote) {
		return ""
	}
	return clientaddr.Key(remote)
}

// take counts a stream for addr, or reports false when addr holds as many
// as it may.
func (f *feed) take(addr string) bool {
	if addr == "" {
		return true
	}
	f.addrMu.Lock()
	defer f.addrMu.Unlock()
	if f.byAddr[addr] >= f.perAddr {
		return false
	}
	f.byAddr[addr]++
	return true
}

// give ends the count take made.
func (f *feed) give(addr string) {
	if addr == "" {
		return
	}
	f.addrMu.Lock()
	defer f.addrMu.Unlock()
	if f.byAddr[addr]--; f.byAddr[addr] <= 0 {
		delete(f.byAddr, addr)
	}
}

// stream is one open stream.
type stream struct {
	s         *Service
	w         http.ResponseWriter
	rc        *http.ResponseController
	scanned   uint64 // every change at or below it was sent
	buf       []byte
	lastWrite time.Time
	lastRead  time.Time
}

func (st *stream) run(ctx context.Context) {
	f := st.s.feed
	st.buf = fmt.Appendf(st.buf, "retry: %d\n: changes after %d\n\n", streamRetryMillis, st.scanned)
	if st.flush() != nil {
		return
	}
	tick := time.NewTicker(min(streamPoll, f.heartbeat))
	defer tick.Stop()
	for {
		wake := f.wait()
		if st.catchUp(ctx) != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-f.done:
			return
		case <-tick.C:
			if time.Since(st.lastWrite) >= f.heartbeat {
				st.buf = append(st.buf, ": keep-alive\n\n"...)
				if st.flush() != nil {
					return
				}
			}
		case <-wake:
			if d := streamBatch - time.Since(st.lastRead); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-f.done:
					t.Stop()
					return
				case <-t.C:
				}
			}
		}
	}
}

// catchUp sends every change after scanned up to the committed sequence,
// streamChunk at a time.
func (st *stream) catchUp(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-st.s.feed.done:
			return store.ErrClosed
		default:
		}
		upTo := st.s.st.Sequence()
		if upTo <= st.scanned {
			return nil
		}
		st.lastRead = time.Now()
		f := st.s.feed
		err := f.tail.fill(st.s.st, upTo)
		batch, end, ok := f.tail.read(st.scanned, streamChunk)
		if err == nil && !ok { // behind the tail: read the store
			batch, end, err = readChanges(st.s.st, st.scanned, upTo, streamChunk)
		}
		if err != nil {
			if !errors.Is(err, store.ErrClosed) {
				st.s.log.Warn("corpus stream: read", "err", err)
			}
			return err
		}
		for _, c := range batch {
			st.buf = fmt.Appendf(st.buf, "event: change\nid: %d\ndata: %s\n\n", c.seq, c.env)
		}
		st.scanned = end
		if len(batch) > 0 {
			if err := st.flush(); err != nil {
				return err
			}
		}
	}
}

// flush writes what is buffered and pushes it to the client.
func (st *stream) flush() error {
	st.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) // not every writer has deadlines
	_, err := st.w.Write(st.buf)
	st.buf = st.buf[:0]
	if err == nil {
		err = st.rc.Flush()
	}
	st.lastWrite = time.Now()
	return err
}

// change is one envelope of the feed.
type change struct {
	seq uint64
	env []byte
}

// readChanges reads the changes in (after, upTo], at most max of them (and
// pageBudget bytes); end is the sequence it read up to.
func readChanges(st *store.Store, after, upTo uint64, max int) (batch []change, end uint64, err error) {
	end, size := upTo, 0
	err = st.View(func(tx *store.Tx) error {
		return scanSeq(tx, pfxChange, after, upTo, func(seq uint64, v []byte) error {
			if len(batch) == max || size >= pageBudget {
				end = batch[len(batch)-1].seq
				return store.ErrStop
			}
			batch = append(batch, change{seq, v})
			size += len(v)
			return nil
		})
	})
	return batch, end, err
}

// tail holds the newest changes in memory, so that the streams keeping up
// share one store read per change rather than one each; a stream behind it
// reads the store.
type tail struct {
	mu      sync.RWMutex
	from    uint64   // entries are every change in (from, upTo]
	upTo    uint64   // 0 before the first fill
	entries []change // ascending
	size    int
	fillMu  sync.Mutex // one filler at a time; the others wait and find it done

	maxEntries, maxBytes int
}

// Bounds of the tail: a stream this far behind reads the store.
const (
	tailEntries = 1024
	tailBytes   = 8 << 20
)

// fill brings the tail up to at least need (a committed sequence). It reads
// the store backwards from the committed sequence down to what it holds, so
// a tail left behind (or empty) costs what it keeps, never the whole feed.
func (t *tail) fill(st *store.Store, need uint64) error {
	t.mu.RLock()
	done := t.upTo >= need
	t.mu.RUnlock()
	if done {
		return nil
	}
	t.fillMu.Lock()
	defer t.fillMu.Unlock()
	t.mu.RLock()
	have := t.upTo
	t.mu.RUnlock()
	if have >= need {
		return nil
	}
	target := st.Sequence() // >= need: sequences only grow
	var fresh []change      // descending
	full, size := false, 0
	err := st.View(func(tx *store.Tx) error {
		return tx.Iterate(pfxChange, true, func(k, v []byte) error {
			seq := binary.BigEndian.Uint64(k[len(pfxChange):])
			switch {
			case seq > target:
				return nil // committed after target was read
			case seq <= have:
				return store.ErrStop
			case len(fresh) == t.maxEntries || size+len(v) > t.maxBytes && len(fresh) > 0:
				full = true
				return store.ErrStop
			}
			fresh = append(fresh, change{seq, v})
			size += len(v)
			return nil
		})
	})
	if err != nil {
		return err
	}
	slices.Reverse(fresh)
	t.mu.Lock()
	defer t.mu.Unlock()
	if full {
		// Only the newest fit: the tail starts over from them.
		t.entries, t.size, t.from = fresh, size, fresh[0].seq-1
	} else {
		t.entries = append(t.entries, fresh...)
		t.size += size
	}
	t.upTo = target
	// Keep the newest: drop from the front past the bounds.
	drop := 0
	for len(t.entries)-drop > t.maxEntries || t.size > t.maxBytes && len(t.entries)-drop > 1 {
		t.size -= len(t.entries[drop].env)
		drop++
	}
	if drop > 0 {
		t.from = t.entries[drop-1].seq
		t.entries = slices.Clone(t.entries[drop:])
	}
	return nil
}

// read returns the changes after after that the tail holds, at most max;
// end is the sequence they reach (the tail's upTo when all were taken). ok
// is false when after is older than the tail.
func (t *tail) read(after uint64, max int) (batch []change, end uint64, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if after < t.from {
		return nil, 0, false
	}
	if after >= t.upTo {
		return nil, after, true
	}
	i, _ := slices.BinarySearchFunc(t.entries, after+1, func(c change, seq uint64) int { return cmp.Compare(c.seq, seq) })
	rest := t.entries[i:]
	if len(rest) > max {
		return slices.Clone(rest[:max]), rest[max-1].seq, true
	}
	return slices.Clone(rest), t.upTo, true
}
