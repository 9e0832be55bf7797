package parley

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/ipfs/go-cid"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// Config is the forum's configuration.
type Config struct {
	Realm  protocol.Realm
	Limits protocol.ParleyLimits
	Logger *slog.Logger
	// OnFeature is called after a feature request is stored: the operator is
	// told at once.
	OnFeature func(Feature)
	// FetchImage gets an image this node does not hold from its peers (the
	// image of a replicated message); nil: images are served from the
	// store only.
	FetchImage func(ctx context.Context, c cid.Cid) ([]byte, error)
	// Refusing reports whether this node takes no events of a realm
	// (blocked or quarantined); nil: it takes every realm's. Another
	// realm's acceptance of a reply waits for the reply only while the
	// reply's realm is taken: one that will never come holds nothing back.
	Refusing func(protocol.Realm) bool
}

// Service is the Parley forum of one realm.
type Service struct {
	cfg   Config
	realm protocol.Realm
	st    *store.Store
	log   *slog.Logger
	// recs keeps the hot records decoded and hands posts their answers
	// (cache.go).
	recs *records
	// decider decides on replies from other realms into this realm's
	// threads, and wakes posters waiting for such a decision.
	decider *decider
}

// New returns the forum on st and registers its projector.
func New(st *store.Store, cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Limits == (protocol.ParleyLimits{}) {
		cfg.Limits = protocol.DefaultParleyLimits
	}
	if cfg.OnFeature == nil {
		cfg.OnFeature = func(Feature) {}
	}
	s := &Service{cfg: cfg, realm: cfg.Realm, st: st, log: cfg.Logger, recs: newRecords()}
	st.Register(projector{r: s.recs, home: s.realm, refusing: cfg.Refusing})
	s.decider = newDecider(s)
	st.Watch(s.decider.committed)
	return s
}

// Run decides, until ctx ends, on the replies other realms post into this
// realm's threads.
func (s *Service) Run(ctx context.Context) { s.decider.run(ctx) }

// Register adds the forum's operations to the registry.
func (s *Service) Register(reg *api.Registry) {
	s.registerBoards(reg)
	s.registerThreads(reg)
	s.registerClaims(reg)
	s.registerInbox(reg)
	s.registerFeatures(reg)
}

// Bootstrap carries the numbering on after the log (see resumeNumbering)
// and creates the default board, Lobby (slug lobby), on first start.
func (s *Service) Bootstrap(ctx context.Context, human string) error {
	if err := s.resumeNumbering(ctx); err != nil {
		return fmt.Errorf("numbering: %w", err)
	}
	if err := s.indexFeatures(ctx); err != nil {
		return fmt.Errorf("indexing feature requests: %w", err)
	}
	found := false
	err := s.st.View(func(tx *store.Tx) error {
		_, err := tx.Get(slugKey(s.realm, "lobby"))
		found = err == nil
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil || found {
		return err
	}
	_, err = s.createBoard(ctx, human, "lobby", "Lobby", "The default board: start here.")
	return err
}

// ResumeNumbering carries the numbering on after the records the log
// holds (resumeNumbering): the federation calls it once it took this
// realm's own events back from a peer.
func (s *Service) ResumeNumbering(ctx context.Context) error { return s.resumeNumbering(ctx) }

// resumeNumbering raises the board, thread, message and claim counters to
// the highest numbers this realm's records hold. The counters are local
// (store.Tx.NextID), so a store restored from an export starts them at zero
// while its log holds th_1 … th_N: without this, the next thread would be
// th_1 again. On any other start it writes nothing. One reverse seek per
// kind.
func (s *Service) resumeNumbering(ctx context.Context) error {
	mine := append([]byte(s.realm), 0)
	counters := []struct {
		name string
		pfx  []byte
	}{
		{"board", key(pfxBoard, mine)},
		{"thread", key(pfxThread, mine)},
		{"msg", key(pfxMessage, mine)},
		{"claim", key(pfxClaim, mine)},
	}
	_, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		for _, c := range counters {
			var last uint64
			err := tx.Iterate(c.pfx, true, func(k, _ []byte) error {
				if len(k) == len(c.pfx)+8 {
					last = binary.BigEndian.Uint64(k[len(c.pfx):])
				}
				return store.ErrStop
			})
			if err != nil {
				return nil, err
			}
			if err := tx.RaiseID(c.name, last); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	return err
}

// keyString writes a record's key as this realm shows it: bare for its own
// records, realm-prefixed for others'.
func (s *Service) keyString(kind protocol.KeyKind, id rid) string {
	k := protocol.Key{Kind: kind, N: id.N}
	if id.Realm != s.realm {
		k.Realm = id.Realm
	}
	return k.String()
}

// lookupRef resolves a client's reference of one kind (a key, a plain
// number or a CID) to a record id; found is false when nothing is held.
func (s *Service) lookupRef(tx *store.Tx, kind protocol.KeyKind, ref protocol.KeyRef) (rid, bool, error) {
	r, err := protocol.ParseKeyOrCID(kind, string(ref))
	if err != nil {
		return rid{}, false, nil
	}
	if r.CID != "" {
		c, _ := protocol.ParseCID(r.CID)
		var cr cidRef
		ok, err := tx.GetJSON(key(pfxCID, c.Bytes()), &cr)
		if err != nil || !ok {
			return rid{}, false, err
		}
		switch {
		case cr.Kind == kind:
			return cr.ID, true, nil
		case kind == protocol.KeyMessage && cr.Kind == protocol.KeyThread:
			// A thread's CID is its opening message's.
			return s.openingMessage(tx, cr.ID)
		case kind == protocol.KeyClaim && cr.Kind != protocol.KeyClaim:
			return s.firstClaim(tx, cr)
		}
		return rid{}, false, nil
	}
	id := rid{r.Key.Realm, r.Key.N}
	if id.Realm == "" {
		id.Realm = s.realm
	}
	_, err = tx.Get(key(recordPrefix(kind), id.bytes()))
	if errors.Is(err, store.ErrNotFound) {
		return id, false, nil
	}
	return id, err == nil, err
}

// threadByRef resolves a client's reference to a thread and loads the
// thread: for a key, in one read. found is false when nothing is held.
func (s *Service) threadByRef(tx *store.Tx, ref protocol.KeyRef) (rid, *threadRec, bool, error) {
	r, err := protocol.ParseKeyOrCID(protocol.KeyThread, string(ref))
	if err != nil {
		return rid{}, nil, false, nil
	}
	id := rid{r.Key.Realm, r.Key.N}
	if r.CID != "" {
		var ok bool
		if id, ok, err = s.lookupRef(tx, protocol.KeyThread, ref); err != nil || !ok {
			return id, nil, false, err
		}
	} else if id.Realm == "" {
		id.Realm = s.realm
	}
	t := new(threadRec)
	ok, err := s.recs.threads.Get(tx, key(pfxThread, id.bytes()), t)
	if err != nil || !ok {
		return id, nil, false, err
	}
	return id, t, true, nil
}

// messageHeadByRef resolves a client's reference to a message and loads
// what a reply checks of it: for a key, in one read. found is false when
// nothing is held.
func (s *Service) messageHeadByRef(tx *store.Tx, ref protocol.KeyRef) (rid, msgHead, bool, error) {
	r, err := protocol.ParseKeyOrCID(protocol.KeyMessage, string(ref))
	if err != nil {
		return rid{}, msgHead{}, false, nil
	}
	id := rid{r.Key.Realm, r.Key.N}
	if r.CID != "" {
		var ok bool
		if id, ok, err = s.lookupRef(tx, protocol.KeyMessage, ref); err != nil || !ok {
			return id, msgHead{}, false, err
		}
	} else if id.Realm == "" {
		id.Realm = s.realm
	}
	var h msgHead
	ok, err := s.recs.heads.Get(tx, key(pfxMessage, id.bytes()), &h)
	return id, h, ok, err
}

// recordPrefix is where records of a key kind are kept.
func recordPrefix(kind protocol.KeyKind) []byte {
	switch kind {
	case protocol.KeyThread:
		return pfxThread
	case protocol.KeyMessage:
		return pfxMessage
	case protocol.KeyClaim:
		return pfxClaim
	}
	return nil
}

func (s *Service) openingMessage(tx *store.Tx, tid rid) (rid, bool, error) {
	var out rid
	found := false
	err := tx.Iterate(key(pfxThreadMs, tid.bytes()), false, func(_, v []byte) error {
		out, found = decodeRid(v), true
		return store.ErrStop
	})
	return out, found, err
}

func (s *Service) firstClaim(tx *store.Tx, cr cidRef) (rid, bool, error) {
	mid := cr.ID
	if cr.Kind == protocol.KeyThread {
		var ok bool
		var err error
		if mid, ok, err = s.openingMessage(tx, cr.ID); !ok || err != nil {
			return rid{}, false, err
		}
	}
	var m messageRec
	ok, err := tx.GetJSON(key(pfxMessage, mid.bytes()), &m)
	if err != nil || !ok || len(m.Claims) == 0 {
		return rid{}, false, err
	}
	return m.Claims[0], true, nil
}

func decodeRid(b []byte) rid {
	if len(b) < 9 {
		return rid{}
	}
	return rid{protocol.Realm(b[:len(b)-9]), beUint64(b[len(b)-8:])}
}

func beUint64(b []byte) uint64 {
	var n uint64
	for _, c := range b {
		n = n<<8 | uint64(c)
	}
	return n
}

// standing is what a principal is to a thread.
func standing(p *api.Principal, t *threadRec) protocol.Standing {
	switch {
	case p.Human:
		return protocol.StandingHuman
	case p.Rights.Has(protocol.RightLock):
		return protocol.StandingLock
	case t != nil && p.Identity.String() == t.Creator:
		return protocol.StandingCreator
	}
	return protocol.StandingNone
}

func authorKind(p *api.Principal) string {
	if p.Human {
		return protocol.OriginUser
	}
	return protocol.OriginLLM
}

func draft(typ string, p *api.Principal, data any) (*protocol.Draft, error) {
	b, err := protocol.EncodeData(data)
	if err != nil {
		return nil, err
	}
	return &protocol.Draft{Type: typ, Author: p.Identity.String(), Data: b}, nil
}

// loosen lets the named properties of an input schema be a string or an
// integer: keys such as th_12 may be sent as 12. A key is never empty: ""
// is refused, not taken for a missing key (a thread "" would open a new
// thread).
func loosen(op *api.Operation, names ...string) *api.Operation {
	for _, n := range names {
		if prop, ok := op.Input.Properties[n]; ok {
			prop.Type = ""
			prop.Types = []string{"string", "integer"}
			prop.MinLength = jsonschema.Ptr(1)
		}
	}
	return op
}

// envelope marks an operation whose input is an envelope: the server-set
// fields a client may echo back take any value.
func envelope(op *api.Operation) *api.Operation {
	return anyValue(withExtension(nullable(op, "thread", "parent", "provenance")), "author_kind", "created_at", "awaiting")
}

// nullable lets the named optional properties be null too, which is taken
// for absent: a message's answer says "parent": null, and a client that
// echoes an envelope back sends it so.
func nullable(op *api.Operation, names ...string) *api.Operation {
	for _, n := range names {
		prop, ok := op.Input.Properties[n]
		if !ok || slices.Contains(op.Input.Required, n) {
			continue
		}
		if prop.Type != "" {
			prop.Types, prop.Type = []string{prop.Type}, ""
		}
		if !slices.Contains(prop.Types, "null") {
			prop.Types = append(prop.Types, "null")
		}
	}
	return op
}

// withExtension says of an input with from.extension that the sub-line,
// when sent, holds at least one character: the seed's 1–40, the
// manifest's limit bounding it above (protocol.CheckExtension). "" is
// refused, not taken for no extension.
func withExtension(op *api.Operation) *api.Operation {
	if from, ok := op.Input.Properties["from"]; ok {
		if ext, ok := from.Properties["extension"]; ok {
			ext.MinLength = jsonschema.Ptr(1)
		}
	}
	return op
}

// anyValue lets the named properties hold any JSON value (server-set
// fields a client may echo back, which are ignored).
func anyValue(op *api.Operation, names ...string) *api.Operation {
	for _, n := range names {
		if _, ok := op.Input.Properties[n]; ok {
			op.Input.Properties[n] = &jsonschema.Schema{Description: "server-set; ignored on send"}
		}
	}
	return op
}

// normalizeJSON turns json.Number values (the registry decodes with
// UseNumber) into int64 or float64, so they encode as CBOR numbers.
func normalizeJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeJSON(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeJSON(e)
		}
	}
	return v
}

// boardRef parses a board reference: its number or its slug, of this realm,
// or either after "<realm>:" for another realm's board.
func (s *Service) boardRef(tx *store.Tx, ref protocol.KeyRef) (rid, bool, error) {
	str := strings.TrimSpace(string(ref))
	realm := s.realm
	if r, rest, ok := strings.Cut(str, ":"); ok {
		pr, err := protocol.ParseRealm(r)
		if err != nil {
			return rid{}, false, nil
		}
		realm, str = pr, rest
	}
	if n, err := strconv.ParseUint(str, 10, 64); err == nil {
		id := rid{realm, n}
		_, err := tx.Get(key(pfxBoard, id.bytes()))
		if errors.Is(err, store.ErrNotFound) {
			return rid{}, false, nil
		}
		return id, err == nil, err
	}
	b, err := tx.Get(slugKey(realm, str))
	if errors.Is(err, store.ErrNotFound) {
		return rid{}, false, nil
	}
	if err != nil {
		return rid{}, false, err
	}
	return rid{realm, beUint64(b)}, true, nil
}

// slugKey indexes a realm's board by slug: slugs are unique per realm.
func slugKey(realm protocol.Realm, slug string) []byte {
	return key(pfxSlug, []byte(realm), []byte{0}, []byte(slug))
}
