package corpus

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"relay/protocol"
)

// TestWriteAnswerIsStored: a write's answer is built from the event it
// stored, not read back; it must be exactly what a retry reads back, for
// every kind of field, a create and an append alike.
func TestWriteAnswerIsStored(t *testing.T) {
	f := openSearchFixture(t, "")
	p, q := f.agent(), f.agent()
	content := "Does the <latency> comparison & the cache hold?"
	version := 1
	writes := []struct {
		create bool
		in     writeIn
	}{
		{true, writeIn{Subject: "  Caches  ", Content: &content, Kind: &[]string{"question", "claim"}, Tags: []string{"perf", "perf", "cache"},
			Mentions: []string{q.Agent.AuthorID}, Payload: json.RawMessage(`{"b":1, "a":[true,null]}`), SchemaName: "toastmachine.object", SchemaVersion: &version}},
		{false, writeIn{Payload: json.RawMessage(`null`)}},
		{false, writeIn{Content: &content}},
	}
	conv := ""
	for i, w := range writes {
		in := w.in
		in.OperationToken = "tok-" + string(rune('a'+i))
		if !w.create {
			in.ConversationID = conv
		}
		retry := in
		got, err := f.s.write(context.Background(), p, &in, w.create)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		conv = got.ConversationID
		again, err := f.s.write(context.Background(), p, &retry, w.create)
		if err != nil || !again.replayed || got.replayed {
			t.Fatalf("retry %d: %v, replayed %v then %v", i, err, got.replayed, again.replayed)
		}
		stored, err := f.s.result(got.MessageID)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := marshal(got)
		b, _ := marshal(again)
		c, _ := marshal(stored)
		if string(a) != string(b) || string(a) != string(c) {
			t.Fatalf("write %d:\nanswer %s\nretry  %s\nstored %s", i, a, b, c)
		}
		if got.Subject != "Caches" || got.RootMessageID == "" || (w.create && got.RootMessageID != got.MessageID) {
			t.Errorf("write %d: subject %q root %q message %q", i, got.Subject, got.RootMessageID, got.MessageID)
		}
	}
}

// TestEventSizeBound: the cheap bound that spares most writes the exact
// measure is never below it, for the strings that grow most in JSON.
func TestEventSizeBound(t *testing.T) {
	ctrl := strings.Repeat("\x01", 300)
	invalidUTF8 := strings.Repeat("\xff", 300)
	seps := strings.Repeat("\u2028", 100)
	plain := "How should autonomous agents communicate?"
	payload := `{"a":"` + strings.Repeat(`\u0001`, 50) + `"}`
	author := "ainotes:" + strings.Repeat("f", 16)
	for i, d := range []messageData{
		{},
		{Content: &plain, Kind: []string{"post"}},
		{Subject: ctrl, Content: &ctrl, Kind: []string{"claim", "question"}, Tags: []string{ctrl[:64], invalidUTF8[:64]}, Mentions: []string{author}},
		{Content: &invalidUTF8, Payload: &payload, SchemaName: "toastmachine.object", SchemaVersion: 1, SchemaValidated: true},
		{Subject: seps, Content: &seps, Tags: []string{"<&>", `"\`}},
	} {
		d.MessageID, d.ConversationID = uuid.NewString(), uuid.NewString()
		exact, err := eventSize(author, "ainotes", &d)
		if err != nil {
			t.Fatal(err)
		}
		if bound := eventSizeBound(author, "ainotes", &d); bound < exact {
			t.Errorf("message %d: bound %d below the exact size %d", i, bound, exact)
		}
		if i == 0 && exact > eventSizeFixed/2 {
			t.Errorf("an empty message's envelope is %d bytes: eventSizeFixed %d leaves too little room", exact, eventSizeFixed)
		}
	}
}

// BenchmarkWriteAnswer compares the two ways a write's answer can be made:
// read back from the store (a retry's way) or built from the stored event
// (a new write's).
func BenchmarkWriteAnswer(b *testing.B) {
	f := openSearchFixture(b, b.TempDir())
	p := f.agent()
	content := "I think a shared append-only corpus could work, if every message says who wrote it and when."
	var res WriteResult
	for i := range 1000 {
		in := writeIn{Content: &content, OperationToken: "w" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)}
		create := i == 0
		if create {
			in.Subject = "AI Agents"
		} else {
			in.ConversationID = res.ConversationID
		}
		var err error
		if res, err = f.s.write(context.Background(), p, &in, create); err != nil {
			b.Fatal(err)
		}
	}
	se, err := f.st.Since(res.Sequence-1, 1)
	if err != nil || len(se) != 1 {
		b.Fatal(err)
	}
	b.Run("read-back", func(b *testing.B) {
		for b.Loop() {
			if _, err := f.s.result(res.MessageID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("from-event", func(b *testing.B) {
		for b.Loop() {
			var d messageData
			if err := protocol.DecodeData(se[0].Event.Data, &d); err != nil {
				b.Fatal(err)
			}
			_ = messageOf(se[0], d)
		}
	})
}

// BenchmarkCheckEventSize compares the exact measure of a typical message's
// change envelope with the bound that spares it.
func BenchmarkCheckEventSize(b *testing.B) {
	content := strings.Repeat("Does the latency comparison account for warm caches? ", 5)
	d := messageData{MessageID: uuid.NewString(), ConversationID: uuid.NewString(), Content: &content, Kind: []string{"question"}, Tags: []string{"performance"}}
	author := "ainotes:0123456789abcdef"
	b.Run("exact", func(b *testing.B) {
		for b.Loop() {
			if _, err := eventSize(author, "ainotes", &d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			if err := checkEventSize(author, "ainotes", &d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestKnownMessageDecodes: the projector and the write's answer take the
// message a write prepared instead of decoding the event's data, so that
// data must decode to exactly the prepared message, for every field.
func TestKnownMessageDecodes(t *testing.T) {
	f := openSearchFixture(t, "")
	q := f.agent()
	content, odd := "Does the <latency> comparison & the cache hold?", "tab\t, nul \x00, \u2028, é, 🙂, \\u003c"
	empty, version := "", 1
	ins := []struct {
		create bool
		in     writeIn
	}{
		{true, writeIn{Subject: "  Caches  ", Content: &content, Kind: &[]string{"question", "claim"}, Tags: []string{"perf", "perf", " cache "},
			Mentions: []string{q.Agent.AuthorID, q.Agent.AuthorID}, Payload: json.RawMessage(`{"b":1, "a":[true,null,"<\u2028>"]}`),
			SchemaName: "toastmachine.object", SchemaVersion: &version}},
		{false, writeIn{ConversationID: uuid.NewString(), Payload: json.RawMessage(`null`)}},
		{false, writeIn{ConversationID: uuid.NewString(), Content: &odd, Tags: []string{}, Mentions: []string{}, Kind: &[]string{"post"}}},
		{false, writeIn{ConversationID: uuid.NewString(), Content: &empty, Payload: json.RawMessage(` [ 1.50, "x" ] `)}},
	}
	for i, w := range ins {
		w.in.OperationToken = "tok"
		prep, err := f.s.prepare(&w.in, w.create)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if !w.create {
			prep.data.ConversationID = w.in.ConversationID
		}
		data, err := protocol.EncodeData(prep.data)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		var d messageData
		if err := protocol.DecodeData(data, &d); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if !reflect.DeepEqual(d, prep.data) {
			t.Errorf("%d: prepared %+v, decodes to %+v", i, prep.data, d)
		}
	}
}
