package federation

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
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
//   - At start, a node that has peers holds authoring until its first
//     exchange of heads with one of them, or startHold, so that a write
//     right after a restart does not fork before the node could know.
type ownHold struct {
	release  func()    // the store's hold; nil when not held
	target   uint64    // the seq peers were seen to hold this realm's chain to
	deadline time.Time // when the hold ends whatever the chain
}

var (
	// startHold bounds the hold at start, before any exchange of heads.
	startHold = 5 * time.Second
	// ownHoldMax bounds the hold while this realm's chain is brought level.
	ownHoldMax = time.Minute
)

// holdOwn holds authoring until this realm's head reaches target, for at
// most d (extending a hold already in place).
func (s *Service) holdOwn(target uint64, d time.Duration, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.own.release == nil {
		s.own.release = s.st.HoldAuthoring()
		s.log.Info("federation: this realm's new events wait", "why", why)
	}
	s.own.target = max(s.own.target, target)
	if dl := time.Now().Add(d); dl.After(s.own.deadline) {
		s.own.deadline = dl
		time.AfterFunc(d, s.ownTimedOut)
	}
}

// ownTimedOut ends the hold once its deadline has passed.
func (s *Service) ownTimedOut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.own.release == nil || time.Now().Before(s.own.deadline) {
		return
	}
	if s.own.target > 0 {
		s.log.Error("federation: this realm's chain was not brought level with its peers in time; new events are taken again and may fork it",
			"held_to", s.own.target, "waited", ownHoldMax)
	}
	s.endOwnHoldLocked()
}

func (s *Service) endOwnHoldLocked() {
	if s.own.release != nil {
		s.own.release()
	}
	s.own = ownHold{}
}

// ownTarget is the seq this realm's chain is being brought to, and whether
// authoring is held.
func (s *Service) ownTarget() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.own.target, s.own.release != nil
}

// levelOwn, after an exchange of heads with p, takes this realm's events
// p holds beyond this node's head while authoring is held for them, and
// ends the hold once the head has reached what peers hold.
func (s *Service) levelOwn(ctx context.Context, p peer.ID, theirs uint64) {
	target, held := s.ownTarget()
	if !held {
		return
	}
	heads, err := s.st.Heads()
	if err != nil {
		return
	}
	mine := heads[s.cfg.Realm].Seq
	if theirs > mine && mine < target {
		if key, ok := s.dir.Key(s.cfg.Realm); ok {
			if err := s.pull(ctx, p, s.cfg.Realm, key, mine+1, min(theirs, target)); err != nil {
				s.log.Warn("federation: taking this realm's own events from a peer", "peer", p, "err", err)
			}
		}
		if heads, err = s.st.Heads(); err != nil {
			return
		}
		if got := heads[s.cfg.Realm].Seq; got > mine {
			s.log.Info("federation: took this realm's own events a peer held beyond this node's copy", "peer", p, "from", mine+1, "to", got)
			if s.cfg.OwnTaken != nil {
				if err := s.cfg.OwnTaken(ctx); err != nil {
					s.log.Error("federation: carrying numbering on after this realm's own events", "err", err)
					return // held until that is done, or for ownHoldMax
				}
			}
		}
		mine = heads[s.cfg.Realm].Seq
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.own.release != nil && mine >= s.own.target {
		s.endOwnHoldLocked()
	}
}

// OwnHeld reports whether this realm's new events wait for its chain to be
// brought level with a peer's, and to which seq.
func (s *Service) OwnHeld() (held bool, to uint64) {
	to, held = s.ownTarget()
	return held, to
}
