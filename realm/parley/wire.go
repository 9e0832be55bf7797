package parley

import (
	"time"

	"relay/protocol"
)

// From is the author of a message as clients see it.
type From struct {
	Identity  string `json:"identity"`
	Extension string `json:"extension,omitempty"`
}

// MessageOut is a message as clients see it.
type MessageOut struct {
	Parley     string              `json:"parley"`
	ID         string              `json:"id"`
	Realm      string              `json:"realm"`
	CID        string              `json:"cid"`
	Thread     string              `json:"thread"`
	Parent     *string             `json:"parent"`
	Kind       protocol.Act        `json:"kind"`
	Body       string              `json:"body"`
	From       From                `json:"from"`
	AuthorKind string              `json:"author_kind" jsonschema:"user (the human) or llm (a model)"`
	Provenance map[string]any      `json:"provenance,omitempty"`
	RelatesTo  []string            `json:"relates_to"`
	Claims     []string            `json:"claims" jsonschema:"keys of the claims this message asserts"`
	Refutes    []string            `json:"refutes"`
	Evidence   []protocol.Evidence `json:"evidence"`
	Image      *ImageOut           `json:"image,omitempty"`
	Awaiting   bool                `json:"awaiting" jsonschema:"true when this act expects a reply"`
	CreatedAt  time.Time           `json:"created_at"`
	// Status is set on a reply into another realm's thread: pending until
	// that realm accepts it into the thread or refuses it.
	Status  string   `json:"status,omitempty" jsonschema:"pending, accepted or refused: a reply into another realm's thread"`
	Refusal *Refusal `json:"refusal,omitempty" jsonschema:"why the thread's realm refused the reply"`
}

// ImageOut is a message's image: its URL, or the CID of the upload and the
// path it is served at.
type ImageOut struct {
	URL       string `json:"url"`
	CID       string `json:"cid,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Bytes     int    `json:"bytes,omitempty"`
}

// MessageNode is a message in a thread's tree.
type MessageNode struct {
	MessageOut
	Replies []any `json:"replies" jsonschema:"the messages whose parent this is, as MessageNode"`
}

// LastMessage summarises a thread's newest message.
type LastMessage struct {
	ID        string       `json:"id"`
	Kind      protocol.Act `json:"kind"`
	From      From         `json:"from"`
	CreatedAt time.Time    `json:"created_at"`
}

// ThreadOut is a thread as clients see it.
type ThreadOut struct {
	ID                string         `json:"id"`
	Realm             string         `json:"realm"`
	CID               string         `json:"cid"`
	Board             uint64         `json:"board"`
	Title             string         `json:"title"`
	State             protocol.State `json:"state"`
	StateOrigin       *string        `json:"state_origin" jsonschema:"user, llm, or null for a newborn thread"`
	StateConfirmedAt  *time.Time     `json:"state_confirmed_at" jsonschema:"null while the state is a model's proposal"`
	StateConfirmedBy  string         `json:"state_confirmed_by,omitempty"`
	StateSetBy        string         `json:"state_set_by,omitempty"`
	StateSetByRealm   string         `json:"state_set_by_realm,omitempty" jsonschema:"the realm of state_set_by: the thread's, or another realm's whose reply the thread's realm accepted (every realm's human is human:<name>)"`
	StateSetAt        time.Time      `json:"state_set_at"`
	Proposal          bool           `json:"proposal" jsonschema:"true while the state awaits confirmation"`
	Locked            bool           `json:"locked" jsonschema:"a confirmed close: no message for anyone until reopened"`
	Creator           string         `json:"creator"`
	CreatedAt         time.Time      `json:"created_at"`
	UpdatedAt         time.Time      `json:"updated_at"`
	Awaiting          bool           `json:"awaiting"`
	LastMessage       *LastMessage   `json:"last_message"`
	MessageCount      int            `json:"message_count"`
	ClaimCount        int            `json:"claim_count"`
	Pinned            bool           `json:"pinned"`
	LLMReplyForbidden bool           `json:"llm_reply_forbidden"`
}

// Attestation is one verdict on a claim.
type Attestation struct {
	Verdict string `json:"verdict"`
	By      From   `json:"by"`
	// Realm is the attester's: every realm's human is human:<name>.
	Realm    string              `json:"realm" jsonschema:"the attester's realm"`
	Evidence []protocol.Evidence `json:"evidence"`
	Note     string              `json:"note,omitempty"`
	At       time.Time           `json:"at"`
	CID      string              `json:"cid"`
	// Refused: the attestation does not count, by this rule. Facts from
	// several realms fold in the order of their times, so an attestation
	// made elsewhere after a supersede it had not received is refused
	// where it falls, yet stays shown.
	Refused string `json:"refused,omitempty" jsonschema:"the reason it does not count, e.g. claim_superseded: the claim had been superseded before it, by the events' times"`
}

// RefusedRefutation is a refute act that does not count against a claim.
type RefusedRefutation struct {
	Message string `json:"message"`
	Refused string `json:"refused" jsonschema:"the reason it does not count, e.g. claim_superseded"`
}

// ClaimOut is a claim with its attestations.
type ClaimOut struct {
	ID           string              `json:"id"`
	Realm        string              `json:"realm"`
	CID          string              `json:"cid"`
	Thread       string              `json:"thread"`
	Message      string              `json:"message"`
	Statement    string              `json:"statement"`
	Evidence     []protocol.Evidence `json:"evidence"`
	State        protocol.ClaimState `json:"state"`
	Author       string              `json:"author"`
	Attestations []Attestation       `json:"attestations"`
	RefutedBy    []string            `json:"refuted_by"`
	// RefutationsRefused are refute acts naming the claim that do not
	// count, with the rule that refused them where they fall among its
	// facts: one made at another realm after a supersede it had not yet
	// received.
	RefutationsRefused []RefusedRefutation `json:"refutations_refused,omitempty"`
	SealedBy           string              `json:"sealed_by,omitempty"`
	SealedAt           *time.Time          `json:"sealed_at,omitempty"`
	SupersededBy       *string             `json:"superseded_by"`
	CreatedAt          time.Time           `json:"created_at"`
	UpdatedAt          time.Time           `json:"updated_at"`
	// Status and Refusal are those of the claim's message when it is a
	// reply into another realm's thread.
	Status  string   `json:"status,omitempty" jsonschema:"set when the claim was asserted in a reply into another realm's thread: pending until that realm decides, accepted, or refused (the claim is then in no thread, and takes no attestation, seal or refutation)"`
	Refusal *Refusal `json:"refusal,omitempty" jsonschema:"why the thread's realm refused the reply that asserted the claim"`
}

// StateEvent is one entry of a thread's state history.
type StateEvent struct {
	From      protocol.State `json:"from"`
	To        protocol.State `json:"to"`
	Origin    *string        `json:"origin" jsonschema:"user or llm: who set the state the entry leads to; null for a new thread's state, which a rejection can restore"`
	Confirmed bool           `json:"confirmed"`
	Via       string         `json:"via" jsonschema:"act, close, reopen, state, confirm or reject"`
	By        string         `json:"by"`
	Realm     string         `json:"realm" jsonschema:"the realm of by: the thread's, or another realm's whose reply the thread's realm accepted (every realm's human is human:<name>)"`
	Message   *string        `json:"message"`
	Note      string         `json:"note,omitempty"`
	At        time.Time      `json:"at"`
	CID       string         `json:"cid"`
}

func (s *Service) messageOut(m *messageRec) MessageOut {
	out := MessageOut{
		Parley: protocol.ParleyVersion, ID: s.keyString(protocol.KeyMessage, rid{m.Realm, m.N}), Realm: string(m.Realm), CID: m.CID,
		Thread: s.keyString(protocol.KeyThread, m.Thread), Kind: m.Kind, Body: m.Body,
		From: From{Identity: m.Identity, Extension: m.Extension}, AuthorKind: m.AuthorKind, Provenance: m.Provenance,
		RelatesTo: s.relatesOut(m.Realm, m.RelatesTo), Claims: []string{}, Refutes: []string{}, Evidence: nonNil(m.Evidence),
		Awaiting: m.Awaiting, CreatedAt: m.CreatedAt, Status: m.Status, Refusal: m.Refusal,
	}
	if m.Parent != nil {
		p := s.keyString(protocol.KeyMessage, *m.Parent)
		out.Parent = &p
	}
	for _, c := range m.Claims {
		out.Claims = append(out.Claims, s.keyString(protocol.KeyClaim, c))
	}
	for _, c := range m.Refutes {
		out.Refutes = append(out.Refutes, s.keyString(protocol.KeyClaim, c))
	}
	if m.Image != nil {
		img := &ImageOut{URL: m.Image.URL, CID: m.Image.CID, MediaType: m.Image.MediaType, Bytes: m.Image.Bytes}
		if img.URL == "" && img.CID != "" {
			img.URL = "/api/v1/images/" + img.CID
		}
		out.Image = img
	}
	return out
}

func (s *Service) threadOut(t *threadRec) ThreadOut {
	out := ThreadOut{
		ID: s.keyString(protocol.KeyThread, t.id()), Realm: string(t.Realm), CID: t.CID, Board: t.Board, Title: t.Title,
		State: t.State.State, StateSetBy: t.StateBy, StateSetByRealm: string(t.StateByRealm), StateSetAt: t.StateAt,
		Proposal: !t.State.Confirmed, Locked: t.locked(), Creator: t.Creator, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		Awaiting: t.Awaiting, MessageCount: t.Messages, ClaimCount: t.Claims, Pinned: t.Pinned, LLMReplyForbidden: t.NoLLM,
	}
	if t.State.Origin != "" {
		o := t.State.Origin
		out.StateOrigin = &o
		// A new thread's state has no origin, and no confirmation to
		// show either: not even once a rejection has restored it.
		out.StateConfirmedAt = t.ConfirmedAt
		out.StateConfirmedBy = t.ConfirmedBy
	}
	if t.Last.N != 0 {
		out.LastMessage = &LastMessage{ID: s.keyString(protocol.KeyMessage, rid{t.Last.Realm, t.Last.N}), Kind: t.Last.Kind,
			From: From{Identity: t.Last.Identity, Extension: t.Last.Extension}, CreatedAt: t.Last.At}
	}
	return out
}

func (s *Service) claimOut(c *claimRec) ClaimOut {
	out := ClaimOut{
		ID: s.keyString(protocol.KeyClaim, rid{c.Realm, c.N}), Realm: string(c.Realm), CID: c.CID,
		Thread: s.keyString(protocol.KeyThread, c.Thread), Message: s.keyString(protocol.KeyMessage, c.Message),
		Statement: c.Statement, Evidence: nonNil(c.Evidence), State: c.State, Author: c.Author, Attestations: []Attestation{},
		RefutedBy: []string{}, SealedBy: c.SealedBy, SealedAt: c.SealedAt, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
	}
	for _, a := range c.Attestations {
		out.Attestations = append(out.Attestations, Attestation{Verdict: a.Verdict, By: From{Identity: a.By, Extension: a.Extension}, Realm: string(a.Realm),
			Evidence: nonNil(a.Evidence), Note: a.Note, At: a.At, CID: a.CID, Refused: string(a.Refused)})
	}
	for _, r := range c.RefutedBy {
		out.RefutedBy = append(out.RefutedBy, s.keyString(protocol.KeyMessage, r))
	}
	for _, r := range c.RefutesRefused {
		out.RefutationsRefused = append(out.RefutationsRefused, RefusedRefutation{Message: s.keyString(protocol.KeyMessage, r.Message), Refused: string(r.Refused)})
	}
	if c.SupersededBy != nil {
		k := s.keyString(protocol.KeyClaim, *c.SupersededBy)
		out.SupersededBy = &k
	}
	return out
}

func (s *Service) historyOut(h *historyRec) StateEvent {
	out := StateEvent{From: h.From, To: h.To, Confirmed: h.Confirmed, Via: h.Via, By: h.By, Realm: string(h.ByRealm), Note: h.Note, At: h.At, CID: h.CID}
	if h.Origin != "" {
		o := h.Origin
		out.Origin = &o
	}
	if h.Message != nil {
		k := s.keyString(protocol.KeyMessage, *h.Message)
		out.Message = &k
	}
	return out
}

// relatesOut writes the keys a message of realm relates to as this node
// writes keys: "cl_3" of another realm's message is that realm's claim,
// "beta:cl_3"; a key of this realm is bare. What is no key stays as is.
func (s *Service) relatesOut(realm protocol.Realm, refs []string) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		if kind := refKind(r); kind != "" {
			if k, err := protocol.ParseKey(kind, r); err == nil {
				if k.Realm == "" {
					k.Realm = realm
				}
				r = s.keyString(kind, rid{k.Realm, k.N})
			}
		}
		out = append(out, r)
	}
	return out
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
