package store

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/ipfs/go-cid"

	"relay/protocol"
)

// SchemaVersion is the layout this binary writes; Open refuses a store with a
// newer one, and moves an older one to it.
//
//  1. The first layout.
//  2. Durability from the store's own write-ahead log (a binary of layout 1
//     would ignore it after a crash), and corpus records some of which are
//     binary or held in their change envelope. Every record of layout 1 is
//     still read, so opening a store of layout 1 only marks it 2; older
//     binaries then refuse it instead of misreading it.
//  3. Events stored by realm and seq, with the CID and arrival order as
//     indexes of their place, so that a range of a chain is one scan.
//     Open marks an older store 3, then moves its events (migrate.go),
//     finishing at the next Open a move that a crash cut short.
const SchemaVersion = 3

// Config configures a Store. Start from DefaultConfig.
type Config struct {
	Dir      string             // Badger directory; ignored when InMemory
	InMemory bool               // for tests: Badger in-memory mode (durability not applicable)
	MaxBatch int                // ops per transaction, default 256
	Logger   *slog.Logger       // default slog.Default()
	Realm    protocol.Realm     // the local realm: Submit authors its events
	Key      ed25519.PrivateKey // the local realm's key: Submit signs with it
	Now      func() time.Time   // default time.Now; used for Event.At (Unix ms)
	// MinFreeBytes is the free space on the store's disk under which
	// writes are refused (ErrDiskFull; disk.go): 0 means
	// DefaultMinFreeBytes, negative does not watch.
	MinFreeBytes int64
}

// DefaultConfig returns the configuration of a durable store in dir.
func DefaultConfig(dir string) Config {
	return Config{Dir: dir, MaxBatch: 256, Logger: slog.Default(), Now: time.Now}
}

// StoredEvent is an event as held by this node.
type StoredEvent struct {
	Event    *protocol.Event
	CID      cid.Cid
	Raw      []byte // canonical signed encoding
	Sequence uint64 // the node's arrival-order sequence (corpus `sequence`), dense here but consumers must allow gaps
}

// Projector updates projections for one event inside the append transaction.
type Projector interface {
	Apply(tx *Tx, ev *StoredEvent) error
	// Prefixes returns the key prefixes this projector owns; Rebuild deletes
	// them before replaying. Each must start with "p/".
	Prefixes() [][]byte
}

// State is what health reports of the store.
type State struct {
	Status        string // "ok", "rebuild-needed", "rebuilding", "failed", "closed"
	Sequence      uint64
	Events        uint64
	Realms        int
	SchemaVersion int
	SyncWrites    bool
	Compression   string
	InMemory      bool
	LSMBytes      int64
	VLogBytes     int64
}

// Store is the event log, its projections and the local-only tables, in one
// Badger database. Ops run on the committer goroutine, which hands batches to
// the writer goroutine, the only one that commits (doc.go).
type Store struct {
	cfg  Config
	log  *slog.Logger
	db   *badger.DB
	opts badger.Options
	wal  *wal // nil in memory
	// walReplayed is how many records Open replayed, for tests.
	walReplayed int
	// checkpoints runs the write-ahead log's background checkpoints.
	checkpoints sync.WaitGroup
	ckRunning   atomic.Bool

	ops        chan *op
	loopDone   chan struct{}
	stop       chan struct{} // closed when Close begins; aborts a Rebuild
	c          *committer
	handoff    chan *batch // committer → writer; unbuffered: one batch commits while the next fills
	writerDone chan struct{}
	batching   *batching                // the writer's wait for a batch worth a sync
	nextSnap   atomic.Pointer[snapshot] // writer → committer: the newest snapshot not yet taken
	failed     atomic.Pointer[error]    // set once, by the writer, when a commit fails
	hold       authorHold               // HoldAuthoring
	diskLow    atomic.Bool              // writes refused for want of disk space (disk.go)
	diskFree   atomic.Int64             // the free bytes last read
	diskDone   chan struct{}

	mu           sync.Mutex // guards closed, projectors, watchers; inflight.Add happens under it
	closed       bool
	inflight     sync.WaitGroup // calls that may still touch db or send on ops
	projectors   []Projector
	watchers     []func([]*StoredEvent)
	refusedHooks []func(protocol.Realm, uint64, string)
	closeOnce    sync.Once
	closeErr     error

	headsMu sync.RWMutex
	heads   map[string]protocol.Head // committed heads; written only by the writer
	seq     atomic.Uint64            // committed node sequence; written only by the writer

	// Parking (park.go). parkGen counts the events ops parked since Open
	// (1 at Open when the store holds some), parkedNone is the count at
	// which a pass last found none: equal, nothing is parked.
	parkGen       atomic.Uint64
	parkedNone    atomic.Uint64
	projectorsSet atomic.Bool   // EnsureProjections ran: passes may project
	unparkWake    chan struct{} // buffered 1: a pass is due
	unparkDone    chan struct{}
	unparkMu      sync.Mutex // one pass at a time
	// unparkFaults is the fault last met by each parked event, by its
	// parking number (under unparkMu): a fault that repeats is logged once
	// at warning level, and the event is tried again after a growing wait.
	unparkFaults  map[uint64]unparkFault
	panicsMu      sync.Mutex
	panicsNoted   map[string]struct{} // panics of retried ops logged with their stack
	waitingAtOpen map[string]int      // x/pk/ by realm, for the committer's count
	parkedN       map[string]int      // x/pk/ by realm, as committed (under headsMu)

	rebuildNeeded atomic.Bool
	rebuilding    atomic.Bool
	commits       atomic.Uint64 // committed Badger transactions, for tests and metrics

	// beforeCommit, set by tests before the first op, runs on the writer
	// before each commit; an error stands in for the commit's.
	beforeCommit func() error
}

// Open opens (creating if needed) the store described by cfg, checks its
// schema version and loads the heads and the node sequence.
func Open(cfg Config) (*Store, error) {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Realm != "" {
		if _, err := protocol.ParseRealm(string(cfg.Realm)); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	if cfg.Key != nil && len(cfg.Key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("store: key has %d bytes", len(cfg.Key))
	}

	db, err := openBadger(cfg)
	if err != nil {
		return nil, err
	}
	var w *wal
	walReplayed := 0
	if !cfg.InMemory {
		var replayed int
		if w, replayed, err = openWAL(db, cfg.Dir, cfg.Logger); err != nil {
			db.Close()
			return nil, err
		}
		if replayed > 0 {
			cfg.Logger.Info("store: replayed the write-ahead log", "records", replayed)
		}
		walReplayed = replayed
	}
	s := &Store{
		wal:         w,
		walReplayed: walReplayed,
		cfg:         cfg,
		log:         cfg.Logger,
		db:          db,
		opts:        db.Opts(),
		ops:         make(chan *op, 4*cfg.MaxBatch),
		loopDone:    make(chan struct{}),
		stop:        make(chan struct{}),
		handoff:     make(chan *batch),
		writerDone:  make(chan struct{}),
		batching:    newBatching(),
		heads:       make(map[string]protocol.Head),
		unparkWake:  make(chan struct{}, 1),
		unparkDone:  make(chan struct{}),
		diskDone:    make(chan struct{}),
	}
	err = s.load()
	if err == nil {
		err = s.checkOwnChain()
	}
	if err != nil {
		s.closeWAL()
		db.Close()
		return nil, err
	}
	s.c = newCommitter(s)
	// The disk is first read diskPoll after Open, not now: a node whose
	// disk is nearly full still starts (its start-up writes are few) and
	// serves reads, refusing writes from then on.
	go s.writeLoop()
	go s.commitLoop()
	go s.unparkLoop()
	go s.watchDisk()
	return s, nil
}

// openBadger opens the Badger database cfg describes.
func openBadger(cfg Config) (*badger.DB, error) {
	var opts badger.Options
	if cfg.InMemory {
		opts = badger.DefaultOptions("").WithInMemory(true)
	} else {
		if cfg.Dir == "" {
			return nil, errors.New("store: no directory")
		}
		if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		if err := checkFiles(cfg.Dir); err != nil {
			return nil, err
		}
		opts = badger.DefaultOptions(cfg.Dir)
	}
	// Durability comes from the store's own write-ahead log (wal.go), so
	// Badger need not sync its own log on every commit; the committer is
	// the only writer, so Badger's conflict detection would be wasted work.
	//
	// Level 0 compacts at 16 tables rather than 5: events are keyed by CID
	// and tokens are random, so every level-0 table spans the whole key
	// space and each compaction into the base level rewrites nearly all of
	// it. At 5 tables that rewrite came every 320 MB written and stalled
	// appends to a tenth for seconds; at 16 it comes a third as often.
	//
	// The base level is 256 MB rather than 10 MB, in tables of 16 MB rather
	// than 2 MB: fewer levels, so each byte is rewritten fewer times on its
	// way down, in fewer, larger tables. Over 90 s of corpus appends, which
	// compactions bound, that sustained 2,770 and 3,175 appends/s against
	// 2,335 and 2,407 (docs/BENCHMARKS.md). Memtables of 128 MB rather than
	// 64 MB make half as many level-0 tables to compact: 3,592 and 3,442
	// against 3,098 and 2,543.
	//
	// Each block of a table is checked against its checksum when it is read
	// from the file (once; then it is cached): a damaged table is an error,
	// never data served as if it were whole.
	opts = opts.WithSyncWrites(false).
		WithNumLevelZeroTables(16).
		WithNumLevelZeroTablesStall(32).
		WithBaseLevelSize(256 << 20).
		WithBaseTableSize(16 << 20).
		WithMemTableSize(128 << 20).
		WithDetectConflicts(false).
		WithChecksumVerificationMode(options.OnBlockRead).
		WithLogger(badgerLogger{cfg.Logger.With("component", "badger")})
	db, err := badger.Open(opts)
	if err != nil {
		// Badger flattens the flock error into text, so its message is
		// all there is to tell a held lock from damage.
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%w: %s", ErrLocked, cfg.Dir)
		}
		return nil, fmt.Errorf("store: open: %w", err)
	}
	return db, nil
}

// restoreAdvice ends the refusal of a store that lost or damaged files.
const restoreAdvice = "restore the data directory from a backup or an export (relay import)"

// checkFiles refuses, before Badger opens dir, a store whose files Badger
// would take for an empty store (checkManifest) or crash on (checkTables).
func checkFiles(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := checkManifest(dir, ents); err != nil {
		return err
	}
	return checkTables(dir, ents)
}

// ErrNoManifest is returned by Open for a directory that holds a store's
// files but not Badger's MANIFEST, which lists its tables: Badger would
// start an empty one over them, and the node a new chain of its realm.
var ErrNoManifest = errors.New("store: Badger's MANIFEST is missing")

// checkManifest refuses a store directory whose MANIFEST is gone while the
// files it described are not: tables, value logs, memtable logs, the key
// registry, or write-ahead segments. Badger writes its MANIFEST before any
// of them, so only damage leaves them without one.
func checkManifest(dir string, ents []os.DirEntry) error {
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); !errors.Is(err, fs.ErrNotExist) {
		return nil // there, or unreadable: Badger says so
	}
	var held []string
	for _, e := range ents {
		switch n := e.Name(); {
		case strings.HasSuffix(n, ".sst"), strings.HasSuffix(n, ".vlog"), strings.HasSuffix(n, ".mem"), n == "KEYREGISTRY":
			held = append(held, n)
		}
	}
	if segs, err := os.ReadDir(filepath.Join(dir, walDirName)); err == nil {
		for _, e := range segs {
			if strings.HasSuffix(e.Name(), walExt) {
				held = append(held, filepath.Join(walDirName, e.Name()))
			}
		}
	}
	if len(held) == 0 {
		return nil
	}
	if len(held) > 4 {
		held = append(held[:4], fmt.Sprintf("%d more", len(held)-4))
	}
	return fmt.Errorf("%w from %s, which holds %s: the store cannot be read without it, and is left as it is; %s",
		ErrNoManifest, dir, strings.Join(held, ", "), restoreAdvice)
}

// ErrDamagedTable is returned by Open for a store holding a table whose
// footer does not fit in its file (cut short, or overwritten at its end).
var ErrDamagedTable = errors.New("store: a table is damaged")

// checkTables reads the footer of every table in dir, as Badger does when
// it opens one: the last 4 bytes give the length of the index's checksum,
// the 4 before that checksum the length of the index. Badger reads what
// they point at without checking that it lies in the file, and a table cut
// short crashes it, on a goroutine of its own where the panic cannot be
// recovered. Badger itself verifies the index against its checksum.
func checkTables(dir string, ents []os.DirEntry) error {
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".sst") {
			continue
		}
		if err := checkTableFooter(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("%w: %s %v; the store is left as it is: %s", ErrDamagedTable, e.Name(), err, restoreAdvice)
		}
	}
	return nil
}

func checkTableFooter(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	var b [4]byte
	u32At := func(off int64) (int64, error) {
		if off < 0 {
			return 0, errors.New("is shorter than its footer")
		}
		if _, err := f.ReadAt(b[:], off); err != nil {
			return 0, err
		}
		return int64(binary.BigEndian.Uint32(b[:])), nil
	}
	sumLen, err := u32At(size - 4)
	if err != nil {
		return err
	}
	indexLenAt := size - 4 - sumLen - 4
	indexLen, err := u32At(indexLenAt)
	if err != nil {
		return err
	}
	if indexLen > indexLenAt {
		return fmt.Errorf("has an index of %d bytes where %d are left", indexLen, indexLenAt)
	}
	return nil
}

// load sets or checks the schema version and reads the heads and sequence.
func (s *Store) load() error {
	var (
		version uint64
		empty   bool
	)
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keySchema)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			it := txn.NewIterator(badger.IteratorOptions{})
			it.Rewind()
			empty = !it.Valid()
			it.Close()
			if !empty {
				// A relay store writes its version first of all: without it,
				// either the data is another program's, or the store lost
				// its oldest writes (Badger's newest files, .mem, removed
				// before they were flushed).
				return errors.New("store: directory holds data but no schema version: not a relay store, or one that lost files; " + restoreAdvice)
			}
			return nil
		case err != nil:
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		version, err = decodeU64(v)
		return err
	})
	if err != nil {
		return err
	}
	if version > SchemaVersion {
		return fmt.Errorf("store: schema version %d is newer than this binary's %d", version, SchemaVersion)
	}
	// The new version goes first, so that an older binary refuses a store
	// whose move was cut short; a later Open finishes it.
	if version < SchemaVersion {
		err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(keySchema, u64(SchemaVersion)) })
		if err == nil {
			err = s.syncDirect()
		}
		if err != nil {
			return err
		}
	}
	if !empty && (version < 3 || s.legacyEventsLeft()) {
		moved, err := s.migrateEvents()
		if err != nil {
			return err
		}
		s.log.Info("store: moved the events to their layout by realm and seq", "events", moved, "from_schema", version)
	}
	return s.View(func(tx *Tx) error {
		switch v, err := tx.Get(keySequence); {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		default:
			n, err := decodeU64(v)
			if err != nil {
				return err
			}
			s.seq.Store(n)
		}
		// The last e/n/ key was written in the same transaction as m/seq;
		// disagreement means the store is damaged, not merely interrupted.
		var last uint64
		err := tx.Iterate(prefixSequence, true, func(k, _ []byte) error {
			last, _ = decodeU64(k[len(prefixSequence):])
			return ErrStop
		})
		if err != nil {
			return err
		}
		if last != s.seq.Load() {
			return fmt.Errorf("store: sequence %d but last event at %d", s.seq.Load(), last)
		}
		if _, err := tx.Get(keyRebuilding); err == nil {
			s.rebuildNeeded.Store(true)
			s.log.Warn("store: an interrupted rebuild left projections incomplete; run Rebuild")
		}
		s.waitingAtOpen = map[string]int{}
		err = tx.Iterate(prefixParked, false, func(k, v []byte) error {
			p, err := decodeParked(k, v)
			if err != nil {
				return err
			}
			s.parkGen.Store(1)
			s.waitingAtOpen[string(p.Realm)]++
			return nil
		})
		if err != nil {
			return err
		}
		s.parkedN = maps.Clone(s.waitingAtOpen)
		return tx.Iterate(prefixHead, false, func(k, v []byte) error {
			h, err := decodeHead(v)
			if err != nil {
				return err
			}
			s.heads[string(k[len(prefixHead):])] = h
			return nil
		})
	})
}

// checkOwnChain refuses a store whose log holds another realm's chain
// signed with the local realm's key: the directory was that realm's, and
// its name changed (realm.json edited, or --realm and the file disagreeing
// some other way). Authoring on would sign a second chain with one key,
// from seq 1, and peers would take the key for two realms. One event of
// each realm held is verified, the head's.
func (s *Store) checkOwnChain() error {
	if s.cfg.Realm == "" || s.cfg.Key == nil {
		return nil
	}
	pub := s.cfg.Key.Public().(ed25519.PublicKey)
	for realm, h := range s.heads {
		if protocol.Realm(realm) == s.cfg.Realm || h.Seq == 0 {
			continue
		}
		se, err := s.EventAt(protocol.Realm(realm), h.Seq)
		if err != nil {
			return fmt.Errorf("store: reading realm %q's head: %w", realm, err)
		}
		if se.Event.Verify(pub) == nil {
			return fmt.Errorf("%w: it holds realm %q's events, signed with this key, and is opened as realm %q", ErrOtherRealm, realm, s.cfg.Realm)
		}
	}
	return nil
}

// Versioned is a projector that names what it derives. A projector whose
// records change meaning (a new index, a changed rule) returns a new
// version, so that stores projected by the old code are rebuilt; one
// without the method is named by its Go type.
type Versioned interface {
	ProjectionVersion() string
}

// Register adds a projector. Call it before the first Submit, Ingest or
// Rebuild; a prefix outside p/ is a programming error and panics, because
// Rebuild deletes what projectors own.
func (s *Store) Register(p Projector) {
	for _, pre := range p.Prefixes() {
		if !bytes.HasPrefix(pre, prefixProjection) {
			panic(fmt.Sprintf("store: projector %T owns prefix %q outside p/", p, pre))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.projectors = append(s.projectors, p)
}

// Watch registers fn to be called with the events of every committed batch,
// in log order, once they are durable and their callers acked. fn runs on
// the writer goroutine: it must return at once (hand the events on).
func (s *Store) Watch(fn func([]*StoredEvent)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers = append(s.watchers, fn)
}

// OnRefused registers fn to be told of a parked event that a projector
// refused once its records arrived (park.go): its realm broke a rule of the
// log. fn runs on the goroutine that tries parked events again.
func (s *Store) OnRefused(fn func(realm protocol.Realm, seq uint64, why string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusedHooks = append(s.refusedHooks, fn)
}

func (s *Store) watcherList() []func([]*StoredEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watchers
}

func (s *Store) projectorList() []Projector {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.projectors)
}

// enter admits a call unless Close has begun; leave must follow.
func (s *Store) enter() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.inflight.Add(1)
	return nil
}

func (s *Store) leave() { s.inflight.Done() }

// Close stops accepting calls (ErrClosed), lets the committer run every
// queued op and the writer commit them, and closes Badger. A running Rebuild
// is aborted and leaves the store marked rebuild-needed. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
		s.inflight.Wait() // no one sends on ops any more
		close(s.ops)
		<-s.loopDone
		<-s.unparkDone
		<-s.diskDone
		s.checkpoints.Wait()
		if s.wal != nil && s.failure() == nil {
			s.closeErr = s.wal.checkpointAll()
		}
		if err := s.db.Close(); s.closeErr == nil {
			s.closeErr = err
		}
		s.closeWAL()
	})
	return s.closeErr
}

// View runs fn on a consistent read-only snapshot of committed state. It does
// not see ops still in a batch.
func (s *Store) View(fn func(tx *Tx) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	return s.view(fn)
}

// view is View for the committer, which must read while Close waits for it.
func (s *Store) view(fn func(tx *Tx) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		return fn(&Tx{s: s, txn: txn, readOnly: true})
	})
}

// EventByCID returns the event with CID c, or ErrNotFound.
func (s *Store) EventByCID(c cid.Cid) (*StoredEvent, error) {
	var se *StoredEvent
	err := s.View(func(tx *Tx) error {
		var err error
		se, err = tx.eventByCID(c)
		return err
	})
	return se, err
}

func (tx *Tx) eventByCID(c cid.Cid) (*StoredEvent, error) {
	place, err := tx.Get(cidKey(c))
	if err != nil {
		return nil, err
	}
	se, err := tx.eventAt(placeKey(place))
	if err != nil {
		return nil, fmt.Errorf("store: %s indexed but unreadable: %w", c, err)
	}
	if !se.CID.Equals(c) {
		return nil, fmt.Errorf("store: %s indexed at the place of %s", c, se.CID)
	}
	return se, nil
}

// heldEvent is the record of an event held below a realm's head, and its CID.
type heldEvent struct{ cid, record []byte }

// heldAt reads the realm's event at seq, which must be held.
func (tx *Tx) heldAt(realm string, seq uint64) (heldEvent, error) {
	v, err := tx.Get(eventKey(realm, seq))
	if err != nil {
		return heldEvent{}, fmt.Errorf("store: %s seq %d below head but missing: %w", realm, seq, err)
	}
	_, c, _, err := splitEventRecord(v)
	if err != nil {
		return heldEvent{}, fmt.Errorf("store: %s seq %d: %w", realm, seq, err)
	}
	return heldEvent{c, v}, nil
}

// eventAt reads the event record under key.
func (tx *Tx) eventAt(key []byte) (*StoredEvent, error) {
	v, err := tx.Get(key)
	if err != nil {
		return nil, err
	}
	return decodeEventRecord(v)
}

// EventAt returns the realm's event at seq, or ErrNotFound.
func (s *Store) EventAt(realm protocol.Realm, seq uint64) (*StoredEvent, error) {
	var se *StoredEvent
	err := s.View(func(tx *Tx) error {
		var err error
		se, err = tx.eventAt(eventKey(string(realm), seq))
		return err
	})
	return se, err
}

// Range returns the realm's events with seq >= from, ascending, at most
// limit of them (limit <= 0: all).
func (s *Store) Range(realm protocol.Realm, from uint64, limit int) ([]*StoredEvent, error) {
	var out []*StoredEvent
	err := s.View(func(tx *Tx) error {
		return eachNumbered(tx, realmSeqPrefix(string(realm)), from, limit, func(v []byte) error {
			se, err := decodeEventRecord(v)
			if err == nil {
				out = append(out, se)
			}
			return err
		})
	})
	return out, err
}

// RangeRaw is Range for a caller that only passes the events on (catch-up
// serving a peer): their canonical signed encodings, in seq order, not
// decoded; one scan of the realm's chain. A realm's chain is dense, so the
// i-th is at seq from+i.
func (s *Store) RangeRaw(realm protocol.Realm, from uint64, limit int) ([][]byte, error) {
	var out [][]byte
	err := s.View(func(tx *Tx) error {
		return eachNumbered(tx, realmSeqPrefix(string(realm)), from, limit, func(v []byte) error {
			_, _, raw, err := splitEventRecord(v)
			if err == nil {
				out = append(out, raw)
			}
			return err
		})
	})
	return out, err
}

// Since returns the events with node Sequence > after, ascending, at most
// limit of them (limit <= 0: all).
func (s *Store) Since(after uint64, limit int) ([]*StoredEvent, error) {
	if after == ^uint64(0) {
		return nil, nil
	}
	return s.arrived(true, after+1, limit)
}

// arrived reads the events stored at node sequence from on, at most limit of
// them, through the arrival-order index.
func (s *Store) arrived(enter bool, from uint64, limit int) ([]*StoredEvent, error) {
	var out []*StoredEvent
	view := s.view
	if enter {
		view = s.View
	}
	err := view(func(tx *Tx) error {
		return eachNumbered(tx, prefixSequence, from, limit, func(place []byte) error {
			se, err := tx.eventAt(placeKey(place))
			if err == nil {
				out = append(out, se)
			}
			return err
		})
	})
	return out, err
}

// eachNumbered calls fn with a copy of the value of each entry of an index of
// 8-byte big-endian numbers under prefix, from the number from on, at most
// limit of them (limit <= 0: all). Iterate has no seek, so this uses Badger
// directly.
func eachNumbered(tx *Tx, prefix []byte, from uint64, limit int, fn func(v []byte) error) error {
	it := tx.txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 64})
	defer it.Close()
	n := 0
	for it.Seek(join(prefix, u64(from))); it.ValidForPrefix(prefix) && (limit <= 0 || n < limit); it.Next() {
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			return err
		}
		if err := fn(v); err != nil {
			return err
		}
		n++
	}
	return nil
}

// Heads returns the newest committed event of every realm held.
func (s *Store) Heads() (map[protocol.Realm]protocol.Head, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	s.headsMu.RLock()
	defer s.headsMu.RUnlock()
	out := make(map[protocol.Realm]protocol.Head, len(s.heads))
	for r, h := range s.heads {
		out[protocol.Realm(r)] = h
	}
	return out, nil
}

// Sequence returns the last node sequence assigned by a committed
// transaction.
func (s *Store) Sequence() uint64 { return s.seq.Load() }

// Evidence is one of two different events a realm signed at the same seq.
type Evidence struct {
	Realm protocol.Realm
	Seq   uint64
	CID   cid.Cid
	Raw   []byte
}

// Equivocations lists the evidence Ingest recorded, by realm and seq.
func (s *Store) Equivocations() ([]Evidence, error) {
	var out []Evidence
	err := s.View(func(tx *Tx) error {
		return tx.Iterate(prefixEquivocation, false, func(k, v []byte) error {
			rest := k[len(prefixEquivocation):]
			i := bytes.IndexByte(rest, 0)
			if i < 0 || len(rest) < i+9 {
				return fmt.Errorf("store: corrupt evidence key %q", k)
			}
			c, err := cid.Cast(rest[i+9:])
			if err != nil {
				return fmt.Errorf("store: corrupt evidence key: %w", err)
			}
			seq, _ := decodeU64(rest[i+1 : i+9])
			out = append(out, Evidence{Realm: protocol.Realm(rest[:i]), Seq: seq, CID: c, Raw: v})
			return nil
		})
	})
	return out, err
}

// State reports the store's health.
func (s *Store) State() State {
	st := State{
		Status:        "ok",
		Sequence:      s.seq.Load(),
		SchemaVersion: SchemaVersion,
		SyncWrites:    s.wal != nil,
		Compression:   compressionName(s.opts.Compression),
		InMemory:      s.opts.InMemory,
	}
	s.headsMu.RLock()
	for _, h := range s.heads {
		st.Events += h.Seq // chains are dense, so a head's seq counts its events
	}
	st.Realms = len(s.heads)
	s.headsMu.RUnlock()
	switch {
	case s.enter() != nil:
		st.Status = "closed"
		return st
	case s.failure() != nil:
		st.Status = "failed"
	case s.rebuilding.Load():
		st.Status = "rebuilding"
	case s.rebuildNeeded.Load():
		st.Status = "rebuild-needed"
	}
	st.LSMBytes, st.VLogBytes = s.db.Size()
	s.leave()
	return st
}

func compressionName(c options.CompressionType) string {
	switch c {
	case options.None:
		return "none"
	case options.Snappy:
		return "snappy"
	case options.ZSTD:
		return "zstd"
	}
	return fmt.Sprintf("unknown(%d)", c)
}

// badgerLogger passes Badger's warnings and errors to slog and drops its
// chatty info and debug lines.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error(strings.TrimSpace(fmt.Sprintf(f, a...)))
}

func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn(strings.TrimSpace(fmt.Sprintf(f, a...)))
}

func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}
