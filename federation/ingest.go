package federation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"relay/protocol"
	"relay/store"
)

// Gossiped runs are validated concurrently, so they reach this node's store
// in any order. A lane puts each realm's runs back in order: a run that
// follows the runs already queued at the store is queued at once, with the
// held runs that follow it, so it joins the commit in progress or the next
// one; a run that comes early is held until the runs before it are queued.
// Without it, a run that overtook the one before failed with a gap, waited
// for that one's commit and cost a commit of its own.
type lane struct {
	mu sync.Mutex
	// next is the seq after the last event queued at the store; it may
	// be stale (catch-up queues too), so the store's head bounds it below.
	// 0 after a queued run failed: the store's head is all that is known.
	next uint64
}

func (s *Service) laneOf(realm protocol.Realm) *lane {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lanes[realm]
	if l == nil {
		l = &lane{}
		s.lanes[realm] = l
	}
	return l
}

// ingestRun stores an authenticated gossiped run (authenticRun), in order
// with the runs before it, and says what becomes of the message.
func (s *Service) ingestRun(ctx context.Context, realm protocol.Realm, run []gossiped, from peer.ID) pubsub.ValidationResult {
	if acked := s.ackedOf(realm); len(acked) > 0 {
		for _, g := range run {
			if acked[g.c.String()] {
				return pubsub.ValidationIgnore // the fork the operator already saw: nothing to store or redo
			}
		}
	}
	l := s.laneOf(realm)
	l.mu.Lock()
	next, err := s.nextSeq(realm, l)
	if err != nil {
		l.mu.Unlock()
		return pubsub.ValidationIgnore
	}
	if run[0].ev.Seq > next {
		// Early: held (it is signed by its realm, so it travels on to
		// those who may need it) until the runs before it are queued.
		s.hold(realm, run, from)
		l.mu.Unlock()
		return pubsub.ValidationAccept
	}
	run = append(run, s.takePending(realm, run[len(run)-1])...)
	if run = s.timelyRun(realm, run, next, from); len(run) == 0 {
		l.mu.Unlock()
		return pubsub.ValidationAccept // held until its time
	}
	n, err := s.queueRun(ctx, realm, l, run)
	return s.settle(ctx, realm, run, n, err, from)
}

// nextSeq is the seq after the last event of realm queued at the store.
// Called with l.mu held.
func (s *Service) nextSeq(realm protocol.Realm, l *lane) (uint64, error) {
	heads, err := s.st.Heads()
	if err != nil {
		return 0, err
	}
	return max(l.next, heads[realm].Seq+1), nil
}

// queueRun queues run at the store, unlocks l and waits for the commit.
func (s *Service) queueRun(ctx context.Context, realm protocol.Realm, l *lane, run []gossiped) (int, error) {
	evs := make([]store.Checked, len(run))
	for i, g := range run {
		evs[i] = store.Checked{Event: g.ev, CID: g.c, Raw: g.raw}
	}
	wait, err := s.st.QueueDecodedChain(ctx, evs, s.evidenceCheck(realm, run))
	if err != nil {
		l.mu.Unlock()
		return 0, err
	}
	l.next = max(l.next, run[len(run)-1].ev.Seq+1)
	l.mu.Unlock()
	n, err := wait()
	if err != nil {
		l.mu.Lock()
		l.next = 0
		l.mu.Unlock()
	}
	return n, err
}

// settle sorts out how a queued run fared.
func (s *Service) settle(ctx context.Context, realm protocol.Realm, run []gossiped, n int, err error, from peer.ID) pubsub.ValidationResult {
	switch {
	case err == nil:
		if n > 0 {
			s.stats.received("gossip", n)
		}
		s.retryWaiting()
		return pubsub.ValidationAccept
	case errors.Is(err, store.ErrDuplicate):
		return pubsub.ValidationAccept
	case errors.Is(err, store.ErrGap):
		// A run queued before it failed: held, and stored now if that
		// run's realm moved on meanwhile.
		s.hold(realm, run, from)
		s.flushPending(realm)
		return pubsub.ValidationAccept
	case errors.Is(err, store.ErrDependency):
		// It refers to a record of another realm not held yet: held until
		// that arrives (retryWaiting).
		s.stats.refused("waiting")
		s.noteWaiting(realm, err)
		s.hold(realm, run, from)
		return pubsub.ValidationAccept
	case errors.Is(err, store.ErrEquivocation):
		// Signed by its realm: the peer that relayed it may be honest
		// (each branch is valid somewhere), so it is not scored down.
		s.equivocated(realm, err.Error())
		return pubsub.ValidationIgnore
	case errors.Is(err, protocol.ErrChainBroken):
		s.stats.refused("chain")
		s.kick(from) // a fork below the head: catch-up collects the evidence
		return pubsub.ValidationReject
	case s.ctx.Err() != nil || errors.Is(err, store.ErrFailed) || errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrDiskFull) || ctx.Err() != nil:
		return pubsub.ValidationIgnore
	default:
		// An event of the run broke a rule of the log: the events before it
		// are stored one by one, and the realm quarantined at it.
		raws := make([][]byte, len(run))
		for i, g := range run {
			raws[i] = g.raw
		}
		s.runFailed(s.ctx, realm, raws, err)
		return pubsub.ValidationReject
	}
}

// evidenceCheck is the verify function of a queued gossip run. The run's
// newest event, the newest of the last run in it, was checked by its
// signature already (authenticRun); the store asks about another event
// only to keep it as evidence of equivocation, and evidence must carry the
// realm's signature of its own, since peers weigh it event by event.
func (s *Service) evidenceCheck(realm protocol.Realm, run []gossiped) func(*protocol.Event) error {
	newest := run[len(run)-1].ev
	return func(ev *protocol.Event) error {
		if ev == newest {
			return nil
		}
		key, ok := s.dir.Key(realm)
		if !ok {
			return fmt.Errorf("federation: no key for realm %s", realm)
		}
		return ev.Verify(key)
	}
}

// verified is the verify function for events already authenticated: by
// their own signature, or by that of a later event linked to them.
func verified(*protocol.Event) error { return nil }

// gapGrace is how long a gap in gossip may last before catch-up is asked
// to fill it: under load the run it waits for may be a while in a queue;
// pulling that too would only send it twice.
const gapGrace = time.Second

// holdWindow is how far ahead of the held head a gossiped event is kept;
// farther ones are left to catch-up, so a realm signing far-future events
// cannot fill memory.
const holdWindow = maxRangeEvents

// maxHeld bounds the held events of one realm.
const maxHeld = 10_000

// hold keeps a gossiped run that arrived ahead of the chain, and asks from
// for a catch-up pass if the gap outlives gapGrace. Only events whose
// authenticity was checked are held.
func (s *Service) hold(realm protocol.Realm, run []gossiped, from peer.ID) {
	heads, err := s.st.Heads()
	if err != nil {
		s.kick(from)
		return
	}
	for i, g := range run {
		if g.ev.Seq > heads[realm].Seq+holdWindow {
			s.kick(from)
			run = run[:i]
			break
		}
	}
	if len(run) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.pending[realm]
	if m == nil {
		m = map[uint64]gossiped{}
		s.pending[realm] = m
	}
	for _, g := range run {
		if len(m) < maxHeld {
			m[g.ev.Seq] = g
		}
	}
	if s.gapTimers[realm] {
		return
	}
	s.gapTimers[realm] = true
	time.AfterFunc(gapGrace, func() {
		s.mu.Lock()
		delete(s.gapTimers, realm)
		gapped := len(s.pending[realm]) > 0
		s.mu.Unlock()
		if gapped && s.ctx.Err() == nil {
			s.flushPending(realm)
			s.mu.Lock()
			gapped = len(s.pending[realm]) > 0
			s.mu.Unlock()
			if gapped && !s.waitingForTime(realm) {
				s.kick(from)
			}
		}
	})
}

// takePending removes and returns the held events that follow after, link
// by link.
func (s *Service) takePending(realm protocol.Realm, after gossiped) []gossiped {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.pending[realm]
	var out []gossiped
	for {
		g, ok := m[after.ev.Seq+1]
		if !ok || !g.ev.Prev.Cid.Equals(after.c) {
			return out
		}
		delete(m, g.ev.Seq)
		out = append(out, g)
		after = g
	}
}

// flushPending stores the held events that now follow the chain.
func (s *Service) flushPending(realm protocol.Realm) {
	l := s.laneOf(realm)
	for {
		l.mu.Lock()
		next, err := s.nextSeq(realm, l)
		if err != nil {
			l.mu.Unlock()
			return
		}
		s.mu.Lock()
		m := s.pending[realm]
		first, ok := m[next]
		for seq := range m {
			if seq < next {
				delete(m, seq)
			}
		}
		if ok {
			delete(m, next)
		}
		s.mu.Unlock()
		if !ok {
			l.mu.Unlock()
			return
		}
		run := append([]gossiped{first}, s.takePending(realm, first)...)
		if run = s.timelyRun(realm, run, next, ""); len(run) == 0 {
			l.mu.Unlock()
			return // held until its time
		}
		n, err := s.queueRun(s.ctx, realm, l, run)
		if errors.Is(err, store.ErrDependency) {
			s.noteWaiting(realm, err)
		}
		switch {
		case errors.Is(err, store.ErrDependency), errors.Is(err, store.ErrGap):
			// It waits for another realm's record, or for a run queued
			// before it that failed: keep it for then.
			s.mu.Lock()
			if m := s.pending[realm]; m != nil {
				for _, g := range run {
					m[g.ev.Seq] = g
				}
			}
			s.mu.Unlock()
			return
		case err != nil:
			raws := make([][]byte, len(run))
			for i, g := range run {
				raws[i] = g.raw
			}
			s.runFailed(s.ctx, realm, raws, err)
			return
		}
		s.stats.received("gossip", n)
	}
}

// retryWaiting tries again the held events of every realm: one may have
// waited for a record that has just arrived.
func (s *Service) retryWaiting() {
	if !s.retrying.CompareAndSwap(false, true) {
		return
	}
	defer s.retrying.Store(false)
	s.mu.Lock()
	var realms []protocol.Realm
	for r, m := range s.pending {
		if len(m) > 0 && !s.waitingForTimeLocked(r) {
			realms = append(realms, r) // one waiting for its time is taken by its timer
		}
	}
	s.mu.Unlock()
	for _, r := range realms {
		s.flushPending(r)
	}
}
