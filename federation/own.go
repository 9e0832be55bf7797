package federation

import (
	"context"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"relay/protocol"
)

// This realm's own chain, when a peer holds more of it than this node.
//
// A node started on an older copy of its store (a backup restored, a disk
// copied back) holds its realm's chain only up to where the copy was
// taken, while its peers may hold events it signed after that. Were it to
// author its next event at the seq after its own head, it would sign a
// second event at a seq peers hold already: an equivocation, for which
// every peer quarantines the realm and loses what it wrote. So:
//
//   - While a peer holds this realm's chain beyond this node's head, linked
//     to it and signed with this realm's key, authoring is held
//     (store.HoldAuthoring: writes that append an event wait) and the
//     missing events are taken from that peer, checked as any realm's,
//     after the other realms the exchange brings (they may refer to them).
//     The hold ends once the node's head reaches what peers held, or after
//     ownHoldMax, when the alarm stays.
//   - At start, a node that has peers holds authoring until an exchange of
//     heads shows its chain level (a peer holding its very head), or for
//     startHold, so that a write right after a restart does not fork
//     before the node could know. A store an import marked (MarkRestored)
//     is held so with no deadline.
type ownHold struct {
	release  func()    // the store's hold; nil when not held
	target   uint64    // the seq peers were seen to hold this realm's chain to
	since    time.Time // when the hold began
	deadline time.Time // when the hold ends whatever the chain
	// renumber is set while events taken back still need OwnTaken: the
	// hold ends only after it succeeded.
	renumber bool
	// gaveUp is the target of a hold that timed out: the chain is not held
	// for it again (an alarm says so), lest writes wait for ever.
	gaveUp uint64
	// restored marks the hold of a store restored from an export
	// (MarkRestored): it has no deadline, and ends only at an exchange with
	// a peer that carries this realm (or by the operator's word,
	// Config.RestoredIsLatest); the mark is then removed.
	restored bool
}

// holdRestored holds authoring in a store restored from an export until
// its chain was compared with a peer's.
func (s *Service) holdRestored() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beginHoldLocked(time.Now())
	s.own.restored = true
	s.log.Warn("federation: this realm was restored from an export: its new events wait until its chain was compared with a peer that carries it (relay peer add, or --peer); if no peer holds newer events of it, --restored-is-latest says so")
}

var (
	// startHold bounds the hold at start, before any exchange of heads.
	startHold = 5 * time.Second
	// ownHoldMax bounds the hold while this realm's chain is brought level.
	ownHoldMax = time.Minute
)

// holdOwn holds authoring until this realm's head reaches target, for at
// most d, and never longer than ownHoldMax from the hold's start.
func (s *Service) holdOwn(target uint64, d time.Duration, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if target > 0 && target <= s.own.gaveUp {
		return // given up on: the alarm stands
	}
	now := time.Now()
	if s.beginHoldLocked(now) {
		s.log.Info("federation: this realm's new events wait", "why", why)
	}
	if target > s.own.target {
		s.own.target = target
		s.own.renumber = true
	}
	dl := now.Add(d)
	if limit := s.own.since.Add(ownHoldMax); dl.After(limit) {
		dl = limit
	}
	if s.own.restored {
		return // no deadline: it ends at an exchange with a peer (levelOwn)
	}
	if dl.After(s.own.deadline) {
		s.own.deadline = dl
		time.AfterFunc(dl.Sub(now), s.ownTimedOut)
	}
}

// ownTimedOut ends the hold once its deadline has passed. A chain still
// behind is an alarm, and is not held for again.
func (s *Service) ownTimedOut() {
	s.mu.Lock()
	if s.own.release == nil || time.Now().Before(s.own.deadline) {
		s.mu.Unlock()
		return
	}
	target := s.own.target
	s.mu.Unlock()
	s.renumberOwn(context.Background()) // a last try: writes are taken again next
	if target > 0 {                     // told before writes are taken again
		s.alarm(OwnChainAlarm{Kind: "ahead", Seq: target, At: time.Now().UTC(),
			Detail: fmt.Sprintf("peers hold this realm's chain to seq %d, beyond this node's copy, and it could not be taken from them in %v: new events are taken again and may fork the chain", target, ownHoldMax)})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.own.release == nil || time.Now().Before(s.own.deadline) {
		return // ended, or held anew, meanwhile
	}
	gaveUp := max(s.own.gaveUp, s.own.target)
	s.endOwnHoldLocked()
	s.own.gaveUp = gaveUp
}

// beginHoldLocked holds authoring from now on unless it is held already,
// and reports whether it began; call with s.mu held.
func (s *Service) beginHoldLocked(now time.Time) bool {
	if s.own.release != nil {
		return false
	}
	s.own.release, s.own.since = s.st.HoldAuthoring(), now
	return true
}

// endOwnHoldLocked lets authoring go; call with s.mu held.
func (s *Service) endOwnHoldLocked() {
	if s.own.release != nil {
		s.own.release()
	}
	s.own = ownHold{gaveUp: s.own.gaveUp}
}

// levelOwn, after an exchange of heads with p (which holds this realm's
// chain to theirs; seq 0 when it does not carry it), takes this realm's
// events p holds beyond this node's head while authoring is held for them,
// and ends the hold once the head has reached what peers hold and the
// numbering carries on after them. A hold without a target (at start, or
// of a restored store) ends only at an exchange that shows the chain
// level: a peer holding this very head (same seq, same event). A peer
// behind it says nothing of what was signed after.
func (s *Service) levelOwn(ctx context.Context, p peer.ID, theirs protocol.Head) {
	held, target := s.OwnHeld()
	if !held {
		return
	}
	heads, err := s.st.Heads()
	if err != nil {
		return
	}
	mine := heads[s.cfg.Realm]
	if theirs.Seq > mine.Seq && mine.Seq < target {
		if key, ok := s.dir.Key(s.cfg.Realm); ok {
			if err := s.pull(ctx, p, s.cfg.Realm, key, mine.Seq+1, min(theirs.Seq, target)); err != nil {
				s.log.Warn("federation: taking this realm's own events from a peer", "peer", p, "err", err)
			}
		}
		if heads, err = s.st.Heads(); err != nil {
			return
		}
		if got := heads[s.cfg.Realm].Seq; got > mine.Seq {
			s.log.Info("federation: took this realm's own events a peer held beyond this node's copy", "peer", p, "from", mine.Seq+1, "to", got)
			s.mu.Lock()
			s.own.renumber = s.own.release != nil
			s.mu.Unlock()
		}
		mine = heads[s.cfg.Realm]
	}
	// Numbering carries on after every event taken back, whether or not
	// the chain is level yet: writes may be taken again before it is (the
	// hold timed out).
	if !s.renumberOwn(ctx) {
		return // held until that is done, or for ownHoldMax
	}
	level := theirs.Seq > 0 && theirs.Seq == mine.Seq && theirs.CID.Equals(mine.CID)
	if mine.Seq < target || (target == 0 && !level) {
		return // still behind; or, with no target, this exchange did not show the chain level
	}
	s.mu.Lock()
	restored := s.own.restored
	if s.own.release == nil || s.own.renumber || mine.Seq < s.own.target {
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	if restored {
		if err := putLocal(ctx, s.st, keyRestored, nil); err != nil {
			s.log.Warn("federation: removing the restore mark", "err", err)
			return // held until it is removed
		}
	}
	s.mu.Lock()
	if s.own.release != nil && !s.own.renumber && mine.Seq >= s.own.target {
		s.endOwnHoldLocked()
		s.mu.Unlock()
		if restored {
			s.log.Info("federation: this restored realm's chain was compared with a peer's; new events are taken", "peer", p)
		}
		return
	}
	s.mu.Unlock()
	if restored { // the hold goes on (a peer ahead came meanwhile): so does the mark
		if err := MarkRestored(ctx, s.st); err != nil {
			s.log.Warn("federation: marking the restore again", "err", err)
		}
	}
}

// renumberOwn runs OwnTaken when events were taken back since it last did,
// and reports whether the numbering is carried on.
func (s *Service) renumberOwn(ctx context.Context) bool {
	s.mu.Lock()
	renumber := s.own.renumber
	s.mu.Unlock()
	if !renumber || s.cfg.OwnTaken == nil {
		return true
	}
	if err := s.cfg.OwnTaken(ctx); err != nil {
		s.log.Error("federation: carrying numbering on after this realm's own events", "err", err)
		return false
	}
	s.mu.Lock()
	s.own.renumber = false
	s.mu.Unlock()
	return true
}

// OwnHeld reports whether this realm's new events wait for its chain to be
// brought level with a peer's, and to which seq (0: no peer was seen
// ahead).
func (s *Service) OwnHeld() (held bool, to uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.own.release != nil, s.own.target
}

// OwnRestored reports whether new events wait because this realm was
// restored from an export and no peer has shown its chain level yet.
func (s *Service) OwnRestored() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.own.release != nil && s.own.restored
}
