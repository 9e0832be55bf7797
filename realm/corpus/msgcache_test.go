package corpus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"relay/realm/api"
)

func cachedMessageOf(t *testing.T, id string, contentBytes int) *cachedMessage {
	c := strings.Repeat("x", contentBytes)
	m, err := newCachedMessage(&Message{MessageID: id, Content: &c})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMsgCacheGenerations: the cache stays within its bound, keeps what is
// read again, and drops what is not.
func TestMsgCacheGenerations(t *testing.T) {
	c := newMsgCache(40_000)                       // 20,000 bytes a generation
	size := cachedMessageOf(t, "m000", 500).size() // about 1,000
	var all []*cachedMessage
	for i := range 100 {
		all = append(all, cachedMessageOf(t, fmt.Sprintf("m%03d", i), 500))
	}
	hot := []string{"m000"}
	for i, m := range all {
		c.addMany([]*cachedMessage{m})
		out := make([]*cachedMessage, 1)
		if c.getMany(hot, out) != 1 || out[0] != all[0] {
			t.Fatalf("after %d adds the hot message is gone", i+1)
		}
		if n := c.curBytes; n > c.half {
			t.Fatalf("cur holds %d bytes, over %d", n, c.half)
		}
		if n := len(c.cur) + len(c.old); n > 2*c.half/size {
			t.Fatalf("%d entries, over the bound", n)
		}
	}
	out := make([]*cachedMessage, 3)
	ids := []string{"m001", "m099", "m000"}
	if n := c.getMany(ids, out); n != 2 || out[0] != nil || out[1] != all[99] || out[2] != all[0] {
		t.Fatalf("found %d: %v", n, out)
	}
	// A message bigger than a generation is not kept, and evicts nothing.
	c.addMany([]*cachedMessage{cachedMessageOf(t, "big", 30_000)})
	if c.getMany([]string{"big", "m099"}, out[:2]) != 1 || out[1] == nil {
		t.Fatal("a message over the bound was kept or evicted others")
	}
	// No cache: nothing is kept, nothing found.
	none := newMsgCache(-1)
	none.addMany(all)
	if none.getMany(ids, out) != 0 {
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
	if len(f.s.msgs.cur)+len(f.s.msgs.old) == 0 {
		t.Fatal("the cache holds nothing")
	}
}

// TestSearchResultJSON: a result writes the cached JSON of its message,
// and that is byte for byte what encoding the message writes, with and
// without HTML escapes, for every kind of field.
func TestSearchResultJSON(t *testing.T) {
	type plainResult struct { // SearchResult without its MarshalJSON
		Message Message `json:"message"`
		Score   float64 `json:"score"`
	}
	encode := func(v any, escape bool) string {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(escape)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	for i, m := range changeDataMessages {
		// The message as stored and read back, as search has it.
		stored, err := marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		var read Message
		if err := json.Unmarshal(stored, &read); err != nil {
			t.Fatal(err)
		}
		c, err := newCachedMessage(&read)
		if err != nil {
			t.Fatal(err)
		}
		for _, score := range []float64{-12.5, -1e-7, 0, -3e21} {
			got := []SearchResult{{Message: read, Score: score, messageJSON: c.json}, {Message: read, Score: score}}
			want := []plainResult{{read, score}, {read, score}}
			for _, escape := range []bool{false, true} {
				if g, w := encode(got, escape), encode(want, escape); g != w {
					t.Fatalf("message %d, escape %v:\ngot  %s\nwant %s", i, escape, g, w)
				}
			}
		}
	}
}
