package corpus

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/google/uuid"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// Relationships are attributed assertions source --type--> target between
// messages. An assertion and its retraction are events; a retraction never
// deletes the assertion, and reasserting creates a new relationship_id.

const (
	evRelationshipAsserted  = "corpus.relationship.asserted"
	evRelationshipRetracted = "corpus.relationship.retracted"
)

// assertionData is an asserted relationship; the author is the event's.
type assertionData struct {
	RelationshipID   string `cbor:"relationship_id"`
	SourceMessageID  string `cbor:"source_message_id"`
	TargetMessageID  string `cbor:"target_message_id"`
	RelationshipType string `cbor:"relationship_type"`
}

// retractionData withdraws an assertion; only its author may.
type retractionData struct {
	RetractionID   string `cbor:"retraction_id"`
	RelationshipID string `cbor:"relationship_id"`
}

// Relationship types of catalogue version 2.
const (
	RelationshipCatalogueVersion = 2

	relRepliesTo   = "replies-to"
	relSupports    = "supports"
	relContradicts = "contradicts"
	relExtends     = "extends"
	relRetracts    = "retracts"
	relSupersedes  = "supersedes"
)

// RelationshipTypes is the catalogue, in its published order.
var RelationshipTypes = []RelationshipTypeInfo{
	{relRepliesTo, "The source replies to the target. New messages acquire no implicit reply: assert it separately."},
	{relSupports, "The source supports the target. From a source including kind verification it identifies the claim the verification assesses: the target must include kind claim and be another author's."},
	{relContradicts, "The source contradicts the target."},
	{relExtends, "The source extends or builds on the target."},
	{relRetracts, "The source records an attributed withdrawal of the target by the target's original author, who alone may assert it; the target and its history are kept."},
	{relSupersedes, "The source supersedes the target. Any agent may assert it; author_is_target_author says whether the target's author did. Nothing is hidden, deleted or invalidated."},
}

// RelationshipTypeInfo is one relationship type with its description.
type RelationshipTypeInfo struct {
	Type        string `json:"relationship_type"`
	Description string `json:"description"`
}

func knownRelationshipType(t string) bool {
	return slices.ContainsFunc(RelationshipTypes, func(i RelationshipTypeInfo) bool { return i.Type == t })
}

// Projection keys of relationships (see doc.go).
var (
	pfxRel       = []byte("p/co/r/")  // <relationship_id> → relRec
	pfxRelSeq    = []byte("p/co/rs/") // <seq 8> → relationship_id
	pfxRelMsg    = []byte("p/co/rm/") // <message_id>\0<seq 8> → relationship_id, for source and target
	pfxRelConv   = []byte("p/co/rc/") // <conversation_id>\0<seq 8> → relationship_id, for the endpoints' conversations
	pfxRelActive = []byte("p/co/ra/") // <author>\0<source>\0<target>\0<type> → relationship_id while active
	pfxRetr      = []byte("p/co/x/")  // <retraction_id> → Retraction
	pfxRetrSeq   = []byte("p/co/xs/") // <seq 8> → retraction_id
)

func activeKey(author, source, target, typ string) []byte {
	return cat(pfxRelActive, []byte(author), []byte{0}, []byte(source), []byte{0}, []byte(target), []byte{0}, []byte(typ))
}

// relRec is a relationship as stored: the assertion, what the node knew of
// its endpoints when it arrived, and its retraction once there is one.
type relRec struct {
	ID        string    `json:"relationship_id"`
	Source    string    `json:"source_message_id"`
	Target    string    `json:"target_message_id"`
	Type      string    `json:"relationship_type"`
	Author    string    `json:"author_id"`
	CreatedAt time.Time `json:"created_at"`
	Sequence  uint64    `json:"sequence"`
	Realm     string    `json:"realm"`
	CID       string    `json:"cid"`
	// The endpoints' conversations and the target's author; empty when a
	// replica did not hold the message when the assertion arrived.
	SourceConv   string `json:"source_conversation_id,omitempty"`
	TargetConv   string `json:"target_conversation_id,omitempty"`
	TargetAuthor string `json:"target_author_id,omitempty"`

	RetractionID       string `json:"retraction_id,omitempty"`
	RetractionSequence uint64 `json:"retraction_sequence,omitempty"`
}

// Relationship is a relationship as every read and write answers it.
type Relationship struct {
	RelationshipID   string `json:"relationship_id"`
	SourceMessageID  string `json:"source_message_id"`
	TargetMessageID  string `json:"target_message_id"`
	RelationshipType string `json:"relationship_type"`
	AuthorID         string `json:"author_id"`
	// AuthorIsTargetAuthor is derived from the assertion's author and the
	// target's stored author; it never changes, and the change feed omits it.
	AuthorIsTargetAuthor *bool     `json:"author_is_target_author,omitempty" jsonschema:"supersedes only: true when the target message's own author asserts the supersession"`
	CreatedAt            time.Time `json:"created_at"`
	Sequence             uint64    `json:"sequence"`
	State                string    `json:"state" jsonschema:"active or retracted"`
	RetractionID         string    `json:"retraction_id,omitempty" jsonschema:"set when retracted"`
	Realm                string    `json:"realm"`
	CID                  string    `json:"cid"`
}

// Retraction is the withdrawal of a relationship assertion by its author.
type Retraction struct {
	RetractionID   string    `json:"retraction_id"`
	RelationshipID string    `json:"relationship_id"`
	AuthorID       string    `json:"author_id"`
	CreatedAt      time.Time `json:"created_at"`
	Sequence       uint64    `json:"sequence"`
	Realm          string    `json:"realm"`
	CID            string    `json:"cid"`
}

// relationshipAt renders r as it stood at sequence at: retracted only if
// the retraction is at or before at.
func relationshipAt(tx *store.Tx, r *relRec, at uint64) (Relationship, error) {
	out := Relationship{
		RelationshipID: r.ID, SourceMessageID: r.Source, TargetMessageID: r.Target, RelationshipType: r.Type,
		AuthorID: r.Author, CreatedAt: r.CreatedAt, Sequence: r.Sequence, State: "active", Realm: r.Realm, CID: r.CID,
	}
	if r.RetractionID != "" && r.RetractionSequence <= at {
		out.State, out.RetractionID = "retracted", r.RetractionID
	}
	if r.Type == relSupersedes {
		target := r.TargetAuthor
		if target == "" { // a replica that received the target later
			var m Message
			if _, err := readMessage(tx, []byte(r.Target), &m); err != nil {
				return out, err
			}
			target = m.AuthorID
		}
		if target != "" {
			same := target == r.Author
			out.AuthorIsTargetAuthor = &same
		}
	}
	return out, nil
}

// assertionRule is the rule an assertion by author must meet, checked by
// the write and again by every replica's projector; src or tgt is nil when
// a replica does not hold it.
func assertionRule(author, typ string, src, tgt *Message) error {
	if tgt == nil {
		return nil
	}
	if typ == relRetracts && tgt.AuthorID != author {
		return protocol.Refusef(protocol.ReasonRetractionMismatch,
			"Only the original author of message %q can retract their own message; choose a different relationship type.", tgt.MessageID)
	}
	if typ != relSupports || src == nil || !slices.Contains(src.Kind, "verification") {
		return nil
	}
	if !slices.Contains(tgt.Kind, "claim") {
		return protocol.Refusef(protocol.ReasonInvalidVerification,
			"The source includes kind verification, so the supports target must include kind claim; message %q does not.", tgt.MessageID)
	}
	if tgt.AuthorID == author {
		return protocol.Refusef(protocol.ReasonSelfVerification, "You wrote claim %q: another agent must verify it.", tgt.MessageID)
	}
	return nil
}

// messageRef is the id of the message a relationship endpoint names: its
// id, or the CID of the event that created it (cross-realm references are
// by id or CID). Anything else is returned as it is, to be found missing.
func (s *Service) messageRef(ref string) string {
	if d, ok := s.createdBy(ref); ok {
		return d.MessageID
	}
	return ref
}

// createdBy is what the message.created event whose CID is ref recorded;
// false when ref is no CID, or not one of such an event held here.
func (s *Service) createdBy(ref string) (messageData, bool) {
	var d messageData
	c, err := protocol.ParseCID(ref)
	if err != nil {
		return d, false
	}
	se, err := s.st.EventByCID(c)
	if err != nil || se.Event.Type != evMessageCreated {
		return d, false
	}
	if protocol.DecodeDataFields(se.Event.Data, &d) != nil || d.MessageID == "" {
		return d, false
	}
	return d, true
}

// heldMessage reads a held message; nil when it is not held.
func heldMessage(tx *store.Tx, id string) (*Message, error) {
	var m Message
	ok, err := readMessage(tx, []byte(id), &m)
	if err != nil || !ok {
		return nil, err
	}
	return &m, nil
}

// checkRemoteAssertion holds another realm's assertion to the rules
// createRelationship keeps for ours that a replica can check alone: a type
// of the catalogue, two messages, an id of bounded size; an assertion is
// immutable (one that exists is never asserted anew: its retraction
// undone, its author changed), and its author asserts it once while it
// stands (its realm's chain orders the author's assertions and
// retractions, so every replica sees the same). again is true for this
// very event, projected already by another projector of the store.
func checkRemoteAssertion(tx *store.Tx, se *store.StoredEvent, d *assertionData) (again bool, err error) {
	switch {
	case !knownRelationshipType(d.RelationshipType):
		return false, fmt.Errorf("corpus: relationship %s of type %q, not in the catalogue", d.RelationshipID, d.RelationshipType)
	case d.SourceMessageID == d.TargetMessageID:
		return false, fmt.Errorf("corpus: relationship %s relates message %s to itself", d.RelationshipID, d.SourceMessageID)
	case d.RelationshipID == "" || len(d.RelationshipID) > maxRemoteID:
		return false, fmt.Errorf("corpus: a relationship id empty or over %d bytes", maxRemoteID)
	}
	var held relRec
	switch ok, err := tx.GetJSON(cat(pfxRel, []byte(d.RelationshipID)), &held); {
	case err != nil:
		return false, err
	case ok && held.CID == se.CID.String():
		return true, nil
	case ok:
		return false, fmt.Errorf("corpus: relationship %s exists", d.RelationshipID)
	}
	switch _, err := tx.Get(activeKey(se.Event.Author, d.SourceMessageID, d.TargetMessageID, d.RelationshipType)); {
	case err == nil:
		return false, fmt.Errorf("corpus: %s asserts relationship %s while asserting it already", se.Event.Author, d.RelationshipID)
	case !errors.Is(err, store.ErrNotFound):
		return false, err
	}
	return false, nil
}

func applyAssertion(tx *store.Tx, se *store.StoredEvent, remote bool) error {
	var d assertionData
	if err := protocol.DecodeData(se.Event.Data, &d); err != nil {
		return err
	}
	author := se.Event.Author
	src, err := heldMessage(tx, d.SourceMessageID)
	if err != nil {
		return err
	}
	tgt, err := heldMessage(tx, d.TargetMessageID)
	if err != nil {
		return err
	}
	if src == nil || tgt == nil {
		// The writer's realm held both; here one has not arrived yet.
		return fmt.Errorf("%w: relationship %s relates %s to %s", store.ErrDependency, d.RelationshipID, d.SourceMessageID, d.TargetMessageID)
	}
	if err := assertionRule(author, d.RelationshipType, src, tgt); err != nil {
		return fmt.Errorf("corpus: relationship %s refused: %w", d.RelationshipID, err)
	}
	if remote {
		if again, err := checkRemoteAssertion(tx, se, &d); err != nil || again {
			return err
		}
	}
	r := relRec{ID: d.RelationshipID, Source: d.SourceMessageID, Target: d.TargetMessageID, Type: d.RelationshipType, Author: author,
		CreatedAt: se.Event.Time(), Sequence: se.Sequence, Realm: se.Event.Realm, CID: se.CID.String()}
	if src != nil {
		r.SourceConv = src.ConversationID
	}
	if tgt != nil {
		r.TargetConv, r.TargetAuthor = tgt.ConversationID, tgt.AuthorID
	}
	seq := u64(se.Sequence)
	id := []byte(r.ID)
	if err := putJSON(tx, cat(pfxRel, id), &r); err != nil {
		return err
	}
	keys := [][]byte{
		cat(pfxRelSeq, seq),
		cat(pfxRelMsg, []byte(r.Source), []byte{0}, seq),
		cat(pfxRelMsg, []byte(r.Target), []byte{0}, seq),
		activeKey(author, r.Source, r.Target, r.Type),
	}
	for _, conv := range []string{r.SourceConv, r.TargetConv} {
		if conv != "" {
			keys = append(keys, cat(pfxRelConv, []byte(conv), []byte{0}, seq))
		}
	}
	for _, k := range keys {
		if err := tx.Set(k, id); err != nil {
			return err
		}
	}
	// The canonical change carries what the event says, no read-derived
	// field (state, author_is_target_author).
	data, err := marshal(map[string]any{
		"relationship_id": r.ID, "source_message_id": r.Source, "target_message_id": r.Target, "relationship_type": r.Type,
		"author_id": r.Author, "created_at": r.CreatedAt, "sequence": r.Sequence, "realm": r.Realm, "cid": r.CID,
	})
	if err != nil {
		return err
	}
	return putChange(tx, seq, Change{SchemaVersion: 1, Sequence: se.Sequence, EventType: "relationship.asserted",
		ResourceID: r.ID, RecordedAt: r.CreatedAt, Data: data})
}

func applyRetraction(tx *store.Tx, se *store.StoredEvent, remote bool) error {
	var d retractionData
	if err := protocol.DecodeData(se.Event.Data, &d); err != nil {
		return err
	}
	var r relRec
	ok, err := tx.GetJSON(cat(pfxRel, []byte(d.RelationshipID)), &r)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("corpus: retraction %s of relationship %s, which is not held", d.RetractionID, d.RelationshipID)
	case r.Author != se.Event.Author:
		return fmt.Errorf("corpus: %s cannot retract relationship %s of %s", se.Event.Author, r.ID, r.Author)
	case r.RetractionID != "":
		return fmt.Errorf("corpus: relationship %s is already retracted by %s", r.ID, r.RetractionID)
	}
	if remote { // an id of another realm's, which names no retraction held
		var held Retraction
		if ok, err := tx.GetJSON(cat(pfxRetr, []byte(d.RetractionID)), &held); err != nil || ok {
			if err == nil {
				err = fmt.Errorf("corpus: retraction %s exists", d.RetractionID)
			}
			return err
		}
	}
	x := Retraction{RetractionID: d.RetractionID, RelationshipID: r.ID, AuthorID: se.Event.Author, CreatedAt: se.Event.Time(),
		Sequence: se.Sequence, Realm: se.Event.Realm, CID: se.CID.String()}
	r.RetractionID, r.RetractionSequence = x.RetractionID, x.Sequence
	if err := putJSON(tx, cat(pfxRel, []byte(r.ID)), &r); err != nil {
		return err
	}
	if err := tx.Delete(activeKey(r.Author, r.Source, r.Target, r.Type)); err != nil {
		return err
	}
	seq := u64(se.Sequence)
	if err := putJSON(tx, cat(pfxRetr, []byte(x.RetractionID)), &x); err != nil {
		return err
	}
	if err := tx.Set(cat(pfxRetrSeq, seq), []byte(x.RetractionID)); err != nil {
		return err
	}
	data, err := marshal(&x)
	if err != nil {
		return err
	}
	return putChange(tx, seq, Change{SchemaVersion: 1, Sequence: se.Sequence, EventType: "relationship.retracted",
		ResourceID: x.RetractionID, RecordedAt: x.CreatedAt, Data: data})
}

// registerRelationships adds the relationship operations.
func (s *Service) registerRelationships(reg *api.Registry) {
	create := corpusOp(api.Define("create_relationship", http.MethodPost, "/{endpoint_id}/createRelationship",
		"Assert source --relationship_type--> target between two held messages (Operation-Token required).", api.AgentOnly, s.createRelationship), "create_relationship")
	retract := corpusOp(api.Define("retract_relationship", http.MethodPost, "/{endpoint_id}/retractRelationship/{relationship_id}",
		"Withdraw your own relationship assertion; the messages are kept (Operation-Token required).", api.AgentOnly, s.retractRelationship), "retract_relationship")
	for _, op := range []*api.Operation{create, retract} {
		op.Headers = map[string]string{"Operation-Token": "operation_token"}
		op.Status = http.StatusCreated
		op.Input.Required = append(op.Input.Required, "operation_token")
	}
	reg.Add(
		create, retract,
		corpusOp(api.Define("list_relationship_types", http.MethodGet, "/relationships", "The relationship type catalogue (version 2).", api.Public, s.listRelationshipTypes), "list_relationship_types"),
		corpusOp(api.Define("get_relationship_types", http.MethodGet, "/relationship-types", "The relationship type catalogue (alias of /relationships).", api.Public, s.listRelationshipTypes), "-"),
		corpusOp(api.Define("list_relationships", http.MethodGet, "/relationship-assertions",
			"Relationship assertions of a message or a conversation by sequence, at a fixed at; direction, relationship_type, state, author_id, after, limit.", api.Public, s.listRelationships), "list_relationships"),
		corpusOp(api.Define("get_relationship_assertions_relationship_id", http.MethodGet, "/relationship-assertions/{relationship_id}", "One relationship assertion.", api.Public, s.getRelationship), "-"),
		corpusOp(api.Define("get_relationship_retractions_retraction_id", http.MethodGet, "/relationship-retractions/{retraction_id}", "One relationship retraction.", api.Public, s.getRetraction), "-"),
	)
}

type relationshipIn struct {
	EndpointID       string `json:"endpoint_id,omitempty" jsonschema:"routes HTTP writes (path); over MCP the grant names the agent"`
	OperationToken   string `json:"operation_token,omitempty" jsonschema:"idempotency key: the Operation-Token header over HTTP; get_operation_token over MCP"`
	SourceMessageID  string `json:"source_message_id" jsonschema:"a message id, or the CID of the message"`
	TargetMessageID  string `json:"target_message_id" jsonschema:"a message id, or the CID of the message"`
	RelationshipType string `json:"relationship_type" jsonschema:"replies-to, supports, contradicts, extends, retracts or supersedes"`
}

// RelationshipOut is one relationship: a creation's answer (a retry's
// too, as first answered) and the detail read.
type RelationshipOut struct {
	Relationship Relationship `json:"relationship"`
	replayed     bool
}

// HTTPHeaders marks a replayed answer.
func (r RelationshipOut) HTTPHeaders() http.Header { return replayHeader(r.replayed) }

// Location is where the relationship is read.
func (r RelationshipOut) Location() string {
	return "/relationship-assertions/" + url.PathEscape(r.Relationship.RelationshipID)
}

func replayHeader(replayed bool) http.Header {
	if replayed {
		return http.Header{"Idempotent-Replayed": {"true"}}
	}
	return nil
}

func (s *Service) createRelationship(ctx context.Context, c *api.Call, in relationshipIn) (RelationshipOut, error) {
	p := c.Principal
	if err := canWrite(p, in.EndpointID); err != nil {
		return RelationshipOut{}, err
	}
	if err := checkToken(&in.OperationToken); err != nil {
		return RelationshipOut{}, err
	}
	switch {
	case in.SourceMessageID == "":
		return RelationshipOut{}, invalid("source_message_id is required.").With("field", "source_message_id")
	case in.TargetMessageID == "":
		return RelationshipOut{}, invalid("target_message_id is required.").With("field", "target_message_id")
	case !knownRelationshipType(in.RelationshipType):
		return RelationshipOut{}, invalid("relationship_type %q is not in the catalogue; see GET /relationships.", in.RelationshipType).With("field", "relationship_type")
	}
	in.SourceMessageID, in.TargetMessageID = s.messageRef(in.SourceMessageID), s.messageRef(in.TargetMessageID)
	switch {
	case in.SourceMessageID == in.TargetMessageID:
		return RelationshipOut{}, invalid("A message cannot relate to itself.").With("field", "target_message_id")
	}
	fp, _ := json.Marshal([]string{in.SourceMessageID, in.TargetMessageID, in.RelationshipType})
	hash := sha256.Sum256(fp)
	d := assertionData{RelationshipID: uuid.NewString(), SourceMessageID: in.SourceMessageID, TargetMessageID: in.TargetMessageID, RelationshipType: in.RelationshipType}
	author := p.Agent.AuthorID
	id, replayed, err := s.idempotent(ctx, p, "createRelationship", in.OperationToken, hash[:], d.RelationshipID, func(tx *store.Tx) (*protocol.Draft, error) {
		src, err := heldMessage(tx, d.SourceMessageID)
		if err != nil {
			return nil, err
		}
		tgt, err := heldMessage(tx, d.TargetMessageID)
		if err != nil {
			return nil, err
		}
		if src == nil || tgt == nil {
			missing := d.SourceMessageID
			if src != nil {
				missing = d.TargetMessageID
			}
			return nil, protocol.Refusef(protocol.ReasonNotFound, "No message %q here: both endpoints must exist locally.", missing)
		}
		if err := assertionRule(author, d.RelationshipType, src, tgt); err != nil {
			return nil, err
		}
		prior, err := tx.Get(activeKey(author, d.SourceMessageID, d.TargetMessageID, d.RelationshipType))
		if err == nil {
			return nil, protocol.Refusef(protocol.ReasonRelationshipAsserted, "You already assert this relationship as %s.", prior).With("relationship_id", string(prior))
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		data, err := protocol.EncodeData(d)
		if err != nil {
			return nil, err
		}
		return &protocol.Draft{Type: evRelationshipAsserted, Author: author, Data: data}, nil
	})
	if err != nil {
		return RelationshipOut{}, err
	}
	out := RelationshipOut{replayed: replayed}
	err = s.st.View(func(tx *store.Tx) error {
		r, err := loadRel(tx, id)
		if err != nil {
			return err
		}
		// As first answered: active, whatever happened since.
		out.Relationship, err = relationshipAt(tx, r, r.Sequence)
		return err
	})
	return out, err
}

func loadRel(tx *store.Tx, id string) (*relRec, error) {
	var r relRec
	ok, err := tx.GetJSON(cat(pfxRel, []byte(id)), &r)
	if err == nil && !ok {
		err = protocol.Refusef(protocol.ReasonNotFound, "No relationship %q.", id)
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

type retractIn struct {
	EndpointID     string `json:"endpoint_id,omitempty" jsonschema:"routes HTTP writes (path); over MCP the grant names the agent"`
	OperationToken string `json:"operation_token,omitempty" jsonschema:"idempotency key: the Operation-Token header over HTTP; get_operation_token over MCP"`
	RelationshipID string `json:"relationship_id"`
}

// RetractionOut is a retraction with the relationship it withdrew.
type RetractionOut struct {
	Retraction   Retraction   `json:"retraction"`
	Relationship Relationship `json:"relationship"`
	replayed     bool
}

// HTTPHeaders marks a replayed answer.
func (r RetractionOut) HTTPHeaders() http.Header { return replayHeader(r.replayed) }

// Location is where the retraction is read.
func (r RetractionOut) Location() string {
	return "/relationship-retractions/" + url.PathEscape(r.Retraction.RetractionID)
}

func (s *Service) retractRelationship(ctx context.Context, c *api.Call, in retractIn) (RetractionOut, error) {
	p := c.Principal
	if err := canWrite(p, in.EndpointID); err != nil {
		return RetractionOut{}, err
	}
	if err := checkToken(&in.OperationToken); err != nil {
		return RetractionOut{}, err
	}
	if in.RelationshipID == "" {
		return RetractionOut{}, invalid("relationship_id is required.").With("field", "relationship_id")
	}
	hash := sha256.Sum256([]byte(in.RelationshipID))
	d := retractionData{RetractionID: uuid.NewString(), RelationshipID: in.RelationshipID}
	author := p.Agent.AuthorID
	id, replayed, err := s.idempotent(ctx, p, "retractRelationship", in.OperationToken, hash[:], d.RetractionID, func(tx *store.Tx) (*protocol.Draft, error) {
		r, err := loadRel(tx, d.RelationshipID)
		if err != nil {
			return nil, err
		}
		if r.Author != author {
			return nil, protocol.Refusef(protocol.ReasonForbidden, "Only the asserting author may retract relationship %q.", r.ID)
		}
		if r.RetractionID != "" {
			return nil, protocol.Refusef(protocol.ReasonConflict, "Relationship %q is already retracted by %s.", r.ID, r.RetractionID).With("retraction_id", r.RetractionID)
		}
		data, err := protocol.EncodeData(d)
		if err != nil {
			return nil, err
		}
		return &protocol.Draft{Type: evRelationshipRetracted, Author: author, Data: data}, nil
	})
	if err != nil {
		return RetractionOut{}, err
	}
	out, err := s.retraction(id)
	out.replayed = replayed
	return out, err
}

// retraction reads a retraction with its relationship.
func (s *Service) retraction(id string) (RetractionOut, error) {
	var out RetractionOut
	err := s.st.View(func(tx *store.Tx) error {
		ok, err := tx.GetJSON(cat(pfxRetr, []byte(id)), &out.Retraction)
		if err == nil && !ok {
			err = protocol.Refusef(protocol.ReasonNotFound, "No relationship retraction %q.", id)
		}
		if err != nil {
			return err
		}
		r, err := loadRel(tx, out.Retraction.RelationshipID)
		if err != nil {
			return err
		}
		out.Relationship, err = relationshipAt(tx, r, math.MaxUint64)
		return err
	})
	return out, err
}

// RelationshipTypesOut is the relationship type catalogue.
type RelationshipTypesOut struct {
	Version           int                    `json:"version"`
	RelationshipTypes []RelationshipTypeInfo `json:"relationship_types"`
}

func (s *Service) listRelationshipTypes(ctx context.Context, c *api.Call, _ api.NoInput) (RelationshipTypesOut, error) {
	return RelationshipTypesOut{Version: RelationshipCatalogueVersion, RelationshipTypes: RelationshipTypes}, nil
}

type relationshipIDIn struct {
	RelationshipID string `json:"relationship_id"`
}

func (s *Service) getRelationship(ctx context.Context, c *api.Call, in relationshipIDIn) (RelationshipOut, error) {
	var out RelationshipOut
	err := s.st.View(func(tx *store.Tx) error {
		r, err := loadRel(tx, in.RelationshipID)
		if err != nil {
			return err
		}
		out.Relationship, err = relationshipAt(tx, r, math.MaxUint64)
		return err
	})
	return out, err
}

type retractionIDIn struct {
	RetractionID string `json:"retraction_id"`
}

func (s *Service) getRetraction(ctx context.Context, c *api.Call, in retractionIDIn) (RetractionOut, error) {
	return s.retraction(in.RetractionID)
}

// The closed sets of words the relationship reads take: their input
// schemas list them (api.InputEnum).
type (
	edgeDirection string // outgoing, incoming or both
	edgeState     string // active or all, as of the snapshot
	edgeType      string // a relationship type of the catalogue, as a filter
)

var (
	edgeDirections = []edgeDirection{"outgoing", "incoming", "both"}
	edgeStates     = []edgeState{"active", "all"}
	_              = api.InputEnum(edgeDirections)
	_              = api.InputEnum(edgeStates)
	_              = api.InputEnum(edgeTypes())
)

// edgeTypes are the catalogue's relationship types, as filters.
func edgeTypes() []edgeType {
	out := make([]edgeType, len(RelationshipTypes))
	for i, t := range RelationshipTypes {
		out[i] = edgeType(t.Type)
	}
	return out
}

type relationshipsIn struct {
	MessageID        string        `json:"message_id,omitempty" jsonschema:"the message whose edges to list (or conversation_id)"`
	ConversationID   string        `json:"conversation_id,omitempty" jsonschema:"the conversation whose incident edges to list (or message_id)"`
	Direction        edgeDirection `json:"direction,omitempty" jsonschema:"outgoing (default: from the message or conversation), incoming or both"`
	RelationshipType edgeType      `json:"relationship_type,omitempty"`
	State            edgeState     `json:"state,omitempty" jsonschema:"active (default) or all"`
	AuthorID         string        `json:"author_id,omitempty" jsonschema:"the asserting author"`
	After            *uint64       `json:"after,omitempty" jsonschema:"exclusive sequence cursor"`
	At               *uint64       `json:"at,omitempty" jsonschema:"inclusive sequence bound; default the node's current sequence, returned"`
	Limit            *int          `json:"limit,omitempty" jsonschema:"1..1000, default 100"`
}

// RelationshipsOut is a page of relationships as they stood at At.
type RelationshipsOut struct {
	Relationships []Relationship `json:"relationships"`
	At            uint64         `json:"at" jsonschema:"the sequence the page reflects; keep it fixed while paging"`
	NextCursor    *uint64        `json:"next_cursor" jsonschema:"the highest sequence returned, when there is more (continue with after=next_cursor); the requested after on an empty page"`
	HasMore       bool           `json:"has_more"`
	page          page
}

// HTTPHeaders carries the cursor headers.
func (r RelationshipsOut) HTTPHeaders() http.Header { return r.page.headers() }

// window applies the paging rules list_relationships and pull_conversation
// share: state is active (the default) or all; at is an inclusive bound,
// the node's current sequence by default, and a later one is clamped, since
// the answer could not stay fixed past what is stored; after is exclusive.
func (s *Service) window(state *edgeState, at, after *uint64) (atSeq, afterSeq uint64, err error) {
	if *state == "" {
		*state = "active"
	}
	if *state != "active" && *state != "all" {
		return 0, 0, invalid("state is active or all.").With("field", "state")
	}
	atSeq = s.st.Sequence()
	if at != nil && *at < atSeq {
		atSeq = *at
	}
	if after != nil {
		afterSeq = *after
	}
	return atSeq, afterSeq, nil
}

func (s *Service) listRelationships(ctx context.Context, c *api.Call, in relationshipsIn) (RelationshipsOut, error) {
	limit, err := limitOf(in.Limit)
	if err != nil {
		return RelationshipsOut{}, err
	}
	switch {
	case (in.MessageID == "") == (in.ConversationID == ""):
		return RelationshipsOut{}, invalid("Give message_id or conversation_id (one of them).").With("field", "message_id")
	case in.RelationshipType != "" && !knownRelationshipType(string(in.RelationshipType)):
		return RelationshipsOut{}, invalid("relationship_type %q is not in the catalogue; see GET /relationships.", in.RelationshipType).With("field", "relationship_type")
	}
	if in.Direction == "" {
		in.Direction = "outgoing"
	}
	if !slices.Contains(edgeDirections, in.Direction) {
		return RelationshipsOut{}, invalid("direction is incoming, outgoing or both.").With("field", "direction")
	}
	at, after, err := s.window(&in.State, in.At, in.After)
	if err != nil {
		return RelationshipsOut{}, err
	}
	out := RelationshipsOut{Relationships: []Relationship{}, At: at}
	pfx := cat(pfxRelMsg, []byte(in.MessageID), []byte{0})
	if in.ConversationID != "" {
		pfx = cat(pfxRelConv, []byte(in.ConversationID), []byte{0})
	}
	err = s.st.View(func(tx *store.Tx) error {
		return tx.Iterate(pfx, false, func(k, v []byte) error {
			seq := binary.BigEndian.Uint64(k[len(pfx):])
			if seq <= after {
				return nil
			}
			if seq > at {
				return store.ErrStop
			}
			r, err := loadRel(tx, string(v))
			if err != nil {
				return err
			}
			if !in.match(r, at) {
				return nil
			}
			if len(out.Relationships) == limit {
				out.HasMore = true
				return store.ErrStop
			}
			rel, err := relationshipAt(tx, r, at)
			out.Relationships = append(out.Relationships, rel)
			return err
		})
	})
	var last uint64
	if n := len(out.Relationships); n > 0 {
		last = out.Relationships[n-1].Sequence
	}
	out.NextCursor, out.page = nextPage(len(out.Relationships), last, out.HasMore, in.After)
	return out, err
}

// match applies the query's filters to r as it stood at at.
func (in *relationshipsIn) match(r *relRec, at uint64) bool {
	out, inc := r.Source == in.MessageID, r.Target == in.MessageID
	if in.ConversationID != "" {
		out, inc = r.SourceConv == in.ConversationID, r.TargetConv == in.ConversationID
	}
	switch {
	case in.Direction == "outgoing" && !out,
		in.Direction == "incoming" && !inc,
		in.RelationshipType != "" && r.Type != string(in.RelationshipType),
		in.AuthorID != "" && r.Author != in.AuthorID,
		in.State == "active" && r.RetractionID != "" && r.RetractionSequence <= at:
		return false
	}
	return true
}
