package realm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"

	"relay/federation"
	"relay/protocol"
	"relay/realm/api"
	"relay/realm/corpus"
	"relay/realm/parley"
	"relay/realm/session"
	"relay/realm/web"
	"relay/store"
)

// Version is the node's version, set at build time with -ldflags.
var Version = "0.1.0-dev"

// Config is how a node is run. Start from DefaultConfig.
type Config struct {
	Realm    string   // realm name; empty: the one the data directory holds, else "local"
	DataDir  string   // key, operator secret and store live here
	HTTPAddr string   // listen address of the HTTP API
	P2PAddrs []string // libp2p listen multiaddrs; none: the node does not federate
	Peers    []string // peers to dial and admit (full multiaddrs ending in /p2p/<peer id>)
	// OpenFederation admits realms the operator did not name as peers.
	OpenFederation bool
	// SyncInterval is how often connected peers compare heads (anti-entropy);
	// 0: the federation default.
	SyncInterval time.Duration
	// MaxClockAhead is how far past this node's clock a peer's event may be
	// dated and still be taken at once; 0: the federation default.
	MaxClockAhead time.Duration
	// Clock dates this realm's events; nil: time.Now. Tests run a realm
	// whose clock is off with it.
	Clock func() time.Time
	// InMemory keeps the store in memory: for tests; nothing survives.
	InMemory bool
	// HumanName is the operator's line: the human is human:<HumanName>.
	// It is named when the realm is created ("" there: operator); later
	// it may only repeat that name ("" takes the realm's).
	HumanName string
	// RestoredIsLatest tells the federation of a realm restored from an
	// export that no peer holds newer events of it: its new events need not
	// wait for a peer to be compared first.
	RestoredIsLatest bool
	// MinFreeBytes is the free disk space under which the store refuses
	// writes: 0 means the store's default (64 MiB), negative none.
	MinFreeBytes int64
	// NewOperatorSecret gives the operator credential a new secret at
	// start, written to DATA/operator.token (the old secret stops
	// working): the way back when that file was lost.
	NewOperatorSecret bool
	// MaxBodyBytes bounds a request body; larger ones are payload_too_large.
	MaxBodyBytes int64
	// AllowedHosts, when set, are extra Host header values MCP accepts on a
	// loopback connection (a reverse proxy in front of the node); see the
	// SDK's DNS-rebinding protection.
	AllowedHosts []string
	// RateLimit is requests per minute per credential (and per address
	// without one), over every API and both MCP endpoints; 0 turns it off.
	RateLimit int
	// SearchCacheBytes bounds the decoded messages corpus search keeps in
	// memory; 0 means corpus.DefaultMessageCacheBytes, negative none.
	SearchCacheBytes int
	// Sessions is how long the human's browser sessions live.
	Sessions session.Config
	// TrustForwardedProto takes X-Forwarded-Proto: https from a reverse
	// proxy as the request having come over TLS, so session cookies are
	// Secure. Set it only behind a proxy that sets the header itself.
	TrustForwardedProto bool
	Logger              *slog.Logger
}

// DefaultConfig returns the defaults of `relay serve`.
func DefaultConfig() Config {
	return Config{
		DataDir:      "./data",
		HTTPAddr:     "127.0.0.1:8080",
		P2PAddrs:     []string{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"},
		MaxBodyBytes: 8 << 20, // an envelope with a 5 MB image, base64, and room
		RateLimit:    protocol.DefaultParleyLimits.RequestsPerMinute,
		Sessions:     session.DefaultConfig(),
	}
}

// Node is one running realm.
type Node struct {
	failLogged atomic.Int64 // when safe last logged the store's failure (unix ns)
	cfg        Config
	log        *slog.Logger
	realm      protocol.Realm
	id         *federation.Identity
	store      *store.Store
	auth       *Auth
	sessions   *session.Manager
	console    *web.Console
	reg        *api.Registry
	metrics    *metrics
	parley     *parley.Service
	corpus     *corpus.Service
	fed        *federation.Service // nil when the node does not federate
	// fedSet is fed once set, for the store's goroutines, which may ask
	// while Open sets it (parley's Refusing).
	fedSet   atomic.Pointer[federation.Service]
	stopBg   context.CancelFunc // ends the node's background work
	fedClose sync.Once
	limiter  *limiter
	limits   protocol.ParleyLimits
	handler  http.Handler
	started  time.Time
	listener net.Listener
	server   *http.Server

	// OperatorTokenFile is where the operator secret was written; empty when
	// it already existed before this start.
	OperatorTokenFile string
}

// realmFile pins a data directory to one realm name.
type realmFile struct {
	Realm  string `json:"realm"`
	PeerID string `json:"peer_id"`
	// InMemory marks a directory whose realm's chain lived in memory only:
	// gone, though peers may hold it, so no store on disk may start a new
	// one under its key.
	InMemory bool `json:"in_memory,omitempty"`
}

// Open prepares a node: it creates or loads the realm key, opens the store,
// rebuilds projections made by other projector versions (ctx stops that
// rebuild; it starts again at the next Open) and, on first start, creates
// the operator credential and writes its secret to DataDir/operator.token
// (mode 0600).
func Open(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	explicitHuman := cfg.HumanName != ""
	if !explicitHuman {
		cfg.HumanName = "operator" // a new realm's human, unless named
	} else if protocol.Slug(cfg.HumanName) == "" {
		return nil, fmt.Errorf("the human's name %q has no letter or digit to make a line of", cfg.HumanName)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultConfig().MaxBodyBytes
	}
	if cfg.Realm != "" {
		// Checked before the data directory is made: a refused start
		// leaves nothing behind.
		if _, err := protocol.ParseRealm(cfg.Realm); err != nil {
			return nil, fmt.Errorf("--realm: %w", err)
		}
	}
	if _, err := federation.ParseListenAddrs(cfg.P2PAddrs); err != nil {
		return nil, err
	}
	if _, err := federation.ParsePeers(cfg.Peers); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	if err := checkNoPartialImport(cfg.DataDir); err != nil {
		return nil, err
	}
	if cfg.InMemory {
		// A store in memory starts a new chain: under a key that already
		// signed one, peers would see a fork and quarantine the realm, and
		// the new operator secret would replace the one on disk.
		if _, err := os.Stat(filepath.Join(cfg.DataDir, "realm.key")); err == nil {
			return nil, fmt.Errorf("--in-memory needs a data directory of its own: %s already holds a realm's key, whose chain an in-memory store would fork (and whose operator secret it would replace)", cfg.DataDir)
		}
	}
	name, rf, err := pinRealm(cfg.DataDir, cfg.Realm)
	if err != nil {
		return nil, err
	}
	if rf.InMemory && !cfg.InMemory {
		return nil, fmt.Errorf("%s held realm %q in memory: that chain is gone, though peers may hold it, and a store here would start another under the same key, a fork peers quarantine; use a new data directory", cfg.DataDir, name)
	}
	if err := checkKeyKept(cfg.DataDir, name, rf); err != nil {
		return nil, err
	}
	if !cfg.InMemory {
		if err := checkStoreKept(cfg.DataDir, name); err != nil {
			return nil, err
		}
	}
	id, created, err := federation.LoadOrCreateIdentity(filepath.Join(cfg.DataDir, "realm.key"))
	if err != nil {
		return nil, err
	}
	if created {
		cfg.Logger.Info("created realm key", "realm", name, "peer_id", id.PeerID.String())
	}
	if rf.PeerID != "" && rf.PeerID != id.PeerID.String() {
		// Another realm's key: it would sign the realm's next events
		// after ones signed by its own, a chain no peer (nor an import)
		// verifies.
		return nil, fmt.Errorf("%s holds realm %q under peer ID %s, but realm.key is the key of peer ID %s: restore the realm's own realm.key; another key would sign its next events after ones signed by its own, a chain no peer takes", cfg.DataDir, name, rf.PeerID, id.PeerID)
	}
	if err := writeRealmFile(cfg.DataDir, realmFile{Realm: string(name), PeerID: id.PeerID.String(), InMemory: cfg.InMemory}); err != nil {
		return nil, err
	}
	scfg := store.DefaultConfig(filepath.Join(cfg.DataDir, "store"))
	scfg.InMemory = cfg.InMemory
	scfg.Logger = cfg.Logger
	scfg.Realm = name
	scfg.Key = id.Signing
	scfg.MinFreeBytes = cfg.MinFreeBytes
	if cfg.Clock != nil {
		scfg.Now = cfg.Clock
	}
	st, err := store.Open(scfg)
	if errors.Is(err, store.ErrOtherRealm) {
		return nil, fmt.Errorf("%w; %s names realm %q: put back the realm's own name", err, filepath.Join(cfg.DataDir, "realm.json"), name)
	}
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger, realm: name, id: id, store: st, started: time.Now()}
	n.metrics = newMetrics(n)
	n.limiter = newLimiter(cfg.RateLimit)
	n.limits = protocol.DefaultParleyLimits
	n.limits.RequestsPerMinute = cfg.RateLimit
	if n.corpus, err = corpus.New(st, corpus.Config{Realm: name, Logger: cfg.Logger, MessageCacheBytes: cfg.SearchCacheBytes}); err != nil {
		st.Close()
		return nil, err
	}
	n.parley = parley.New(st, parley.Config{Realm: name, Limits: n.limits, Logger: cfg.Logger,
		OnFeature: func(parley.Feature) { n.metrics.features.Inc() },
		FetchImage: func(ctx context.Context, c cid.Cid) ([]byte, error) {
			if n.fed == nil {
				return nil, federation.ErrNoBlob
			}
			return n.fed.FetchBlobAny(ctx, c)
		},
		Refusing: func(r protocol.Realm) bool { f := n.fedSet.Load(); return f != nil && f.Refusing(r) }})
	if n.auth, err = newAuth(name, st); err != nil {
		st.Close()
		return nil, err
	}
	// Projections made by other projector versions, or by a rebuild cut
	// short, are rebuilt before anything reads them.
	if _, err := st.EnsureProjections(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("projections: %w", err)
	}
	if err := n.ensureOperator(); err != nil {
		st.Close()
		return nil, err
	}
	// The human was named when the realm was created; its identity signs
	// its events and every peer knows it: it is not renamed.
	if p := n.auth.human(); p != nil {
		line := p.Identity.Line
		if explicitHuman && protocol.Slug(cfg.HumanName) != line {
			st.Close()
			return nil, fmt.Errorf("the realm's human is %s, named when the realm was created; --human %q cannot rename it (leave it out, or give %q)", p.Identity, cfg.HumanName, line)
		}
		cfg.HumanName, n.cfg.HumanName = line, line
	}
	if err := indexRequests(context.Background(), st); err != nil {
		st.Close()
		return nil, fmt.Errorf("indexing access requests: %w", err)
	}
	human := protocol.Identity{Prefix: protocol.HumanPrefix, Line: cfg.HumanName}.String()
	if err := n.parley.Bootstrap(context.Background(), human); err != nil {
		st.Close()
		return nil, fmt.Errorf("default board: %w", err)
	}
	// Replicated events reach the corpus streams like local ones.
	st.Watch(func([]*store.StoredEvent) { n.corpus.Notify() })
	if len(cfg.P2PAddrs) > 0 {
		fcfg := federation.DefaultConfig()
		fcfg.Realm, fcfg.Identity, fcfg.Logger = name, id, cfg.Logger
		fcfg.Listen, fcfg.Peers, fcfg.Open = cfg.P2PAddrs, cfg.Peers, cfg.OpenFederation
		fcfg.Blobs = n.parley
		fcfg.OwnTaken = n.parley.ResumeNumbering
		fcfg.BlockedEvent = n.parley.BlockedEvent
		fcfg.RestoredIsLatest = cfg.RestoredIsLatest
		if cfg.SyncInterval > 0 {
			fcfg.SyncInterval = cfg.SyncInterval
		}
		if cfg.MaxClockAhead > 0 {
			fcfg.MaxAhead = cfg.MaxClockAhead
		}
		if n.fed, err = federation.New(st, fcfg); err == nil {
			n.fedSet.Store(n.fed)
		}
		if err != nil {
			st.Close()
			return nil, err
		}
		n.metrics.reg.MustRegister(newFederationCollector(n.fed))
	}
	bg, stop := context.WithCancel(context.Background())
	n.stopBg = stop
	go n.parley.Run(bg)
	n.sessions = session.New(st, cfg.Sessions)
	if n.OperatorTokenFile != "" && cfg.NewOperatorSecret {
		// A secret replaced because it leaked: the console sessions
		// opened with it end too.
		if err := n.sessions.EndAll(context.Background()); err != nil {
			// The old secret may have leaked: its sessions must not live on.
			n.closeFederation()
			st.Close()
			return nil, fmt.Errorf("ending the console sessions opened with the old operator secret (the new one is in place; start again with --new-operator-secret to end them): %w", err)
		}
	}
	n.reg = api.NewRegistry()
	n.registerCore()
	n.registerFederation()
	n.parley.Register(n.reg)
	n.corpus.Register(n.reg)
	n.registerFeeds()
	n.console = web.New(web.Config{
		Realm: string(name), HumanID: human, Version: Version,
		Registry: n.reg, Sessions: n.sessions, Store: st,
		Human: n.auth.human, CheckSecret: n.auth.isHumanSecret,
		TrustForwardedProto: cfg.TrustForwardedProto, Logger: cfg.Logger, Refusal: n.safe,
	})
	n.handler = n.routes()
	return n, nil
}

// checkKeyKept refuses a data directory that held a realm and lost its
// key: a new key would sign the realm's next events after ones signed by
// the old, a chain no peer takes, and pin the new key over the old.
func checkKeyKept(dir string, name protocol.Realm, rf realmFile) error {
	if _, err := os.Stat(filepath.Join(dir, "realm.key")); !errors.Is(err, fs.ErrNotExist) {
		return nil // there, or unreadable: LoadOrCreateIdentity says so
	}
	held := rf.PeerID != ""
	if entries, err := os.ReadDir(filepath.Join(dir, "store")); err == nil && len(entries) > 0 {
		held = true
	}
	if !held {
		return nil
	}
	who := ""
	if rf.PeerID != "" {
		who = " (peer ID " + rf.PeerID + ")"
	}
	return fmt.Errorf("%s holds realm %q%s but not its key, realm.key: restore it from where it was kept; a new key would sign the realm's next events after ones signed by the old, a chain no peer takes", dir, name, who)
}

// checkStoreKept refuses a data directory that held a realm and lost its
// store: its operator secret was written only once the store held the
// operator credential, so a missing or empty store beside it was deleted
// or damaged. Started anew, the node would sign a new chain of the realm
// from seq 1, a fork of the one its peers hold, and replace the operator
// secret.
func checkStoreKept(dir string, name protocol.Realm) error {
	if _, err := os.Stat(filepath.Join(dir, "operator.token")); err != nil {
		return nil
	}
	if entries, err := os.ReadDir(filepath.Join(dir, "store")); err == nil && len(entries) > 0 {
		return nil // what it holds, store.Open and ensureOperator check
	}
	return storeLost(dir, name)
}

func storeLost(dir string, name protocol.Realm) error {
	return fmt.Errorf("%s held realm %q (its operator secret, operator.token, is there) but its store is missing or empty: "+
		"restore the store, or the realm from an export (relay import into a new directory); starting anew would sign a new chain of the realm, "+
		"a fork of the one its peers hold (to create a new realm, use an empty data directory)", dir, name)
}

// pinRealm returns the realm name of the data directory, recording it on
// first start; a different name later is refused, because the log, the key
// and every identity belong to the first.
func pinRealm(dir, want string) (protocol.Realm, realmFile, error) {
	var rf realmFile
	b, err := os.ReadFile(filepath.Join(dir, "realm.json"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", rf, err
	}
	if err == nil {
		if err := json.Unmarshal(b, &rf); err != nil {
			return "", rf, fmt.Errorf("realm.json: %w", err)
		}
		if want != "" && want != rf.Realm {
			return "", rf, fmt.Errorf("data directory %s belongs to realm %q, not %q", dir, rf.Realm, want)
		}
		name, err := protocol.ParseRealm(rf.Realm)
		return name, rf, err
	}
	if want == "" {
		want = "local"
	}
	name, err := protocol.ParseRealm(want)
	return name, rf, err
}

func writeRealmFile(dir string, rf realmFile) error {
	b, _ := json.MarshalIndent(rf, "", "  ")
	b = append(b, '\n')
	path := filepath.Join(dir, "realm.json")
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return nil // as it is: a node running on dir may be reading it
	}
	return store.WriteFile(path, b, 0o600)
}

// ensureOperator creates the human credential on first start.
func (n *Node) ensureOperator() error {
	ctx := context.Background()
	path := filepath.Join(n.cfg.DataDir, "operator.token")
	if n.auth.hasHuman() {
		if n.cfg.NewOperatorSecret {
			tok, err := n.auth.rotateHuman(ctx)
			if err != nil {
				return fmt.Errorf("operator credential: %w", err)
			}
			if err := store.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
				return fmt.Errorf("the operator credential has a new secret, but writing it to %s: %w; start again with --new-operator-secret", path, err)
			}
			n.OperatorTokenFile = path
			n.log.Warn("gave the operator credential a new secret; the old one no longer works", "secret_file", path)
			return nil
		}
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			n.log.Warn("the operator secret's file is missing; a start with --new-operator-secret writes a new secret there (the old one then stops working)", "secret_file", path)
		}
		return nil
	}
	if !n.cfg.InMemory {
		// The secret's file is written only once the store holds the
		// credential: with the file there, a store without it lost its data.
		if _, err := os.Stat(path); err == nil {
			return storeLost(n.cfg.DataDir, n.realm)
		}
	}
	tok, err := n.auth.Issue(ctx, n.cfg.HumanName, append(protocol.Rights(nil), protocol.AllRights...), true)
	if err != nil {
		return fmt.Errorf("operator credential: %w", err)
	}
	if err := store.WriteFile(path, []byte(tok.Token+"\n"), 0o600); err != nil {
		return fmt.Errorf("the operator credential was created, but writing its secret to %s: %w; start again with --new-operator-secret", path, err)
	}
	n.OperatorTokenFile = path
	n.log.Info("created operator credential", "identity", tok.Identity, "secret_file", path)
	return nil
}

// Realm is the node's realm name.
func (n *Node) Realm() protocol.Realm { return n.realm }

// PeerID is the realm key's libp2p peer ID.
func (n *Node) PeerID() string { return n.id.PeerID.String() }

// api.Registry is the node's operation registry.
func (n *Node) Registry() *api.Registry { return n.reg }

// Handler is the node's whole HTTP surface.
func (n *Node) Handler() http.Handler { return n.handler }

// Store is the node's store.
func (n *Node) Store() *store.Store { return n.store }

// Auth is the node's credential service.
func (n *Node) Auth() *Auth { return n.auth }

// Listen binds the HTTP address; Addr is known afterwards.
func (n *Node) Listen() error {
	ln, err := net.Listen("tcp", n.cfg.HTTPAddr)
	if err != nil {
		return err
	}
	n.listener = ln
	return nil
}

// URL is the node's base URL once it listens.
func (n *Node) URL() string {
	if n.listener == nil {
		return ""
	}
	a, ok := n.listener.Addr().(*net.TCPAddr)
	if !ok {
		return "http://" + n.listener.Addr().String()
	}
	if a.IP.IsUnspecified() { // listening on every address: loopback is one to visit
		return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Port))
	}
	return "http://" + a.String()
}

// Serve serves HTTP until ctx is done, then shuts down gracefully: stop
// accepting, answer the requests in flight and those already on their way
// over open connections (and so finish their durable writes), close the
// connections between requests, then close the store cleanly.
func (n *Node) Serve(ctx context.Context) error {
	if n.listener == nil {
		if err := n.Listen(); err != nil {
			return err
		}
	}
	drain := newDrainer()
	n.server = &http.Server{
		Handler:           drain.handler(n.handler),
		ConnState:         drain.connState,
		ConnContext:       drain.connContext,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
	}
	n.server.RegisterOnShutdown(n.corpus.CloseStreams) // streams never go idle by themselves
	n.server.RegisterOnShutdown(n.console.Close)
	ln := &onceCloseListener{Listener: n.listener}
	errc := make(chan error, 1)
	go func() { errc <- n.server.Serve(ln) }()
	select {
	case err := <-errc:
		n.closeFederation()
		n.store.Close()
		return err
	case <-ctx.Done():
	}
	n.log.Info("shutting down")
	drain.drain(ln, drainGrace)
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := n.server.Shutdown(sctx)
	n.closeFederation()
	if cerr := n.closeStore(storeCloseTimeout); err == nil {
		err = cerr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// storeCloseTimeout bounds how long a shutdown waits for the store to
// close. Closing writes Badger's memtables out; when the disk is gone (the
// data directory deleted, a volume lost), Badger retries that forever, and
// a node that waited would never exit.
var storeCloseTimeout = 30 * time.Second

// closeStore closes the store, or gives up on it after timeout with an
// error; the process may then exit with the store open, which loses
// nothing acknowledged: every acked write was synced to the store's
// write-ahead log first, and the next start replays it. After a timeout
// the store's Close is still running and holds the data directory's lock,
// so the node is done for: the caller exits.
func (n *Node) closeStore(timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- n.store.Close() }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		n.log.Error("the store did not close in time; exiting with it open (the next start replays its write-ahead log)", "after", timeout)
		return fmt.Errorf("store not closed after %s", timeout)
	}
}

// Close releases the node without serving (for nodes used in-process).
func (n *Node) Close() error {
	n.console.Close()
	if n.listener != nil && n.server == nil {
		n.listener.Close()
	}
	n.closeFederation()
	return n.store.Close()
}

// closeFederation hangs up on every peer before the store closes.
func (n *Node) closeFederation() {
	n.fedClose.Do(func() {
		n.stopBg()
		if n.fed != nil {
			if err := n.fed.Close(); err != nil {
				n.log.Warn("federation close", "err", err)
			}
		}
	})
}

// Federation is the node's federation, nil when it does not federate.
func (n *Node) Federation() *federation.Service { return n.fed }
