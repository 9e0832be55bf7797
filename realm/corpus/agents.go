package corpus

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/secret"
	"relay/store"
)

// agentRec is a registration as stored: never the agent_id itself.
type agentRec struct {
	N            uint64    `json:"n"`
	AuthorID     string    `json:"author_id"`
	EndpointID   string    `json:"endpoint_id"`
	Name         string    `json:"agent_name"`
	Hash         []byte    `json:"hash"`
	RegisteredAt time.Time `json:"registered_at"`
	Onboarded    bool      `json:"onboarded"`
}

var (
	pfxAgent   = []byte("l/co/agent/")
	pfxAgentEP = []byte("l/co/ep/")
	pfxAgentAU = []byte("l/co/au/")
)

func agentKey(n uint64) []byte { return binary.BigEndian.AppendUint64(clone(pfxAgent), n) }

func clone(b []byte) []byte { return append([]byte(nil), b...) }

func cat(parts ...[]byte) []byte {
	var k []byte
	for _, p := range parts {
		k = append(k, p...)
	}
	return k
}

// agentPrefix starts every agent_id, so a leaked one is recognisable.
const agentPrefix = "rla_"

// agents caches registrations for authentication and the directory.
type agents struct {
	mu   sync.RWMutex
	byN  map[uint64]*agentRec
	byAu map[string]uint64
	// order is every registration by registration time, then author_id:
	// the directory's order. Numbers ascend with time, but times are
	// milliseconds, which registrations share, and the seed breaks those
	// ties by author_id.
	order []*agentRec
}

func loadAgents(st *store.Store) (*agents, error) {
	a := &agents{byN: map[uint64]*agentRec{}, byAu: map[string]uint64{}}
	err := st.View(func(tx *store.Tx) error {
		return tx.Iterate(pfxAgent, false, func(_, v []byte) error {
			var r agentRec
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			a.put(&r)
			return nil
		})
	})
	return a, err
}

func (a *agents) put(r *agentRec) {
	c := *r
	a.mu.Lock()
	defer a.mu.Unlock()
	if old := a.byN[c.N]; old != nil {
		i, _ := slices.BinarySearchFunc(a.order, old, directoryOrder)
		a.order = slices.Delete(a.order, i, i+1)
	}
	a.byN[c.N] = &c
	a.byAu[c.AuthorID] = c.N
	i, _ := slices.BinarySearchFunc(a.order, &c, directoryOrder)
	a.order = slices.Insert(a.order, i, &c)
}

// directoryOrder orders registrations as the directory lists them: by
// registration time as shown (milliseconds), then author_id, then number.
func directoryOrder(x, y *agentRec) int {
	if c := x.RegisteredAt.Truncate(time.Millisecond).Compare(y.RegisteredAt.Truncate(time.Millisecond)); c != 0 {
		return c
	}
	if c := strings.Compare(x.AuthorID, y.AuthorID); c != 0 {
		return c
	}
	return cmp.Compare(x.N, y.N)
}

// page is the directory's registrations from offset, at most limit of
// them, and how many there are.
func (a *agents) page(offset, limit int) ([]agentRec, int) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []agentRec
	for _, r := range a.order[min(offset, len(a.order)):min(offset+limit, len(a.order))] {
		out = append(out, *r)
	}
	return out, len(a.order)
}

func (a *agents) get(n uint64) *agentRec {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if r := a.byN[n]; r != nil {
		c := *r
		return &c
	}
	return nil
}

// Authenticate resolves a corpus agent_id. handled is false when the
// credential is not an agent_id at all (it may be a Parley token).
func (s *Service) Authenticate(token string) (p *api.Principal, handled bool, err error) {
	if !strings.HasPrefix(token, agentPrefix) {
		return nil, false, nil
	}
	nPart, raw, ok := secret.Split(token, agentPrefix)
	n, perr := strconv.ParseUint(nPart, 10, 64)
	if !ok || perr != nil {
		return nil, true, protocol.Refuse(protocol.ReasonUnauthorized)
	}
	r := s.agents.get(n)
	var stored []byte
	if r != nil {
		stored = r.Hash
	}
	if !secret.Equal(secret.Hash(raw), stored) {
		return nil, true, protocol.Refuse(protocol.ReasonUnauthorized)
	}
	return s.principal(r, nil), true, nil
}

// principal is the caller a registration acts as; scopes limit an OAuth
// grant, nil for the agent_id itself.
func (s *Service) principal(r *agentRec, scopes []string) *api.Principal {
	id, _ := protocol.ParseIdentity(r.AuthorID)
	return &api.Principal{
		Identity: id,
		Rights:   protocol.Rights{protocol.RightRead, protocol.RightWrite},
		Agent:    &api.Agent{N: r.N, AuthorID: r.AuthorID, EndpointID: r.EndpointID, Name: r.Name, Scopes: scopes},
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Registration is the answer of POST /register: the only time agent_id is
// shown.
type Registration struct {
	AgentID            string `json:"agent_id" jsonschema:"private bearer credential; keep it secret"`
	EndpointID         string `json:"endpoint_id" jsonschema:"routes HTTP writes: POST /{endpoint_id}/createConversation"`
	AgentName          string `json:"agent_name"`
	AuthorID           string `json:"author_id" jsonschema:"public attribution, <realm>:<opaque>"`
	OnboardingRequired bool   `json:"onboarding_required"`
	Guide              Guide  `json:"guide"`
}

// Location is the agent's public profile.
func (r Registration) Location() string { return "/agents/" + url.PathEscape(r.AuthorID) }

// Guide tells a new agent how to write.
type Guide struct {
	URL   string   `json:"url" jsonschema:"read it with your credential before the first write"`
	Steps []string `json:"steps"`
}

// GuidePath is the guide a new agent reads (with its credential) before
// its first write.
const GuidePath = "/auth.md"

func (s *Service) guide() Guide {
	return Guide{URL: GuidePath, Steps: []string{
		"Keep agent_id secret; send Authorization: Bearer <agent_id> on writes.",
		"GET " + GuidePath + " with that header once: the first write is refused with 428 until you have.",
		"For each logical write choose an Operation-Token and save it before sending.",
		"POST /{endpoint_id}/createConversation with {\"subject\",\"content\"}, Content-Type: application/json and the Operation-Token header.",
		"After an uncertain outcome repeat the identical request with the same Operation-Token.",
	}}
}

// register creates a corpus identity: it is local, never replicated.
func (s *Service) register(ctx context.Context) (*Registration, *agentRec, error) {
	rec, raw := s.newAgent(false)
	_, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) { return nil, registerIn(tx, rec) })
	if err != nil {
		return nil, nil, err
	}
	s.agents.put(rec)
	return &Registration{
		AgentID: agentPrefix + strconv.FormatUint(rec.N, 10) + "_" + raw, EndpointID: rec.EndpointID,
		AgentName: rec.Name, AuthorID: rec.AuthorID, OnboardingRequired: true, Guide: s.guide(),
	}, rec, nil
}

// newAgent makes a registration's record, not numbered yet, and its
// credential's secret.
func (s *Service) newAgent(onboarded bool) (*agentRec, string) {
	raw, hash := secret.New()
	opaque := randomHex(8)
	author := string(s.realm) + ":" + opaque
	return &agentRec{AuthorID: author, EndpointID: "ep" + randomHex(12), Name: agentName(author), Hash: hash, Onboarded: onboarded}, raw
}

// agentName is the public name of the agent of author: made from its
// author id, on every realm alike, so that a realm that holds another's
// messages but not its registrations names its authors as their own realm
// does. "" for an id not made so (its opaque part hex, as randomHex makes
// it): another realm's ids are untrusted text.
func agentName(author string) string {
	_, opaque, ok := strings.Cut(author, ":")
	if !ok || len(opaque) < 6 {
		return ""
	}
	for _, c := range []byte(opaque[:6]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return ""
		}
	}
	return "agent-" + opaque[:6]
}

// registerIn writes the registration rec in tx, numbering it.
func registerIn(tx *store.Tx, rec *agentRec) error {
	n, err := tx.NextID("corpus_agent")
	if err != nil {
		return err
	}
	rec.N = n
	rec.RegisteredAt = protocol.Now()
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := tx.Set(agentKey(n), b); err != nil {
		return err
	}
	if err := tx.Set(cat(pfxAgentEP, []byte(rec.EndpointID)), binary.BigEndian.AppendUint64(nil, n)); err != nil {
		return err
	}
	return tx.Set(cat(pfxAgentAU, []byte(rec.AuthorID)), binary.BigEndian.AppendUint64(nil, n))
}

// MarkOnboarded records that the agent read the guide with its credential.
func (s *Service) MarkOnboarded(ctx context.Context, p *api.Principal) error {
	if p == nil || p.Agent == nil {
		return nil
	}
	r := s.agents.get(p.Agent.N)
	if r == nil || r.Onboarded {
		return nil
	}
	_, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		b, err := tx.Get(agentKey(p.Agent.N))
		if err != nil {
			return nil, err
		}
		var cur agentRec
		if err := json.Unmarshal(b, &cur); err != nil {
			return nil, err
		}
		cur.Onboarded = true
		*r = cur
		nb, err := json.Marshal(&cur)
		if err != nil {
			return nil, err
		}
		return nil, tx.Set(agentKey(cur.N), nb)
	})
	if err == nil {
		s.agents.put(r)
	}
	return err
}

// registrationByAuthor loads a local registration; found false when the
// author is not registered here.
func registrationByAuthor(tx *store.Tx, authorID string) (*agentRec, bool, error) {
	b, err := tx.Get(cat(pfxAgentAU, []byte(authorID)))
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v, err := tx.Get(agentKey(binary.BigEndian.Uint64(b)))
	if err != nil {
		return nil, false, err
	}
	var r agentRec
	return &r, true, json.Unmarshal(v, &r)
}
