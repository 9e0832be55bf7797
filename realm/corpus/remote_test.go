package corpus

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"relay/protocol"
	"relay/store"
)

// TestRemotePayloadChecked: another realm's message whose payload this
// realm's writes would not store (nested too deep, not in its JCS form,
// not JSON) is refused when projected, not stored to break every read of
// it; one as a write would store it is taken.
func TestRemotePayloadChecked(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytesOf(7))
	for _, tc := range []struct {
		name, payload string
		ok            bool
	}{
		{"as written", `{"a":[1,2]}`, true},
		{"100 deep", strings.Repeat("[", 100) + strings.Repeat("]", 100), true},
		{"101 deep", strings.Repeat("[", 101) + strings.Repeat("]", 101), false},
		{"9,999 deep", strings.Repeat("[", 9999) + strings.Repeat("]", 9999), false},
		{"not JCS", `{"b":1, "a":2}`, false},
		{"not JSON", `{"a":`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := openSearchFixture(t, "")
			payload := tc.payload
			d := messageData{MessageID: "m-remote", ConversationID: "c-remote", Subject: "Remote", Content: text("x"), Kind: []string{"post"}, Payload: &payload}
			data, err := protocol.EncodeData(d)
			if err != nil {
				t.Fatal(err)
			}
			ev := &protocol.Event{Realm: "away", Seq: 1, Type: evMessageCreated, At: time.Now().UnixMilli(), Author: "away:bot", Data: data}
			raw, _, err := ev.Sign(key)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.st.Ingest(context.Background(), raw, func(*protocol.Event) error { return nil })
			if tc.ok != (err == nil) {
				t.Fatalf("ingest: %v, want taken %v", err, tc.ok)
			}
			out, err := f.s.listMessages(context.Background(), nil, messagesIn{})
			if err != nil {
				t.Fatalf("the messages after it: %v", err)
			}
			if got := len(out.Messages); got != map[bool]int{true: 1, false: 0}[tc.ok] {
				t.Fatalf("%d messages listed", got)
			}
		})
	}
}

// TestRemoteForgeriesRefused: another realm's events may not overwrite what
// exists (a message, a conversation, a relationship: they are immutable,
// and their ids are not realm-prefixed) nor name another realm's author;
// each is refused when projected, and what was held stays as it was.
func TestRemoteForgeriesRefused(t *testing.T) {
	f := openSearchFixture(t, "")
	p := f.agent()
	first := f.post(p, writeIn{Subject: "Home", Content: text("the original")})
	key := ed25519.NewKeyFromSeed(bytesOf(9))
	seq := uint64(0)
	var prev protocol.Link
	ingest := func(typ, author string, d any) error {
		t.Helper()
		data, err := protocol.EncodeData(d)
		if err != nil {
			t.Fatal(err)
		}
		ev := &protocol.Event{Realm: "away", Seq: seq + 1, Prev: prev, Type: typ, At: time.Now().UnixMilli(), Author: author, Data: data}
		raw, c, err := ev.Sign(key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.Ingest(context.Background(), raw, func(*protocol.Event) error { return nil }); err != nil {
			return err
		}
		seq, prev = seq+1, protocol.Link{Cid: c}
		return nil
	}
	// An honest message of its own first, to relate to.
	if err := ingest(evMessageCreated, "away:bot", messageData{MessageID: "m-away", ConversationID: "c-away", Subject: "Away", Content: text("x"), Kind: []string{"post"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, typ, author string
		data              any
	}{
		{"a message over one held", evMessageCreated, "away:bot",
			messageData{MessageID: first.MessageID, ConversationID: "c-away", Content: text("overwritten"), Kind: []string{"post"}}},
		{"a conversation created again", evMessageCreated, "away:bot",
			messageData{MessageID: "m-new", ConversationID: first.ConversationID, Subject: "Taken", Content: text("x"), Kind: []string{"post"}}},
		{"another realm's author", evMessageCreated, string(p.Agent.AuthorID),
			messageData{MessageID: "m-forged", ConversationID: "c-away", Content: text("forged"), Kind: []string{"post"}}},
		{"another realm's author relating", evRelationshipAsserted, string(p.Agent.AuthorID),
			assertionData{RelationshipID: "r-forged", SourceMessageID: "m-away", TargetMessageID: first.MessageID, RelationshipType: "supports"}},
		// The rules a write keeps, which a replica can check alone.
		{"a subject over its limit", evMessageCreated, "away:bot",
			messageData{MessageID: "m-s", ConversationID: "c-s", Subject: strings.Repeat("S", MaxSubject+1), Content: text("x"), Kind: []string{"post"}}},
		{"content over its limit", evMessageCreated, "away:bot",
			messageData{MessageID: "m-c", ConversationID: "c-away", Content: text(strings.Repeat("c", MaxContent+1)), Kind: []string{"post"}}},
		{"blank content", evMessageCreated, "away:bot", messageData{MessageID: "m-b", ConversationID: "c-away", Content: text("   "), Kind: []string{"post"}}},
		{"a kind outside the catalogue", evMessageCreated, "away:bot",
			messageData{MessageID: "m-k", ConversationID: "c-away", Content: text("x"), Kind: []string{"post", "<script>"}}},
		{"too many tags", evMessageCreated, "away:bot",
			messageData{MessageID: "m-t", ConversationID: "c-away", Content: text("x"), Kind: []string{"post"}, Tags: strings.Split(strings.Repeat("t,", 40)+"t", ",")}},
		{"a relationship type outside the catalogue", evRelationshipAsserted, "away:bot",
			assertionData{RelationshipID: "r-type", SourceMessageID: "m-away", TargetMessageID: first.MessageID, RelationshipType: "owns-your-data"}},
		{"a message related to itself", evRelationshipAsserted, "away:bot",
			assertionData{RelationshipID: "r-self", SourceMessageID: "m-away", TargetMessageID: "m-away", RelationshipType: "supports"}},
	} {
		if err := ingest(tc.typ, tc.author, tc.data); err == nil {
			t.Errorf("%s: taken", tc.name)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
	var m Message
	var ok bool
	if err := f.st.View(func(tx *store.Tx) (err error) { ok, err = readMessage(tx, []byte(first.MessageID), &m); return err }); err != nil || !ok ||
		m.Content == nil || *m.Content != "the original" || m.ConversationID != first.ConversationID {
		t.Fatalf("the held message after the forgeries: %v %v %+v", ok, err, m)
	}
	// The relationship, asserted honestly, cannot be asserted again.
	rel := assertionData{RelationshipID: "r-away", SourceMessageID: "m-away", TargetMessageID: first.MessageID, RelationshipType: "supports"}
	if err := ingest(evRelationshipAsserted, "away:bot", rel); err != nil {
		t.Fatal(err)
	}
	if err := ingest(evRelationshipAsserted, "away:other", rel); err == nil {
		t.Error("a relationship asserted again: taken")
	}
	again := rel
	again.RelationshipID = "r-away-2"
	if err := ingest(evRelationshipAsserted, "away:bot", again); err == nil {
		t.Error("an author asserting what it asserts already: taken")
	}
}
