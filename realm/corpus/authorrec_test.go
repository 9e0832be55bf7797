package corpus

import (
	"context"
	"math/rand"
	"testing"
	"time"
	"unicode/utf8"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// TestAuthorRecordRoundTrip: the binary form gives back every field, as
// the JSON form did (the JSON of both is the same), and refuses what is
// cut short or has bytes to spare.
func TestAuthorRecordRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	var kinds []string // as events carry them: valid UTF-8
	for _, k := range oddStrings {
		if utf8.ValidString(k) {
			kinds = append(kinds, k)
		}
	}
	for i := range 2000 {
		a := authorRec{AuthorID: "ainotes:x", Messages: r.Intn(1 << 20), Conversations: r.Intn(1000), Kinds: map[string]int{},
			FirstSequence: r.Uint64() >> uint(r.Intn(64)), LastSequence: r.Uint64(),
			FirstActive: time.UnixMilli(r.Int63n(1 << 42)).UTC(), LastActive: time.UnixMilli(r.Int63n(1 << 42)).Add(time.Duration(r.Intn(1e6))).UTC()}
		if i == 0 {
			a.FirstActive, a.Messages = time.Time{}, 0
		}
		for range r.Intn(8) {
			a.Kinds[kinds[r.Intn(len(kinds))]] = r.Intn(1 << 16)
		}
		for h := range a.Hours {
			a.Hours[h] = r.Intn(1 << 12)
		}
		for w := range a.Weekdays {
			a.Weekdays[w] = r.Intn(1 << 12)
		}
		raw := encodeAuthor(&a)
		got, err := decodeAuthor(a.AuthorID, raw)
		if err != nil {
			t.Fatal(err)
		}
		gj, _ := marshal(&got)
		wj, _ := marshal(&a)
		if string(gj) != string(wj) || !got.FirstActive.Equal(a.FirstActive) || !got.LastActive.Equal(a.LastActive) {
			t.Fatalf("round trip:\ngot  %s\nwant %s", gj, wj)
		}
		fromJSON, err := decodeAuthor(a.AuthorID, wj)
		if err != nil {
			t.Fatal(err)
		}
		if fj, _ := marshal(&fromJSON); string(fj) != string(wj) {
			t.Fatalf("JSON record:\ngot  %s\nwant %s", fj, wj)
		}
		if _, err := decodeAuthor(a.AuthorID, raw[:r.Intn(len(raw))]); err == nil {
			t.Fatal("a record cut short decodes")
		}
		if _, err := decodeAuthor(a.AuthorID, append(raw, 0)); err == nil {
			t.Fatal("a record with a byte to spare decodes")
		}
	}
}

// TestAuthorRecordUpgrade: an author whose statistics an earlier version
// stored as JSON shows the same profile, and its next message carries the
// statistics on in binary.
func TestAuthorRecordUpgrade(t *testing.T) {
	f := openSearchFixture(t, "")
	p := f.agent()
	m := f.post(p, writeIn{Subject: "s", Content: text("one"), Kind: &[]string{"claim", "question"}})
	f.post(p, writeIn{ConversationID: m.ConversationID, Content: text("two")})
	profile := func() string {
		t.Helper()
		out, err := f.s.getAgent(context.Background(), &api.Call{}, authorIDIn{AuthorID: p.Agent.AuthorID})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := marshal(out)
		list, err := f.s.listAgents(context.Background(), &api.Call{}, offsetIn{})
		if err != nil {
			t.Fatal(err)
		}
		l, _ := marshal(list)
		return string(b) + string(l)
	}
	binary := profile()
	k := cat(pfxAuthor, []byte(p.Agent.AuthorID))
	_, err := f.st.Submit(context.Background(), func(tx *store.Tx) (*protocol.Draft, error) {
		raw, err := tx.Get(k)
		if err != nil {
			return nil, err
		}
		a, err := decodeAuthor(p.Agent.AuthorID, raw)
		if err != nil {
			return nil, err
		}
		return nil, putJSON(tx, k, &a)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := profile(); got != binary {
		t.Fatalf("profile from the JSON record:\n%s\nfrom the binary one:\n%s", got, binary)
	}
	f.post(p, writeIn{ConversationID: m.ConversationID, Content: text("three"), Kind: &[]string{"claim"}})
	err = f.st.View(func(tx *store.Tx) error {
		raw, err := tx.Get(k)
		if err != nil {
			return err
		}
		if raw[0] != authorFormat {
			t.Errorf("still JSON: %s", raw)
		}
		a, _, err := readAuthor(tx, p.Agent.AuthorID)
		if a.Messages != 3 || a.Conversations != 1 || a.Kinds["claim"] != 2 || a.Kinds["question"] != 1 || a.Kinds["post"] != 1 {
			t.Errorf("after the upgrade: %+v", a)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
