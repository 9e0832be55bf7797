package federation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/metrics"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"

	"relay/protocol"
	"relay/store"
)

// Config is how a realm federates. Start from DefaultConfig.
type Config struct {
	Realm    protocol.Realm
	Identity *Identity
	// Listen are the libp2p listen multiaddrs (TCP and QUIC).
	Listen []string
	// Peers are dialled and admitted; the operator adds more at run time.
	Peers []string
	// Open admits realms the operator did not name.
	Open bool
	// SyncInterval is how often each connected peer's heads are compared
	// with ours (anti-entropy); a gap or a new connection does it at once.
	SyncInterval time.Duration
	// MaxAhead is how far past this node's clock a peer's event may be
	// dated and still be taken; one dated later waits until it is no
	// longer (see ahead.go).
	MaxAhead time.Duration
	// Blobs serves and keeps content-addressed blobs (images); may be nil.
	Blobs BlobStore
	// RestoredIsLatest forgets the mark an import leaves (MarkRestored):
	// the operator knows that no peer holds events of this realm newer than
	// its store, and new events need not wait for a peer to show it.
	RestoredIsLatest bool
	// OwnTaken, when set, runs after this realm's own events were taken
	// from a peer (this node ran on an older copy of its store), before
	// new events are authored again: numbering kept outside the log
	// carries on after the numbers those events hold.
	OwnTaken func(context.Context) error
	// BlockedEvent, when set, is shown every event of a realm the operator
	// blocked that catch-up reads past what this node holds (blocked.go):
	// the realm's own, signed and linked, and never stored, served or
	// relayed here. An error says it is to be shown again: the reading
	// stops before it, for the next exchange.
	BlockedEvent func(context.Context, *protocol.Event, cid.Cid) error
	Logger       *slog.Logger
}

// BlobStore is what the catch-up protocol needs of the node's blobs.
type BlobStore interface {
	Blob(c []byte) ([]byte, bool)
}

// DefaultConfig returns a federation config with the defaults of `relay
// serve`.
func DefaultConfig() Config {
	return Config{SyncInterval: 10 * time.Second, MaxAhead: time.Minute}
}

// Service is a realm's federation: the libp2p host, the realm directory,
// peering, live propagation over GossipSub and catch-up.
type Service struct {
	cfg   Config
	log   *slog.Logger
	st    *store.Store
	host  host.Host
	ps    *pubsub.PubSub
	gater *gater
	bw    *metrics.BandwidthCounter
	dir   *Directory
	// dirTopic carries descriptors; set once at start.
	dirTopic *pubsub.Topic
	stats    *stats

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	peers       map[peer.ID]*peerState
	topics      map[protocol.Realm]*realmTopic
	blocked     map[protocol.Realm]Block
	quarantined map[protocol.Realm]Quarantine
	// acked is, by realm, the CIDs of the equivocation evidence held when
	// the operator lifted its quarantine: that evidence, passed on again by
	// peers, does not quarantine the realm again; new evidence does.
	acked map[protocol.Realm]map[string]bool
	// ownAlarms is what showed this realm's key signing elsewhere.
	ownAlarms []OwnChainAlarm
	own       ownHold                                // authoring held while this realm's chain is behind a peer's (own.go)
	strangers map[peer.ID]time.Time                  // when a refused stranger was last logged (strangerRefused)
	pending   map[protocol.Realm]map[uint64]gossiped // gossiped events beyond the held head, verified
	waiting   map[protocol.Realm]waitNote            // why a realm's next event is held (Realms)
	lanes     map[protocol.Realm]*lane
	pulling   map[protocol.Realm]bool
	peeked    map[protocol.Realm]protocol.Head // a blocked realm's events read up to here (blocked.go)
	gapTimers map[protocol.Realm]bool          // a gap check is scheduled
	aheadOf   map[protocol.Realm]aheadWait
	retrying  atomic.Bool // retryWaiting is running

	outbox chan []*store.StoredEvent

	forgeRange atomic.Pointer[func(protocol.Realm, uint64) [][]byte] // Misbehaver.ForgeRanges
}

// New starts the federation of the realm whose log st is: it listens, joins
// the realm's topics, dials the configured peers and serves catch-up.
func New(st *store.Store, cfg Config) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = DefaultConfig().SyncInterval
	}
	if cfg.MaxAhead <= 0 {
		cfg.MaxAhead = DefaultConfig().MaxAhead
	}
	if cfg.Identity == nil || cfg.Realm == "" {
		return nil, errors.New("federation: Config needs Realm and Identity")
	}
	listen, err := ParseListenAddrs(cfg.Listen)
	if err != nil {
		return nil, err
	}
	peers, err := ParsePeers(cfg.Peers)
	if err != nil {
		return nil, err
	}
	dir, err := openDirectory(st)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, log: cfg.Logger, st: st, dir: dir, stats: newStats(),
		peers: map[peer.ID]*peerState{}, topics: map[protocol.Realm]*realmTopic{},
		blocked: map[protocol.Realm]Block{}, quarantined: map[protocol.Realm]Quarantine{}, acked: map[protocol.Realm]map[string]bool{},
		strangers: map[peer.ID]time.Time{},
		pending:   map[protocol.Realm]map[uint64]gossiped{}, waiting: map[protocol.Realm]waitNote{}, lanes: map[protocol.Realm]*lane{}, pulling: map[protocol.Realm]bool{}, peeked: map[protocol.Realm]protocol.Head{}, gapTimers: map[protocol.Realm]bool{}, aheadOf: map[protocol.Realm]aheadWait{},
		outbox: make(chan []*store.StoredEvent, 4096)}
	s.gater = newGater(cfg.Identity.PeerID, cfg.Open)
	s.gater.strangers = s.strangerRefused
	s.bw = metrics.NewBandwidthCounter()
	if err := s.loadState(); err != nil {
		return nil, err
	}
	for _, ai := range peers {
		s.addPeer(ai, sourceFlag, time.Now())
	}
	// Before the host listens: nothing to undo when it fails.
	switch restored, err := hasLocal(st, keyRestored); {
	case err != nil:
		return nil, err
	case restored && cfg.RestoredIsLatest:
		if err := putLocal(context.Background(), st, keyRestored, nil); err != nil {
			return nil, err
		}
		s.log.Warn("federation: this realm was restored from an export; the operator says no peer holds newer events of it")
	case restored:
		s.holdRestored()
	case len(s.peers) > 0:
		s.holdOwn(0, startHold, "the first exchange of heads with a peer, which may hold this realm's chain beyond this node's copy")
	}
	s.host, err = libp2p.New(
		libp2p.Identity(cfg.Identity.PrivKey),
		libp2p.ListenAddrs(listen...),
		// Without SO_REUSEPORT a second node listening on a TCP port taken
		// is refused, rather than sharing the port and taking half the
		// connections meant for the first.
		libp2p.Transport(tcp.NewTCPTransport, tcp.DisableReuseport()),
		libp2p.Transport(quic.NewTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.ConnectionGater(s.gater),
		libp2p.BandwidthReporter(s.bw),
		libp2p.DisableRelay(),
		libp2p.UserAgent("relay/"+string(cfg.Realm)),
	)
	if err != nil {
		return nil, fmt.Errorf("federation: host: %w", err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := s.pinSelf(); err != nil {
		s.cancel()
		s.host.Close()
		return nil, err
	}
	if s.ps, err = newPubSub(s.ctx, s.host, &s.stats.gossip); err != nil {
		s.cancel()
		s.host.Close()
		return nil, err
	}
	s.host.SetStreamHandler(SyncProtocol, s.serveSync)
	s.host.Network().Notify(&network.NotifyBundle{
		ConnectedF:    func(_ network.Network, c network.Conn) { s.connected(c.RemotePeer()) },
		DisconnectedF: func(_ network.Network, c network.Conn) { s.disconnected(c.RemotePeer()) },
	})
	if err := s.joinDirectory(); err != nil {
		s.cancel()
		s.host.Close()
		return nil, fmt.Errorf("federation: directory topic: %w", err)
	}
	for _, e := range dir.Entries() {
		s.follow(e.Realm)
	}
	st.Watch(s.committed)
	// An event parked for a record it referred to, refused once that came:
	// its realm broke a rule of the log, as if refused on arrival.
	st.OnRefused(s.refusedParked)
	if err := s.refusedWhileAway(); err != nil {
		s.log.Warn("federation: parked events refused before start", "err", err)
	}
	s.wg.Add(2)
	go s.publishLoop()
	go s.dialLoop()
	return s, nil
}

// pinSelf signs the realm's descriptor with the addresses it listens on and
// pins its own name in the directory.
func (s *Service) pinSelf() error {
	desc := &protocol.Descriptor{Realm: string(s.cfg.Realm), Addrs: s.addrStrings(), At: time.Now().UnixMilli()}
	raw, err := protocol.SignDescriptor(desc, s.cfg.Identity.Signing)
	if err != nil {
		return err
	}
	if _, err := s.dir.Learn(s.ctx, raw); err != nil {
		return fmt.Errorf("federation: own realm: %w", err)
	}
	return nil
}

func (s *Service) addrStrings() []string {
	var out []string
	for _, a := range s.host.Addrs() {
		out = append(out, a.String())
	}
	return out
}

// Close stops the federation: no more dials, streams or gossip.
func (s *Service) Close() error {
	s.cancel()
	err := s.host.Close()
	s.wg.Wait()
	return err
}

// PeerID is the realm's peer ID.
func (s *Service) PeerID() peer.ID { return s.host.ID() }

// Addrs are the node's full p2p addresses, ending in /p2p/<peer id>.
func (s *Service) Addrs() []string {
	var out []string
	for _, a := range s.host.Addrs() {
		out = append(out, a.Encapsulate(ma.StringCast("/p2p/"+s.host.ID().String())).String())
	}
	return out
}

// Wire returns the bytes this node has received and sent to peers since it
// started, over every protocol. libp2p totals them once a second, so the
// last second's traffic may not show yet.
func (s *Service) Wire() (in, out int64) {
	t := s.bw.GetBandwidthTotals()
	return t.TotalIn, t.TotalOut
}

// WireInByProtocol returns the bytes this node has received from peers
// since it started, by protocol (GossipSub, catch-up, identify, …); totalled
// as Wire's are.
func (s *Service) WireInByProtocol() map[string]int64 {
	out := map[string]int64{}
	for p, st := range s.bw.GetBandwidthByProtocol() {
		out[string(p)] = st.TotalIn
	}
	return out
}

// Directory is the realm directory.
func (s *Service) Directory() *Directory { return s.dir }

// Descriptor returns the realm's own signed descriptor.
func (s *Service) Descriptor() (*protocol.Descriptor, []byte) {
	raws := s.dir.raws(s.cfg.Realm)
	d, _ := protocol.DecodeDescriptor(raws[0])
	return d, raws[0]
}

// committed is the store's watcher: the realm's own new events go out on its
// topic, and any event may fill a gap held in pending.
func (s *Service) committed(evs []*store.StoredEvent) {
	select {
	case s.outbox <- evs:
	default:
		// The publisher is far behind: catch-up will carry these.
		s.stats.dropped.Add(uint64(len(evs)))
	}
}

func (s *Service) publishLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case evs := <-s.outbox:
			own := s.ownEvents(nil, evs)
			// What committed while the last message was sent goes out
			// together: one message for several events under load.
			for more := true; more; {
				select {
				case evs := <-s.outbox:
					own = s.ownEvents(own, evs)
				default:
					more = false
				}
			}
			for _, run := range runs(own) {
				s.publish(run)
			}
		}
	}
}

// ownEvents appends the realm's own events of evs to own.
func (s *Service) ownEvents(own, evs []*store.StoredEvent) []*store.StoredEvent {
	for _, se := range evs {
		if se.Event.Realm == string(s.cfg.Realm) {
			own = append(own, se)
		}
	}
	return own
}
