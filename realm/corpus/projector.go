package corpus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"relay/protocol"
	"relay/store"
)

// projector keeps the corpus's projections. It runs on the store's
// committer, which runs every write of the node one at a time: what Apply
// spends, every write waits for.
type projector struct {
	// known is what the write being run knows of the message it is about to
	// store: write sets it in its Submit fn, and Apply of the same op takes
	// it, so that it does not read again what the write has just read. Only
	// the committer goroutine touches it.
	known *knownMessage
	// The author and conversation records every message rewrites are
	// binary (authorrec.go, convrec.go): decoding one costs less than the
	// lookup that reads it, so none is kept decoded.

	home string // this node's realm
}

// knownMessage is a write's event data, the message it encodes, and the
// conversation it appends to, as the write read it; conv is nil for a new
// conversation. msg is what data decodes to (encoding is deterministic and
// decoding gives back what was encoded: TestKnownMessageDecodes), so Apply
// need not decode data again when the event carries these very bytes.
type knownMessage struct {
	data []byte
	msg  messageData
	conv *Conversation
}

var _ store.Projector = (*projector)(nil)

func (*projector) Prefixes() [][]byte { return [][]byte{pfxAll} }

// ProjectionVersion changes whenever what Apply derives from an event
// changes, so that stores projected before are rebuilt (store.Versioned).
// 2: an author's first and last activity are the earliest and latest of
// their messages, in whatever order those are projected. 3: so is a
// conversation's updated_at, the latest of its messages' created_at. 4:
// an author's messages are indexed by sequence (messagesIndexes). 5: so are
// a tag's, and those mentioning an agent. 6: the conversations holding a
// message of each kind are indexed (kindConversations). 7: so are the
// messages of each kind but post, of each schema, and with a payload. 8:
// a schema_validated verdict without a declared schema is not kept. 9:
// the index of conversations by created sequence holds their subjects.
func (*projector) ProjectionVersion() string { return "corpus/9" }

// take returns what the write knows of se and forgets it: nil unless se
// carries the write's data (byte for byte: a fresh message_id is in it).
// An op that failed before its event left known behind; the next event
// clears it.
func (p *projector) take(se *store.StoredEvent) *knownMessage {
	k := p.known
	p.known = nil
	if k == nil || !bytes.Equal(k.data, se.Event.Data) {
		return nil
	}
	return k
}

func (p *projector) Apply(tx *store.Tx, se *store.StoredEvent) error {
	known := p.take(se)
	switch se.Event.Type {
	case evMessageCreated:
		if known != nil {
			return p.applyMessage(tx, se, known.msg, known)
		}
		var d messageData
		if err := protocol.DecodeData(se.Event.Data, &d); err != nil {
			return err
		}
		if se.Event.Realm != p.home {
			if err := checkRemotePayload(d.Payload); err != nil {
				return err
			}
			if err := checkRemoteMessage(se, &d); err != nil {
				return fmt.Errorf("corpus: realm %s's message %s: %w", se.Event.Realm, d.MessageID, err)
			}
		}
		return p.applyMessage(tx, se, d, nil)
	case evRelationshipAsserted:
		return applyAssertion(tx, se, se.Event.Realm != p.home)
	case evRelationshipRetracted:
		return applyRetraction(tx, se, se.Event.Realm != p.home)
	}
	return nil
}

// checkRemoteMessage holds another realm's message to the rules this
// realm's writes keep (prepare): ids, subject, content, kinds, tags,
// mentions, the schema pair and the event's size. A replica can check each
// alone, so every replica refuses the same messages.
func checkRemoteMessage(se *store.StoredEvent, d *messageData) error {
	switch {
	case d.MessageID == "" || len(d.MessageID) > maxRemoteID || d.ConversationID == "" || len(d.ConversationID) > maxRemoteID:
		return errors.New("an id empty or over 128 bytes")
	case d.Subject != "" && (strings.TrimSpace(d.Subject) != d.Subject || protocol.CodePoints(d.Subject) > MaxSubject):
		return errors.New("a subject not trimmed, or over its limit")
	case (d.Content == nil || strings.TrimSpace(*d.Content) == "") && d.Payload == nil:
		return errors.New("neither content nor payload")
	case d.Content != nil && protocol.CodePoints(*d.Content) > MaxContent:
		return errors.New("content over its limit")
	case (d.SchemaName == "") != (d.SchemaVersion == 0):
		return errors.New("a schema name without its version, or a version without a name")
	}
	if kinds, err := normalizeKinds(d.Kind, true); err != nil || !slices.Equal(kinds, d.Kind) {
		return errors.New("kinds outside the catalogue or out of order")
	}
	if tags, err := checkTags(d.Tags); err != nil || !slices.Equal(tags, d.Tags) {
		return errors.New("tags over the limits, repeated or not trimmed")
	}
	if ms, err := checkMentions(d.Mentions); err != nil || !slices.Equal(ms, d.Mentions) {
		return errors.New("mentions that are not author ids, or repeated")
	}
	return checkEventSize(se.Event.Author, protocol.Realm(se.Event.Realm), d)
}

// maxRemoteID bounds the ids another realm's records carry (this realm
// makes UUIDs).
const maxRemoteID = 128

// checkRemotePayload refuses another realm's message whose payload is not
// one this realm's writes would store: its JCS form, within the size and
// depth limits. Stored as it came, it is spliced into every record and
// answer that holds the message, and one that does not read back as JSON
// would break them all. This realm's own messages were checked when
// written (older ones may precede the depth limit, and a rebuild takes
// them as they are).
func checkRemotePayload(payload *string) error {
	if payload == nil {
		return nil
	}
	canon, err := protocol.JCS([]byte(*payload))
	switch {
	case err != nil:
		return fmt.Errorf("corpus: a payload that is not I-JSON: %v", err)
	case string(canon) != *payload:
		return errors.New("corpus: a payload not in its JCS form")
	case len(canon) > MaxPayloadBytes:
		return fmt.Errorf("corpus: a payload of %d JCS bytes, over %d", len(canon), MaxPayloadBytes)
	case protocol.JSONDepth(canon) > MaxPayloadDepth:
		return fmt.Errorf("corpus: a payload nested deeper than %d levels", MaxPayloadDepth)
	}
	return nil
}

// messageOf is the message an event creates.
func messageOf(se *store.StoredEvent, d messageData) Message {
	m := Message{
		MessageID: d.MessageID, ConversationID: d.ConversationID, Content: d.Content, AuthorID: se.Event.Author,
		CreatedAt: se.Event.Time(), Sequence: se.Sequence, Kind: d.Kind, Tags: nonNil(d.Tags), Mentions: nonNil(d.Mentions),
		SchemaName: d.SchemaName, SchemaVersion: d.SchemaVersion, Realm: se.Event.Realm, CID: se.CID.String(),
	}
	if d.Payload != nil {
		m.Payload = json.RawMessage(*d.Payload)
		m.HasPayload = true
	}
	// A verdict is on a declared schema: another realm's without one is
	// not kept, so that validated messages are those of the schemas'
	// indexes (messagesIndexes).
	if d.SchemaValidated && d.SchemaName != "" {
		t := true
		m.SchemaValidated = &t
	}
	return m
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// applyMessage projects a created message; known, when not nil, is the
// conversation as the write that made the event read it in the same op.
func (p *projector) applyMessage(tx *store.Tx, se *store.StoredEvent, d messageData, known *knownMessage) error {
	m := messageOf(se, d)
	seq := u64(se.Sequence)
	var c Conversation
	var ok bool
	if known != nil {
		if ok = known.conv != nil; ok {
			c = *known.conv
		}
	} else {
		var err error
		if ok, err = readConversation(tx, []byte(d.ConversationID), &c); err != nil {
			return err
		}
	}
	created := !ok
	if se.Event.Realm != p.home { // another realm's event: nothing it names may exist yet
		var old Message
		if held, err := readMessage(tx, []byte(d.MessageID), &old); err != nil {
			return err
		} else if held && old.CID == m.CID {
			return nil // this very event, projected already (another projector of the store)
		} else if held {
			return fmt.Errorf("corpus: message %s exists; messages are immutable", d.MessageID)
		}
		if ok && d.Subject != "" {
			return fmt.Errorf("corpus: message %s creates conversation %s, which exists", d.MessageID, d.ConversationID)
		}
	}
	if created {
		if d.Subject == "" {
			return fmt.Errorf("%w: message %s appends to conversation %s", store.ErrDependency, d.MessageID, d.ConversationID)
		}
		c = Conversation{ConversationID: d.ConversationID, Subject: d.Subject, RootMessageID: d.MessageID, AuthorID: m.AuthorID,
			CreatedAt: m.CreatedAt, CreatedSequence: se.Sequence, Realm: m.Realm, CID: m.CID}
		if err := tx.Set(cat(pfxConvSeq, seq), convSeqValue(d.ConversationID, d.Subject)); err != nil {
			return err
		}
	}
	c.MessageCount++
	// The latest message's time, whatever order messages from several
	// realms arrive in: every node shows the same.
	if m.CreatedAt.After(c.UpdatedAt) {
		c.UpdatedAt = m.CreatedAt
	}
	c.LastSequence = se.Sequence
	if err := tx.Set(cat(pfxConv, []byte(d.ConversationID)), encodeConversation(&c)); err != nil {
		return err
	}
	if err := putMessage(tx, &m, seq); err != nil {
		return err
	}
	if err := tx.Set(cat(pfxMsgSeq, seq), []byte(d.MessageID)); err != nil {
		return err
	}
	if err := tx.Set(cat(pfxConvMsgs, []byte(d.ConversationID), seq), []byte(d.MessageID)); err != nil {
		return err
	}
	if err := tx.Set(cat(pfxAuthMsgs, []byte(m.AuthorID), []byte{0}, seq), []byte(d.MessageID)); err != nil {
		return err
	}
	var kinds, schema []string
	for _, k := range m.Kind {
		if kindIndexed(k) {
			kinds = append(kinds, k)
		}
	}
	if m.SchemaName != "" {
		schema = []string{m.SchemaName}
	}
	for _, ix := range [...]struct {
		pfx  []byte
		vals []string
	}{{pfxTagMsgs, m.Tags}, {pfxMentMsgs, m.Mentions}, {pfxKindMsgs, kinds}, {pfxSchMsgs, schema}} {
		for i, v := range ix.vals {
			if slices.Contains(ix.vals[:i], v) {
				continue
			}
			if err := tx.Set(cat(ix.pfx, []byte(v), []byte{0}, seq), []byte(d.MessageID)); err != nil {
				return err
			}
		}
	}
	if m.HasPayload {
		if err := tx.Set(cat(pfxPayMsgs, seq), []byte(d.MessageID)); err != nil {
			return err
		}
	}
	for _, tag := range m.Tags {
		if err := countTag(tx, tag, d.ConversationID); err != nil {
			return err
		}
	}
	for _, kind := range m.Kind {
		ck := cat(pfxKindConv, []byte(kind), []byte{0}, []byte(d.ConversationID))
		if !created { // a new conversation holds no kind yet
			switch _, err := tx.Get(ck); {
			case err == nil:
				continue
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
		}
		if err := tx.Set(ck, nil); err != nil {
			return err
		}
	}
	if err := p.countAuthor(tx, &m, created); err != nil {
		return err
	}
	data, err := marshal(changeData(&m, d.Subject))
	if err != nil {
		return err
	}
	return putChange(tx, seq, Change{SchemaVersion: 1, Sequence: se.Sequence, EventType: "message.created",
		ResourceID: d.MessageID, RecordedAt: m.CreatedAt, Data: data})
}

// changeData is a message as the change feed carries it: only what the
// event says, no read-derived fields.
func changeData(m *Message, subject string) *changeMessage {
	d := &changeMessage{
		AuthorID: m.AuthorID, CID: m.CID, Content: m.Content, ConversationID: m.ConversationID, CreatedAt: m.CreatedAt,
		HasPayload: m.HasPayload, Kind: m.Kind, Mentions: m.Mentions, MessageID: m.MessageID, Realm: m.Realm,
		Sequence: m.Sequence, Subject: subject, Tags: m.Tags,
	}
	if m.HasPayload {
		d.Payload = &m.Payload
	}
	if m.SchemaName != "" {
		d.SchemaName, d.SchemaVersion = m.SchemaName, &m.SchemaVersion
	}
	if m.SchemaValidated != nil {
		t := true
		d.SchemaValidated = &t
	}
	return d
}

// changeMessage is the data of a message.created change. Its fields are in
// the order of their names, and absent exactly when the envelopes' first
// encoding (a map) left them out: stored envelopes are immutable history,
// and new ones must read as the old ones do (TestChangeDataEncoding).
type changeMessage struct {
	AuthorID        string           `json:"author_id"`
	CID             string           `json:"cid"`
	Content         *string          `json:"content"`
	ConversationID  string           `json:"conversation_id"`
	CreatedAt       time.Time        `json:"created_at"`
	HasPayload      bool             `json:"has_payload"`
	Kind            []string         `json:"kind"`
	Mentions        []string         `json:"mentions"`
	MessageID       string           `json:"message_id"`
	Payload         *json.RawMessage `json:"payload,omitempty"`
	Realm           string           `json:"realm"`
	SchemaName      string           `json:"schema_name,omitempty"`
	SchemaValidated *bool            `json:"schema_validated,omitempty"`
	SchemaVersion   *int             `json:"schema_version,omitempty"`
	Sequence        uint64           `json:"sequence"`
	Subject         string           `json:"subject,omitempty"`
	Tags            []string         `json:"tags"`
}

func countTag(tx *store.Tx, tag, conv string) error {
	k := cat(pfxTag, []byte(tag))
	t := tagRec{Tag: tag}
	if _, err := tx.GetJSON(k, &t); err != nil {
		return err
	}
	t.Messages++
	ck := cat(pfxTagConv, []byte(tag), []byte{0}, []byte(conv))
	switch _, err := tx.Get(ck); {
	case errors.Is(err, store.ErrNotFound):
		t.Conversations++
		if err := tx.Set(ck, nil); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	return putJSON(tx, k, &t)
}

func (p *projector) countAuthor(tx *store.Tx, m *Message, createdConversation bool) error {
	k := cat(pfxAuthor, []byte(m.AuthorID))
	a := authorRec{AuthorID: m.AuthorID, Kinds: map[string]int{}}
	switch raw, err := tx.Get(k); {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	default:
		if a, err = decodeAuthor(m.AuthorID, raw); err != nil {
			return err
		}
	}
	// First and last by time and by sequence, whatever order the messages
	// are projected in: an author's message parked behind a record not
	// held yet may be projected after a later one (store.Scoped).
	if a.Messages == 0 || m.Sequence < a.FirstSequence {
		a.FirstSequence = m.Sequence
	}
	if a.Messages == 0 || m.CreatedAt.Before(a.FirstActive) {
		a.FirstActive = m.CreatedAt
	}
	if m.Sequence > a.LastSequence {
		a.LastSequence = m.Sequence
	}
	if a.Messages == 0 || m.CreatedAt.After(a.LastActive) {
		a.LastActive = m.CreatedAt
	}
	a.Messages++
	if createdConversation {
		a.Conversations++
	}
	for _, kind := range m.Kind {
		a.Kinds[kind]++
	}
	a.Hours[m.CreatedAt.UTC().Hour()]++
	a.Weekdays[int(m.CreatedAt.UTC().Weekday())]++
	return tx.Set(k, encodeAuthor(&a))
}
