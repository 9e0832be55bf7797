package federation

import (
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"relay/protocol"
	"relay/store"
)

// Events dated ahead of this node's clock. An event's time is its realm's
// word, and it orders what readers see: a thread's and a conversation's
// latest activity, an inbox and its since cursor. A realm whose clock runs
// ahead would set those on every realm that takes its events, and a reader
// who went by them would skip what this node's own agents wrote meanwhile.
// So an event dated more than Config.MaxAhead past this node's clock is not
// taken yet. It waits, and its realm's later events with it (a chain cannot
// skip one), until its date is no more than MaxAhead away: held gossip is
// stored then, and catch-up asks again then. Nothing is lost and nothing is
// refused; the realm's status says what waits and until when.

// errAhead is the cause of an aheadError.
var errAhead = errors.New("dated ahead of this node's clock")

// aheadError says which event waits for its time, and until when.
type aheadError struct {
	seq     uint64
	at, due time.Time
	allowed time.Duration
}

func (e *aheadError) Error() string {
	return fmt.Sprintf("dated %s, more than %s ahead of this node's clock: taken from %s",
		e.at.Format(time.RFC3339Nano), e.allowed, e.due.Format(time.RFC3339Nano))
}

func (e *aheadError) Unwrap() error { return errAhead }

// timely returns how many of the n events of a run (event(i) the i-th) are,
// from the start, dated no more than MaxAhead past now, or held or queued
// already (below seq next: the store tells a duplicate from an
// equivocation), and, when that is not all of them, why the next one waits.
func (s *Service) timely(n int, event func(int) *protocol.Event, now time.Time, next uint64) (int, *aheadError) {
	limit := now.Add(s.cfg.MaxAhead).UnixMilli()
	for i := range n {
		if ev := event(i); ev.At > limit && ev.Seq >= next {
			at := ev.Time()
			return i, &aheadError{seq: ev.Seq, at: at, due: at.Add(-s.cfg.MaxAhead), allowed: s.cfg.MaxAhead}
		}
	}
	return n, nil
}

// timelyRun returns the part of a gossiped run of realm that may be taken
// now; next is the seq after the last event of realm queued at the store.
// The rest is held until the first of it is due (from sent it, and is
// asked again then if it is still missing).
func (s *Service) timelyRun(realm protocol.Realm, run []gossiped, next uint64, from peer.ID) []gossiped {
	n, ahead := s.timely(len(run), func(i int) *protocol.Event { return run[i].ev }, time.Now(), next)
	if ahead == nil {
		return run
	}
	s.mu.Lock()
	m := s.pending[realm]
	if m == nil {
		m = map[uint64]gossiped{}
		s.pending[realm] = m
	}
	for _, g := range run[n:] {
		if len(m) < maxHeld {
			m[g.ev.Seq] = g
		}
	}
	s.mu.Unlock()
	s.waitUntil(realm, ahead, from)
	return run[:n]
}

// waitUntil notes that realm's next event waits for its time, and arranges
// for it to be taken then: the held gossip is stored, and from (if any) is
// asked for what is still missing.
func (s *Service) waitUntil(realm protocol.Realm, ahead *aheadError, from peer.ID) {
	s.noteWaiting(realm, fmt.Errorf("%w: event %d", ahead, ahead.seq))
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.aheadOf[realm]; ok && !w.due.After(ahead.due) {
		if from != "" {
			w.from = from
			s.aheadOf[realm] = w
		}
		return // a timer for then or sooner is set
	}
	if w, ok := s.aheadOf[realm]; ok {
		w.timer.Stop()
		if from == "" {
			from = w.from
		}
	}
	w := aheadWait{due: ahead.due, from: from}
	// An hour at most: the callback looks again, and a date beyond what a
	// Duration holds must not wrap into the past.
	w.timer = time.AfterFunc(min(time.Until(ahead.due), maxAheadTimer)+time.Millisecond, func() {
		s.mu.Lock()
		cur, ok := s.aheadOf[realm]
		if ok && cur.due.Equal(ahead.due) {
			delete(s.aheadOf, realm)
		}
		s.mu.Unlock()
		if !ok || !cur.due.Equal(ahead.due) || s.ctx.Err() != nil {
			return
		}
		s.flushPending(realm)
		if cur.from != "" {
			s.kick(cur.from)
		}
	})
	s.aheadOf[realm] = w
}

// maxAheadTimer is the longest a wait's timer runs before it looks again.
const maxAheadTimer = time.Hour

// authenticNext reports whether run[n], an event of a range a peer sent
// for realm, is the realm's next event after run[:n]: its realm's, at its
// seq, linked to the one before and signed by the realm's key. prev is the
// event before run[0]: the last of the ranges this catch-up queued before,
// or the held head. Only such an event may make the realm wait: another is
// the sender's doing, and the range is refused as it is.
func (s *Service) authenticNext(realm protocol.Realm, key []byte, run []store.Checked, n int, prev protocol.Head) bool {
	if n > 0 {
		prev = protocol.Head{Seq: run[n-1].Event.Seq, CID: run[n-1].CID}
	}
	ev := run[n].Event
	return ev.Realm == string(realm) && ev.Follows(prev) == nil && ev.Verify(key) == nil
}

// aheadWait is a realm whose next event waits for its time.
type aheadWait struct {
	due   time.Time
	from  peer.ID // who to ask for the missing events then
	timer *time.Timer
}

// waitingForTime reports whether realm's next event is known to wait for
// its time: no catch-up of it is worth asking for before then.
func (s *Service) waitingForTime(realm protocol.Realm) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitingForTimeLocked(realm)
}

// waitingForTimeLocked is waitingForTime with s.mu held.
func (s *Service) waitingForTimeLocked(realm protocol.Realm) bool {
	w, ok := s.aheadOf[realm]
	return ok && time.Now().Before(w.due)
}
