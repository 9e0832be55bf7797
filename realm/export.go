package realm

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ipfs/go-cid"

	"relay/federation"
	"relay/protocol"
	"relay/realm/backup"
	"relay/realm/corpus"
	"relay/realm/parley"
	"relay/store"
)

// What an export holds and what it leaves out: the event log (every
// realm's chain the store holds) and the blobs its events name, which is
// everything replicated and everything the projections are rebuilt from.
// Local-only state (tokens, token requests, sessions, OAuth clients and
// grants, corpus registrations, operation tokens, inbox cursors, feature
// requests) stays out: it is neither verifiable nor, for its secrets,
// something a backup file should spread.

// importPartial is the directory an import builds the node in, inside the
// data directory. Its removal is the import's commit point: Open refuses a
// data directory that still has one.
const importPartial = "import.partial"

// importMoves are what an import moves from importPartial into the data
// directory, in this order, before it removes importPartial: what an
// interrupted import can leave beside it.
var importMoves = []string{importPartial, "store", "realm.key", "realm.json"}

// KeySource returns the public key that verifies a realm's events, false
// when it is not known. The realm directory (federation) will be one; until
// then a node knows only its own key.
type KeySource func(protocol.Realm) (ed25519.PublicKey, bool)

// ExportConfig says what to export and where.
type ExportConfig struct {
	DataDir  string    // a stopped node's data directory
	Out      io.Writer // the export file
	Compress bool      // gzip the file
	// WithKey includes the realm's private key, so that an import can
	// continue the realm; the file is then as secret as realm.key.
	WithKey bool
	// Keys gives the keys of other realms whose events the store holds.
	// A node holds none while federation is not active; an export of a
	// realm without a key fails.
	Keys     KeySource
	Progress func(backup.Progress) // called every few thousand events and after each blob
	Logger   *slog.Logger
	Now      func() time.Time
}

// ExportResult is what an export wrote.
type ExportResult struct {
	Realm  protocol.Realm
	Events uint64
	Blobs  uint64
	Realms int
	Bytes  int64
	Heads  map[protocol.Realm]protocol.Head
}

// Export writes the event log of the stopped node in cfg.DataDir, and the
// blobs its events name, to cfg.Out, from one consistent snapshot.
func Export(ctx context.Context, cfg ExportConfig) (ExportResult, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := checkNoPartialImport(cfg.DataDir); err != nil {
		return ExportResult{}, err
	}
	name, err := readRealmFile(cfg.DataDir)
	if err != nil {
		return ExportResult{}, err
	}
	id, err := federation.LoadIdentity(filepath.Join(cfg.DataDir, "realm.key"))
	if err != nil {
		return ExportResult{}, err
	}
	dir := filepath.Join(cfg.DataDir, "store")
	if _, err := os.Stat(dir); err != nil {
		return ExportResult{}, fmt.Errorf("%s holds no store: %w", cfg.DataDir, err)
	}
	scfg := store.DefaultConfig(dir)
	scfg.Logger = cfg.Logger
	st, err := store.Open(scfg)
	if errors.Is(err, store.ErrLocked) {
		return ExportResult{}, fmt.Errorf("%w: data directory %s is in use; stop the node first, export reads a stopped node's store", ErrNodeRunning, cfg.DataDir)
	}
	if err != nil {
		return ExportResult{}, err
	}
	defer st.Close()
	// The realm directory pins the keys of the realms this node holds; their
	// descriptors go with the keys, so that an import pins them too.
	pinned, err := federation.PinnedDescriptors(st)
	if err != nil {
		return ExportResult{}, err
	}
	if cfg.Keys == nil {
		cfg.Keys = func(r protocol.Realm) (ed25519.PublicKey, bool) {
			p, ok := pinned[r]
			return p.Key, ok
		}
	}

	res := ExportResult{Realm: name}
	err = st.View(func(tx *store.Tx) error {
		heads, err := tx.Heads()
		if err != nil {
			return err
		}
		res.Heads, res.Realms = heads, len(heads)
		var total uint64
		realms := make([]protocol.Realm, 0, len(heads))
		for r, h := range heads {
			total += h.Seq // chains are dense
			realms = append(realms, r)
		}
		slices.Sort(realms)
		w, err := backup.NewWriter(cfg.Out, backup.Header{Origin: string(name), CreatedAt: cfg.Now().UnixMilli(), Relay: Version, Events: total}, cfg.Compress)
		if err != nil {
			return err
		}
		for _, r := range realms {
			var pub ed25519.PublicKey
			switch k, ok := cfg.Keys.lookup(r); {
			case r == name:
				pub = id.Public()
			case ok:
				pub = k
			default:
				return fmt.Errorf("no public key known for realm %s, whose events the store holds: its chain could not be verified on import", r)
			}
			rk := backup.RealmKey{Realm: string(r), Public: pub}
			if p, ok := pinned[r]; ok && r != name {
				rk.Descriptor = p.Raw
				if rk.CheckDescriptor() != nil {
					rk.Descriptor = nil // pinned to another key than the one given
				}
			}
			if err := w.Key(rk); err != nil {
				return err
			}
		}
		if cfg.WithKey {
			b, err := id.Marshal()
			if err != nil {
				return err
			}
			if err := w.Secret(backup.Secret{Realm: string(name), Key: b}); err != nil {
				return err
			}
		}
		progress := func() {
			if cfg.Progress != nil {
				cfg.Progress(backup.Progress{Events: res.Events, EventsTotal: total, Blobs: res.Blobs, Bytes: w.Bytes()})
			}
		}
		err = tx.EachChained(func(se *store.StoredEvent) error {
			if err := w.Event(se.Raw); err != nil {
				return err
			}
			res.Events++
			if res.Events%4096 == 0 {
				progress()
				return ctx.Err()
			}
			return nil
		})
		if err != nil {
			return err
		}
		progress()
		err = parley.EachBlob(tx, func(b parley.Blob) error {
			if err := w.Blob(backup.Blob{CID: b.CID.Bytes(), MediaType: b.MediaType, Data: b.Data}); err != nil {
				return err
			}
			res.Blobs++
			progress()
			return ctx.Err()
		})
		if err != nil {
			return err
		}
		if err := w.Close(heads); err != nil {
			return err
		}
		res.Bytes = w.Bytes()
		return nil
	})
	if err != nil {
		return ExportResult{}, fmt.Errorf("export: %w", err)
	}
	return res, nil
}

func (k KeySource) lookup(r protocol.Realm) (ed25519.PublicKey, bool) {
	if k == nil {
		return nil, false
	}
	return k(r)
}

// ImportConfig says what to import and where.
type ImportConfig struct {
	DataDir string    // must not exist or be empty
	In      io.Reader // the export file
	// Key is the origin realm's key in realm.key's form, for a file
	// exported without --with-key; it must be the key the file's chain of
	// that realm is signed with.
	Key []byte
	// Keys, when set, gives keys this node already trusts (the realm
	// directory); a file with another key for one of those realms is
	// refused.
	Keys KeySource
	// VerifyAll checks every event's signature, not only the newest of
	// each chunk (see backup.Options.VerifyAll).
	VerifyAll bool
	// MinFreeBytes is the free disk space under which the import stops
	// (store.ErrDiskFull), as Config.MinFreeBytes for a node: Badger
	// writes through memory maps, and one that meets a full disk ends the
	// process rather than fail the import.
	MinFreeBytes int64
	Progress     func(backup.Progress)
	Logger       *slog.Logger
}

// ImportResult is what an import restored.
type ImportResult struct {
	Realm             protocol.Realm
	PeerID            string
	Events            uint64
	Blobs             uint64
	Realms            int
	Pinned            int // other realms' keys pinned in the realm directory
	Heads             map[protocol.Realm]protocol.Head
	OperatorTokenFile string // the fresh operator secret
}

// Import verifies an export file and restores it into a fresh data
// directory: the node becomes the file's origin realm (its key from the
// file or cfg.Key), holds every chain of the file with every projection
// rebuilt by the services' projectors, and gets a fresh operator secret.
// It is all or nothing: the node is built in DataDir/import.partial and
// moved into place only once the whole file has verified.
func Import(ctx context.Context, cfg ImportConfig) (res ImportResult, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	_, statErr := os.Stat(cfg.DataDir)
	made := errors.Is(statErr, fs.ErrNotExist) // the import makes DataDir: a failed one removes it
	if err := prepareFresh(cfg.DataDir); err != nil {
		return ImportResult{}, err
	}
	stage := filepath.Join(cfg.DataDir, importPartial)
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return ImportResult{}, err
	}
	var st *store.Store
	defer func() {
		if st != nil {
			st.Close()
		}
		if err != nil {
			os.RemoveAll(stage)
			if made {
				os.Remove(cfg.DataDir) // empty now; left alone if not
			}
		}
	}()

	var id *federation.Identity
	var descs map[protocol.Realm][]byte
	var blobs blobBatch
	var chunks restorer
	sum, err := backup.Read(ctx, cfg.In, backup.Options{Known: cfg.Keys, VerifyAll: cfg.VerifyAll, Progress: cfg.Progress}, backup.Sink{
		Begin: func(s backup.Start) error {
			origin := protocol.Realm(s.Header.Origin)
			var err error
			if id, err = importIdentity(origin, s, cfg.Key); err != nil {
				return err
			}
			descs = s.Descriptors
			scfg := store.DefaultConfig(filepath.Join(stage, "store"))
			scfg.Logger, scfg.Realm, scfg.Key = cfg.Logger, origin, id.Signing
			scfg.MinFreeBytes = cfg.MinFreeBytes
			if st, err = store.Open(scfg); err != nil {
				return err
			}
			if err := checkImportDisk(st, cfg.DataDir); err != nil {
				return err
			}
			// The services register their projectors, so every event is
			// projected in the transaction that stores it, as when it was
			// first written.
			parley.New(st, parley.Config{Realm: origin, Logger: cfg.Logger})
			if _, err := corpus.New(st, corpus.Config{Realm: origin, Logger: cfg.Logger}); err != nil {
				return err
			}
			// The store is empty: this records the projectors' versions,
			// so that the first start does not project it all again.
			if _, err := st.EnsureProjections(ctx); err != nil {
				return err
			}
			blobs.st, blobs.dir = st, cfg.DataDir
			chunks = restorer{ctx: ctx, st: st, origin: origin, dir: cfg.DataDir}
			return nil
		},
		Events: chunks.add,
		Blob: func(b backup.Blob) error {
			if err := chunks.finish(); err != nil { // the events first, in order
				return err
			}
			return blobs.add(ctx, b)
		},
	})
	if err == nil {
		err = chunks.finish()
	}
	if err != nil {
		return ImportResult{}, err
	}
	if err := blobs.flush(ctx); err != nil {
		return ImportResult{}, err
	}
	// An event parked on the way (its records later in the file) is
	// projected now, before the node's numbering resumes from the records.
	st.Unpark(ctx)
	heads, err := st.Heads()
	if err != nil {
		return ImportResult{}, err
	}
	var held uint64 // chains are dense; parked events count, unshown
	for _, h := range heads {
		held += h.Seq
	}
	if held != sum.Events || len(heads) != len(sum.Heads) {
		return ImportResult{}, fmt.Errorf("import: stored %d events of %d realms, the file holds %d of %d", held, len(heads), sum.Events, len(sum.Heads))
	}
	for r, h := range sum.Heads {
		if heads[r] != h {
			return ImportResult{}, fmt.Errorf("import: realm %s stored up to %d, the file up to %d", r, heads[r].Seq, h.Seq)
		}
	}
	// The exporting node's directory bindings hold here too: a realm the
	// restored node holds cannot be claimed by another key.
	if err := federation.Pin(ctx, st, protocol.Realm(sum.Header.Origin), descs); err != nil {
		return ImportResult{}, fmt.Errorf("import: %w", err)
	}
	if len(descs) > 0 { // it federated: its peers may hold events it signed after the export
		if err := federation.MarkRestored(ctx, st); err != nil {
			return ImportResult{}, fmt.Errorf("import: %w", err)
		}
	}
	err = st.Close()
	st = nil
	if err != nil {
		return ImportResult{}, err
	}
	origin := protocol.Realm(sum.Header.Origin)
	if err := federation.SaveIdentity(filepath.Join(stage, "realm.key"), id); err != nil {
		return ImportResult{}, err
	}
	if err := writeRealmFile(stage, realmFile{Realm: string(origin), PeerID: id.PeerID.String()}); err != nil {
		return ImportResult{}, err
	}
	for _, name := range importMoves[1:] {
		if err := os.Rename(filepath.Join(stage, name), filepath.Join(cfg.DataDir, name)); err != nil {
			return ImportResult{}, err
		}
	}
	if err := os.Remove(stage); err != nil { // the commit point
		return ImportResult{}, err
	}
	if err := store.SyncDir(cfg.DataDir); err != nil { // the moves and the commit, durable
		return ImportResult{}, err
	}

	// Opening the node creates the operator credential and carries every
	// service's numbering on after the restored log.
	ncfg := DefaultConfig()
	ncfg.DataDir, ncfg.Logger = cfg.DataDir, cfg.Logger
	ncfg.P2PAddrs = nil // opened only to be set up: no federation
	n, err := Open(ctx, ncfg)
	if err != nil {
		return ImportResult{}, fmt.Errorf("import: the restored node does not open: %w", err)
	}
	res = ImportResult{Realm: origin, PeerID: id.PeerID.String(), Events: sum.Events, Blobs: sum.Blobs,
		Realms: len(sum.Heads), Pinned: len(descs), Heads: sum.Heads, OperatorTokenFile: n.OperatorTokenFile}
	return res, n.Close()
}

// importIdentity is the key the restored node signs with: the file's secret
// or the one given, either of which must be the key of the origin's chain.
func importIdentity(origin protocol.Realm, s backup.Start, given []byte) (*federation.Identity, error) {
	pub, ok := s.Keys[origin]
	if !ok {
		return nil, fmt.Errorf("the file holds no key for its origin realm %s", origin)
	}
	var raw []byte
	switch {
	case s.Secret != nil && given != nil:
		// Both: they must agree, or the one given would be ignored unseen.
		if g, err := federation.ParseIdentity(given); err != nil || !g.Public().Equal(pub) {
			return nil, fmt.Errorf("the key given (--key) is not realm %s's, which the file carries too: leave --key out to use the file's", origin)
		}
		raw = s.Secret.Key
	case s.Secret != nil:
		raw = s.Secret.Key
	case given != nil:
		raw = given
	default:
		return nil, fmt.Errorf("%w: restoring realm %s continues its chain, which only its key can sign; "+
			"the file was exported without it: pass the realm's realm.key (--key), or export again with --with-key", ErrNoRealmKey, origin)
	}
	id, err := federation.ParseIdentity(raw)
	if err != nil {
		return nil, fmt.Errorf("realm key: %w", err)
	}
	if !id.Public().Equal(pub) {
		return nil, fmt.Errorf("the realm key is not realm %s's: its chain is signed by another key", origin)
	}
	return id, nil
}

// restoreWindow is how many chunks may be queued in the store at once: the
// committer projects one while the writer commits the one before.
const restoreWindow = 2

// restorer stores verified chunks, keeping restoreWindow of them in flight.
type restorer struct {
	ctx     context.Context
	st      *store.Store
	origin  protocol.Realm // the exporting realm: its own events must project
	dir     string         // the data directory imported into
	at      uint64         // events handed to the store so far
	pending []pendingChunk
}

type pendingChunk struct {
	after uint64
	evs   []store.Checked
	wait  func() error
}

func (r *restorer) add(evs []store.Checked) error {
	if err := checkImportDisk(r.st, r.dir); err != nil {
		return err
	}
	r.pending = append(r.pending, pendingChunk{r.at, evs, r.st.Restore(r.ctx, r.at, evs)})
	r.at += uint64(len(evs))
	for len(r.pending) > restoreWindow {
		if err := r.settle(); err != nil {
			return err
		}
	}
	return nil
}

// finish waits for every chunk in flight.
func (r *restorer) finish() error {
	for len(r.pending) > 0 {
		if err := r.settle(); err != nil {
			return err
		}
	}
	return nil
}

// settle waits for the oldest chunk. A chunk that fails may only be too
// large for one Badger transaction (large events, large projections): the
// chunks behind it fail too (Restore checks the sequence), so it is stored
// in halves and they are queued again. A real error comes back at the
// single event that causes it.
func (r *restorer) settle() error {
	p := r.pending[0]
	r.pending = r.pending[1:]
	err := p.wait()
	if err == nil {
		return nil
	}
	rest := r.pending
	r.pending = nil
	for _, q := range rest {
		q.wait()
	}
	if r.ctx.Err() != nil {
		return r.ctx.Err()
	}
	if err := r.halves(p.after, p.evs); err != nil {
		return err
	}
	for _, q := range rest {
		r.pending = append(r.pending, pendingChunk{q.after, q.evs, r.st.Restore(r.ctx, q.after, q.evs)})
	}
	return nil
}

func (r *restorer) halves(after uint64, evs []store.Checked) error {
	err := r.st.Restore(r.ctx, after, evs)()
	if err == nil {
		return nil
	}
	if len(evs) == 1 || r.ctx.Err() != nil {
		e := evs[0].Event
		if len(evs) == 1 && r.ctx.Err() == nil && e.Realm != string(r.origin) && store.IsRefusal(err) {
			// Another realm's event that broke a rule of the log, kept in
			// its chain unprojected at the exporting node: kept so here.
			if err := r.st.RestoreRefused(r.ctx, after, evs[0], err.Error()); err == nil {
				return nil
			}
		}
		return fmt.Errorf("import: storing event %d (%s seq %d): %w", after+1, e.Realm, e.Seq, err)
	}
	half := len(evs) / 2
	if err := r.halves(after, evs[:half]); err != nil {
		return err
	}
	return r.halves(after+uint64(half), evs[half:])
}

// blobBatch stores blobs a few at a time, one op each batch.
type blobBatch struct {
	st    *store.Store
	dir   string // the data directory imported into
	blobs []parley.Blob
	size  int
}

func (b *blobBatch) add(ctx context.Context, bl backup.Blob) error {
	c, err := cid.Cast(bl.CID) // Read checked its shape and hash
	if err != nil {
		return err
	}
	b.blobs = append(b.blobs, parley.Blob{CID: c, MediaType: bl.MediaType, Data: bl.Data})
	b.size += len(bl.Data)
	if len(b.blobs) >= 64 || b.size >= 4<<20 {
		return b.flush(ctx)
	}
	return nil
}

func (b *blobBatch) flush(ctx context.Context) error {
	if len(b.blobs) == 0 {
		return nil
	}
	if err := checkImportDisk(b.st, b.dir); err != nil {
		return err
	}
	_, err := b.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		for _, bl := range b.blobs {
			if err := parley.PutBlob(tx, bl); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	b.blobs, b.size = nil, 0
	return err
}

// checkImportDisk reads the free space of the disk the import is built on
// before each chunk, rather than every half second as a node does: an
// import writes faster than that, and a disk it filled would end the
// process (Badger's memory maps) instead of failing the import.
func checkImportDisk(st *store.Store, dir string) error {
	if low, free := st.CheckDisk(); low {
		return fmt.Errorf("import: %w: %.1f MiB free on the disk of %s, not enough to go on: free space, or import onto another disk", store.ErrDiskFull, float64(free)/(1<<20), dir)
	}
	return nil
}

// prepareFresh makes sure dir can receive an import: it does not exist or
// is empty, but for what an interrupted import left, which is removed.
func prepareFresh(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	switch {
	case len(names) == 0:
		return nil
	case slices.Contains(names, importPartial) && !slices.ContainsFunc(names, func(n string) bool { return !slices.Contains(importMoves, n) }):
		// Left by an interrupted import (with what it had already moved
		// out of its stage: the moves come before the stage is removed),
		// unless one is still running: its store is then locked.
		partial := filepath.Join(dir, importPartial)
		if _, err := os.Stat(filepath.Join(partial, "store")); err == nil {
			scfg := store.DefaultConfig(filepath.Join(partial, "store"))
			scfg.Logger = slog.New(slog.DiscardHandler)
			st, err := store.Open(scfg)
			if errors.Is(err, store.ErrLocked) {
				return fmt.Errorf("another import into %s is running", dir)
			}
			if err == nil {
				st.Close()
			}
		}
		for _, n := range names {
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("data directory %s is not empty (it holds %s): import restores into a fresh directory", dir, strings.Join(names, ", "))
}

// checkNoPartialImport refuses a data directory an import did not finish.
func checkNoPartialImport(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, importPartial)); err == nil {
		return fmt.Errorf("data directory %s holds an import that did not finish (%s): empty the directory and import again", dir, importPartial)
	}
	return nil
}

// readRealmFile reads the realm a data directory belongs to.
func readRealmFile(dir string) (protocol.Realm, error) {
	b, err := os.ReadFile(filepath.Join(dir, "realm.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s is not a relay data directory (no realm.json)", dir)
	}
	if err != nil {
		return "", err
	}
	var rf realmFile
	if err := json.Unmarshal(b, &rf); err != nil {
		return "", fmt.Errorf("realm.json: %w", err)
	}
	return protocol.ParseRealm(rf.Realm)
}
