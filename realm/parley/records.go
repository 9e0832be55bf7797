package parley

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/ipfs/go-cid"

	"relay/protocol"
	"relay/store"
)

// Projection prefixes; all under p/pa/ so Rebuild owns them.
var (
	pfxAll      = []byte("p/pa/")
	pfxBoard    = []byte("p/pa/b/")
	pfxSlug     = []byte("p/pa/bs/")
	pfxThread   = []byte("p/pa/t/")
	pfxMessage  = []byte("p/pa/m/")
	pfxClaim    = []byte("p/pa/c/")
	pfxThreadMs = []byte("p/pa/tm/")
	pfxThreadCl = []byte("p/pa/tc/")
	pfxHistory  = []byte("p/pa/th/")
	pfxThreadAt = []byte("p/pa/tu/") // threads newest first (threadAtKey)
	pfxBoardAt  = []byte("p/pa/bo/") // a board's threads in its order (boardAtKey)
	pfxPart     = []byte("p/pa/pt/")
	pfxCID      = []byte("p/pa/cid/")
	pfxPending  = []byte("p/pa/rp/") // thread, reply → the reply's CID: replies from other realms awaiting the thread's realm
	pfxDecision = []byte("p/pa/rd/") // reply CID \0 deciding realm → a decision that arrived before its reply
	pfxDecided  = []byte("p/pa/rx/") // identity \0 sequence → a reply of theirs the thread's realm decided on
	pfxAside    = []byte("p/pa/ca/") // claim, sequence, kind → a fact on a claim of a realm refused here, kept until the claim comes

	pfxInbox = []byte("l/pa/inbox/")
	pfxExt   = []byte("l/pa/ext/")
	pfxFeat  = []byte("l/pa/feat/")
)

// rid identifies a record of one kind: its origin realm and number.
type rid struct {
	Realm protocol.Realm
	N     uint64
}

// bytes is the record's key suffix: realm, NUL, number.
// String is the realm-prefixed key of a message id.
func (r rid) String() string { return fmt.Sprintf("%s:msg_%d", r.Realm, r.N) }

func (r rid) bytes() []byte { return r.appendTo(make([]byte, 0, len(r.Realm)+9)) }

func (r rid) appendTo(b []byte) []byte {
	b = append(append(b, r.Realm...), 0)
	return binary.BigEndian.AppendUint64(b, r.N)
}

// key joins a prefix and parts into a new key, allocated once: every record
// the projector writes or reads needs one.
func key(pfx []byte, parts ...[]byte) []byte {
	n := len(pfx)
	for _, p := range parts {
		n += len(p)
	}
	k := append(make([]byte, 0, n), pfx...)
	for _, p := range parts {
		k = append(k, p...)
	}
	return k
}

// ridKey is key(pfx, id.bytes(), u64(ns[0]), …) without the parts'
// allocations.
func ridKey(pfx []byte, id rid, ns ...uint64) []byte {
	k := append(make([]byte, 0, len(pfx)+len(id.Realm)+9+8*len(ns)), pfx...)
	k = id.appendTo(k)
	for _, n := range ns {
		k = binary.BigEndian.AppendUint64(k, n)
	}
	return k
}

// cidKey is the key of the record a CID names: key(pfxCID, c.Bytes()).
func cidKey(c cid.Cid) []byte {
	ks := c.KeyString() // the CID's bytes, without copying them
	return append(append(make([]byte, 0, len(pfxCID)+len(ks)), pfxCID...), ks...)
}

func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// Board is a container of threads.
// id is the board's record id: boards are numbered by their realm.
func (b *Board) id() rid { return rid{protocol.Realm(b.Realm), b.ID} }

type Board struct {
	ID          uint64    `json:"id"`
	Slug        string    `json:"slug"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Realm       string    `json:"realm"`
	CID         string    `json:"cid"`
	Creator     string    `json:"creator"`
	CreatedAt   time.Time `json:"created_at"`
	Threads     int       `json:"threads"`
	Messages    int       `json:"messages"`
	Waiting     int       `json:"waiting" jsonschema:"threads whose last act awaits a reply"`
	Open        int       `json:"open" jsonschema:"threads neither closed nor set aside"`
}

// threadRec is a thread as stored.
type threadRec struct {
	Realm     protocol.Realm       `json:"realm"`
	N         uint64               `json:"n"`
	CID       string               `json:"cid"`
	Board     uint64               `json:"board"`
	Title     string               `json:"title"`
	Creator   string               `json:"creator"`
	CreatedAt time.Time            `json:"created_at"`
	UpdatedAt time.Time            `json:"updated_at"`
	State     protocol.ThreadState `json:"state"`
	// Settled is the last confirmed state: what rejecting a proposal
	// restores.
	Settled protocol.ThreadState `json:"settled"`
	StateBy string               `json:"state_by,omitempty"`
	// StateByRealm is StateBy's realm: the thread's, or, for the act of
	// a reply it accepted, the reply's (every realm's human is
	// human:<name>).
	StateByRealm protocol.Realm `json:"state_by_realm,omitempty"`
	StateAt      time.Time      `json:"state_at"`
	ConfirmedAt  *time.Time     `json:"confirmed_at,omitempty"`
	ConfirmedBy  string         `json:"confirmed_by,omitempty"`
	Awaiting     bool           `json:"awaiting"`
	Last         lastMessage    `json:"last"`
	Messages     int            `json:"messages"`
	Claims       int            `json:"claims"`
	Pinned       bool           `json:"pinned"`
	NoLLM        bool           `json:"no_llm"`
}

type lastMessage struct {
	N         uint64         `json:"n"`
	Realm     protocol.Realm `json:"realm"`
	Kind      protocol.Act   `json:"kind"`
	Identity  string         `json:"identity"`
	Extension string         `json:"extension,omitempty"`
	At        time.Time      `json:"at"`
	Sequence  uint64         `json:"sequence"`
}

func (t *threadRec) id() rid { return rid{t.Realm, t.N} }

// board is the id of the thread's board: a thread opens on a board of its
// own realm.
func (t *threadRec) board() rid { return rid{t.Realm, t.Board} }

// waiting reports whether the thread awaits a reply someone can give: its
// last act expects one and it is neither locked nor set aside.
func (t *threadRec) waiting() bool {
	return t.Awaiting && !t.locked() && !protocol.IsSide(t.State.State)
}

// locked reports whether the thread accepts no message: it is closed and
// confirmed, or a model's proposal (a reopen) stands over a confirmed close.
// As a proposed close does not lock, a proposed reopen does not unlock:
// only its confirmation does.
func (t *threadRec) locked() bool {
	return t.State.Locked() || !t.State.Confirmed && t.Settled.Locked()
}

// closedRefusal is the refusal of a message to a locked thread, saying,
// when a model's reopen stands over the close, what lifts the lock: not
// another reopen, but its confirmation.
func (t *threadRec) closedRefusal() *protocol.Refusal {
	if t.State.Locked() {
		return protocol.Refuse(protocol.ReasonThreadClosed)
	}
	return protocol.Refusef(protocol.ReasonThreadClosed,
		"The thread stays closed: its reopening is a model's proposal until the human or a lock holder confirms it (post_threads_id_confirm) or rejects it.")
}

// newer orders threads by their latest activity, newest first; the node
// sequence breaks ties within a millisecond.
func newer(a, b *threadRec) bool {
	if !a.UpdatedAt.Equal(b.UpdatedAt) {
		return a.UpdatedAt.After(b.UpdatedAt)
	}
	return a.Last.Sequence > b.Last.Sequence
}

// threadAtKey is t's place among all threads, newest first (newer):
// its last change's time and its last message's sequence, each inverted so
// that the newest sorts first, then its id.
func threadAtKey(t *threadRec) []byte {
	k := make([]byte, 0, len(pfxThreadAt)+16+len(t.Realm)+9)
	k = append(k, pfxThreadAt...)
	return t.id().appendTo(appendNewest(k, t))
}

// boardAtKey is t's place among its board's threads, in the order a board
// lists them: pinned first, then those waiting for a reply, then the rest,
// each newest first.
func boardAtKey(t *threadRec) []byte {
	b := t.board()
	k := make([]byte, 0, len(pfxBoardAt)+2*(len(t.Realm)+9)+17)
	k = b.appendTo(append(k, pfxBoardAt...))
	rank := byte(2)
	switch {
	case t.Pinned:
		rank = 0
	case t.waiting():
		rank = 1
	}
	return t.id().appendTo(appendNewest(append(k, rank), t))
}

// The bytes of an order key between its prefix (pfxThreadAt, or
// pfxBoardAt and the board's id) and the thread's id.
const (
	threadOrder = 16
	boardOrder  = 1 + 16
)

// appendNewest appends t's inverted time and last sequence (newer's order).
func appendNewest(k []byte, t *threadRec) []byte {
	k = binary.BigEndian.AppendUint64(k, ^uint64(t.UpdatedAt.UnixNano()))
	return binary.BigEndian.AppendUint64(k, ^t.Last.Sequence)
}

// messageRec is a message as stored.
type messageRec struct {
	Realm      protocol.Realm      `json:"realm"`
	N          uint64              `json:"n"`
	CID        string              `json:"cid"`
	Thread     rid                 `json:"thread"`
	Parent     *rid                `json:"parent,omitempty"`
	Kind       protocol.Act        `json:"kind"`
	Body       string              `json:"body"`
	Identity   string              `json:"identity"`
	Extension  string              `json:"extension,omitempty"`
	AuthorKind string              `json:"author_kind"`
	Provenance map[string]any      `json:"provenance,omitempty"`
	RelatesTo  []string            `json:"relates_to,omitempty"`
	Claims     []rid               `json:"claims,omitempty"`
	Refutes    []rid               `json:"refutes,omitempty"`
	Evidence   []protocol.Evidence `json:"evidence,omitempty"`
	Image      *imageData          `json:"image,omitempty"`
	Awaiting   bool                `json:"awaiting"`
	CreatedAt  time.Time           `json:"created_at"`
	Sequence   uint64              `json:"sequence"`
	// Status and Refusal are set on a reply into another realm's thread.
	Status  string   `json:"status,omitempty"`
	Refusal *Refusal `json:"refusal,omitempty"`
}

// claimRec is a claim as stored. State, Attestations, RefutedBy, SealedBy,
// SealedAt, SupersededBy and UpdatedAt are derived: fold (claims.go) makes
// them from Base and Facts, so that they depend on which facts the replica
// holds and not on the order they arrived in.
type claimRec struct {
	Realm        protocol.Realm      `json:"realm"`
	N            uint64              `json:"n"`
	CID          string              `json:"cid"`
	Thread       rid                 `json:"thread"`
	Message      rid                 `json:"message"`
	Statement    string              `json:"statement"`
	Evidence     []protocol.Evidence `json:"evidence,omitempty"`
	State        protocol.ClaimState `json:"state"`
	Author       string              `json:"author"`
	Attestations []attestation       `json:"attestations"`
	RefutedBy    []rid               `json:"refuted_by,omitempty"`
	// RefutesRefused are the refute acts its facts refuse where they fall
	// (one made at another realm after a supersede it had not received),
	// derived like RefutedBy: shown, not counted.
	RefutesRefused []refusedRefute `json:"refutes_refused,omitempty"`
	SealedBy       string          `json:"sealed_by,omitempty"`
	SealedAt       *time.Time      `json:"sealed_at,omitempty"`
	SupersededBy   *rid            `json:"superseded_by,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	// Facts is every fact the projector accepted about the claim, in
	// canonical order, those the rules refuse where they fall included.
	// Reads never show it.
	Facts []claimFact `json:"facts,omitempty"`
	// Base is what a record written before Facts existed had derived; the
	// facts fold onto it. Nil for every other record.
	Base *claimBase `json:"base,omitempty"`
}

type attestation struct {
	Verdict string `json:"verdict"`
	By      string `json:"by"`
	// Realm is the attester's: By alone names no one when it is a human
	// (every realm's is human:<name>).
	Realm     protocol.Realm      `json:"realm,omitempty"`
	Extension string              `json:"extension,omitempty"`
	Evidence  []protocol.Evidence `json:"evidence,omitempty"`
	Note      string              `json:"note,omitempty"`
	At        time.Time           `json:"at"`
	CID       string              `json:"cid"`
	// Refused is the rule that kept the attestation from counting where
	// it falls among the claim's facts: an attestation made, at another
	// realm, after a supersede it had not yet received.
	Refused protocol.Reason `json:"refused,omitempty"`
}

// refusedRefute is a refute act that does not count against a claim.
type refusedRefute struct {
	Message rid             `json:"message"`
	Refused protocol.Reason `json:"refused"`
}

// historyRec is one state change of a thread.
type historyRec struct {
	From      protocol.State `json:"from"`
	To        protocol.State `json:"to"`
	Origin    string         `json:"origin"`
	Confirmed bool           `json:"confirmed"`
	Via       string         `json:"via"`
	By        string         `json:"by"`
	ByRealm   protocol.Realm `json:"by_realm,omitempty"` // By's realm, as threadRec.StateByRealm
	Message   *rid           `json:"message,omitempty"`
	Note      string         `json:"note,omitempty"`
	At        time.Time      `json:"at"`
	CID       string         `json:"cid"`
	Sequence  uint64         `json:"sequence"`
}

// cidRef says which record a CID names.
type cidRef struct {
	Kind protocol.KeyKind `json:"kind"`
	ID   rid              `json:"id"`
}

func putJSON(tx *store.Tx, k []byte, v any) error {
	return withRecordJSON(v, func(b []byte) error { return tx.Set(k, b) })
}
