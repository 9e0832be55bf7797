package parley

import (
	"encoding/json"
	"strconv"
	"sync"

	"relay/protocol"
	"relay/realm/internal/jsonenc"
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
	b = jsonenc.AppendHTMLString(b, string(t.Realm))
	b = append(b, `,"n":`...)
	b = strconv.AppendUint(b, t.N, 10)
	b = append(b, `,"cid":`...)
	b = jsonenc.AppendHTMLString(b, t.CID)
	b = append(b, `,"board":`...)
	b = strconv.AppendUint(b, t.Board, 10)
	b = append(b, `,"title":`...)
	b = jsonenc.AppendHTMLString(b, t.Title)
	b = append(b, `,"creator":`...)
	b = jsonenc.AppendHTMLString(b, t.Creator)
	b = append(b, `,"created_at":`...)
	if b, err = jsonenc.AppendTime(b, t.CreatedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"updated_at":`...)
	if b, err = jsonenc.AppendTime(b, t.UpdatedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"state":`...)
	b = appendThreadState(b, t.State)
	b = append(b, `,"settled":`...)
	b = appendThreadState(b, t.Settled)
	if t.StateBy != "" {
		b = append(b, `,"state_by":`...)
		b = jsonenc.AppendHTMLString(b, t.StateBy)
	}
	if t.StateByRealm != "" {
		b = append(b, `,"state_by_realm":`...)
		b = jsonenc.AppendHTMLString(b, string(t.StateByRealm))
	}
	b = append(b, `,"state_at":`...)
	if b, err = jsonenc.AppendTime(b, t.StateAt); err != nil {
		return nil, err
	}
	if t.ConfirmedAt != nil {
		b = append(b, `,"confirmed_at":`...)
		if b, err = jsonenc.AppendTime(b, *t.ConfirmedAt); err != nil {
			return nil, err
		}
	}
	if t.ConfirmedBy != "" {
		b = append(b, `,"confirmed_by":`...)
		b = jsonenc.AppendHTMLString(b, t.ConfirmedBy)
	}
	b = append(b, `,"awaiting":`...)
	b = strconv.AppendBool(b, t.Awaiting)
	b = append(b, `,"last":{"n":`...)
	b = strconv.AppendUint(b, t.Last.N, 10)
	b = append(b, `,"realm":`...)
	b = jsonenc.AppendHTMLString(b, string(t.Last.Realm))
	b = append(b, `,"kind":`...)
	b = jsonenc.AppendHTMLString(b, string(t.Last.Kind))
	b = append(b, `,"identity":`...)
	b = jsonenc.AppendHTMLString(b, t.Last.Identity)
	if t.Last.Extension != "" {
		b = append(b, `,"extension":`...)
		b = jsonenc.AppendHTMLString(b, t.Last.Extension)
	}
	b = append(b, `,"at":`...)
	if b, err = jsonenc.AppendTime(b, t.Last.At); err != nil {
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
	b = jsonenc.AppendHTMLString(b, string(s.State))
	b = append(b, `,"Origin":`...)
	b = jsonenc.AppendHTMLString(b, s.Origin)
	b = append(b, `,"Confirmed":`...)
	b = strconv.AppendBool(b, s.Confirmed)
	b = append(b, `,"Before":`...)
	b = jsonenc.AppendHTMLString(b, string(s.Before))
	return append(b, '}')
}

func (bd *Board) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, bd.ID, 10)
	b = append(b, `,"slug":`...)
	b = jsonenc.AppendHTMLString(b, bd.Slug)
	b = append(b, `,"name":`...)
	b = jsonenc.AppendHTMLString(b, bd.Name)
	b = append(b, `,"description":`...)
	b = jsonenc.AppendHTMLString(b, bd.Description)
	b = append(b, `,"realm":`...)
	b = jsonenc.AppendHTMLString(b, bd.Realm)
	b = append(b, `,"cid":`...)
	b = jsonenc.AppendHTMLString(b, bd.CID)
	b = append(b, `,"creator":`...)
	b = jsonenc.AppendHTMLString(b, bd.Creator)
	b = append(b, `,"created_at":`...)
	if b, err = jsonenc.AppendTime(b, bd.CreatedAt); err != nil {
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
	b = jsonenc.AppendHTMLString(b, string(m.Realm))
	b = append(b, `,"n":`...)
	b = strconv.AppendUint(b, m.N, 10)
	b = append(b, `,"cid":`...)
	b = jsonenc.AppendHTMLString(b, m.CID)
	b = append(b, `,"thread":`...)
	b = m.Thread.appendJSON(b)
	if m.Parent != nil {
		b = append(b, `,"parent":`...)
		b = m.Parent.appendJSON(b)
	}
	b = append(b, `,"kind":`...)
	b = jsonenc.AppendHTMLString(b, string(m.Kind))
	b = append(b, `,"body":`...)
	b = jsonenc.AppendHTMLString(b, m.Body)
	b = append(b, `,"identity":`...)
	b = jsonenc.AppendHTMLString(b, m.Identity)
	if m.Extension != "" {
		b = append(b, `,"extension":`...)
		b = jsonenc.AppendHTMLString(b, m.Extension)
	}
	b = append(b, `,"author_kind":`...)
	b = jsonenc.AppendHTMLString(b, m.AuthorKind)
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
			b = jsonenc.AppendHTMLString(b, r)
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
			b = jsonenc.AppendHTMLString(b, string(e.Kind))
			b = append(b, `,"value":`...)
			b = jsonenc.AppendHTMLString(b, e.Value)
			if e.Note != "" {
				b = append(b, `,"note":`...)
				b = jsonenc.AppendHTMLString(b, e.Note)
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
			b = jsonenc.AppendHTMLString(b, m.Image.URL)
		}
		if m.Image.CID != "" {
			field(`"cid":`)
			b = jsonenc.AppendHTMLString(b, m.Image.CID)
		}
		if m.Image.MediaType != "" {
			field(`"media_type":`)
			b = jsonenc.AppendHTMLString(b, m.Image.MediaType)
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
	if b, err = jsonenc.AppendTime(b, m.CreatedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"sequence":`...)
	b = strconv.AppendUint(b, m.Sequence, 10)
	if m.Status != "" {
		b = append(b, `,"status":`...)
		b = jsonenc.AppendHTMLString(b, m.Status)
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
	b = jsonenc.AppendHTMLString(b, string(c.Kind))
	b = append(b, `,"id":`...)
	b = c.ID.appendJSON(b)
	return append(b, '}'), nil
}

// appendJSON writes a rid, which has no JSON tags.
func (r rid) appendJSON(b []byte) []byte {
	b = append(b, `{"Realm":`...)
	b = jsonenc.AppendHTMLString(b, string(r.Realm))
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
