package corpus

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"relay/realm/internal/jsonenc"
	"relay/store"
)

var (
	pfxAll      = []byte("p/co/")
	pfxMessage  = []byte("p/co/m/")
	pfxMsgSeq   = []byte("p/co/ms/")
	pfxConv     = []byte("p/co/c/")
	pfxConvSeq  = []byte("p/co/cs/")
	pfxConvMsgs = []byte("p/co/cm/")
	pfxAuthMsgs = []byte("p/co/am/") // <author_id>\0<sequence 8> → message id
	pfxTagMsgs  = []byte("p/co/tm/") // <tag>\0<sequence 8> → message id
	pfxMentMsgs = []byte("p/co/mm/") // <author_id mentioned>\0<sequence 8> → message id
	pfxKindConv = []byte("p/co/kc/") // <kind>\0<conversation_id> → nil: a conversation holds a message of the kind
	pfxKindMsgs = []byte("p/co/km/") // <kind>\0<sequence 8> → message id, for every kind but post (kindIndexed)
	pfxPayMsgs  = []byte("p/co/pm/") // <sequence 8> → message id: the messages with a payload
	pfxSchMsgs  = []byte("p/co/sm/") // <schema_name>\0<sequence 8> → message id
	pfxTag      = []byte("p/co/tag/")
	pfxTagConv  = []byte("p/co/tagc/")
	pfxAuthor   = []byte("p/co/au/")
	pfxChange   = []byte("p/co/ch/")

	pfxOpToken = []byte("l/co/op/")
)

func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// Message is a corpus message as every representation derives it.
type Message struct {
	MessageID       string          `json:"message_id"`
	ConversationID  string          `json:"conversation_id"`
	Content         *string         `json:"content"`
	Payload         json.RawMessage `json:"payload,omitempty" jsonschema:"any JSON value, when one was supplied (null included)"`
	HasPayload      bool            `json:"has_payload"`
	AuthorID        string          `json:"author_id"`
	CreatedAt       time.Time       `json:"created_at"`
	Sequence        uint64          `json:"sequence"`
	Kind            []string        `json:"kind"`
	Tags            []string        `json:"tags"`
	Mentions        []string        `json:"mentions"`
	SchemaName      string          `json:"schema_name,omitempty"`
	SchemaVersion   int             `json:"schema_version,omitempty"`
	SchemaValidated *bool           `json:"schema_validated,omitempty" jsonschema:"true when the payload validated against the declared schema; absent otherwise"`
	Realm           string          `json:"realm"`
	CID             string          `json:"cid"`
}

// Conversation is a conversation's summary.
type Conversation struct {
	ConversationID  string    `json:"conversation_id"`
	Subject         string    `json:"subject"`
	RootMessageID   string    `json:"root_message_id"`
	AuthorID        string    `json:"author_id" jsonschema:"who created it"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
	MessageCount    int       `json:"message_count"`
	CreatedSequence uint64    `json:"created_sequence"`
	LastSequence    uint64    `json:"last_sequence"`
	Realm           string    `json:"realm"`
	CID             string    `json:"cid"`
}

// messagesIndexes are the indexes a message listing reads, as one
// (scanSeqs): a conversation's messages, an author's, those mentioning an
// agent, those with a tag, a schema, one of the kinds (none of them post),
// a payload or any schema (for a schema_version, or schema_validated=true:
// a version, and a verdict, come only with a declared schema), or all
// messages; each by sequence. The listing's filters are applied to what
// they hold.
func (in *messagesIn) messagesIndexes(tx *store.Tx) ([][]byte, error) {
	one := func(pfx ...[]byte) ([][]byte, error) { return [][]byte{cat(pfx...)}, nil }
	switch {
	case in.ConversationID != "":
		return one(pfxConvMsgs, []byte(in.ConversationID))
	case in.AuthorID != "":
		return one(pfxAuthMsgs, []byte(in.AuthorID), []byte{0})
	case in.MentionedAgent != "":
		return one(pfxMentMsgs, []byte(in.MentionedAgent), []byte{0})
	case in.Tag != "":
		return one(pfxTagMsgs, []byte(in.Tag), []byte{0})
	case in.SchemaName != "":
		return one(pfxSchMsgs, []byte(in.SchemaName), []byte{0})
	case len(in.Kinds) > 0 && !slices.ContainsFunc(in.Kinds, func(k string) bool { return !kindIndexed(k) }):
		var out [][]byte
		for _, k := range in.Kinds {
			out = append(out, cat(pfxKindMsgs, []byte(k), []byte{0}))
		}
		return out, nil
	case in.HasPayload != nil && *in.HasPayload:
		return one(pfxPayMsgs)
	case in.SchemaVersion != nil || in.SchemaValidated != nil && *in.SchemaValidated:
		return schemaIndexes(tx)
	}
	return one(pfxMsgSeq)
}

// kindIndexed reports whether messages of kind are indexed by it: every
// kind but post, the default, which most messages are and a listing of
// all messages finds soon.
func kindIndexed(kind string) bool { return kind != "post" }

// tagRec counts a tag's use.
type tagRec struct {
	Tag           string `json:"tag"`
	Messages      int    `json:"message_count"`
	Conversations int    `json:"conversation_count"`
}

// authorRec is an author's activity.
type authorRec struct {
	AuthorID      string         `json:"author_id"`
	Messages      int            `json:"message_count"`
	Conversations int            `json:"conversation_count"`
	Kinds         map[string]int `json:"kinds"`
	FirstSequence uint64         `json:"first_sequence"`
	LastSequence  uint64         `json:"last_sequence"`
	FirstActive   time.Time      `json:"first_active"`
	LastActive    time.Time      `json:"last_active"`
	Hours         [24]int        `json:"hours"`
	Weekdays      [7]int         `json:"weekdays"`
}

// Change is one envelope of the change feed.
type Change struct {
	SchemaVersion int             `json:"schema_version"`
	Sequence      uint64          `json:"sequence"`
	EventType     string          `json:"event_type"`
	ResourceID    string          `json:"resource_id"`
	RecordedAt    time.Time       `json:"recorded_at"`
	Data          json.RawMessage `json:"data"`
}

func putJSON(tx *store.Tx, k []byte, v any) error {
	b, err := marshal(v)
	if err != nil {
		return err
	}
	return tx.Set(k, b)
}

// marshal encodes without HTML escaping, as every corpus representation is.
// The records a write stores encode themselves (records_json.go), to the
// same bytes.
func marshal(v any) ([]byte, error) {
	if r, ok := v.(recordJSON); ok {
		b, err := r.appendJSON(make([]byte, 0, 512))
		if err != nil {
			return nil, err
		}
		return unescapeHTML(b), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return unescapeHTML(b), nil
}

// unescapeHTML undoes encoding/json's \u003c, \u003e and \u0026 escapes, so
// byte counts match JSON.stringify. Most records hold none of them and are
// returned as they are; otherwise the runs between backslashes are copied
// whole.
func unescapeHTML(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u00`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\\')
		if i < 0 || i+1 == len(b) {
			return append(out, b...)
		}
		out, b = append(out, b[:i]...), b[i:]
		if len(b) >= 6 && b[1] == 'u' && b[2] == '0' && b[3] == '0' {
			if c := htmlUnescaped(b[4], b[5]); c != 0 {
				out, b = append(out, c), b[6:]
				continue
			}
		}
		out, b = append(out, b[0], b[1]), b[2:] // an escape of its own, kept
	}
	return out
}

// htmlUnescaped is the character encoding/json writes as \u00<hi><lo> for
// HTML's sake, or 0.
func htmlUnescaped(hi, lo byte) byte {
	switch string([]byte{hi, lo}) {
	case "3c":
		return '<'
	case "3e":
		return '>'
	case "26":
		return '&'
	}
	return 0
}

// encodeChange is marshal(c), put together without encoding c.Data again:
// c.Data is marshal's output, compact and unescaped already, which marshal
// would only scan, escape and unescape back.
func encodeChange(c *Change) ([]byte, error) {
	if len(c.Data) == 0 {
		return marshal(c)
	}
	b := make([]byte, 0, len(c.Data)+len(c.ResourceID)+len(c.EventType)+128)
	b = append(b, `{"schema_version":`...)
	b = strconv.AppendInt(b, int64(c.SchemaVersion), 10)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendUint(b, c.Sequence, 10)
	b = append(b, `,"event_type":`...)
	b = jsonenc.AppendString(b, c.EventType)
	b = append(b, `,"resource_id":`...)
	b = jsonenc.AppendString(b, c.ResourceID)
	b = append(b, `,"recorded_at":`...)
	b, err := jsonenc.AppendTime(b, c.RecordedAt)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"data":`...)
	b = append(b, c.Data...)
	return append(b, '}'), nil
}

// putChange stores a change envelope under its sequence.
func putChange(tx *store.Tx, seq []byte, c Change) error {
	b, err := encodeChange(&c)
	if err != nil {
		return err
	}
	return tx.Set(cat(pfxChange, seq), b)
}

// A message is stored once, in its change envelope (p/co/ch/<sequence>),
// whose data holds every field of the message under the message's own
// names; p/co/m/<message_id> holds only that sequence (8 bytes). A message
// whose envelope would not give it back whole (a replicated one with a
// schema_version but no schema_name) is stored whole under p/co/m/ as
// JSON, as every message was before; readMessage reads both.
//
// msgRefLen tells the two apart: no JSON record is 8 bytes long.
const msgRefLen = 8

// inChange reports whether m's change envelope gives m back whole.
func inChange(m *Message) bool { return m.SchemaName != "" || m.SchemaVersion == 0 }

// putMessage stores m's record under its id: its sequence when its change
// envelope (stored at seq by the same projection) holds it.
func putMessage(tx *store.Tx, m *Message, seq []byte) error {
	k := cat(pfxMessage, []byte(m.MessageID))
	if inChange(m) {
		return tx.Set(k, seq)
	}
	return putJSON(tx, k, m)
}

// readMessage reads the message with id into m; found is false when it is
// not held.
func readMessage(tx *store.Tx, id []byte, m *Message) (found bool, err error) {
	_, found, err = readMessageRaw(tx, id, m)
	return found, err
}

// readMessageSized is readMessage with the size of the message's JSON
// record as it is stored, or would be stored whole: what an export page
// counts against its budget.
func readMessageSized(tx *store.Tx, id []byte, m *Message) (int, bool, error) {
	raw, found, err := readMessageRaw(tx, id, m)
	if err != nil || !found || raw != nil {
		return len(raw), found, err
	}
	b, err := marshal(m)
	return len(b), true, err
}

// readMessageRaw is readMessage returning the whole JSON record when the
// message is stored so, nil when it is read from its change envelope.
func readMessageRaw(tx *store.Tx, id []byte, m *Message) (raw []byte, found bool, err error) {
	b, err := tx.Get(cat(pfxMessage, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if len(b) != msgRefLen {
		return b, true, json.Unmarshal(b, m)
	}
	env, err := tx.Get(cat(pfxChange, b))
	if err != nil {
		return nil, true, fmt.Errorf("corpus: message %s at sequence %d: %w", id, binary.BigEndian.Uint64(b), err)
	}
	// The envelope's data carries the message's fields under the
	// message's names (and subject, which a Message has not).
	var c struct {
		Data *Message `json:"data"`
	}
	c.Data = m
	return nil, true, json.Unmarshal(env, &c)
}
