package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"

	"relay/protocol"
)

// Where a peer came from: a --peer flag (not kept: the flags say it each
// start) or the operator (kept in the store).
const (
	sourceFlag     = "flag"
	sourceOperator = "operator"
	sourceInbound  = "inbound" // an unnamed realm that dialled an open realm
)

// peerRecord is a kept peer.
type peerRecord struct {
	Addrs   []string  `json:"addrs"`
	AddedAt time.Time `json:"added_at"`
}

// peerState is what the node knows of one peer.
type peerState struct {
	id      peer.ID
	addrs   []ma.Multiaddr
	source  string
	addedAt time.Time

	connected bool
	since     time.Time // when it connected last
	dialing   bool
	backoff   time.Duration
	nextDial  time.Time
	lastErr   string
	lastSync  time.Time
	heads     map[protocol.Realm]protocol.Head // its heads at the last exchange
	kick      chan struct{}                    // wakes its sync worker
	stop      context.CancelFunc               // ends its sync worker
}

// Block is a realm the operator blocked.
type Block struct {
	Realm  protocol.Realm `json:"realm"`
	At     time.Time      `json:"at"`
	Reason string         `json:"reason,omitempty"`
}

// Quarantine is a realm whose events this node stopped taking because it
// misbehaved (equivocation, a broken rule): the operator is told.
type Quarantine struct {
	Realm  protocol.Realm `json:"realm"`
	At     time.Time      `json:"at"`
	Reason string         `json:"reason"`
}

func (s *Service) loadState() error {
	err := loadLocal(s.st, pfxPeer, func(k, v []byte) error {
		id, err := peer.Decode(string(k))
		if err != nil {
			return err
		}
		var r peerRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		var addrs []ma.Multiaddr
		for _, a := range r.Addrs {
			if m, err := ma.NewMultiaddr(a); err == nil {
				addrs = append(addrs, m)
			}
		}
		s.addPeer(peer.AddrInfo{ID: id, Addrs: addrs}, sourceOperator, r.AddedAt)
		return nil
	})
	if err != nil {
		return err
	}
	err = loadLocal(s.st, pfxBlock, func(k, v []byte) error {
		var b Block
		if err := json.Unmarshal(v, &b); err != nil {
			return err
		}
		s.blocked[b.Realm] = b
		return nil
	})
	if err != nil {
		return err
	}
	err = loadLocal(s.st, pfxQuarantine, func(k, v []byte) error {
		var q Quarantine
		if err := json.Unmarshal(v, &q); err != nil {
			return err
		}
		s.quarantined[q.Realm] = q
		return nil
	})
	if err != nil {
		return err
	}
	return loadLocal(s.st, pfxAcked, func(k, v []byte) error {
		var cids []string
		if err := json.Unmarshal(v, &cids); err != nil {
			return err
		}
		set := make(map[string]bool, len(cids))
		for _, c := range cids {
			set[c] = true
		}
		s.acked[protocol.Realm(k)] = set
		return nil
	})
}

// addPeer admits and (from the dial loop) dials a peer.
func (s *Service) addPeer(ai peer.AddrInfo, source string, at time.Time) *peerState {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.peers[ai.ID]
	if !ok {
		p = &peerState{id: ai.ID, source: source, addedAt: at, kick: make(chan struct{}, 1)}
		s.peers[ai.ID] = p
	}
	if source == sourceOperator || p.source == sourceInbound {
		p.source = source
	}
	if len(ai.Addrs) > 0 {
		p.addrs = ai.Addrs
	}
	p.nextDial = time.Time{}
	p.backoff = 0
	s.gater.set(s.gater.allowed, ai.ID, true)
	return p
}

// strangerRefused tells the operator of a connection refused because its
// peer was not named (relay peer add, --peer, or --open-federation admit
// it): counted every time, logged once per peer every strangerLogEvery.
func (s *Service) strangerRefused(p peer.ID, from ma.Multiaddr) {
	s.stats.refused("unnamed_peer")
	now := time.Now()
	s.mu.Lock()
	last, seen := s.strangers[p]
	if !seen && len(s.strangers) >= maxStrangersLogged {
		clear(s.strangers) // a crowd of strangers: logged again, at worst
	}
	if seen && now.Sub(last) < strangerLogEvery {
		s.mu.Unlock()
		return
	}
	s.strangers[p] = now
	s.mu.Unlock()
	s.log.Info("federation: refused a connection from a peer no operator named; relay peer add or --peer admits it, --open-federation admits any", "peer", p, "from", fmt.Sprint(from))
}

const (
	strangerLogEvery   = 10 * time.Minute
	maxStrangersLogged = 1024
)

// maxPeerAddrs bounds the addresses kept for a peer the operator adds.
const maxPeerAddrs = 8

// AddPeer adds a peer by its full multiaddr (ending in /p2p/<peer id>),
// keeps it, and dials it.
func (s *Service) AddPeer(ctx context.Context, addr string) (PeerStatus, error) {
	ais, err := ParsePeers([]string{addr})
	if err != nil {
		return PeerStatus{}, err
	}
	ai := ais[0]
	if ai.ID == s.host.ID() {
		return PeerStatus{}, errors.New("federation: that address is this realm")
	}
	// The addresses known before stay behind the new ones: one that cannot
	// be dialled (a typo, a transport the peer does not run) does not make
	// the peer unreachable once it stops dialling in.
	s.mu.Lock()
	if p := s.peers[ai.ID]; p != nil {
		for _, a := range p.addrs {
			if len(ai.Addrs) < maxPeerAddrs && !slices.ContainsFunc(ai.Addrs, a.Equal) {
				ai.Addrs = append(ai.Addrs, a)
			}
		}
	}
	s.mu.Unlock()
	rec := peerRecord{AddedAt: time.Now().UTC()}
	for _, a := range ai.Addrs {
		rec.Addrs = append(rec.Addrs, a.String())
	}
	if err := putLocal(ctx, s.st, fkey(pfxPeer, ai.ID.String()), rec); err != nil {
		return PeerStatus{}, err
	}
	s.addPeer(ai, sourceOperator, rec.AddedAt)
	s.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, time.Hour)
	return s.peerStatus(ai.ID)
}

// RemovePeer forgets a peer the operator added and hangs up on it.
func (s *Service) RemovePeer(ctx context.Context, id string) error {
	pid, err := peer.Decode(id)
	if err != nil {
		return fmt.Errorf("federation: peer id: %w", err)
	}
	s.mu.Lock()
	_, ok := s.peers[pid]
	s.mu.Unlock()
	if !ok {
		return ErrUnknownPeer
	}
	if err := putLocal(ctx, s.st, fkey(pfxPeer, pid.String()), nil); err != nil {
		return err
	}
	s.mu.Lock()
	if p := s.peers[pid]; p != nil && p.connected {
		p.connected = false
		p.stop() // its sync worker ends now: disconnected will not find it
	}
	delete(s.peers, pid)
	s.mu.Unlock()
	s.gater.set(s.gater.allowed, pid, false)
	s.host.Network().ClosePeer(pid)
	return nil
}

// ErrUnknownPeer is returned for a peer the node does not have.
var ErrUnknownPeer = errors.New("federation: no such peer")

// connected starts a sync worker for a new connection.
func (s *Service) connected(id peer.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.peers[id]
	if !ok {
		p = &peerState{id: id, source: sourceInbound, addedAt: time.Now().UTC(), kick: make(chan struct{}, 1)}
		s.peers[id] = p
	}
	if p.connected {
		return
	}
	p.connected, p.since = true, time.Now()
	ctx, cancel := context.WithCancel(s.ctx)
	p.stop = cancel
	s.wg.Add(1)
	go s.syncWorker(ctx, p)
}

func (s *Service) disconnected(id peer.ID) {
	if len(s.host.Network().ConnsToPeer(id)) > 0 {
		return // another connection lives on
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.peers[id]
	if !ok || !p.connected {
		return
	}
	p.connected = false
	p.stop()
	if p.source == sourceInbound {
		delete(s.peers, id)
		return
	}
	if time.Since(p.since) < briefConnection && s.ctx.Err() == nil {
		// Hung up on at once: the peer's gate does not admit this realm
		// (it removed or blocked it), so dialling again at once would
		// only repeat that. It backs off, and the operator is told.
		s.backOff(p, "the peer closed the connection as soon as it opened: it may not admit this realm (its operator adds this node as a peer, or opens its federation)")
	}
}

// briefConnection is how long a connection must last for its end not to
// count as the peer refusing it.
const briefConnection = 5 * time.Second

// backOff notes a failed connection to p and when to dial it again (0.5 s
// doubling to 30 s, with jitter). The caller holds s.mu.
func (s *Service) backOff(p *peerState, why string) {
	p.lastErr = why
	switch {
	case p.backoff == 0:
		p.backoff = 500 * time.Millisecond
	case p.backoff < 30*time.Second:
		p.backoff *= 2
	}
	jitter := time.Duration(rand.Int64N(int64(p.backoff)/4 + 1))
	p.nextDial = time.Now().Add(p.backoff + jitter)
}

// dialLoop keeps the named peers connected, backing off from each failure
// (0.5 s doubling to 30 s, with jitter).
func (s *Service) dialLoop() {
	defer s.wg.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		s.mu.Lock()
		var due []*peerState
		for _, p := range s.peers {
			if p.source != sourceInbound && !p.connected && !p.dialing && !now.Before(p.nextDial) && s.gater.admits(p.id) {
				p.dialing = true
				due = append(due, p)
			}
		}
		s.mu.Unlock()
		for _, p := range due {
			s.mu.Lock()
			ai := peer.AddrInfo{ID: p.id, Addrs: append([]ma.Multiaddr(nil), p.addrs...)}
			s.mu.Unlock()
			go s.dial(p, ai)
		}
	}
}

func (s *Service) dial(p *peerState, ai peer.AddrInfo) {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	err := s.host.Connect(ctx, ai)
	s.mu.Lock()
	defer s.mu.Unlock()
	p.dialing = false
	if err == nil {
		return // connected: its error and backoff go once the connection has lasted
	}
	s.dialFailed(p, err)
}

// dialFailed backs off from a failed dial. libp2p answers a dial soon after
// a failed one with "dial backoff", which says nothing of why: the reason
// before it is kept. Call with s.mu held.
func (s *Service) dialFailed(p *peerState, err error) {
	why := err.Error()
	if onlyBackoff(err) && p.lastErr != "" {
		why = p.lastErr
	}
	s.backOff(p, why)
}

// onlyBackoff reports whether a dial failed for libp2p's backoff alone, on
// every address it tried.
func onlyBackoff(err error) bool {
	var de *swarm.DialError
	if !errors.As(err, &de) {
		return errors.Is(err, swarm.ErrDialBackoff)
	}
	if len(de.DialErrors) == 0 {
		return errors.Is(de.Cause, swarm.ErrDialBackoff)
	}
	for _, te := range de.DialErrors {
		if !errors.Is(te.Cause, swarm.ErrDialBackoff) {
			return false
		}
	}
	return true
}

// PeerStatus is one peer as the operator sees it.
type PeerStatus struct {
	PeerID    string            `json:"peer_id"`
	Realm     string            `json:"realm,omitempty"`
	Addrs     []string          `json:"addrs"`
	Source    string            `json:"source" jsonschema:"flag, operator or inbound"`
	State     string            `json:"state" jsonschema:"connected, dialing, backoff or idle"`
	LastError string            `json:"last_error,omitempty"`
	LastSync  *time.Time        `json:"last_sync,omitempty"`
	Acked     map[string]uint64 `json:"acknowledged" jsonschema:"realm to the newest seq the peer holds, at the last exchange"`
}

func (s *Service) peerStatus(id peer.ID) (PeerStatus, error) {
	s.mu.Lock()
	p, ok := s.peers[id]
	s.mu.Unlock()
	if !ok {
		return PeerStatus{}, ErrUnknownPeer
	}
	return s.statusOf(p), nil
}

func (s *Service) statusOf(p *peerState) PeerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := PeerStatus{PeerID: p.id.String(), Source: p.source, Addrs: []string{}, LastError: p.lastErr, Acked: map[string]uint64{}}
	if r, ok := s.dir.RealmOf(p.id); ok {
		ps.Realm = string(r)
	}
	for _, a := range p.addrs {
		ps.Addrs = append(ps.Addrs, a.String())
	}
	switch {
	case p.connected:
		ps.State = "connected"
	case p.dialing:
		ps.State = "dialing"
	case p.lastErr != "":
		ps.State = "backoff"
	default:
		ps.State = "idle"
	}
	if !p.lastSync.IsZero() {
		t := p.lastSync
		ps.LastSync = &t
	}
	for r, h := range p.heads {
		ps.Acked[string(r)] = h.Seq
	}
	return ps
}

// Peers lists the peers by peer ID.
func (s *Service) Peers() []PeerStatus {
	s.mu.Lock()
	ps := make([]*peerState, 0, len(s.peers))
	for _, p := range s.peers {
		ps = append(ps, p)
	}
	s.mu.Unlock()
	out := make([]PeerStatus, 0, len(ps))
	for _, p := range ps {
		out = append(out, s.statusOf(p))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PeerID < out[j].PeerID })
	return out
}

// SetLinkCut cuts (or heals) the link to peer p: no connection either way
// until healed. A fault-injection hook for testnet; the operator's tool is a
// block.
func (s *Service) SetLinkCut(p peer.ID, cut bool) {
	s.gater.set(s.gater.cut, p, cut)
	if cut {
		s.host.Network().ClosePeer(p)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ps, ok := s.peers[p]; ok {
		ps.backoff, ps.nextDial = 0, time.Time{}
	}
}
