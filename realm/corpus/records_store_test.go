package corpus

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"relay/protocol"
	"relay/store"
)

// viaJSON is m as a reader got it when every message was stored whole:
// decoded from its JSON record.
func viaJSON(t *testing.T, m *Message) (Message, int) {
	t.Helper()
	b, err := marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out Message
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out, len(b)
}

// TestMessageStoredOnce: a message is stored in its change envelope only,
// and read back exactly as it was read when it was stored whole, with the
// same size for export pages; every field, every shape.
func TestMessageStoredOnce(t *testing.T) {
	f := openSearchFixture(t, "")
	p, q := f.agent(), f.agent()
	content, odd := "Does the <latency> comparison & the cache hold?", "tab\t, nul \x00, \u2028, é, 🙂, \\u003c \"q\""
	version := 1
	first := f.post(p, writeIn{Subject: "  Caches <&> ", Content: &content, Kind: &[]string{"question", "claim"}, Tags: []string{"perf", "cache"},
		Mentions: []string{q.Agent.AuthorID}, Payload: json.RawMessage(`{"b":1, "a":[true,null,"<\u2028>"]}`),
		SchemaName: "toastmachine.object", SchemaVersion: &version})
	conv := first.ConversationID
	f.post(p, writeIn{ConversationID: conv, Payload: json.RawMessage(`null`)})
	f.post(q, writeIn{ConversationID: conv, Content: &odd, Payload: json.RawMessage(` [ 1.50, "x\u003c" ] `)})
	f.post(q, writeIn{ConversationID: conv, Content: &odd, Kind: &[]string{"verification"}})
	f.post(p, writeIn{Content: text(""), Payload: json.RawMessage(`0`)}) // empty content beside a payload

	evs, err := f.st.Since(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, se := range evs {
		if se.Event.Type != evMessageCreated {
			continue
		}
		n++
		var d messageData
		if err := protocol.DecodeData(se.Event.Data, &d); err != nil {
			t.Fatal(err)
		}
		orig := messageOf(se, d)
		want, wantSize := viaJSON(t, &orig)
		err := f.st.View(func(tx *store.Tx) error {
			rec, err := tx.Get(cat(pfxMessage, []byte(d.MessageID)))
			if err != nil {
				return err
			}
			if len(rec) != msgRefLen {
				t.Errorf("message %d stored whole: %s", n, rec)
			}
			var got Message
			size, ok, err := readMessageSized(tx, []byte(d.MessageID), &got)
			if err != nil || !ok {
				t.Fatalf("message %d: %v %v", n, ok, err)
			}
			if !reflect.DeepEqual(got, want) || size != wantSize {
				t.Errorf("message %d:\nread %+v (%d bytes)\nwas  %+v (%d bytes)", n, got, size, want, wantSize)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n != 5 {
		t.Fatalf("%d messages", n)
	}
}

// TestMessageStoredWhole: a message its envelope would not give back
// whole, and a message stored whole by an earlier version, are read from
// their JSON record.
func TestMessageStoredWhole(t *testing.T) {
	f := openSearchFixture(t, "")
	p := f.agent()
	stored := f.post(p, writeIn{Subject: "s", Content: text("stored by an earlier version")})
	odd := Message{MessageID: "b6f1a3c4-0000-4000-8000-000000000001", ConversationID: stored.ConversationID, Content: text("replicated"),
		AuthorID: "other:x", Sequence: 99, Kind: []string{"post"}, Tags: []string{}, Mentions: []string{}, SchemaVersion: 3, Realm: "other", CID: "bafy"}
	if inChange(&odd) {
		t.Fatal("a schema_version without schema_name is not in the change data")
	}
	_, err := f.st.Submit(context.Background(), func(tx *store.Tx) (*protocol.Draft, error) {
		if err := putJSON(tx, cat(pfxMessage, []byte(stored.MessageID)), &stored); err != nil {
			return nil, err
		}
		return nil, putMessage(tx, &odd, u64(odd.Sequence))
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []Message{stored, odd} {
		want, wantSize := viaJSON(t, &m)
		err := f.st.View(func(tx *store.Tx) error {
			var got Message
			size, ok, err := readMessageSized(tx, []byte(m.MessageID), &got)
			if err != nil || !ok || !reflect.DeepEqual(got, want) || size != wantSize {
				t.Errorf("%s: %v %v\nread %+v (%d)\nwas  %+v (%d)", m.MessageID, ok, err, got, size, want, wantSize)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
