package federation

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"relay/protocol"
	"relay/store"
)

// streamTimeout bounds one catch-up exchange, either side.
const streamTimeout = 30 * time.Second

// farBehind is how many events behind a peer this node must be to pull them
// all at once rather than leave the newest to gossip.
const farBehind = 2 * defaultRangeSize

// serveSync answers one catch-up request.
func (s *Service) serveSync(str network.Stream) {
	defer str.Close()
	str.SetDeadline(time.Now().Add(streamTimeout))
	r := bufio.NewReader(str)
	w := bufio.NewWriterSize(str, 64<<10)
	b, err := readFrame(r, maxRequestSize)
	if err != nil {
		str.Reset()
		return
	}
	q, err := decodeRequest(b)
	if err != nil {
		s.stats.refused("malformed")
		str.Reset()
		return
	}
	switch q.Op {
	case opHeads:
		err = s.answerHeads(w)
	case opRange:
		err = s.answerRange(w, q)
	case opBlob:
		err = s.answerBlob(w, q.CID)
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		str.Reset()
		return
	}
	str.CloseWrite()
}

func (s *Service) answerHeads(w *bufio.Writer) error {
	heads, err := s.st.Heads()
	if err != nil {
		return err
	}
	// The answer stays within what a peer reads (maxHeadsSize): heads
	// first, then descriptors (this realm's first), then evidence, each
	// while the budget lasts.
	a := headsAnswer{Heads: []wireHead{}, Descriptors: [][]byte{}}
	budget := maxHeadsSize - 64<<10
	for r, h := range heads {
		if s.IsBlocked(r) {
			continue
		}
		a.Heads = append(a.Heads, wireHead{Realm: string(r), Seq: h.Seq, CID: h.CID.Bytes()})
		budget -= 96
	}
	for _, raw := range s.dir.raws(s.cfg.Realm) {
		if budget -= len(raw) + 8; budget < 0 {
			break
		}
		a.Descriptors = append(a.Descriptors, raw)
	}
	evs, err := s.st.Equivocations()
	if err != nil {
		return err
	}
	for _, e := range evs {
		if len(a.Evidence) == maxEvidence {
			break
		}
		if budget -= len(e.Raw) + 8; budget < 0 {
			break
		}
		a.Evidence = append(a.Evidence, e.Raw)
	}
	b, err := encodeWire(&a)
	if err != nil {
		return err
	}
	return writeFrame(w, b)
}

func (s *Service) answerRange(w *bufio.Writer, q *request) error {
	realm := protocol.Realm(q.Realm)
	if f := s.forgeRange.Load(); f != nil {
		if raws := (*f)(realm, q.From); raws != nil {
			for _, raw := range raws {
				if err := writeFrame(w, raw); err != nil {
					return err
				}
			}
			return writeFrame(w, nil)
		}
	}
	if !s.IsBlocked(realm) {
		// Read in small steps, so that a range of large events never sits
		// in memory whole; stop at the byte budget.
		from, sent, size := q.From, 0, 0
	read:
		for sent < q.Limit {
			raws, err := s.st.RangeRaw(realm, from, min(64, q.Limit-sent))
			if err != nil {
				return err
			}
			if len(raws) == 0 {
				break
			}
			for _, raw := range raws {
				if size += len(raw); size > maxRangeBytes {
					break read
				}
				if err := writeFrame(w, raw); err != nil {
					return err
				}
				sent++
				from++ // a chain is dense
			}
		}
	}
	return writeFrame(w, nil)
}

func (s *Service) answerBlob(w *bufio.Writer, c []byte) error {
	if s.cfg.Blobs != nil {
		if b, ok := s.cfg.Blobs.Blob(c); ok {
			return writeFrame(w, b)
		}
	}
	return writeFrame(w, nil)
}

// ask opens a stream to p, sends q and returns the reader of the answer.
func (s *Service) ask(ctx context.Context, p peer.ID, q *request) (network.Stream, *bufio.Reader, error) {
	str, err := s.host.NewStream(ctx, p, SyncProtocol)
	if err != nil {
		return nil, nil, err
	}
	str.SetDeadline(time.Now().Add(streamTimeout))
	b, err := encodeWire(q)
	if err == nil {
		w := bufio.NewWriter(str)
		if err = writeFrame(w, b); err == nil {
			err = w.Flush()
		}
	}
	if err == nil {
		err = str.CloseWrite()
	}
	if err != nil {
		str.Reset()
		return nil, nil, err
	}
	return str, bufio.NewReaderSize(str, 64<<10), nil
}

func (s *Service) fetchHeads(ctx context.Context, p peer.ID) (*headsAnswer, error) {
	str, r, err := s.ask(ctx, p, &request{Op: opHeads})
	if err != nil {
		return nil, err
	}
	defer str.Close()
	b, err := readFrame(r, maxHeadsSize)
	if err != nil {
		return nil, err
	}
	return decodeHeads(b)
}

// fetchRange pulls up to limit events of realm from seq from.
func (s *Service) fetchRange(ctx context.Context, p peer.ID, realm protocol.Realm, from uint64, limit int) ([][]byte, error) {
	str, r, err := s.ask(ctx, p, &request{Op: opRange, Realm: string(realm), From: from, Limit: limit})
	if err != nil {
		return nil, err
	}
	defer str.Close()
	var out [][]byte
	size := 0
	for {
		b, err := readFrame(r, protocol.MaxEventSize)
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			return out, nil
		}
		if size += len(b); len(out) >= maxRangeEvents || size > maxRangeBytes {
			return nil, fmt.Errorf("federation: %s sent more than a range", p)
		}
		out = append(out, b)
	}
}

// FetchBlob asks p for the blob with CID c.
func (s *Service) FetchBlob(ctx context.Context, p peer.ID, c cid.Cid) ([]byte, error) {
	str, r, err := s.ask(ctx, p, &request{Op: opBlob, CID: c.Bytes()})
	if err != nil {
		return nil, err
	}
	defer str.Close()
	b, err := readFrame(r, maxBlobSize)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, ErrNoBlob
	}
	if !protocol.BlobCID(b).Equals(c) {
		return nil, fmt.Errorf("federation: %s sent a blob that is not %s", p, c)
	}
	return b, nil
}

// FetchBlobAny asks the connected peers in turn for the blob with CID c.
func (s *Service) FetchBlobAny(ctx context.Context, c cid.Cid) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, p := range s.host.Network().Peers() {
		b, err := s.FetchBlob(ctx, p, c)
		if err == nil {
			return b, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, ErrNoBlob
}

// ErrNoBlob is returned when a peer does not hold a blob.
var ErrNoBlob = errors.New("federation: blob not held")

// syncWorker runs catch-up with one connected peer: at once, whenever
// kicked (a gap), and every SyncInterval.
func (s *Service) syncWorker(ctx context.Context, p *peerState) {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.SyncInterval)
	defer t.Stop()
	// Right after a connection, realms and heads are still being learned
	// around the net, and the first look may find less than the peer
	// holds: look again soon, three times, before settling on the
	// interval. A look again after 100 ms brings a restarted realm's events
	// that no peer got before it stopped (a three-realm kill -9 drill
	// converged 0.07-0.15 s after the load instead of 0.9-1.0 s when the
	// first look again came after 1 s).
	soon := []time.Duration{100 * time.Millisecond, time.Second, 2 * time.Second}
	kicked := false
	for {
		if err := s.syncWith(ctx, p, kicked); err != nil && ctx.Err() == nil {
			s.log.Debug("federation: catch-up", "peer", p.id, "err", err)
			s.mu.Lock()
			p.lastErr = err.Error()
			s.mu.Unlock()
		}
		var early <-chan time.Time
		if len(soon) > 0 {
			early, soon = time.After(soon[0]), soon[1:]
		}
		kicked = false
		select {
		case <-ctx.Done():
			return
		case <-early:
		case <-t.C:
		case <-p.kick:
			kicked = true
			// Let a burst of kicks (a run of gossiped gaps) become one pass.
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// kick asks for a catch-up pass with p soon.
func (s *Service) kick(p peer.ID) {
	s.mu.Lock()
	ps := s.peers[p]
	s.mu.Unlock()
	if ps == nil {
		return
	}
	select {
	case ps.kick <- struct{}{}:
	default:
	}
}

// syncWith compares heads with p and pulls every realm p is ahead in.
// A kicked pass (a gap that gossip did not fill) pulls everything the peer
// has; a routine pass leaves the newest events to gossip.
func (s *Service) syncWith(ctx context.Context, p *peerState, kicked bool) error {
	a, err := s.fetchHeads(ctx, p.id)
	if err != nil {
		return err
	}
	var news [][]byte
	for _, raw := range a.Descriptors {
		if _, isNew, err := s.learn(ctx, raw); err == nil && isNew {
			news = append(news, raw)
		}
	}
	s.announce(news...)
	s.weighEvidence(ctx, a.Evidence)
	theirs := make(map[protocol.Realm]protocol.Head, len(a.Heads))
	for _, h := range a.Heads {
		c, _ := cid.Cast(h.CID)
		theirs[protocol.Realm(h.Realm)] = protocol.Head{Seq: h.Seq, CID: c}
	}
	s.mu.Lock()
	before := p.heads
	p.heads = theirs
	p.lastSync = time.Now().UTC()
	p.lastErr, p.backoff = "", 0 // it admits this realm
	s.mu.Unlock()
	s.stats.seen(theirs, s.dir)
	mine, err := s.st.Heads()
	if err != nil {
		return err
	}
	own := theirs[s.cfg.Realm]
	if own.Seq > 0 && s.checkOwnChain(ctx, p.id, own, mine[s.cfg.Realm]) {
		s.holdOwn(own.Seq, ownHoldMax, fmt.Sprintf("peer %s holds this realm's chain to seq %d, beyond this node's copy (seq %d): those events first", p.id, own.Seq, mine[s.cfg.Realm].Seq))
	}
	// This realm's own events come after the others', which they may
	// refer to; and an exchange ends the hold at start (own.go).
	defer s.levelOwn(ctx, p.id, own)
	for realm, h := range theirs {
		if realm != s.cfg.Realm && s.IsBlocked(realm) {
			if key, ok := s.dir.Key(realm); ok {
				s.peekBlocked(ctx, p.id, realm, key, h)
			}
			continue
		}
		if realm == s.cfg.Realm || s.refusing(realm) {
			continue
		}
		key, ok := s.dir.Key(realm)
		if !ok {
			continue
		}
		m := mine[realm]
		switch {
		case h.Seq > m.Seq:
			// What the peer held at the last exchange and this node still
			// lacks is missing; what it gained since is likely still on its
			// way by gossip, unless this node is far behind (or the pair
			// has not compared before), when pulling it all is faster.
			to := h.Seq
			if prev, ok := before[realm]; ok && !kicked && h.Seq-m.Seq < farBehind {
				to = min(to, prev.Seq)
			}
			if to <= m.Seq {
				continue
			}
			if s.waitingForTime(realm) {
				continue // its next event is dated ahead: asked for then
			}
			if err := s.pull(ctx, p.id, realm, key, m.Seq+1, to); err != nil {
				if errors.Is(err, store.ErrDependency) || errors.Is(err, errAhead) {
					continue // it waits on another realm, or for its time: go on with the others
				}
				if errors.Is(err, protocol.ErrChainBroken) {
					// The peer's chain does not extend ours: if the peer's
					// event at our head's seq is signed by the realm and
					// differs from ours, the realm forked (a longer branch
					// than ours, which compare would never see).
					if heads, herr := s.st.Heads(); herr == nil && heads[realm].Seq > 0 {
						s.compare(ctx, p.id, realm, key, protocol.Head{Seq: heads[realm].Seq})
					}
				}
				return err
			}
		case h.Seq > 0 && h.Seq <= m.Seq:
			if err := s.compare(ctx, p.id, realm, key, h); err != nil {
				return err
			}
		}
	}
	return nil
}

// weighEvidence checks equivocation evidence a peer passed on: an event that
// is signed by its realm and differs from the one held at its seq proves the
// equivocation here too, and is kept as this node's own evidence.
func (s *Service) weighEvidence(ctx context.Context, raws [][]byte) {
	for i, raw := range raws {
		if i == maxEvidence {
			return
		}
		ev, _, err := protocol.DecodeEvent(raw)
		if err != nil {
			continue
		}
		realm := protocol.Realm(ev.Realm)
		key, ok := s.dir.Key(realm)
		if ok && realm == s.cfg.Realm {
			s.ownEvidence(ev, raw, key)
		}
		if !ok || realm == s.cfg.Realm || s.refusing(realm) {
			continue
		}
		held, err := s.st.EventAt(realm, ev.Seq)
		if c := protocol.CIDOf(raw); err != nil || held.CID.Equals(c) || s.acknowledged(realm, c) {
			continue // not held yet, the very event held, or evidence the operator already saw
		}
		if _, err := s.st.Ingest(ctx, raw, verifyWith(key)); errors.Is(err, store.ErrEquivocation) {
			s.equivocated(realm, fmt.Sprintf("equivocation at seq %d (evidence from a peer)", ev.Seq))
		}
	}
}

// compare checks that p's head of realm is the event we hold at its seq;
// another event there is equivocation, whose evidence Ingest keeps.
func (s *Service) compare(ctx context.Context, p peer.ID, realm protocol.Realm, key []byte, h protocol.Head) error {
	held, err := s.st.EventAt(realm, h.Seq)
	if err != nil || held.CID.Equals(h.CID) || s.acknowledged(realm, h.CID) {
		return nil
	}
	raws, err := s.fetchRange(ctx, p, realm, h.Seq, 1)
	if err != nil || len(raws) == 0 {
		return err
	}
	_, err = s.st.Ingest(ctx, raws[0], verifyWith(key))
	if errors.Is(err, store.ErrEquivocation) {
		s.equivocated(realm, fmt.Sprintf("equivocation at seq %d, shown by %s", h.Seq, p))
		return nil
	}
	return nil
}

func verifyWith(key []byte) func(*protocol.Event) error {
	return func(ev *protocol.Event) error { return ev.Verify(key) }
}

// pull fetches realm's events [from, to] from p in ranges and stores each
// range as one chain: its links are checked and its newest event's
// signature authenticates it all.
func (s *Service) pull(ctx context.Context, p peer.ID, realm protocol.Realm, key []byte, from, to uint64) error {
	s.mu.Lock()
	if s.pulling[realm] {
		s.mu.Unlock()
		return nil // another peer's worker is on it
	}
	s.pulling[realm] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pulling, realm)
		s.mu.Unlock()
	}()
	type fetched struct {
		limit uint64
		raws  [][]byte
		err   error
	}
	// Up to fetchAhead ranges are fetched at once, on streams of their own,
	// while the ones before are stored; and up to maxQueuedRuns are queued
	// at the store at once: the committer checks and projects one while
	// the writer syncs the one before.
	var fetching []chan fetched // in seq order
	next := from                // the first seq not yet asked for
	ask := func() {
		for len(fetching) < fetchAhead && next <= to {
			at, limit := next, min(uint64(pullRangeSize), to-next+1)
			ch := make(chan fetched, 1)
			go func() {
				raws, err := s.fetchRange(ctx, p, realm, at, int(limit))
				ch <- fetched{limit, raws, err}
			}()
			fetching = append(fetching, ch)
			next += limit
		}
	}
	// abandon waits for the ranges in flight and forgets them.
	abandon := func() {
		for _, ch := range fetching {
			<-ch
		}
		fetching = nil
	}
	defer abandon()
	type queued struct {
		raws [][]byte
		wait func() (int, error)
	}
	var runs []queued
	// settle waits for the queued runs until at most keep are left; on a
	// failure it waits for the rest (they cannot store past it) and sorts
	// the failure out.
	settle := func(keep int) error {
		for len(runs) > keep {
			r := runs[0]
			runs = runs[1:]
			n, err := r.wait()
			if err == nil {
				s.stats.received("catchup", n)
				continue
			}
			for _, later := range runs {
				later.wait()
			}
			runs = nil
			return s.runFailed(ctx, realm, r.raws, err)
		}
		return nil
	}
	// before is the event before the next range: the last one queued, or
	// the held head (queued ranges are not committed yet).
	heads, err := s.st.Heads()
	if err != nil {
		return err
	}
	before := heads[realm]
	ask()
	for from <= to && len(fetching) > 0 {
		f := <-fetching[0]
		fetching = fetching[1:]
		if f.err != nil {
			settle(0)
			return f.err
		}
		if len(f.raws) == 0 {
			break
		}
		at := from + uint64(len(f.raws))
		if uint64(len(f.raws)) < f.limit {
			// A short answer (the peer's byte budget): the ranges asked
			// for after it start beyond its end. Ask again from there.
			abandon()
			next = at
		}
		ask()
		run, err := decodeRange(f.raws)
		var ahead *aheadError
		if err == nil {
			var n int
			if n, ahead = s.timely(len(run), func(i int) *protocol.Event { return run[i].Event }, time.Now(), before.Seq+1); ahead != nil {
				if s.authenticNext(realm, key, run, n, before) {
					run, f.raws = run[:n], f.raws[:n]
				} else {
					ahead = nil // not the realm's next event: the store says what is wrong with the range
				}
			}
		}
		var wait func() (int, error)
		if err == nil && len(run) > 0 {
			wait, err = s.st.QueueDecodedChain(ctx, run, verifyWith(key))
			if last := run[len(run)-1]; err == nil && last.Event.Seq > before.Seq {
				before = protocol.Head{Seq: last.Event.Seq, CID: last.CID}
			}
		}
		if err == nil && ahead != nil {
			// The rest waits for its time: store what came before it,
			// and ask again then.
			if wait != nil {
				runs = append(runs, queued{f.raws, wait})
			}
			if err := settle(0); err != nil {
				return err
			}
			s.waitUntil(realm, ahead, p)
			s.flushPending(realm)
			s.retryWaiting()
			return ahead
		}
		if err == nil {
			runs = append(runs, queued{f.raws, wait})
			err = settle(maxQueuedRuns - 1)
		} else {
			settle(0)
			err = s.ingestFailed(realm, err)
		}
		if err != nil {
			return err
		}
		from = at
	}
	if err := settle(0); err != nil {
		return err
	}
	s.flushPending(realm)
	s.retryWaiting()
	return nil
}

// decodeRange decodes a range a peer sent, for QueueDecodedChain.
func decodeRange(raws [][]byte) ([]store.Checked, error) {
	run := make([]store.Checked, len(raws))
	for i, raw := range raws {
		ev, c, err := protocol.DecodeEvent(raw)
		if err != nil {
			return nil, fmt.Errorf("event %d of the run: %w", i, err)
		}
		run[i] = store.Checked{Event: ev, CID: c, Raw: raw}
	}
	return run, nil
}

// maxQueuedRuns is how many ranges catch-up has queued at the store at once.
const maxQueuedRuns = 3

// fetchAhead is how many ranges catch-up fetches from a peer at once: the
// peer reads one while this node reads the one before off the wire, and
// neither waits for a stream to open.
const fetchAhead = 3

// pullRangeSize is the events catch-up asks for in one range: the most a
// peer sends, so streams are opened and store ops queued for many events.
const pullRangeSize = maxRangeEvents

// runFailed sorts out a run that did not store. When a signed event of the
// run broke a rule of the log, the events before it are stored one by one
// and the realm is quarantined at the one that broke it.
func (s *Service) runFailed(ctx context.Context, realm protocol.Realm, raws [][]byte, err error) error {
	if !isRuleError(err) {
		return s.ingestFailed(realm, err)
	}
	// The store verified the newest event before it ran any projector, so
	// every event of the run is authentic: take them one at a time.
	for _, raw := range raws {
		_, err := s.st.Ingest(ctx, raw, verified)
		switch {
		case err == nil:
			s.stats.received("catchup", 1)
		case errors.Is(err, store.ErrDuplicate):
		default:
			return s.ingestFailed(realm, err)
		}
	}
	return nil
}

// isRuleError reports whether err is an event breaking a rule of the log
// (authority, a payload its projector refuses), not a transport or chain
// fault.
func isRuleError(err error) bool {
	for _, e := range []error{store.ErrDependency, store.ErrEquivocation, protocol.ErrBadSignature, protocol.ErrChainBroken,
		protocol.ErrInvalidEvent, protocol.ErrNonCanonical, store.ErrGap, store.ErrFailed, store.ErrClosed, store.ErrDiskFull,
		context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return false
		}
	}
	return store.IsRefusal(err) // a panic, a read fault or a size is not the realm's doing
}

// ingestFailed sorts out why a run did not store.
func (s *Service) ingestFailed(realm protocol.Realm, err error) error {
	switch {
	case errors.Is(err, store.ErrEquivocation):
		s.equivocated(realm, err.Error())
		return nil
	case errors.Is(err, store.ErrDependency):
		// An event of the run refers to another realm's record not held
		// yet: it is not wrong, only early. A later pass stores it.
		s.stats.refused("waiting")
		s.noteWaiting(realm, err)
		return err
	case errors.Is(err, protocol.ErrBadSignature), errors.Is(err, protocol.ErrChainBroken),
		errors.Is(err, protocol.ErrInvalidEvent), errors.Is(err, protocol.ErrNonCanonical), errors.Is(err, store.ErrGap):
		s.stats.refused("catchup")
		return err // the peer's fault or a race: try again later, maybe elsewhere
	case !isRuleError(err):
		return err
	}
	// A signed event broke a rule of the log: the realm misbehaves.
	s.stats.refused("rule")
	s.quarantine(realm, err.Error())
	return nil
}
