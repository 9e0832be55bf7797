package corpus

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"relay/realm/internal/jsonenc"
)

// The records a message writes on the committer (the message, its
// conversation, its author's statistics, its change envelope) are encoded
// by hand, not by reflection: every write pays for them on the one
// goroutine all writes share. marshal takes this path for them and its
// output is byte for byte what it was before (encoding/json, then
// unescapeHTML), which records_json_test.go checks for every field and
// fuzzes, so stored records, their readers and the change feed's immutable
// envelopes do not change.

// recordJSON is a record that appends its own JSON encoding, with the
// HTML characters <, > and & written as they are (marshal's output).
type recordJSON interface {
	appendJSON(b []byte) ([]byte, error)
}

var (
	_ recordJSON = (*Message)(nil)
	_ recordJSON = (*changeMessage)(nil)
	_ recordJSON = (*Conversation)(nil)
)

func (m *Message) appendJSON(b []byte) ([]byte, error) {
	var err error
	if m == nil {
		return append(b, "null"...), nil
	}
	b = append(b, `{"message_id":`...)
	b = jsonenc.AppendString(b, m.MessageID)
	b = append(b, `,"conversation_id":`...)
	b = jsonenc.AppendString(b, m.ConversationID)
	b = append(b, `,"content":`...)
	b = appendStringPtr(b, m.Content)
	if len(m.Payload) > 0 {
		b = append(b, `,"payload":`...)
		if b, err = appendRaw(b, m.Payload); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"has_payload":`...)
	b = strconv.AppendBool(b, m.HasPayload)
	b = append(b, `,"author_id":`...)
	b = jsonenc.AppendString(b, m.AuthorID)
	b = append(b, `,"created_at":`...)
	if b, err = jsonenc.AppendTime(b, m.CreatedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"sequence":`...)
	b = strconv.AppendUint(b, m.Sequence, 10)
	b = append(b, `,"kind":`...)
	b = appendStrings(b, m.Kind)
	b = append(b, `,"tags":`...)
	b = appendStrings(b, m.Tags)
	b = append(b, `,"mentions":`...)
	b = appendStrings(b, m.Mentions)
	if m.SchemaName != "" {
		b = append(b, `,"schema_name":`...)
		b = jsonenc.AppendString(b, m.SchemaName)
	}
	if m.SchemaVersion != 0 {
		b = append(b, `,"schema_version":`...)
		b = strconv.AppendInt(b, int64(m.SchemaVersion), 10)
	}
	if m.SchemaValidated != nil {
		b = append(b, `,"schema_validated":`...)
		b = strconv.AppendBool(b, *m.SchemaValidated)
	}
	b = append(b, `,"realm":`...)
	b = jsonenc.AppendString(b, m.Realm)
	b = append(b, `,"cid":`...)
	b = jsonenc.AppendString(b, m.CID)
	return append(b, '}'), nil
}

func (d *changeMessage) appendJSON(b []byte) ([]byte, error) {
	var err error
	if d == nil {
		return append(b, "null"...), nil
	}
	b = append(b, `{"author_id":`...)
	b = jsonenc.AppendString(b, d.AuthorID)
	b = append(b, `,"cid":`...)
	b = jsonenc.AppendString(b, d.CID)
	b = append(b, `,"content":`...)
	b = appendStringPtr(b, d.Content)
	b = append(b, `,"conversation_id":`...)
	b = jsonenc.AppendString(b, d.ConversationID)
	b = append(b, `,"created_at":`...)
	if b, err = jsonenc.AppendTime(b, d.CreatedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"has_payload":`...)
	b = strconv.AppendBool(b, d.HasPayload)
	b = append(b, `,"kind":`...)
	b = appendStrings(b, d.Kind)
	b = append(b, `,"mentions":`...)
	b = appendStrings(b, d.Mentions)
	b = append(b, `,"message_id":`...)
	b = jsonenc.AppendString(b, d.MessageID)
	if d.Payload != nil {
		b = append(b, `,"payload":`...)
		if b, err = appendRaw(b, *d.Payload); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"realm":`...)
	b = jsonenc.AppendString(b, d.Realm)
	if d.SchemaName != "" {
		b = append(b, `,"schema_name":`...)
		b = jsonenc.AppendString(b, d.SchemaName)
	}
	if d.SchemaValidated != nil {
		b = append(b, `,"schema_validated":`...)
		b = strconv.AppendBool(b, *d.SchemaValidated)
	}
	if d.SchemaVersion != nil {
		b = append(b, `,"schema_version":`...)
		b = strconv.AppendInt(b, int64(*d.SchemaVersion), 10)
	}
	b = append(b, `,"sequence":`...)
	b = strconv.AppendUint(b, d.Sequence, 10)
	if d.Subject != "" {
		b = append(b, `,"subject":`...)
		b = jsonenc.AppendString(b, d.Subject)
	}
	b = append(b, `,"tags":`...)
	b = appendStrings(b, d.Tags)
	return append(b, '}'), nil
}

func (c *Conversation) appendJSON(b []byte) ([]byte, error) {
	var err error
	if c == nil {
		return append(b, "null"...), nil
	}
	b = append(b, `{"conversation_id":`...)
	b = jsonenc.AppendString(b, c.ConversationID)
	b = append(b, `,"subject":`...)
	b = jsonenc.AppendString(b, c.Subject)
	b = append(b, `,"root_message_id":`...)
	b = jsonenc.AppendString(b, c.RootMessageID)
	b = append(b, `,"author_id":`...)
	b = jsonenc.AppendString(b, c.AuthorID)
	b = append(b, `,"created_at":`...)
	if b, err = jsonenc.AppendTime(b, c.CreatedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"updated_at":`...)
	if b, err = jsonenc.AppendTime(b, c.UpdatedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"message_count":`...)
	b = strconv.AppendInt(b, int64(c.MessageCount), 10)
	b = append(b, `,"created_sequence":`...)
	b = strconv.AppendUint(b, c.CreatedSequence, 10)
	b = append(b, `,"last_sequence":`...)
	b = strconv.AppendUint(b, c.LastSequence, 10)
	b = append(b, `,"realm":`...)
	b = jsonenc.AppendString(b, c.Realm)
	b = append(b, `,"cid":`...)
	b = jsonenc.AppendString(b, c.CID)
	return append(b, '}'), nil
}

// appendStrings writes a []string as encoding/json does: nil is null.
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, s)
	}
	return append(b, ']')
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return jsonenc.AppendString(b, *s)
}

// appendRaw writes a raw JSON value as encoding/json does (compacted,
// HTML characters, U+2028 and U+2029 escaped) then marshal (HTML
// characters back): a value of printable ASCII without spaces is already
// compact, and only its HTML characters would change, and change back.
// Anything else goes through encoding/json itself, which also refuses
// what is not JSON.
func appendRaw(b []byte, raw json.RawMessage) ([]byte, error) {
	plain := true
	for _, c := range raw {
		if c <= ' ' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain && json.Valid(raw) {
		return append(b, raw...), nil
	}
	j, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}
