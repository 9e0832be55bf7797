package corpus

import (
	"context"
	"errors"
	"math/rand"
	"testing"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// TestConversationRecordRoundTrip: the binary form gives back every field
// (the JSON of both is the same), and refuses what is cut short or has
// bytes to spare.
func TestConversationRecordRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	str := func() string { return oddStrings[r.Intn(len(oddStrings))] }
	tm := func() time.Time {
		return time.UnixMilli(r.Int63n(1 << 42)).Add(time.Duration(r.Intn(2) * r.Intn(1e6))).UTC()
	}
	for range 2000 {
		c := Conversation{ConversationID: "3f1e0c9a-0000-4000-8000-00000000000a", Subject: str(), RootMessageID: str(), AuthorID: str(),
			CreatedAt: tm(), UpdatedAt: tm(), MessageCount: r.Intn(1 << 20), CreatedSequence: r.Uint64() >> uint(r.Intn(64)),
			LastSequence: r.Uint64(), Realm: str(), CID: str()}
		raw := encodeConversation(&c)
		var got Conversation
		if err := decodeConversation(c.ConversationID, raw, &got); err != nil {
			t.Fatal(err)
		}
		gj, _ := marshal(&got)
		wj, _ := marshal(&c)
		if string(gj) != string(wj) {
			t.Fatalf("round trip:\ngot  %s\nwant %s", gj, wj)
		}
		var cut Conversation
		if err := decodeConversation(c.ConversationID, raw[:r.Intn(len(raw))], &cut); err == nil {
			t.Fatal("a record cut short decodes")
		}
		if err := decodeConversation(c.ConversationID, append(raw, 0), &cut); err == nil {
			t.Fatal("a record with a byte to spare decodes")
		}
	}
}

// TestConversationRecordUpgrade: a conversation an earlier version stored
// as JSON reads the same everywhere (its page in a snapshot included), and
// its next message carries it on in binary.
func TestConversationRecordUpgrade(t *testing.T) {
	f := openSearchFixture(t, "")
	p := f.agent()
	first := f.post(p, writeIn{Subject: "Caches <&> \u2028 é", Content: text("one")})
	f.post(p, writeIn{ConversationID: first.ConversationID, Content: text("two")})
	ctx := context.Background()
	views := func() string {
		t.Helper()
		one, err := f.s.getConversation(ctx, &api.Call{}, conversationIDIn{ConversationID: first.ConversationID})
		if err != nil {
			t.Fatal(err)
		}
		list, err := f.s.listConversations(ctx, &api.Call{}, conversationsIn{})
		if err != nil {
			t.Fatal(err)
		}
		var out string
		for _, v := range []any{one, list} {
			b, _ := marshal(v)
			out += string(b) + "\n"
		}
		return out
	}
	page := func() (Conversation, int) {
		t.Helper()
		var c Conversation
		var n int
		err := f.st.View(func(tx *store.Tx) error {
			var err error
			c, n, _, err = snapConversation(tx, []byte(first.ConversationID), f.st.Sequence())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return c, n
	}
	binary := views()
	binC, binN := page()
	k := cat(pfxConv, []byte(first.ConversationID))
	_, err := f.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		var c Conversation
		if _, err := readConversation(tx, []byte(first.ConversationID), &c); err != nil {
			return nil, err
		}
		return nil, putJSON(tx, k, &c)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := views(); got != binary {
		t.Fatalf("from the JSON record:\n%s\nfrom the binary one:\n%s", got, binary)
	}
	if c, n := page(); n != binN || c != binC {
		t.Fatalf("snapshot page: %+v (%d bytes) against %+v (%d bytes)", c, n, binC, binN)
	}
	third := f.post(p, writeIn{ConversationID: first.ConversationID, Content: text("three")})
	err = f.st.View(func(tx *store.Tx) error {
		raw, err := tx.Get(k)
		if err != nil {
			return err
		}
		if raw[0] != convFormat {
			t.Errorf("still JSON: %s", raw)
		}
		var c Conversation
		_, err = readConversation(tx, []byte(first.ConversationID), &c)
		if c.MessageCount != 3 || c.LastSequence != third.Sequence || !c.UpdatedAt.Equal(third.CreatedAt) || c.RootMessageID != first.MessageID {
			t.Errorf("after the upgrade: %+v", c)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBinaryRecordsCutShort: a binary author or conversation record cut at
// any byte is refused with its error, never misread.
func TestBinaryRecordsCutShort(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	conv := encodeConversation(&Conversation{Subject: "subject", RootMessageID: "m1", AuthorID: "ainotes:a",
		Realm: "ainotes", CID: "bafy", CreatedAt: at, UpdatedAt: at, MessageCount: 300, CreatedSequence: 7, LastSequence: 1 << 40})
	author := encodeAuthor(&authorRec{AuthorID: "ainotes:a", Messages: 3, Conversations: 1, FirstSequence: 1,
		LastSequence: 9, FirstActive: at, LastActive: at, Kinds: map[string]int{"post": 2, "question": 1}})
	for n := range len(conv) {
		var c Conversation
		if err := decodeConversation("c1", conv[:n], &c); !errors.Is(err, errConvRecord) {
			t.Fatalf("conversation cut at %d of %d: %v", n, len(conv), err)
		}
	}
	for n := range len(author) {
		if _, err := decodeAuthor("ainotes:a", author[:n]); !errors.Is(err, errAuthorRecord) {
			t.Fatalf("author cut at %d of %d: %v", n, len(author), err)
		}
	}
	var c Conversation
	if err := decodeConversation("c1", append(conv, 0), &c); !errors.Is(err, errConvRecord) {
		t.Fatalf("conversation with a trailing byte: %v", err)
	}
}
