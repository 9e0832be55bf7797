package parley

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"relay/protocol"
)

// The records a post writes on the committer (its message, its thread, the
// board's counters, the CID index) are encoded by hand, not by reflection:
// every post pays for them on the one goroutine all writes share. The
// output is byte for byte what encoding/json writes for the same value
// (records_json_test.go checks every field of every type, and fuzzes the
// strings), so stored records and their readers do not change.

// recordJSON is a record that appends its own JSON encoding.
type recordJSON interface {
	appendJSON(b []byte) ([]byte, error)
}

var (
	_ recordJSON = (*threadRec)(nil)
	_ recordJSON = (*Board)(nil)
	_ recordJSON = (*messageRec)(nil)
	_ recordJSON = (*cidRef)(nil)
)

// scratch holds encoding buffers: the store copies what it is given.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

// withRecordJSON calls f with v's JSON in a buffer that is reused once f
// returns.
func withRecordJSON(v any, f func(b []byte) error) error {
	r, ok := v.(recordJSON)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return f(b)
	}
	buf := scratch.Get().(*[]byte)
	defer scratch.Put(buf)
	b, err := r.appendJSON((*buf)[:0])
	if err != nil {
		return err
	}
	if cap(b) <= 16<<10 { // one big record does not pin a big buffer
		*buf = b
	}
	return f(b)
}

func (t *threadRec) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"realm":`...)
	b = appendJSONString(b, string(t.Realm))
	b = append(b, `,"n":`...)
	b = strconv.AppendUint(b, t.N, 10)
	b = append(b, `,"cid":`...)
	b = appendJSONString(b, t.CID)
	b = append(b, `,"board":`...)
	b = strconv.AppendUint(b, t.Board, 10)
	b = append(b, `,"title":`...)
	b = appendJSONString(b, t.Title)
	b = append(b, `,"creator":`...)
	b = appendJSONString(b, t.Creator)
	b = append(b, `,"created_at":`...)
	if b, err = appendJSONTime(b, t.CreatedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"updated_at":`...)
	if b, err = appendJSONTime(b, t.UpdatedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"state":`...)
	b = appendThreadState(b, t.State)
	b = append(b, `,"settled":`...)
	b = appendThreadState(b, t.Settled)
	if t.StateBy != "" {
		b = append(b, `,"state_by":`...)
		b = appendJSONString(b, t.StateBy)
	}
	b = append(b, `,"state_at":`...)
	if b, err = appendJSONTime(b, t.StateAt); err != nil {
		return nil, err
	}
	if t.ConfirmedAt != nil {
		b = append(b, `,"confirmed_at":`...)
		if b, err = appendJSONTime(b, *t.ConfirmedAt); err != nil {
			return nil, err
		}
	}
	if t.ConfirmedBy != "" {
		b = append(b, `,"confirmed_by":`...)
		b = appendJSONString(b, t.ConfirmedBy)
	}
	b = append(b, `,"awaiting":`...)
	b = strconv.AppendBool(b, t.Awaiting)
	b = append(b, `,"last":{"n":`...)
	b = strconv.AppendUint(b, t.Last.N, 10)
	b = append(b, `,"realm":`...)
	b = appendJSONString(b, string(t.Last.Realm))
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, string(t.Last.Kind))
	b = append(b, `,"identity":`...)
	b = appendJSONString(b, t.Last.Identity)
	if t.Last.Extension != "" {
		b = append(b, `,"extension":`...)
		b = appendJSONString(b, t.Last.Extension)
	}
	b = append(b, `,"at":`...)
	if b, err = appendJSONTime(b, t.Last.At); err != nil {
		return nil, err
	}
	b = append(b, `,"sequence":`...)
	b = strconv.AppendUint(b, t.Last.Sequence, 10)
	b = append(b, `},"messages":`...)
	b = strconv.AppendInt(b, int64(t.Messages), 10)
	b = append(b, `,"claims":`...)
	b = strconv.AppendInt(b, int64(t.Claims), 10)
	b = append(b, `,"pinned":`...)
	b = strconv.AppendBool(b, t.Pinned)
	b = append(b, `,"no_llm":`...)
	b = strconv.AppendBool(b, t.NoLLM)
	return append(b, '}'), nil
}

// appendThreadState writes protocol.ThreadState, which has no JSON tags.
func appendThreadState(b []byte, s protocol.ThreadState) []byte {
	b = append(b, `{"State":`...)
	b = appendJSONString(b, string(s.State))
	b = append(b, `,"Origin":`...)
	b = appendJSONString(b, s.Origin)
	b = append(b, `,"Confirmed":`...)
	b = strconv.AppendBool(b, s.Confirmed)
	b = append(b, `,"Before":`...)
	b = appendJSONString(b, string(s.Before))
	return append(b, '}')
}

func (bd *Board) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, bd.ID, 10)
	b = append(b, `,"slug":`...)
	b = appendJSONString(b, bd.Slug)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, bd.Name)
	b = append(b, `,"description":`...)
	b = appendJSONString(b, bd.Description)
	b = append(b, `,"realm":`...)
	b = appendJSONString(b, bd.Realm)
	b = append(b, `,"cid":`...)
	b = appendJSONString(b, bd.CID)
	b = append(b, `,"creator":`...)
	b = appendJSONString(b, bd.Creator)
	b = append(b, `,"created_at":`...)
	if b, err = appendJSONTime(b, bd.CreatedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"threads":`...)
	b = strconv.AppendInt(b, int64(bd.Threads), 10)
	b = append(b, `,"messages":`...)
	b = strconv.AppendInt(b, int64(bd.Messages), 10)
	b = append(b, `,"waiting":`...)
	b = strconv.AppendInt(b, int64(bd.Waiting), 10)
	b = append(b, `,"open":`...)
	b = strconv.AppendInt(b, int64(bd.Open), 10)
	return append(b, '}'), nil
}

func (m *messageRec) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"realm":`...)
	b = appendJSONString(b, string(m.Realm))
	b = append(b, `,"n":`...)
	b = strconv.AppendUint(b, m.N, 10)
	b = append(b, `,"cid":`...)
	b = appendJSONString(b, m.CID)
	b = append(b, `,"thread":`...)
	b = m.Thread.appendJSON(b)
	if m.Parent != nil {
		b = append(b, `,"parent":`...)
		b = m.Parent.appendJSON(b)
	}
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, string(m.Kind))
	b = append(b, `,"body":`...)
	b = appendJSONString(b, m.Body)
	b = append(b, `,"identity":`...)
	b = appendJSONString(b, m.Identity)
	if m.Extension != "" {
		b = append(b, `,"extension":`...)
		b = appendJSONString(b, m.Extension)
	}
	b = append(b, `,"author_kind":`...)
	b = appendJSONString(b, m.AuthorKind)
	if len(m.Provenance) > 0 {
		p, err := json.Marshal(m.Provenance) // any values: encoding/json's own
		if err != nil {
			return nil, err
		}
		b = append(b, `,"provenance":`...)
		b = append(b, p...)
	}
	if len(m.RelatesTo) > 0 {
		b = append(b, `,"relates_to":[`...)
		for i, r := range m.RelatesTo {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, r)
		}
		b = append(b, ']')
	}
	if len(m.Claims) > 0 {
		b = append(b, `,"claims":`...)
		b = appendRids(b, m.Claims)
	}
	if len(m.Refutes) > 0 {
		b = append(b, `,"refutes":`...)
		b = appendRids(b, m.Refutes)
	}
	if len(m.Evidence) > 0 {
		b = append(b, `,"evidence":[`...)
		for i, e := range m.Evidence {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"kind":`...)
			b = appendJSONString(b, e.Kind)
			b = append(b, `,"value":`...)
			b = appendJSONString(b, e.Value)
			if e.Note != "" {
				b = append(b, `,"note":`...)
				b = appendJSONString(b, e.Note)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if m.Image != nil {
		b = append(b, `,"image":{`...)
		n := len(b)
		field := func(name string) {
			if len(b) > n {
				b = append(b, ',')
			}
			b = append(b, name...)
		}
		if m.Image.URL != "" {
			field(`"url":`)
			b = appendJSONString(b, m.Image.URL)
		}
		if m.Image.CID != "" {
			field(`"cid":`)
			b = appendJSONString(b, m.Image.CID)
		}
		if m.Image.MediaType != "" {
			field(`"media_type":`)
			b = appendJSONString(b, m.Image.MediaType)
		}
		if m.Image.Bytes != 0 {
			field(`"bytes":`)
			b = strconv.AppendInt(b, int64(m.Image.Bytes), 10)
		}
		b = append(b, '}')
	}
	b = append(b, `,"awaiting":`...)
	b = strconv.AppendBool(b, m.Awaiting)
	b = append(b, `,"created_at":`...)
	if b, err = appendJSONTime(b, m.CreatedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"sequence":`...)
	b = strconv.AppendUint(b, m.Sequence, 10)
	if m.Status != "" {
		b = append(b, `,"status":`...)
		b = appendJSONString(b, m.Status)
	}
	if m.Refusal != nil {
		r, err := json.Marshal(m.Refusal)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"refusal":`...)
		b = append(b, r...)
	}
	return append(b, '}'), nil
}

func (c *cidRef) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"kind":`...)
	b = appendJSONString(b, string(c.Kind))
	b = append(b, `,"id":`...)
	b = c.ID.appendJSON(b)
	return append(b, '}'), nil
}

// appendJSON writes a rid, which has no JSON tags.
func (r rid) appendJSON(b []byte) []byte {
	b = append(b, `{"Realm":`...)
	b = appendJSONString(b, string(r.Realm))
	b = append(b, `,"N":`...)
	b = strconv.AppendUint(b, r.N, 10)
	return append(b, '}')
}

func appendRids(b []byte, ids []rid) []byte {
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = id.appendJSON(b)
	}
	return append(b, ']')
}

// appendJSONTime writes t as time.Time.MarshalJSON does: the usual UTC
// time of a record by hand, any other through MarshalJSON itself.
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	if t.Location() == time.UTC {
		if y := t.Year(); y >= 0 && y <= 9999 {
			b = append(b, '"')
			b = t.AppendFormat(b, time.RFC3339Nano)
			return append(b, '"'), nil
		}
	}
	j, err := t.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

const hexDigits = "0123456789abcdef"

// jsonSafe holds the ASCII bytes a JSON string carries as they are when
// HTML characters are escaped.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONString writes s as encoding/json does by default: HTML
// characters, U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
