package parley

import (
	"strconv"
	"time"

	"relay/protocol"
	"relay/realm/internal/jsonenc"
)

// A post's answer is encoded by hand, as its records are (records_json.go):
// every post over HTTP pays for it, and encoding/json spent most of that in
// reflection and in compacting what each time's MarshalJSON wrote. The
// output is byte for byte what an encoding/json Encoder with
// SetEscapeHTML(false) writes for the same value, the HTTP transport's
// encoder, without its final newline (wire_json_test.go checks every field
// and fuzzes the strings). A message with provenance or a refusal is left
// to encoding/json: neither is on the path of a plain post.

// AppendJSON appends the answer's JSON to b. ok is false, and b
// unchanged, when the answer holds what only encoding/json writes (or
// what it would refuse): encode it with encoding/json then.
func (p PostOut) AppendJSON(b []byte) (_ []byte, ok bool) {
	start := len(b)
	b = append(b, `{"message":`...)
	b, ok = p.Message.appendJSON(b)
	if !ok {
		return b[:start], false
	}
	b = append(b, `,"thread":`...)
	if b, ok = p.Thread.appendJSON(b); !ok {
		return b[:start], false
	}
	return append(b, '}'), true
}

func (m *MessageOut) appendJSON(b []byte) ([]byte, bool) {
	if m.Provenance != nil || m.Refusal != nil {
		return b, false
	}
	b = append(b, `{"parley":`...)
	b = jsonenc.AppendString(b, m.Parley)
	b = append(b, `,"id":`...)
	b = jsonenc.AppendString(b, m.ID)
	b = append(b, `,"realm":`...)
	b = jsonenc.AppendString(b, m.Realm)
	b = append(b, `,"cid":`...)
	b = jsonenc.AppendString(b, m.CID)
	b = append(b, `,"thread":`...)
	b = jsonenc.AppendString(b, m.Thread)
	b = append(b, `,"parent":`...)
	b = appendStringPtr(b, m.Parent)
	b = append(b, `,"kind":`...)
	b = jsonenc.AppendString(b, string(m.Kind))
	b = append(b, `,"body":`...)
	b = jsonenc.AppendString(b, m.Body)
	b = append(b, `,"from":`...)
	b = m.From.appendJSON(b)
	b = append(b, `,"author_kind":`...)
	b = jsonenc.AppendString(b, m.AuthorKind)
	b = append(b, `,"relates_to":`...)
	b = appendStrings(b, m.RelatesTo)
	b = append(b, `,"claims":`...)
	b = appendStrings(b, m.Claims)
	b = append(b, `,"refutes":`...)
	b = appendStrings(b, m.Refutes)
	b = append(b, `,"evidence":`...)
	b = appendEvidence(b, m.Evidence)
	if m.Image != nil {
		b = append(b, `,"image":{"url":`...)
		b = jsonenc.AppendString(b, m.Image.URL)
		if m.Image.CID != "" {
			b = append(b, `,"cid":`...)
			b = jsonenc.AppendString(b, m.Image.CID)
		}
		if m.Image.MediaType != "" {
			b = append(b, `,"media_type":`...)
			b = jsonenc.AppendString(b, m.Image.MediaType)
		}
		if m.Image.Bytes != 0 {
			b = append(b, `,"bytes":`...)
			b = strconv.AppendInt(b, int64(m.Image.Bytes), 10)
		}
		b = append(b, '}')
	}
	b = append(b, `,"awaiting":`...)
	b = strconv.AppendBool(b, m.Awaiting)
	b = append(b, `,"created_at":`...)
	b, ok := appendTime(b, m.CreatedAt)
	if !ok {
		return b, false
	}
	if m.Status != "" {
		b = append(b, `,"status":`...)
		b = jsonenc.AppendString(b, m.Status)
	}
	return append(b, '}'), true
}

func (t *ThreadOut) appendJSON(b []byte) ([]byte, bool) {
	var ok bool
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, t.ID)
	b = append(b, `,"realm":`...)
	b = jsonenc.AppendString(b, t.Realm)
	b = append(b, `,"cid":`...)
	b = jsonenc.AppendString(b, t.CID)
	b = append(b, `,"board":`...)
	b = strconv.AppendUint(b, t.Board, 10)
	b = append(b, `,"title":`...)
	b = jsonenc.AppendString(b, t.Title)
	b = append(b, `,"state":`...)
	b = jsonenc.AppendString(b, string(t.State))
	b = append(b, `,"state_origin":`...)
	b = appendStringPtr(b, t.StateOrigin)
	b = append(b, `,"state_confirmed_at":`...)
	if t.StateConfirmedAt == nil {
		b = append(b, "null"...)
	} else if b, ok = appendTime(b, *t.StateConfirmedAt); !ok {
		return b, false
	}
	if t.StateConfirmedBy != "" {
		b = append(b, `,"state_confirmed_by":`...)
		b = jsonenc.AppendString(b, t.StateConfirmedBy)
	}
	if t.StateSetBy != "" {
		b = append(b, `,"state_set_by":`...)
		b = jsonenc.AppendString(b, t.StateSetBy)
	}
	if t.StateSetByRealm != "" {
		b = append(b, `,"state_set_by_realm":`...)
		b = jsonenc.AppendString(b, t.StateSetByRealm)
	}
	b = append(b, `,"state_set_at":`...)
	if b, ok = appendTime(b, t.StateSetAt); !ok {
		return b, false
	}
	b = append(b, `,"proposal":`...)
	b = strconv.AppendBool(b, t.Proposal)
	b = append(b, `,"locked":`...)
	b = strconv.AppendBool(b, t.Locked)
	b = append(b, `,"creator":`...)
	b = jsonenc.AppendString(b, t.Creator)
	b = append(b, `,"created_at":`...)
	if b, ok = appendTime(b, t.CreatedAt); !ok {
		return b, false
	}
	b = append(b, `,"updated_at":`...)
	if b, ok = appendTime(b, t.UpdatedAt); !ok {
		return b, false
	}
	b = append(b, `,"awaiting":`...)
	b = strconv.AppendBool(b, t.Awaiting)
	b = append(b, `,"last_message":`...)
	if l := t.LastMessage; l == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"id":`...)
		b = jsonenc.AppendString(b, l.ID)
		b = append(b, `,"kind":`...)
		b = jsonenc.AppendString(b, string(l.Kind))
		b = append(b, `,"from":`...)
		b = l.From.appendJSON(b)
		b = append(b, `,"created_at":`...)
		if b, ok = appendTime(b, l.CreatedAt); !ok {
			return b, false
		}
		b = append(b, '}')
	}
	b = append(b, `,"message_count":`...)
	b = strconv.AppendInt(b, int64(t.MessageCount), 10)
	b = append(b, `,"claim_count":`...)
	b = strconv.AppendInt(b, int64(t.ClaimCount), 10)
	b = append(b, `,"pinned":`...)
	b = strconv.AppendBool(b, t.Pinned)
	b = append(b, `,"llm_reply_forbidden":`...)
	b = strconv.AppendBool(b, t.LLMReplyForbidden)
	return append(b, '}'), true
}

func (f *From) appendJSON(b []byte) []byte {
	b = append(b, `{"identity":`...)
	b = jsonenc.AppendString(b, f.Identity)
	if f.Extension != "" {
		b = append(b, `,"extension":`...)
		b = jsonenc.AppendString(b, f.Extension)
	}
	return append(b, '}')
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return jsonenc.AppendString(b, *s)
}

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

func appendEvidence(b []byte, evs []protocol.Evidence) []byte {
	if evs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, e := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"kind":`...)
		b = jsonenc.AppendString(b, string(e.Kind))
		b = append(b, `,"value":`...)
		b = jsonenc.AppendString(b, e.Value)
		if e.Note != "" {
			b = append(b, `,"note":`...)
			b = jsonenc.AppendString(b, e.Note)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendTime is jsonenc.AppendTime; ok is false where encoding/json
// would fail.
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	out, err := jsonenc.AppendTime(b, t)
	if err != nil {
		return b, false
	}
	return out, true
}
