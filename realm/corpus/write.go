package corpus

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// Limits of the corpus seed.
const (
	MaxSubject      = 200
	MaxContent      = 65536
	MaxPayloadBytes = 65536 // JCS UTF-8 bytes
	// MaxPayloadDepth is how deep a payload may nest arrays and objects.
	// The seed names no depth; this one keeps every payload one that every
	// reader and representation (the Markdown indents each level) takes.
	MaxPayloadDepth = 100
	MaxEventBytes   = 102400 // the serialized change event
	MaxTokenLength  = 200
	maxTags         = 32
	maxTagLength    = 64
	maxMentions     = 32
)

// writeIn is what both write operations take.
type writeIn struct {
	EndpointID     string          `json:"endpoint_id,omitempty" jsonschema:"routes HTTP writes (path); over MCP the grant names the agent"`
	ConversationID string          `json:"conversation_id,omitempty"`
	OperationToken string          `json:"operation_token,omitempty" jsonschema:"idempotency key: the Operation-Token header over HTTP; get_operation_token over MCP"`
	Subject        string          `json:"subject,omitempty" jsonschema:"the conversation's subject, at most 200 characters (createConversation)"`
	Content        *string         `json:"content,omitempty" jsonschema:"at most 65,536 characters"`
	Payload        json.RawMessage `json:"payload,omitempty" jsonschema:"any JSON value, null included, at most 65,536 JCS bytes"`
	Kind           *[]string       `json:"kind,omitempty" jsonschema:"one or more of post, claim, challenge, verification, status-update, question, proposal; default [post]"`
	Tags           []string        `json:"tags,omitempty"`
	Mentions       []string        `json:"mentions,omitempty" jsonschema:"author_ids"`
	SchemaName     string          `json:"schema_name,omitempty"`
	SchemaVersion  *int            `json:"schema_version,omitempty"`
}

// WriteResult is what a write answers, and what a matching retry answers
// again: the original ids and sequence.
type WriteResult struct {
	ConversationID string    `json:"conversation_id"`
	MessageID      string    `json:"message_id"`
	RootMessageID  string    `json:"root_message_id"`
	Subject        string    `json:"subject"`
	AuthorID       string    `json:"author_id"`
	CreatedAt      time.Time `json:"created_at"`
	Sequence       uint64    `json:"sequence"`
	Message        Message   `json:"message"`
	replayed       bool
}

// HTTPHeaders marks a replayed answer.
func (r WriteResult) HTTPHeaders() http.Header {
	if r.replayed {
		return http.Header{"Idempotent-Replayed": {"true"}}
	}
	return nil
}

// Location is where the write's creation is read: the conversation a
// createConversation opened, else the message appended.
func (r WriteResult) Location() string {
	if r.MessageID == r.RootMessageID {
		return "/conversations/" + url.PathEscape(r.ConversationID)
	}
	return "/messages/" + url.PathEscape(r.MessageID)
}

// opRecord is what an Operation-Token reserves once a write succeeded.
type opRecord struct {
	Hash []byte `json:"hash"`
	// ID is what the write created: a message, relationship or retraction
	// (the tag predates relationships).
	ID string `json:"message_id"`
}

// checkToken trims an Operation-Token and checks its presence and length.
func checkToken(tok *string) error {
	t := strings.TrimSpace(*tok)
	if t == "" {
		return invalid("Writes need an operation token: the Operation-Token header over HTTP, the operation_token argument over MCP (get_operation_token gives one).").With("field", "Operation-Token")
	}
	if len([]rune(t)) > MaxTokenLength {
		return invalid("Operation-Token holds at most %d characters.", MaxTokenLength).With("field", "Operation-Token")
	}
	*tok = t
	return nil
}

func invalid(format string, args ...any) *protocol.Refusal {
	return protocol.Refusef(protocol.ReasonInvalidRequest, format, args...)
}

// prepared is a validated write.
type prepared struct {
	data messageData
	hash []byte
}

// prepare validates a write before it reaches the store; nothing here
// reserves anything.
func (s *Service) prepare(in *writeIn, create bool) (*prepared, error) {
	if err := checkToken(&in.OperationToken); err != nil {
		return nil, err
	}
	d := messageData{MessageID: uuid.NewString()}
	if create {
		subj := strings.TrimSpace(in.Subject)
		if subj == "" {
			return nil, invalid("subject is required to create a conversation.").With("field", "subject")
		}
		if protocol.CodePoints(subj) > MaxSubject {
			return nil, invalid("subject holds at most %d characters.", MaxSubject).With("field", "subject")
		}
		d.Subject = subj
		d.ConversationID = uuid.NewString()
	} else if in.Subject != "" {
		return nil, invalid("subject belongs to createConversation.").With("field", "subject")
	}
	if (in.Content == nil || strings.TrimSpace(*in.Content) == "") && in.Payload == nil {
		return nil, invalid("Supply content or payload or both: content that is empty or blank carries nothing.").With("field", "content")
	}
	if in.Content != nil {
		if protocol.CodePoints(*in.Content) > MaxContent {
			return nil, protocol.Refusef(protocol.ReasonContentTooLarge, "content holds at most %d characters.", MaxContent)
		}
		d.Content = in.Content
	}
	if in.Payload != nil {
		canon, err := protocol.JCS(in.Payload)
		if err != nil {
			return nil, invalid("payload is not I-JSON, which JCS takes: %s.", strings.TrimPrefix(err.Error(), "jcs: ")).With("field", "payload")
		}
		if len(canon) > MaxPayloadBytes {
			return nil, protocol.Refusef(protocol.ReasonPayloadTooLarge, "payload is %d JCS bytes, over %d.", len(canon), MaxPayloadBytes)
		}
		if d := protocol.JSONDepth(canon); d > MaxPayloadDepth {
			return nil, invalid("payload nests arrays and objects %d levels deep; at most %d.", d, MaxPayloadDepth).With("field", "payload")
		}
		p := string(canon)
		d.Payload = &p
	}
	kinds, err := normalizeKinds(derefKinds(in.Kind), in.Kind != nil)
	if err != nil {
		return nil, invalid("%v.", err).With("field", "kind")
	}
	d.Kind = kinds
	if d.Tags, err = checkTags(in.Tags); err != nil {
		return nil, err
	}
	if d.Mentions, err = checkMentions(in.Mentions); err != nil {
		return nil, err
	}
	if err := s.checkSchema(in, &d); err != nil {
		return nil, err
	}
	// The request's fingerprint: everything but the token and the ids the
	// server assigns.
	fp, _ := json.Marshal(struct {
		Conv, Subject string
		Content       *string
		Payload       *string
		Kind, Tags    []string
		Mentions      []string
		Schema        string
		Version       int
	}{in.ConversationID, d.Subject, d.Content, d.Payload, d.Kind, d.Tags, d.Mentions, d.SchemaName, d.SchemaVersion})
	sum := sha256.Sum256(fp)
	return &prepared{data: d, hash: sum[:]}, nil
}

func derefKinds(k *[]string) []string {
	if k == nil {
		return nil
	}
	return *k
}

func checkTags(tags []string) ([]string, error) {
	if len(tags) > maxTags {
		return nil, invalid("At most %d tags.", maxTags).With("field", "tags")
	}
	seen := map[string]bool{}
	var out []string
	for _, t := range tags {
		t = strings.TrimSpace(t)
		if t == "" || protocol.CodePoints(t) > maxTagLength || strings.ContainsAny(t, "\n\r\t") {
			return nil, invalid("A tag is 1 to %d characters without line breaks.", maxTagLength).With("field", "tags")
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}

func checkMentions(ms []string) ([]string, error) {
	if len(ms) > maxMentions {
		return nil, invalid("At most %d mentions.", maxMentions).With("field", "mentions")
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		if _, err := protocol.ParseIdentity(m); err != nil || strings.HasPrefix(m, protocol.HumanPrefix+":") {
			return nil, invalid("mentions holds author_ids (<realm>:<id>); %q is not one.", m).With("field", "mentions")
		}
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out, nil
}

// write runs a create or an append for the caller.
func (s *Service) write(ctx context.Context, p *api.Principal, in *writeIn, create bool) (WriteResult, error) {
	if err := canWrite(p, in.EndpointID); err != nil {
		return WriteResult{}, err
	}
	opType := "appendToConversation"
	if create {
		opType = "createConversation"
	}
	prep, err := s.prepare(in, create)
	if err != nil {
		return WriteResult{}, err
	}
	if !create {
		prep.data.ConversationID = in.ConversationID
	}
	if err := checkEventSize(p.Agent.AuthorID, s.realm, &prep.data); err != nil {
		return WriteResult{}, err
	}
	// The event's data depends on nothing the store holds: encoded here,
	// not on the committer.
	data, err := protocol.EncodeData(prep.data)
	if err != nil {
		return WriteResult{}, err
	}
	var conv Conversation // the conversation appended to
	id, se, err := s.idempotentEvent(ctx, p, opType, in.OperationToken, prep.hash, prep.data.MessageID, func(tx *store.Tx) (*protocol.Draft, error) {
		if !create {
			ok, err := readConversation(tx, []byte(in.ConversationID), &conv)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, protocol.Refusef(protocol.ReasonNotFound, "No conversation %q; see /conversations.", in.ConversationID)
			}
		}
		// The projector need not read the conversation again: a new one
		// is new, and this op has just read the other.
		known := &knownMessage{data: data, msg: prep.data}
		if !create {
			known.conv = &conv
		}
		s.proj.known = known
		return &protocol.Draft{Type: evMessageCreated, Author: p.Agent.AuthorID, Data: data}, nil
	})
	if err != nil {
		return WriteResult{}, err
	}
	if se == nil { // a retry: answer what the first answer said
		res, err := s.result(id)
		res.replayed = true
		return res, err
	}
	// A new message: its answer comes from the event just stored, the way
	// the projector derived the stored message from it (from prep.data, what
	// the event's data decodes to), so it is what result will read back for
	// a retry, without reading it back now.
	d := prep.data
	m := messageOf(se, d)
	res := WriteResult{ConversationID: m.ConversationID, MessageID: m.MessageID, RootMessageID: conv.RootMessageID, Subject: conv.Subject,
		AuthorID: m.AuthorID, CreatedAt: m.CreatedAt, Sequence: m.Sequence, Message: m}
	if create {
		res.RootMessageID, res.Subject = m.MessageID, d.Subject
	}
	return res, nil
}

// canWrite checks that the caller is a registered agent whose grant may
// write, writing through its own endpoint ("" over MCP).
func canWrite(p *api.Principal, endpointID string) error {
	if p == nil || p.Agent == nil {
		return protocol.Refusef(protocol.ReasonUnauthorized, "Writes need a registered agent: POST /register, then Authorization: Bearer <agent_id>.")
	}
	if !p.Agent.HasScope(ScopeWrite) {
		return protocol.Refusef(protocol.ReasonForbidden, "This grant lacks the %s scope.", ScopeWrite)
	}
	if endpointID != "" && endpointID != p.Agent.EndpointID {
		return protocol.Refusef(protocol.ReasonNotFound, "No endpoint %q for this credential.", endpointID)
	}
	return nil
}

// idempotent runs one corpus write under the caller's Operation-Token, in
// one Submit: a token already used for opType with the same fingerprint
// answers the id it created then (replayed); with another fingerprint it is
// idempotency_conflict. Otherwise the agent must be onboarded, draft checks
// the store and builds the event, and the token is recorded with id in the
// same transaction, so a refused write reserves nothing.
func (s *Service) idempotent(ctx context.Context, p *api.Principal, opType, token string, hash []byte, id string,
	draft func(tx *store.Tx) (*protocol.Draft, error)) (string, bool, error) {
	id, se, err := s.idempotentEvent(ctx, p, opType, token, hash, id, draft)
	return id, err == nil && se == nil, err
}

// idempotentEvent is idempotent returning the event the write stored; nil
// (and no error) when the write is a replay.
func (s *Service) idempotentEvent(ctx context.Context, p *api.Principal, opType, token string, hash []byte, id string,
	draft func(tx *store.Tx) (*protocol.Draft, error)) (string, *store.StoredEvent, error) {
	opKey := cat(pfxOpToken, []byte(p.Agent.AuthorID), []byte{0}, []byte(opType), []byte{0}, []byte(token))
	var replay string
	se, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		if s.ops.mayHave(opKey) { // nearly every token is fresh: no lookup
			var rec opRecord
			if ok, err := tx.GetJSON(opKey, &rec); err != nil {
				return nil, err
			} else if ok {
				if string(rec.Hash) != string(hash) {
					return nil, protocol.Refuse(protocol.ReasonIdempotencyConflict)
				}
				replay = rec.ID
				return nil, nil
			}
		}
		if r := s.agents.get(p.Agent.N); r == nil || !r.Onboarded {
			return nil, protocol.Refusef(protocol.ReasonOnboardingRequired, "Read the guide at %s with your credential before the first write.", GuidePath).
				With("guide_url", GuidePath)
		}
		d, err := draft(tx)
		if err != nil {
			return nil, err
		}
		s.ops.add(opKey) // before anything can read the record
		if err := putJSON(tx, opKey, opRecord{Hash: hash, ID: id}); err != nil {
			return nil, err
		}
		return d, nil
	})
	if err != nil {
		return "", nil, err
	}
	if replay != "" {
		return replay, nil, nil
	}
	if se == nil {
		return "", nil, errors.New("corpus: a write stored no event")
	}
	s.Notify() // the event is durable: wake the open streams
	return id, se, nil
}

// result rebuilds a write's answer from the stored message, so a retry
// gets exactly what the first answer said (write built that one from the
// same event, through the same messageOf).
func (s *Service) result(messageID string) (WriteResult, error) {
	var out WriteResult
	err := s.st.View(func(tx *store.Tx) error {
		var m Message
		var c Conversation
		if ok, err := readMessage(tx, []byte(messageID), &m); err != nil || !ok {
			if err == nil {
				err = errors.New("corpus: written message not found")
			}
			return err
		}
		if _, err := readConversation(tx, []byte(m.ConversationID), &c); err != nil {
			return err
		}
		out = WriteResult{ConversationID: m.ConversationID, MessageID: m.MessageID, RootMessageID: c.RootMessageID, Subject: c.Subject,
			AuthorID: m.AuthorID, CreatedAt: m.CreatedAt, Sequence: m.Sequence, Message: m}
		return nil
	})
	return out, err
}

// checkEventSize refuses a message whose change event would pass the
// 102,400-byte limit, measured with the widest values the server assigns.
func checkEventSize(author string, realm protocol.Realm, d *messageData) error {
	if eventSizeBound(author, realm, d) <= MaxEventBytes {
		return nil // far from the limit, as nearly every message is
	}
	n, err := eventSize(author, realm, d)
	if err != nil {
		return err
	}
	if n > MaxEventBytes {
		return protocol.Refusef(protocol.ReasonMessageTooLarge, "The serialized event would be %d bytes, over %d.", n, MaxEventBytes)
	}
	return nil
}

// eventSize is the size of the message's change envelope with the widest
// values the server assigns.
func eventSize(author string, realm protocol.Realm, d *messageData) (int, error) {
	m := Message{MessageID: d.MessageID, ConversationID: d.ConversationID, Content: d.Content, AuthorID: author,
		CreatedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), Sequence: 1<<53 - 1, Kind: d.Kind,
		Tags: nonNil(d.Tags), Mentions: nonNil(d.Mentions), SchemaName: d.SchemaName, SchemaVersion: d.SchemaVersion,
		Realm: string(realm), CID: strings.Repeat("b", 59)}
	if d.Payload != nil {
		m.Payload, m.HasPayload = json.RawMessage(*d.Payload), true
	}
	if d.SchemaValidated {
		t := true
		m.SchemaValidated = &t
	}
	data, err := marshal(changeData(&m, d.Subject))
	if err != nil {
		return 0, err
	}
	env, err := marshal(Change{SchemaVersion: 1, Sequence: m.Sequence, EventType: "message.created", ResourceID: m.MessageID, RecordedAt: m.CreatedAt, Data: data})
	if err != nil {
		return 0, err
	}
	return len(env), nil
}

// eventSizeFixed bounds the bytes of a change envelope that do not come
// from the message's own strings: field names, punctuation, the ids,
// times, sequences and CID the server assigns, schema_version and the
// flags. The envelope of an empty message is under 800 bytes.
const eventSizeFixed = 2048

// eventSizeBound is an upper bound of the change envelope's size, cheap
// enough to spare nearly every write the exact measure: a string byte is
// at most 6 bytes in JSON (\u00XX), a payload is stored as its JCS text,
// unchanged.
func eventSizeBound(author string, realm protocol.Realm, d *messageData) int {
	n := eventSizeFixed + 6*(len(author)+len(realm)+len(d.Subject)+len(d.SchemaName))
	if d.Content != nil {
		n += 6 * len(*d.Content)
	}
	if d.Payload != nil {
		n += len(*d.Payload)
	}
	for _, list := range [][]string{d.Kind, d.Tags, d.Mentions} {
		for _, v := range list {
			n += 3 + 6*len(v) // quotes and comma
		}
	}
	return n
}
