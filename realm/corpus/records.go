package corpus

import (
	"encoding/binary"
	"encoding/json"
	"time"

	"relay/store"
)

var (
	pfxAll      = []byte("p/co/")
	pfxMessage  = []byte("p/co/m/")
	pfxMsgSeq   = []byte("p/co/ms/")
	pfxConv     = []byte("p/co/c/")
	pfxConvSeq  = []byte("p/co/cs/")
	pfxConvMsgs = []byte("p/co/cm/")
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
func marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return unescapeHTML(b), nil
}

// unescapeHTML undoes encoding/json's \u003c, \u003e and \u0026 escapes, so
// byte counts match JSON.stringify.
func unescapeHTML(b []byte) []byte {
	out := b[:0:0]
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+5 < len(b) && b[i+1] == 'u' && b[i+2] == '0' && b[i+3] == '0' {
			switch string(b[i+4 : i+6]) {
			case "3c":
				out = append(out, '<')
				i += 5
				continue
			case "3e":
				out = append(out, '>')
				i += 5
				continue
			case "26":
				out = append(out, '&')
				i += 5
				continue
			}
		}
		if b[i] == '\\' && i+1 < len(b) {
			out = append(out, b[i], b[i+1])
			i++
			continue
		}
		out = append(out, b[i])
	}
	return out
}
