package backup

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"relay/protocol"
	"relay/store"
)

// Options configure Read.
type Options struct {
	// Known returns the key the caller already holds for a realm (the realm
	// directory); when it has one, the file's must be the same. nil: none.
	Known func(protocol.Realm) (ed25519.PublicKey, bool)
	// Workers decode and verify events in parallel; 0 means GOMAXPROCS.
	Workers int
	// VerifyAll checks every event's signature. Without it, Read checks in
	// each chunk the signature of every realm's newest event: with the hash
	// links (each prev is the CID, recomputed from the bytes, of the event
	// before) that authenticates every byte of the chain up to it, for a
	// fraction of the cost. Only an event its own realm signed badly and
	// then linked to would pass unseen.
	VerifyAll bool
	// ChunkEvents and ChunkBytes bound one chunk handed to Sink.Events;
	// 0 means 512 events and 1 MiB of raw events.
	ChunkEvents int
	ChunkBytes  int
	// Progress, when set, is called after every chunk and every blob.
	Progress func(Progress)
}

// Sink receives what a file holds, each part only once verified, in file
// order, from one goroutine at a time. A nil field skips that part; an
// error stops Read and is returned.
type Sink struct {
	// Begin is called once, before any event or blob, with the header and
	// keys.
	Begin func(Start) error
	// Events gets the events in chunks: decoded, CIDs recomputed, signed
	// by their realm's key and extending its chain.
	Events func([]store.Checked) error
	// Blob gets each blob, its CID checked against its bytes.
	Blob func(Blob) error
}

// Start is what a file says before its events: the header, every realm's
// key (not to be changed: the verifying goroutines read it) and the secret,
// nil when the file has none.
type Start struct {
	Header Header
	Keys   map[protocol.Realm]ed25519.PublicKey
	// Descriptors holds the signed descriptors the file carries, each
	// verified and matching its realm's key.
	Descriptors map[protocol.Realm][]byte
	Secret      *Secret
}

// Progress is how far a Read (or an export) has come.
type Progress struct {
	Events      uint64 // events verified and handed on
	EventsTotal uint64 // events the file holds
	Blobs       uint64
	Bytes       int64 // of the uncompressed stream
}

// Summary is what a file held.
type Summary struct {
	Header Header
	Heads  map[protocol.Realm]protocol.Head
	Keys   int
	Secret bool
	Events uint64
	Blobs  uint64
}

// Read reads and verifies a whole export file, handing its parts to sink
// (see the package doc for every check). It returns only once the trailer
// has matched and the file has ended: a sink that stores must treat
// everything it got as provisional until then.
func Read(ctx context.Context, in io.Reader, opts Options, sink Sink) (Summary, error) {
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if opts.ChunkEvents <= 0 {
		opts.ChunkEvents = 512
	}
	if opts.ChunkBytes <= 0 {
		opts.ChunkBytes = 1 << 20
	}
	r, err := NewReader(in)
	if err != nil {
		return Summary{}, err
	}
	rd := &reading{ctx: ctx, opts: opts, sink: sink, r: r,
		keys: map[protocol.Realm]ed25519.PublicKey{}, descriptors: map[protocol.Realm][]byte{},
		heads: map[protocol.Realm]protocol.Head{}}
	rd.sum.Header = r.Header()
	err = rd.run()
	if rd.pipe != nil {
		if perr := rd.pipe.close(); err == nil {
			err = perr
		}
	}
	if err != nil {
		return Summary{}, err
	}
	rd.sum.Heads = rd.heads
	return rd.sum, nil
}

type reading struct {
	ctx         context.Context
	opts        Options
	sink        Sink
	r           *Reader
	keys        map[protocol.Realm]ed25519.PublicKey // complete before the first event
	descriptors map[protocol.Realm][]byte
	secret      *Secret
	heads       map[protocol.Realm]protocol.Head // the pipeline's sink goroutine owns it while it runs
	pipe        *pipeline
	keyed       bool
	sum         Summary
}

func (rd *reading) run() error {
	for {
		if err := rd.ctx.Err(); err != nil {
			return err
		}
		f, err := rd.r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch f.Kind {
		case KindKey:
			if err := rd.key(f.Key); err != nil {
				return err
			}
		case KindSecret:
			rd.secret = f.Secret
			rd.sum.Secret = true
		case KindEvent:
			if rd.pipe == nil {
				if err := rd.endKeys(); err != nil {
					return err
				}
				rd.pipe = startPipeline(rd)
			}
			if err := rd.pipe.add(f.Event, rd.r.Events()); err != nil {
				return err
			}
		case KindBlob, KindTrailer:
			if err := rd.endKeys(); err != nil {
				return err
			}
			if rd.pipe != nil {
				p := rd.pipe
				rd.pipe = nil
				if err := p.close(); err != nil {
					return err
				}
			}
			if f.Kind == KindTrailer {
				return rd.trailer(f.Trailer)
			}
			if err := rd.blob(f.Blob); err != nil {
				return err
			}
		}
	}
}

func (rd *reading) key(k *RealmKey) error {
	realm := protocol.Realm(k.Realm)
	pub := ed25519.PublicKey(k.Public)
	if rd.opts.Known != nil {
		if known, ok := rd.opts.Known(realm); ok && !known.Equal(pub) {
			return fmt.Errorf("%w: realm %s", ErrKeyMismatch, realm)
		}
	}
	if err := k.CheckDescriptor(); err != nil {
		return fmt.Errorf("%w: key of %s: %w", ErrUnverified, realm, err)
	}
	if len(k.Descriptor) > 0 {
		rd.descriptors[realm] = k.Descriptor
	}
	rd.keys[realm] = pub
	rd.sum.Keys++
	return nil
}

func (rd *reading) endKeys() error {
	if rd.keyed {
		return nil
	}
	rd.keyed = true
	if rd.sink.Begin == nil {
		return nil
	}
	return rd.sink.Begin(Start{Header: rd.sum.Header, Keys: rd.keys, Descriptors: rd.descriptors, Secret: rd.secret})
}

func (rd *reading) blob(b *Blob) error {
	n := rd.sum.Blobs + 1
	c, err := cid.Cast(b.CID)
	if err != nil {
		return fmt.Errorf("%w: blob %d: cid: %v", ErrUnverified, n, err)
	}
	if p := c.Prefix(); p.Version != 1 || p.Codec != cid.Raw || p.MhType != multihash.SHA2_256 {
		return fmt.Errorf("%w: blob %d: %s is not a blob cid", ErrUnverified, n, c)
	}
	if !protocol.BlobCID(b.Data).Equals(c) {
		return fmt.Errorf("%w: blob %d: bytes do not hash to %s", ErrUnverified, n, c)
	}
	if b.MediaType == "" || len(b.MediaType) > 127 || bytes.ContainsAny([]byte(b.MediaType), "\r\n") {
		return fmt.Errorf("%w: blob %d (%s): media type %q", ErrUnverified, n, c, b.MediaType)
	}
	if rd.sink.Blob != nil {
		if err := rd.sink.Blob(*b); err != nil {
			return err
		}
	}
	rd.sum.Blobs = n
	rd.progress(rd.r.offset)
	return nil
}

func (rd *reading) trailer(t *Trailer) error {
	if len(t.Heads) != len(rd.heads) {
		return fmt.Errorf("%w: trailer names %d realms, the file has events of %d", ErrCorrupt, len(t.Heads), len(rd.heads))
	}
	seen := make(map[string]bool, len(t.Heads))
	for _, h := range t.Heads {
		if seen[h.Realm] {
			return fmt.Errorf("%w: trailer names realm %s twice", ErrCorrupt, h.Realm)
		}
		seen[h.Realm] = true
		got, ok := rd.heads[protocol.Realm(h.Realm)]
		if !ok || got.Seq != h.Seq || !bytes.Equal(got.CID.Bytes(), h.CID) {
			return fmt.Errorf("%w: trailer says realm %s ends at seq %d, its chain in the file ends at %d", ErrCorrupt, h.Realm, h.Seq, got.Seq)
		}
	}
	return nil
}

func (rd *reading) progress(bytes int64) {
	if rd.opts.Progress != nil {
		rd.opts.Progress(Progress{Events: rd.sum.Events, EventsTotal: rd.sum.Header.Events, Blobs: rd.sum.Blobs, Bytes: bytes})
	}
}

// chunk is a run of consecutive event frames.
type chunk struct {
	first uint64 // the file's number of its first event, from 1
	raws  [][]byte
	size  int
	end   int64 // stream offset after its last frame, for progress
	evs   []store.Checked
	err   error
	done  chan struct{} // closed once decoded and verified
}

// pipeline decodes and verifies chunks on worker goroutines and hands them
// to the sink on one goroutine, in file order, checking chains there.
type pipeline struct {
	rd       *reading
	cur      *chunk
	work     chan *chunk // to the workers, any order
	order    chan *chunk // to the sink goroutine, file order
	workers  sync.WaitGroup
	sinkDone chan struct{}
	failed   chan struct{} // closed with err set, by the first failure
	once     sync.Once
	err      error
	closed   bool
}

func startPipeline(rd *reading) *pipeline {
	n := rd.opts.Workers
	p := &pipeline{rd: rd, work: make(chan *chunk, 2*n), order: make(chan *chunk, 2*n+2),
		sinkDone: make(chan struct{}), failed: make(chan struct{})}
	p.workers.Add(n)
	for range n {
		go func() {
			defer p.workers.Done()
			for c := range p.work {
				c.err = verifyChunk(c, rd.keys, rd.opts.VerifyAll)
				close(c.done)
			}
		}()
	}
	go p.sinkLoop()
	return p
}

func (p *pipeline) fail(err error) {
	p.once.Do(func() {
		p.err = err
		close(p.failed)
	})
}

// add queues one raw event (the file's event number n).
func (p *pipeline) add(raw []byte, n uint64) error {
	if p.cur == nil {
		p.cur = &chunk{first: n, done: make(chan struct{})}
	}
	p.cur.raws = append(p.cur.raws, raw)
	p.cur.size += len(raw)
	p.cur.end = p.rd.r.offset
	if len(p.cur.raws) >= p.rd.opts.ChunkEvents || p.cur.size >= p.rd.opts.ChunkBytes {
		return p.flush()
	}
	return nil
}

func (p *pipeline) flush() error {
	c := p.cur
	if c == nil {
		return nil
	}
	p.cur = nil
	select {
	case <-p.failed:
		return p.err
	case p.order <- c:
	}
	select {
	case <-p.failed:
		return p.err
	case p.work <- c:
	}
	return nil
}

// close hands on the last chunk, waits for everything queued and returns
// the first failure.
func (p *pipeline) close() error {
	if p.closed {
		return p.err
	}
	p.closed = true
	err := p.flush()
	close(p.work)
	close(p.order)
	p.workers.Wait()
	<-p.sinkDone
	if p.err != nil {
		return p.err
	}
	return err
}

func (p *pipeline) sinkLoop() {
	defer close(p.sinkDone)
	rd := p.rd
	for c := range p.order {
		select {
		case <-p.failed:
			continue // drain
		case <-c.done:
		}
		if c.err != nil {
			p.fail(c.err)
			continue
		}
		if err := rd.ctx.Err(); err != nil {
			p.fail(err)
			continue
		}
		for i, e := range c.evs {
			realm := protocol.Realm(e.Event.Realm)
			if err := e.Event.Follows(rd.heads[realm]); err != nil {
				p.fail(fmt.Errorf("%w: event %d (%s seq %d): %w", ErrUnverified, c.first+uint64(i), realm, e.Event.Seq, err))
				break
			}
			rd.heads[realm] = protocol.Head{Seq: e.Event.Seq, CID: e.CID}
		}
		if p.err != nil {
			continue
		}
		if rd.sink.Events != nil {
			if err := rd.sink.Events(c.evs); err != nil {
				p.fail(err)
				continue
			}
		}
		rd.sum.Events += uint64(len(c.evs))
		rd.progress(c.end)
	}
}

// verifyChunk decodes every event of c, recomputing its CID, and verifies
// signatures against the realms' keys: every one when all is set, else
// each realm's newest in the chunk (see Options.VerifyAll).
func verifyChunk(c *chunk, keys map[protocol.Realm]ed25519.PublicKey, all bool) error {
	c.evs = make([]store.Checked, len(c.raws))
	newest := map[protocol.Realm]int{}
	for i, raw := range c.raws {
		ev, id, err := protocol.DecodeEvent(raw)
		if err != nil {
			return fmt.Errorf("%w: event %d: %w", ErrUnverified, c.first+uint64(i), err)
		}
		if _, ok := keys[protocol.Realm(ev.Realm)]; !ok {
			return fmt.Errorf("%w: event %d: realm %s has no key in the file", ErrUnverified, c.first+uint64(i), ev.Realm)
		}
		c.evs[i] = store.Checked{Event: ev, CID: id, Raw: raw}
		newest[protocol.Realm(ev.Realm)] = i
	}
	c.raws = nil
	for i, e := range c.evs {
		realm := protocol.Realm(e.Event.Realm)
		if !all && newest[realm] != i {
			continue
		}
		if err := e.Event.Verify(keys[realm]); err != nil {
			return fmt.Errorf("%w: event %d (%s seq %d): %w", ErrUnverified, c.first+uint64(i), realm, e.Event.Seq, err)
		}
	}
	return nil
}
