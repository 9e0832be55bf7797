package corpus

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"relay/realm/api"
)

func cachedMessageOf(t *testing.T, id string, contentBytes int) *cachedMessage {
	c := strings.Repeat("x", contentBytes)
	return &cachedMessage{m: Message{MessageID: id, Content: &c}}
}

// TestMsgCacheBound: the cache stays within its bound and full, replaces
// entries in place, and keeps nothing too big.
func TestMsgCacheBound(t *testing.T) {
	c := newMsgCache(20_000)
	size := cachedMessageOf(t, "m000", 500).size() // about 1,000
	var all []*cachedMessage
	for i := range 100 {
		all = append(all, cachedMessageOf(t, fmt.Sprintf("m%03d", i), 500))
	}
	for i, m := range all {
		c.addMany([]*cachedMessage{m})
		if c.bytes > c.max {
			t.Fatalf("after %d adds: %d bytes, over %d", i+1, c.bytes, c.max)
		}
		out := make([]*cachedMessage, 1)
		if c.getMany([]string{m.m.MessageID}, out) != 1 || out[0] != m {
			t.Fatalf("the message just added is not there")
		}
	}
	if n := len(c.entries); n != c.max/size {
		t.Fatalf("%d entries of %d bytes in %d", n, size, c.max)
	}
	sum := 0
	for _, e := range c.entries {
		sum += e.size()
	}
	if sum != c.bytes {
		t.Fatalf("counted %d bytes, holds %d", c.bytes, sum)
	}
	// Replacing an entry (as the index and search's JSON do) keeps the count.
	var id string
	for k := range c.entries {
		id = k
		break
	}
	before := c.bytes
	repl := cachedMessageOf(t, id, 500)
	c.setMany([]*cachedMessage{repl})
	out := make([]*cachedMessage, 1)
	if c.bytes != before || c.getMany([]string{id}, out) != 1 || out[0] != repl {
		t.Fatalf("replacing: %d bytes, was %d", c.bytes, before)
	}
	// addMany does not replace.
	c.addMany([]*cachedMessage{cachedMessageOf(t, id, 500)})
	if c.getMany([]string{id}, out) != 1 || out[0] != repl {
		t.Fatal("addMany replaced an entry")
	}
	// A message bigger than a quarter of the bound is not kept, and evicts
	// nothing.
	n := len(c.entries)
	c.addMany([]*cachedMessage{cachedMessageOf(t, "big", 6_000)})
	if c.getMany([]string{"big"}, out) != 0 || len(c.entries) != n {
		t.Fatal("a message over the bound was kept or evicted others")
	}
	// No cache: nothing is kept, nothing found.
	none := newMsgCache(-1)
	none.addMany(all)
	none.setMany(all)
	if none.getMany([]string{"m001"}, out) != 0 {
		t.Fatal("a disabled cache found messages")
	}
}

// TestSearchCachedResults: searches answer the same through the cache,
// cold and warm, and without it, also while a Rebuild has cleared the
// projection the cache was filled from.
func TestSearchCachedResults(t *testing.T) {
	f := openSearchFixture(t, "")
	p := f.agent()
	c := newBenchCorpus()
	conv := ""
	for i := range 300 {
		in := writeIn{Content: text(c.sentence()), ConversationID: conv}
		if i%7 == 0 {
			in.Tags = []string{"t"}
		}
		conv = f.post(p, in).ConversationID
	}
	uncached, err := New(f.st, Config{Realm: "ainotes", Logger: quiet(), MessageCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	small, err := New(f.st, Config{Realm: "ainotes", Logger: quiet(), MessageCacheBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	queries := make([]searchIn, 60)
	for i := range queries {
		queries[i] = searchIn{Q: c.word() + " " + c.word(), Limit: ptr(1 + i%40)}
		if i%3 == 0 {
			queries[i].Tag = "t"
		}
	}
	run := func(s *Service, in searchIn) string {
		out, err := s.search(context.Background(), &api.Call{}, in)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := marshal(out.Results)
		return string(b)
	}
	for round := range 3 {
		for i, q := range queries {
			want := run(uncached, q)
			for _, s := range []*Service{f.s, small} {
				if got := run(s, q); got != want {
					t.Fatalf("round %d query %d:\ngot  %s\nwant %s", round, i, got, want)
				}
			}
		}
		if round == 1 {
			if err := f.st.Rebuild(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(f.s.msgs.entries) == 0 {
		t.Fatal("the cache holds nothing")
	}
}

// TestDerivedMessageIsStored: the message the index puts in the cache is
// exactly what reading the projection's record gives, for the payloads
// and lists a peer may send too (not JCS, escapes, spaces, empty lists).
func TestDerivedMessageIsStored(t *testing.T) {
	f := openSearchFixture(t, "")
	p := f.agent()
	f.post(p, writeIn{Content: text("x")})
	evs, err := f.st.Since(0, 0)
	if err != nil || len(evs) == 0 {
		t.Fatal(err)
	}
	se := evs[len(evs)-1]
	html := "<b>&amp;</b> \u2028 \\u003c"
	payloads := []string{`null`, `{"a":1}`, ` { "a" : "\u003c&\u003e" , "b" : [ 1 , 2.50, -0 ] } `, "[\"\u2028<\u2029>&\", \"\\\\u003c\", \"\\u2028\"]", `"\ud83d\ude00"`}
	var ds []messageData
	for i, pl := range payloads {
		ds = append(ds, messageData{MessageID: fmt.Sprint("m", i), ConversationID: "c", Content: &html, Payload: &pl,
			Kind: []string{"claim"}, Tags: []string{html}, SchemaName: "s", SchemaVersion: 1, SchemaValidated: i%2 == 0})
	}
	ds = append(ds, messageData{MessageID: "nil-lists"}, messageData{MessageID: "empty-lists", Kind: []string{}, Tags: []string{}, Mentions: []string{}},
		messageData{MessageID: "subject", Subject: "s <&>", Content: &html, Kind: []string{"post"}})
	for _, d := range ds {
		got, ok := derivedMessage(se, d)
		if !ok {
			t.Fatalf("%s: not derived", d.MessageID)
		}
		m := messageOf(se, d)
		stored, err := marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		var want Message
		if err := json.Unmarshal(stored, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\nderived %#v\nread    %#v", d.MessageID, got, want)
		}
	}
	bad := "{"
	if _, ok := derivedMessage(se, messageData{MessageID: "bad", Payload: &bad}); ok {
		t.Fatal("a payload that is not JSON was derived")
	}
}
