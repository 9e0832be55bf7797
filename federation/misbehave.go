package federation

import (
	"bufio"
	"context"
	"io"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"relay/protocol"
)

// Misbehaver plays a peer that lies: it signs what it likes with the realm's
// key, publishes raw bytes on any realm's topic and sends raw frames on the
// catch-up protocol. It is testnet's hook for fault injection; nothing in a
// node calls it.
type Misbehaver struct{ s *Service }

// Misbehave returns the service's fault-injection hook.
func (s *Service) Misbehave() Misbehaver { return Misbehaver{s} }

// Sign signs ev with the realm's key, whatever it says.
func (m Misbehaver) Sign(ev *protocol.Event) ([]byte, cid.Cid, error) {
	return ev.Sign(m.s.cfg.Identity.Signing)
}

// Publish sends raws on realm's topic as one gossip message, joining the
// topic first if need be.
func (m Misbehaver) Publish(realm protocol.Realm, raws ...[]byte) error {
	return m.PublishMessage(realm, encodeRun(raws))
}

// PublishMessage sends data on realm's topic as it is, joining the topic
// first if need be.
func (m Misbehaver) PublishMessage(realm protocol.Realm, data []byte) error {
	m.s.follow(realm)
	m.s.mu.Lock()
	rt := m.s.topics[realm]
	m.s.mu.Unlock()
	if rt == nil {
		return ErrUnknownPeer
	}
	return rt.topic.Publish(m.s.ctx, data)
}

// TopicPeers is how many peers the node sees on realm's topic.
func (m Misbehaver) TopicPeers(realm protocol.Realm) int {
	m.s.mu.Lock()
	rt := m.s.topics[realm]
	m.s.mu.Unlock()
	if rt == nil {
		return 0
	}
	return len(rt.topic.ListPeers())
}

// SendSync opens a catch-up stream to p, writes raw as it is, and returns
// what p answers before it closes or resets the stream.
func (m Misbehaver) SendSync(ctx context.Context, p peer.ID, raw []byte) ([]byte, error) {
	str, err := m.s.host.NewStream(ctx, p, SyncProtocol)
	if err != nil {
		return nil, err
	}
	defer str.Close()
	str.SetDeadline(time.Now().Add(5 * time.Second))
	w := bufio.NewWriter(str)
	if _, err := w.Write(raw); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	str.CloseWrite()
	return io.ReadAll(str)
}

// ForgeRanges makes the node answer catch-up range requests with what f
// returns for the realm and first seq asked (nil from f: the honest
// answer); ForgeRanges(nil) makes it honest again.
func (m Misbehaver) ForgeRanges(f func(realm protocol.Realm, from uint64) [][]byte) {
	if f == nil {
		m.s.forgeRange.Store(nil)
		return
	}
	m.s.forgeRange.Store(&f)
}
