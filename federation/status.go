package federation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"relay/protocol"
)

// stats are the federation's counters, read by the status API and /metrics.
type stats struct {
	published atomic.Uint64
	dropped   atomic.Uint64
	gossip    gossipCounts

	mu       sync.Mutex
	got      map[string]uint64                // by way: gossip, catchup
	refusals map[string]uint64                // by cause
	highest  map[protocol.Realm]protocol.Head // the newest head any peer showed
}

// refusalCauses are the causes refusals are counted by, each counted
// from zero so that a metric shows it before it first happens.
var refusalCauses = []string{"malformed", "signature", "key_conflict", "descriptor", "waiting", "chain", "rule", "catchup", "equivocation", "refusing", "unnamed_peer"}

func newStats() *stats {
	st := &stats{got: map[string]uint64{}, refusals: map[string]uint64{}, highest: map[protocol.Realm]protocol.Head{}}
	for _, c := range refusalCauses {
		st.refusals[c] = 0
	}
	return st
}

func (st *stats) received(way string, n int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.got[way] += uint64(n)
}

func (st *stats) refused(cause string) { st.refusedN(cause, 1) }

func (st *stats) refusedN(cause string, n int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.refusals[cause] += uint64(n)
}

// seen keeps the newest head a peer showed of each realm the directory
// knows (a peer may list any name; only known realms are kept).
func (st *stats) seen(heads map[protocol.Realm]protocol.Head, dir *Directory) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for r, h := range heads {
		if _, ok := dir.Key(r); !ok {
			continue
		}
		if h.Seq > st.highest[r].Seq {
			st.highest[r] = h
		}
	}
}

// Counters are the federation's totals since start.
type Counters struct {
	Published uint64            `json:"published" jsonschema:"own events sent on the realm's topic"`
	Unsent    uint64            `json:"unsent" jsonschema:"own events not gossiped because the publisher fell behind; catch-up carries them"`
	Received  map[string]uint64 `json:"received" jsonschema:"events stored from peers, by way (gossip, catchup)"`
	Refused   map[string]uint64 `json:"refused" jsonschema:"events and requests refused, by cause"`
	Gossip    GossipCounters    `json:"gossip" jsonschema:"what GossipSub took in: message copies and control IDs"`
}

// Counters returns the totals.
func (s *Service) Counters() Counters {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	c := Counters{Published: s.stats.published.Load(), Unsent: s.stats.dropped.Load(), Received: map[string]uint64{}, Refused: map[string]uint64{}, Gossip: s.stats.gossip.totals()}
	for k, v := range s.stats.got {
		c.Received[k] = v
	}
	for k, v := range s.stats.refusals {
		c.Refused[k] = v
	}
	return c
}

// RealmStatus is one realm as this node holds it.
type RealmStatus struct {
	Realm       string     `json:"realm"`
	PeerID      string     `json:"peer_id,omitempty"`
	Local       bool       `json:"local"`
	Seq         uint64     `json:"seq" jsonschema:"the newest event held"`
	CID         string     `json:"cid,omitempty"`
	Highest     uint64     `json:"highest_seen" jsonschema:"the newest seq any peer has shown"`
	Lag         uint64     `json:"lag" jsonschema:"events seen at a peer and not yet held"`
	Blocked     bool       `json:"blocked"`
	Quarantined string     `json:"quarantined,omitempty" jsonschema:"why its events are no longer taken"`
	Waiting     string     `json:"waiting,omitempty" jsonschema:"why its next event is held, or why events it holds are not shown yet: they refer to another realm's record not held here (a realm this node blocks or quarantines may hold it)"`
	Parked      int        `json:"parked,omitempty" jsonschema:"events of its chain held but not shown yet: each refers to a record not held here, and is shown once that arrives"`
	Refused     string     `json:"refused,omitempty" jsonschema:"an event of its chain held but never shown: it waited for a record, and broke a rule of the log once that came"`
	KeyPinnedAt *time.Time `json:"descriptor_at,omitempty"`
}

// Realms lists every realm held or known, by name.
func (s *Service) Realms() ([]RealmStatus, error) {
	heads, err := s.st.Heads()
	if err != nil {
		return nil, err
	}
	names := map[protocol.Realm]bool{}
	for r := range heads {
		names[r] = true
	}
	for _, e := range s.dir.Entries() {
		names[e.Realm] = true
	}
	s.mu.Lock()
	for r := range s.blocked {
		names[r] = true
	}
	s.mu.Unlock()
	s.stats.mu.Lock()
	highest := make(map[protocol.Realm]protocol.Head, len(s.stats.highest))
	for r, h := range s.stats.highest {
		highest[r] = h
	}
	s.stats.mu.Unlock()
	// Each realm's count of parked events, its first parked one and its
	// first refused one: counts as the store keeps them, the rest read in
	// parking order up to statusParkedBudget events, so that a status
	// (or a metrics scrape) costs the same however many are parked.
	parkedN := s.st.ParkedCounts()
	firstParked, refused, err := s.st.FirstParked(names, statusParkedBudget)
	if err != nil {
		return nil, err
	}
	out := make([]RealmStatus, 0, len(names))
	for r := range names {
		h := heads[r]
		rs := RealmStatus{Realm: string(r), Local: r == s.cfg.Realm, Seq: h.Seq, Highest: max(h.Seq, highest[r].Seq)}
		if h.Seq > 0 {
			rs.CID = h.CID.String()
		}
		rs.Lag = rs.Highest - h.Seq
		if e, ok := s.dir.Entry(r); ok {
			rs.PeerID = e.PeerID.String()
			at := e.At
			rs.KeyPinnedAt = &at
		}
		s.mu.Lock()
		_, rs.Blocked = s.blocked[r]
		rs.Quarantined = s.quarantined[r].Reason
		if w, ok := s.waiting[r]; ok && w.head == h.Seq && rs.Lag > 0 {
			rs.Waiting = fmt.Sprintf("event %d, since %s: %s", w.head+1, w.since.UTC().Format(time.RFC3339), w.why)
		}
		if rs.Parked = parkedN[r]; rs.Parked > 0 && rs.Waiting == "" {
			rs.Waiting = fmt.Sprintf("%d held, not shown yet", rs.Parked)
			if p, ok := firstParked[r]; ok {
				rs.Waiting += fmt.Sprintf("; event %d, since %s: %s", p.Seq, p.At.Format(time.RFC3339), p.Why)
			}
		}
		if p, ok := refused[r]; ok {
			rs.Refused = fmt.Sprintf("event %d, held since %s and refused once its records came: %s", p.Seq, p.At.Format(time.RFC3339), p.Why)
		}
		s.mu.Unlock()
		out = append(out, rs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Realm < out[j].Realm })
	return out, nil
}

// statusParkedBudget bounds the parked events, and the refused ones, a
// status reads to name each realm's first.
const statusParkedBudget = 10_000

// IsBlocked reports whether the operator blocked realm.
func (s *Service) IsBlocked(r protocol.Realm) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.blocked[r]
	return ok
}

// Refusing reports whether this node takes no events of realm: blocked or
// quarantined.
func (s *Service) Refusing(r protocol.Realm) bool { return s.refusing(r) }

// refusing reports whether this node takes no events of realm: blocked or
// quarantined.
func (s *Service) refusing(r protocol.Realm) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, b := s.blocked[r]
	_, q := s.quarantined[r]
	return b || q
}

// Blocked lists the blocked realms.
func (s *Service) Blocked() []Block {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Block, 0, len(s.blocked))
	for _, b := range s.blocked {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Realm < out[j].Realm })
	return out
}

// ErrOwnRealm is returned when the operator tries to block the realm itself.
var ErrOwnRealm = errors.New("federation: a realm cannot block itself")

// BlockRealm blocks realm: its events are no longer stored, served or
// relayed, and its key may no longer connect.
func (s *Service) BlockRealm(ctx context.Context, realm protocol.Realm, reason string) (Block, error) {
	if realm == s.cfg.Realm {
		return Block{}, ErrOwnRealm
	}
	b := Block{Realm: realm, At: time.Now().UTC(), Reason: reason}
	if err := putLocal(ctx, s.st, fkey(pfxBlock, string(realm)), b); err != nil {
		return Block{}, err
	}
	s.mu.Lock()
	s.blocked[realm] = b
	delete(s.pending, realm)
	s.mu.Unlock()
	s.unfollow(realm)
	if e, ok := s.dir.Entry(realm); ok {
		s.gater.set(s.gater.denied, e.PeerID, true)
		s.host.Network().ClosePeer(e.PeerID)
	}
	return b, nil
}

// UnblockRealm lifts a block, and a quarantine, of realm; sync resumes.
// The equivocation evidence held for realm is kept, and counts as seen:
// peers passing it on again do not quarantine the realm again, new
// evidence does.
func (s *Service) UnblockRealm(ctx context.Context, realm protocol.Realm) error {
	seen, err := s.evidenceOf(realm)
	if err != nil {
		return err
	}
	if err := putLocal(ctx, s.st, fkey(pfxBlock, string(realm)), nil); err != nil {
		return err
	}
	if len(seen) > 0 {
		if err := putLocal(ctx, s.st, fkey(pfxAcked, string(realm)), slices.Sorted(maps.Keys(seen))); err != nil {
			return err
		}
	}
	if err := putLocal(ctx, s.st, fkey(pfxQuarantine, string(realm)), nil); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.blocked, realm)
	delete(s.quarantined, realm)
	if len(seen) > 0 {
		s.acked[realm] = seen
	}
	s.mu.Unlock()
	if e, ok := s.dir.Entry(realm); ok {
		s.gater.set(s.gater.denied, e.PeerID, false)
	}
	s.follow(realm)
	s.mu.Lock()
	ids := make([]peer.ID, 0, len(s.peers))
	for id := range s.peers {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.kick(id)
	}
	return nil
}

// evidenceOf is the CIDs of the equivocation evidence held for realm.
func (s *Service) evidenceOf(realm protocol.Realm) (map[string]bool, error) {
	all, err := s.st.Equivocations()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, e := range all {
		if e.Realm == realm {
			out[e.CID.String()] = true
		}
	}
	return out, nil
}

// acknowledged reports whether c is evidence of an equivocation of realm
// the operator already lifted a quarantine over: it is kept, and is not
// taken in again.
func (s *Service) acknowledged(realm protocol.Realm, c cid.Cid) bool {
	return s.ackedOf(realm)[c.String()]
}

// ackedOf is the evidence of realm the operator lifted a quarantine over.
// The set is replaced, never changed, so it may be read without the lock.
func (s *Service) ackedOf(realm protocol.Realm) map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked[realm]
}

// equivocated quarantines realm for the equivocation err reports, unless
// every piece of evidence held for it is what the operator already lifted
// a quarantine over (UnblockRealm): a peer passing that on again is no news.
func (s *Service) equivocated(realm protocol.Realm, reason string) {
	if acked := s.ackedOf(realm); len(acked) > 0 {
		if held, err := s.evidenceOf(realm); err == nil && len(held) > 0 && seenAll(held, acked) {
			s.log.Debug("federation: equivocation evidence already seen by the operator", "realm", realm)
			return
		}
	}
	s.stats.refused("equivocation")
	s.quarantine(realm, reason)
}

// seenAll reports whether every CID of held is in acked.
func seenAll(held, acked map[string]bool) bool {
	for c := range held {
		if !acked[c] {
			return false
		}
	}
	return true
}

// quarantine stops taking realm's events and tells the operator.
func (s *Service) quarantine(realm protocol.Realm, reason string) {
	if realm == s.cfg.Realm {
		// This realm's own events, taken back from a peer (own.go), never
		// make it refuse itself: the operator is told instead.
		s.alarm(OwnChainAlarm{Kind: "fork", At: time.Now().UTC(), Detail: "this realm's own events from a peer were refused: " + reason})
		return
	}
	s.mu.Lock()
	_, already := s.quarantined[realm]
	q := Quarantine{Realm: realm, At: time.Now().UTC(), Reason: reason}
	if !already {
		s.quarantined[realm] = q
		delete(s.pending, realm)
	}
	s.mu.Unlock()
	if already {
		return
	}
	s.log.Error("federation: realm quarantined", "realm", realm, "reason", reason)
	if err := putLocal(s.ctx, s.st, fkey(pfxQuarantine, string(realm)), q); err != nil {
		s.log.Error("federation: keep quarantine", "realm", realm, "err", err)
	}
}

// waitNote is why a realm's chain stopped at head: its next event refers to
// a record of another realm this node does not hold (store.ErrDependency).
// It holds only while the head stays there.
type waitNote struct {
	head  uint64
	why   string
	since time.Time
}

// noteWaiting records that realm's next event waits for a record, for the
// operator (Realms): without it, only the lag and a counter would show.
func (s *Service) noteWaiting(realm protocol.Realm, err error) {
	heads, herr := s.st.Heads()
	if herr != nil {
		return
	}
	head := heads[realm].Seq
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.waiting[realm]; !ok || w.head != head {
		s.waiting[realm] = waitNote{head: head, why: err.Error(), since: time.Now()}
	}
}

// OwnChainAlarm is evidence that this realm's key signed events this node
// did not: another node runs with the key, or this node's log was restored
// from an older copy. Either way, its next events fork the chain that
// peers hold, and they will quarantine the realm.
type OwnChainAlarm struct {
	Kind   string    `json:"kind" jsonschema:"fork: another event signed with this realm's key at a seq this node holds; ahead: a peer holds this realm's chain beyond this node's log"`
	Seq    uint64    `json:"seq"`
	CID    string    `json:"cid" jsonschema:"the event signed elsewhere"`
	Peer   string    `json:"peer,omitempty" jsonschema:"the peer that showed it"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail"`
}

// maxOwnAlarms bounds the alarms kept.
const maxOwnAlarms = 16

// OwnChainAlarms lists what showed this realm's key signing elsewhere.
func (s *Service) OwnChainAlarms() []OwnChainAlarm {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ownAlarms)
}

// alarm records an own-chain alarm once per kind and seq, and logs it.
func (s *Service) alarm(a OwnChainAlarm) {
	s.mu.Lock()
	if slices.ContainsFunc(s.ownAlarms, func(o OwnChainAlarm) bool { return o.Kind == a.Kind && o.Seq == a.Seq }) || len(s.ownAlarms) == maxOwnAlarms {
		s.mu.Unlock()
		return
	}
	s.ownAlarms = append(s.ownAlarms, a)
	s.mu.Unlock()
	s.log.Error("federation: this realm's key signed events this node did not", "kind", a.Kind, "seq", a.Seq, "cid", a.CID, "peer", a.Peer, "detail", a.Detail)
}

// ownEvidence weighs equivocation evidence about this realm: an event
// signed with its key that differs from the one held at its seq.
func (s *Service) ownEvidence(ev *protocol.Event, raw []byte, key []byte) {
	c := protocol.CIDOf(raw)
	held, err := s.st.EventAt(s.cfg.Realm, ev.Seq)
	if err != nil || held.CID.Equals(c) || ev.Verify(key) != nil {
		return
	}
	s.alarm(OwnChainAlarm{Kind: "fork", Seq: ev.Seq, CID: c.String(), At: time.Now().UTC(),
		Detail: fmt.Sprintf("peers hold evidence of another event signed with this realm's key at seq %d: the key is used by another node, and peers have quarantined this realm", ev.Seq)})
}

// checkOwnChain compares a peer's head of this realm with this node's log:
// a different event at a seq held, or a chain beyond this node's head not
// linked to it, signed with this realm's key, is an alarm. A chain beyond
// this node's head and linked to it is this node's own history, which an
// older copy of its store lacks: it reports true, for the events to be
// taken before any is authored (own.go). What the peer only claims is
// neither: the event is fetched and its signature checked.
func (s *Service) checkOwnChain(ctx context.Context, p peer.ID, theirs, mine protocol.Head) (behind bool) {
	if theirs.Seq == 0 {
		return false
	}
	seq, kind := theirs.Seq, "fork"
	var held cid.Cid // the event this node holds at seq, for a fork
	if theirs.Seq > mine.Seq {
		seq, kind = mine.Seq+1, "ahead"
	} else if ev, err := s.st.EventAt(s.cfg.Realm, seq); err != nil || ev.CID.Equals(theirs.CID) {
		return false
	} else {
		held = ev.CID
	}
	key, ok := s.dir.Key(s.cfg.Realm)
	if !ok {
		return false
	}
	raws, err := s.fetchRange(ctx, p, s.cfg.Realm, seq, 1)
	if err != nil || len(raws) == 0 {
		return false
	}
	ev, c, err := protocol.DecodeEvent(raws[0])
	if err != nil || ev.Seq != seq || ev.Verify(key) != nil {
		return false
	}
	if kind == "ahead" && ev.Follows(mine) == nil {
		return true
	}
	detail := fmt.Sprintf("peer %s holds another event signed with this realm's key at seq %d: the key is used by another node", p, seq)
	if kind == "ahead" {
		detail = fmt.Sprintf("peer %s holds this realm's chain up to seq %d, beyond this node's log (seq %d): this node runs on an older copy of its store, or the key is used by another node; its next events fork the chain", p, theirs.Seq, mine.Seq)
	} else if held.Equals(c) {
		return false // the peer's head was not the event it sent
	}
	s.alarm(OwnChainAlarm{Kind: kind, Seq: seq, CID: c.String(), Peer: p.String(), At: time.Now().UTC(), Detail: detail})
	return false
}

// refusedParked quarantines the realm of an event parked for a record it
// referred to and refused once that came: the realm broke a rule of the
// log, as if the event had been refused on arrival. It is noted, so that
// a quarantine the operator lifts is not laid again at the next start, nor
// when the store tries the event again after an upgrade and it is refused
// again.
func (s *Service) refusedParked(realm protocol.Realm, seq uint64, why string) {
	k := fkey(pfxRefused, string(realm), strconv.FormatUint(seq, 10))
	switch noted, err := hasLocal(s.st, k); {
	case err != nil:
		s.log.Warn("federation: read a refused event's note", "realm", realm, "seq", seq, "err", err)
	case noted:
		s.log.Info("federation: an event refused before is refused again", "realm", realm, "seq", seq, "why", why)
		return
	}
	s.stats.refused("rule")
	s.quarantine(realm, fmt.Sprintf("event %d: %s", seq, why))
	if err := putLocal(s.ctx, s.st, k, []byte{}); err != nil {
		s.log.Warn("federation: note a refused event", "realm", realm, "seq", seq, "err", err)
	}
}

// refusedWhileAway quarantines for the parked events refused while the
// federation was not running (on a start, by an import) and not noted yet.
func (s *Service) refusedWhileAway() error {
	parked, err := s.st.ParkedEvents(0)
	if err != nil {
		return err
	}
	for _, p := range parked {
		if !p.Refused {
			continue
		}
		switch noted, err := hasLocal(s.st, fkey(pfxRefused, string(p.Realm), strconv.FormatUint(p.Seq, 10))); {
		case err != nil:
			return err
		case !noted:
			s.refusedParked(p.Realm, p.Seq, p.Why)
		}
	}
	return nil
}
