package federation

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/ipfs/go-cid"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"relay/protocol"
)

// TopicPrefix names the live topics: one per origin realm. Every message
// carries its topic, so the name is short. e2: a message carries a run of
// events (batch.go).
const TopicPrefix = "relay/e2/"

// DirectoryTopic carries signed realm descriptors, so that a realm learns of
// realms it is not peered with (and joins their topics) at once.
const DirectoryTopic = "/relay/directory/1"

// realmTopic is a joined topic and its subscription.
type realmTopic struct {
	topic *pubsub.Topic
	sub   *pubsub.Subscription
}

// newPubSub starts GossipSub sized for a realm's rate: the events carry
// their own signatures, so messages are unsigned and anonymous, and their ID
// is the digest of the event. The origin floods its runs to every peer on
// its topic; receivers relay to a small mesh, for realms the origin does not
// reach directly, and a run from its origin only after relayDelay. Queues
// are deep (the defaults drop above ~1,000 messages/s here); whatever is
// lost anyway, catch-up repairs. IDONTWANT is sent for
// every message, so a mesh peer that already has an event is not sent it
// again.
func newPubSub(ctx context.Context, h host.Host, counts *gossipCounts) (*pubsub.PubSub, error) {
	params := pubsub.DefaultGossipSubParams()
	params.IDontWantMessageThreshold = 1
	params.MaxIDontWantMessages = 100_000
	params.MaxIDontWantLength = 1000
	params.HeartbeatInterval = 700 * time.Millisecond
	// A small mesh: the origin floods its own events to every peer on the
	// topic, so each receiver need forward to few; every forward a peer
	// already has is bytes on the wire for nothing.
	params.D, params.Dlo, params.Dhi, params.Dscore, params.Dout, params.Dlazy = 2, 1, 3, 1, 0, 3
	// Each message ID is offered (IHAVE) at one heartbeat, not three:
	// every peer on the topic has had the message from the origin, so a
	// later offer is seldom wanted, and a miss is a gap catch-up fills.
	params.HistoryGossip = 1
	return pubsub.NewGossipSub(ctx, h,
		pubsub.WithGossipSubParams(params),
		pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
		pubsub.WithNoAuthor(),
		pubsub.WithMessageIdFn(messageID),
		// The origin sends its own runs to every peer on its topic, not
		// only to its mesh (go-libp2p-pubsub no longer does by default).
		pubsub.WithFloodPublish(true),
		pubsub.WithMaxMessageSize(maxGossipMessage+1024),
		pubsub.WithPeerOutboundQueueSize(8192),
		pubsub.WithValidateQueueSize(8192),
		pubsub.WithPeerScore(scoreParams(), scoreThresholds()),
		pubsub.WithRawTracer(counts),
	)
}

// messageID is the first 12 bytes of the event's SHA-256: 96 bits, beyond
// any accidental or contrived collision, and short, since every IDONTWANT
// and IHAVE carries IDs.
func messageID(m *pb.Message) string {
	d := sha256.Sum256(m.GetData())
	return string(d[:12])
}

// scoreParams score peers down for invalid messages (forged, malformed,
// breaking a rule), which the validators report as Reject.
func scoreParams() *pubsub.PeerScoreParams {
	return &pubsub.PeerScoreParams{
		AppSpecificScore:            func(peer.ID) float64 { return 0 },
		DecayInterval:               time.Second,
		DecayToZero:                 0.01,
		RetainScore:                 10 * time.Minute,
		IPColocationFactorThreshold: 1000, // a testnet runs many realms on one address
		TopicScoreCap:               100,
		Topics:                      map[string]*pubsub.TopicScoreParams{},
	}
}

func topicScore() *pubsub.TopicScoreParams {
	return &pubsub.TopicScoreParams{
		TopicWeight:                    1,
		TimeInMeshQuantum:              time.Second,
		FirstMessageDeliveriesWeight:   0.1,
		FirstMessageDeliveriesDecay:    0.9,
		FirstMessageDeliveriesCap:      100,
		InvalidMessageDeliveriesWeight: -100,
		InvalidMessageDeliveriesDecay:  0.99,
	}
}

func scoreThresholds() *pubsub.PeerScoreThresholds {
	return &pubsub.PeerScoreThresholds{
		GossipThreshold:             -100,
		PublishThreshold:            -500,
		GraylistThreshold:           -1000,
		AcceptPXThreshold:           10,
		OpportunisticGraftThreshold: 5,
	}
}

// follow joins the topic of realm (unless blocked or already joined).
func (s *Service) follow(realm protocol.Realm) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.topics[realm]; ok {
		return
	}
	if _, ok := s.blocked[realm]; ok {
		return
	}
	name := TopicPrefix + string(realm)
	// A run from its origin holds its validation slot for relayDelay, so a
	// burst (an origin flushing after a reconnect) needs many slots; past
	// them pubsub drops messages as throttled.
	if err := s.ps.RegisterTopicValidator(name, s.validator(realm), pubsub.WithValidatorConcurrency(validateConcurrency)); err != nil {
		s.log.Warn("federation: topic validator", "realm", realm, "err", err)
		return
	}
	t, err := s.ps.Join(name, pubsub.WithTopicMessageIdFn(messageID))
	if err != nil {
		s.ps.UnregisterTopicValidator(name)
		s.log.Warn("federation: join topic", "realm", realm, "err", err)
		return
	}
	if err := t.SetScoreParams(topicScore()); err != nil {
		s.log.Warn("federation: topic score", "realm", realm, "err", err)
	}
	sub, err := t.Subscribe(pubsub.WithBufferSize(1024))
	if err != nil {
		t.Close()
		s.ps.UnregisterTopicValidator(name)
		s.log.Warn("federation: subscribe", "realm", realm, "err", err)
		return
	}
	s.topics[realm] = &realmTopic{topic: t, sub: sub}
	s.wg.Add(1)
	go s.drain(sub)
}

// unfollow leaves a realm's topic (when it is blocked).
func (s *Service) unfollow(realm protocol.Realm) {
	s.mu.Lock()
	rt, ok := s.topics[realm]
	delete(s.topics, realm)
	s.mu.Unlock()
	if !ok {
		return
	}
	rt.sub.Cancel()
	rt.topic.Close()
	s.ps.UnregisterTopicValidator(TopicPrefix + string(realm))
}

// drain reads a subscription: the validators have already stored what
// arrives, so the messages are only counted out.
func (s *Service) drain(sub *pubsub.Subscription) {
	defer s.wg.Done()
	for {
		if _, err := sub.Next(s.ctx); err != nil {
			return
		}
	}
}

// publish sends a run of the realm's own events on its topic, as one
// message.
func (s *Service) publish(raws [][]byte) {
	s.mu.Lock()
	rt := s.topics[s.cfg.Realm]
	s.mu.Unlock()
	if rt == nil {
		return
	}
	if err := rt.topic.Publish(s.ctx, encodeRun(raws)); err != nil && s.ctx.Err() == nil {
		s.log.Warn("federation: publish", "events", len(raws), "err", err)
	}
	s.stats.published.Add(uint64(len(raws)))
}

// gossiped is one decoded event of a gossip message.
type gossiped struct {
	ev  *protocol.Event
	c   cid.Cid
	raw []byte
}

// validator checks a gossiped run of events before it is forwarded: well
// formed, consecutive and linked, of the topic's realm, authenticated by the
// realm's pinned key (authenticRun); then stores it, which checks the chain
// and every authority rule. Only what this node would store is forwarded; a
// gap is held and filled by catch-up. When an event of the run is forged or
// malformed, the message is refused and the authentic events before it are
// stored.
func (s *Service) validator(realm protocol.Realm) pubsub.ValidatorEx {
	return func(ctx context.Context, from peer.ID, m *pubsub.Message) pubsub.ValidationResult {
		if from == s.host.ID() {
			return pubsub.ValidationAccept // our own publication
		}
		start := time.Now()
		raws, err := splitRun(m.GetData())
		if err != nil {
			s.stats.refused("malformed")
			return pubsub.ValidationReject
		}
		run, whole := decodeRun(realm, raws)
		if !whole {
			s.stats.refused("malformed")
		}
		if len(run) == 0 {
			return pubsub.ValidationReject
		}
		if realm == s.cfg.Realm || s.refusing(realm) {
			if !whole {
				return pubsub.ValidationReject
			}
			if realm != s.cfg.Realm {
				s.stats.refusedN("refusing", len(run)) // blocked or quarantined here
			}
			return pubsub.ValidationIgnore
		}
		key, ok := s.dir.Key(realm)
		if !ok {
			s.kick(from)
			if !whole {
				return pubsub.ValidationReject
			}
			return pubsub.ValidationIgnore
		}
		n := authenticRun(run, key)
		if n < len(run) {
			s.stats.refused("signature")
			s.log.Warn("federation: forged event refused", "realm", realm, "seq", run[n].ev.Seq, "from", from)
		}
		if n < len(run) || !whole {
			if n > 0 {
				s.ingestRun(ctx, realm, run[:n], from)
			}
			return pubsub.ValidationReject
		}
		res := s.ingestRun(ctx, realm, run, from)
		if res == pubsub.ValidationAccept {
			if r, ok := s.dir.RealmOf(from); ok && r == realm {
				relayLater(ctx, start)
			}
		}
		return res
	}
}

// relayDelay is how long after its validation began a run that came from
// its origin is relayed at the earliest. The origin floods each run to
// every peer on its topic at once, and each of them tells its mesh
// (IDONTWANT) as soon as it has the run, before validating it; relaying
// only once those have come means a run is relayed to the mesh peers the
// origin does not reach, not to those it reached a moment later (without
// it, at 1,000 posts/s a third of the copies a receiver took in were
// duplicates). A realm reached only through a relay gets the run that much
// later; a run that came through a relay goes on as soon as it is stored.
const relayDelay = 30 * time.Millisecond

// validateConcurrency is how many messages of one realm's topic may be in
// validation at once (pubsub's default is 1,024).
const validateConcurrency = 8192

// relayLater returns relayDelay after start at the earliest: the validator
// returns when the run may be relayed.
func relayLater(ctx context.Context, start time.Time) {
	d := relayDelay - time.Since(start)
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// decodeRun decodes the events of a gossip message of realm's topic as far
// as they are well formed, of the realm, and each the successor of the one
// before, seq and link; whole is false when it stopped short of the end.
func decodeRun(realm protocol.Realm, raws [][]byte) (run []gossiped, whole bool) {
	run = make([]gossiped, 0, len(raws))
	for i, raw := range raws {
		ev, c, err := protocol.DecodeEvent(raw)
		if err != nil || ev.Realm != string(realm) ||
			i > 0 && (ev.Seq != run[i-1].ev.Seq+1 || !ev.Prev.Cid.Equals(run[i-1].c)) {
			return run, false
		}
		run = append(run, gossiped{ev, c, raw})
	}
	return run, true
}

// authenticRun returns how many events at the start of run, a linked run of
// one realm's events (decodeRun), are authentic: all of them when the
// newest event's signature verifies against key; otherwise it checks each
// event's own signature and stops at the first that fails.
//
// One signature is enough for the whole run. Each event's prev is the CID,
// a SHA-256, of the encoding of the event before it, signature included,
// and the links were checked when the run was decoded; so the newest
// event's signature commits to every byte of every event before it. Without
// the realm's key no one can change, insert, drop or reorder an event of
// such a run without breaking a link or finding a SHA-256 collision. An
// event whose own signature is bad can pass only if the realm itself
// linked it into its chain, and then the realm's key vouches for it all
// the same (catch-up stores ranges by the same argument). Every event that
// passes is thus the realm's, so an event of it that differs from the one
// held at its seq is evidence of equivocation. A forger, lacking the key,
// cannot sign the newest event: the fallback then finds the first event
// that is not the realm's, and only those before it are stored.
func authenticRun(run []gossiped, key ed25519.PublicKey) int {
	if len(run) == 0 || run[len(run)-1].ev.Verify(key) == nil {
		return len(run)
	}
	for i, g := range run[:len(run)-1] {
		if g.ev.Verify(key) != nil {
			return i
		}
	}
	return len(run) - 1
}

// joinDirectory joins the directory topic and announces the realm.
func (s *Service) joinDirectory() error {
	if err := s.ps.RegisterTopicValidator(DirectoryTopic, s.validateDescriptor); err != nil {
		return err
	}
	t, err := s.ps.Join(DirectoryTopic)
	if err != nil {
		return err
	}
	sub, err := t.Subscribe()
	if err != nil {
		return err
	}
	s.dirTopic = t
	s.wg.Add(1)
	go s.drain(sub)
	return nil
}

// announce publishes the descriptors of realms just learned.
func (s *Service) announce(raws ...[]byte) {
	if s.dirTopic == nil {
		return
	}
	for _, raw := range raws {
		if err := s.dirTopic.Publish(s.ctx, raw); err != nil && s.ctx.Err() == nil {
			s.log.Debug("federation: announce", "err", err)
		}
	}
}

// learn takes a descriptor from a peer: a realm new to the directory is
// followed, and told on to the other peers.
func (s *Service) learn(ctx context.Context, raw []byte) (*DirEntry, bool, error) {
	if s.dir.Holds(raw) {
		return nil, false, nil // checked and followed when it was learned
	}
	_, known := s.dir.Key(realmOfDescriptor(raw))
	e, err := s.dir.Learn(ctx, raw)
	if err != nil {
		if errors.Is(err, ErrKeyConflict) {
			s.stats.refused("key_conflict")
			s.log.Warn("federation: realm key conflict", "err", err)
		}
		return nil, false, err
	}
	s.follow(e.Realm)
	return e, !known, nil
}

// validateDescriptor checks a gossiped descriptor and learns it; only a
// descriptor that told this node something new travels on.
func (s *Service) validateDescriptor(ctx context.Context, from peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	if from == s.host.ID() {
		return pubsub.ValidationAccept
	}
	_, isNew, err := s.learn(ctx, m.GetData())
	switch {
	case errors.Is(err, ErrKeyConflict):
		return pubsub.ValidationIgnore
	case err != nil:
		s.stats.refused("descriptor")
		return pubsub.ValidationReject
	case isNew:
		s.kick(from) // fetch the new realm's history from who told us
		return pubsub.ValidationAccept
	}
	return pubsub.ValidationIgnore
}

// realmOfDescriptor is the realm a descriptor claims, or "" when it does
// not decode.
func realmOfDescriptor(raw []byte) protocol.Realm {
	d, err := protocol.DecodeDescriptor(raw)
	if err != nil {
		return ""
	}
	return protocol.Realm(d.Realm)
}
