package federation

import (
	"context"

	"github.com/libp2p/go-libp2p/core/peer"

	"relay/protocol"
)

// A blocked realm's events are neither stored, served nor relayed here. Yet
// its agents may have replied into this realm's threads, and only this
// realm can say it refuses those replies: until it does, every replica
// shows them pending, and their authors wait for good. So catch-up reads,
// from a peer that holds them, a blocked realm's events past what this
// node holds, checks that they are the realm's (its signature, its chain),
// and shows each to Config.BlockedEvent, which may answer with an event of
// this realm's own. Nothing of the blocked realm is kept.

// maxPeek bounds the events of one blocked realm read in one exchange;
// the next exchange reads on.
const maxPeek = 4 * pullRangeSize

// peekBlocked reads realm's events beyond its head held or read here, up to
// h, from peer p, and shows them to Config.BlockedEvent.
func (s *Service) peekBlocked(ctx context.Context, p peer.ID, realm protocol.Realm, key []byte, h protocol.Head) {
	if s.cfg.BlockedEvent == nil {
		return
	}
	s.mu.Lock()
	if s.pulling[realm] {
		s.mu.Unlock()
		return // another peer's worker is on it
	}
	s.pulling[realm] = true
	at := s.peeked[realm]
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pulling, realm)
		if at.Seq > s.peeked[realm].Seq {
			s.peeked[realm] = at
		}
		s.mu.Unlock()
	}()
	heads, err := s.st.Heads()
	if err != nil {
		return
	}
	if held := heads[realm]; held.Seq >= at.Seq {
		at = held
	}
	for read := 0; at.Seq < h.Seq && read < maxPeek; {
		raws, err := s.fetchRange(ctx, p, realm, at.Seq+1, int(min(uint64(pullRangeSize), h.Seq-at.Seq)))
		if err != nil || len(raws) == 0 {
			return
		}
		for _, raw := range raws {
			ev, c, err := protocol.DecodeEvent(raw)
			if err != nil || ev.Realm != string(realm) || ev.Follows(at) != nil || ev.Verify(key) != nil {
				s.log.Debug("federation: a blocked realm's event not read", "realm", realm, "seq", at.Seq+1, "from", p, "err", err)
				return
			}
			if s.cfg.BlockedEvent(ctx, ev, c) != nil {
				return // shown again by the next exchange
			}
			at = protocol.Head{Seq: ev.Seq, CID: c}
			read++
		}
	}
}
