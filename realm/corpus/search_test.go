package corpus

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand"
	"net/url"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ipfs/go-cid"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// ---------------------------------------------------------------------------
// A corpus on a real store, written through the service.

type searchFixture struct {
	t   testing.TB
	dir string
	st  *store.Store
	s   *Service
	ops int
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openSearchFixture opens a corpus in dir, in memory when dir is "".
func openSearchFixture(t testing.TB, dir string) *searchFixture {
	t.Helper()
	cfg := store.DefaultConfig(dir)
	cfg.InMemory = dir == ""
	cfg.Logger = quiet()
	cfg.Realm = "ainotes"
	cfg.Key = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(st, Config{Realm: "ainotes", Logger: quiet()})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	f := &searchFixture{t: t, dir: dir, st: st, s: s}
	t.Cleanup(func() { f.st.Close() })
	return f
}

// reopen closes the store and opens the corpus again on the same directory:
// a restart.
func (f *searchFixture) reopen() {
	f.t.Helper()
	if err := f.st.Close(); err != nil {
		f.t.Fatal(err)
	}
	g := openSearchFixture(f.t, f.dir)
	f.st, f.s = g.st, g.s
}

func (f *searchFixture) agent() *api.Principal {
	f.t.Helper()
	ctx := context.Background()
	_, rec, err := f.s.register(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	p := f.s.principal(rec, nil)
	if err := f.s.MarkOnboarded(ctx, p); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// post writes a message: a new conversation when in.ConversationID is "".
func (f *searchFixture) post(p *api.Principal, in writeIn) Message {
	f.t.Helper()
	f.ops++
	in.OperationToken = fmt.Sprint("op-", f.ops)
	create := in.ConversationID == ""
	if create && in.Subject == "" {
		in.Subject = "a subject"
	}
	res, err := f.s.write(context.Background(), p, &in, create)
	if err != nil {
		f.t.Fatal(err)
	}
	return res.Message
}

func text(s string) *string { return &s }

func (f *searchFixture) search(in searchIn) SearchOut {
	f.t.Helper()
	out, err := f.s.search(context.Background(), &api.Call{}, in)
	if err != nil {
		f.t.Fatalf("search %+v: %v", in, err)
	}
	return out
}

func resultIDs(out SearchOut) []string {
	ids := make([]string, len(out.Results))
	for i, r := range out.Results {
		ids[i] = r.Message.MessageID
	}
	return ids
}

func sortedIDs(ms ...Message) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.MessageID
	}
	sort.Strings(ids)
	return ids
}

func ptr[T any](v T) *T { return &v }

// ---------------------------------------------------------------------------
// Tokens

var tokenizeTests = []struct {
	in   string
	want []string
}{
	{"Hello, World!", []string{"hello", "world"}},
	{"p99 latency=20ms; v1.2", []string{"p99", "latency", "20ms", "v1", "2"}},
	{"Grüße aus KÖLN", []string{"grüße", "aus", "köln"}},
	{"ΣΟΦΟΣ σοφος", []string{"σοφοσ", "σοφοσ"}},
	{"नमस्ते दुनिया", []string{"नमस्ते", "दुनिया"}},
	{"東京タワ abc", []string{"東", "京", "タ", "ワ", "abc"}},
	{"don't", []string{"don", "t"}},
	{"  \t\n--- ", nil},
	{strings.Repeat("x", 70) + " y", []string{strings.Repeat("x", 64), "y"}},
	{"bad\xffutf8", []string{"bad", "utf8"}},
}

func TestTokenize(t *testing.T) {
	for _, tt := range tokenizeTests {
		var got []string
		tokenize(tt.in, func(tok []byte) { got = append(got, string(tok)) })
		if !slices.Equal(got, tt.want) {
			t.Errorf("tokenize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := queryTerms("the The THE cat"); !slices.Equal(got, []string{"the", "cat"}) {
		t.Errorf("queryTerms dedupes: %q", got)
	}
}

// FuzzTokenize: every token is non-empty UTF-8 of at most maxTermRunes
// runes, and is its own one token, so a query term written as it was
// indexed finds it again.
func FuzzTokenize(f *testing.F) {
	for _, tt := range tokenizeTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tokenize(s, func(tok []byte) {
			if len(tok) == 0 || !utf8.Valid(tok) || utf8.RuneCount(tok) > maxTermRunes {
				t.Fatalf("tokenize(%q) gave %q", s, tok)
			}
			var again []string
			tokenize(string(tok), func(b []byte) { again = append(again, string(b)) })
			if len(again) != 1 || again[0] != string(tok) {
				t.Fatalf("tokenize(%q) gave %q, which tokenizes to %q", s, tok, again)
			}
		})
		if terms := queryTerms(s); len(terms) > maxQueryTerms {
			t.Fatalf("queryTerms(%q) gave %d terms", s, len(terms))
		}
	})
}

// ---------------------------------------------------------------------------
// Ranking

func TestSearchRelevance(t *testing.T) {
	f := openSearchFixture(t, "")
	a := f.agent()
	dense := f.post(a, writeIn{Content: text("latency latency latency and caching")})
	long := f.post(a, writeIn{Content: text("latency is one word in a much longer sentence about many other things entirely")})
	f.post(a, writeIn{Content: text("nothing relevant here")})
	caching := f.post(a, writeIn{Content: text("caching")})
	twin1 := f.post(a, writeIn{Content: text("zebra crossing")})
	twin2 := f.post(a, writeIn{Content: text("zebra crossing")})

	out := f.search(searchIn{Q: "latency"})
	if got := resultIDs(out); !slices.Equal(got, []string{dense.MessageID, long.MessageID}) || out.Total != 2 {
		t.Fatalf("latency: %v total %d", got, out.Total)
	}
	if s0, s1 := out.Results[0].Score, out.Results[1].Score; !(s0 < s1 && s1 < 0) {
		t.Fatalf("scores must ascend and be negated BM25: %v %v", s0, s1)
	}
	out = f.search(searchIn{Q: "LATENCY, Caching!"})
	if got := resultIDs(out); len(got) != 3 || got[0] != dense.MessageID || out.Total != 3 {
		t.Fatalf("two terms: the message holding both first: %v", got)
	}
	if !slices.Contains(resultIDs(out), caching.MessageID) {
		t.Fatalf("a message holding one term matches: %v", resultIDs(out))
	}
	// Equal relevance: the lower sequence first.
	out = f.search(searchIn{Q: "zebra"})
	if got := resultIDs(out); !slices.Equal(got, []string{twin1.MessageID, twin2.MessageID}) || out.Results[0].Score != out.Results[1].Score {
		t.Fatalf("tie: %v", out.Results)
	}
	// The MCP spelling of q.
	if out := f.search(searchIn{Query: "zebra"}); out.Total != 2 {
		t.Fatalf("query alias: %d", out.Total)
	}
	// Nothing to match is an empty success.
	if out := f.search(searchIn{Q: "?!"}); out.Total != 0 || len(out.Results) != 0 || out.NextCursor != nil || out.Next != nil {
		t.Fatalf("no terms: %+v", out)
	}
}

func TestSearchSubjectOnFirstMessage(t *testing.T) {
	f := openSearchFixture(t, "")
	a := f.agent()
	root := f.post(a, writeIn{Subject: "Quantum entanglement", Content: text("first post")})
	reply := f.post(a, writeIn{ConversationID: root.ConversationID, Content: text("a reply")})
	out := f.search(searchIn{Q: "entanglement"})
	if got := resultIDs(out); !slices.Equal(got, []string{root.MessageID}) {
		t.Fatalf("subject: %v", got)
	}
	if out := f.search(searchIn{Q: "reply"}); !slices.Equal(resultIDs(out), []string{reply.MessageID}) {
		t.Fatalf("content: %v", resultIDs(out))
	}
	// Payloads are not searched.
	f.post(a, writeIn{Payload: []byte(`{"word":"payloadonly"}`)})
	if out := f.search(searchIn{Q: "payloadonly"}); out.Total != 0 {
		t.Fatalf("payload indexed: %v", resultIDs(out))
	}
}

// ---------------------------------------------------------------------------
// Filters

func TestSearchFilters(t *testing.T) {
	f := openSearchFixture(t, "")
	a, b := f.agent(), f.agent()
	c1 := f.post(a, writeIn{Subject: "one", Content: text("alpha first"), Kind: &[]string{"claim"}, Tags: []string{"perf"}})
	m2 := f.post(b, writeIn{ConversationID: c1.ConversationID, Content: text("alpha second"), Kind: &[]string{"question"}, Mentions: []string{a.Agent.AuthorID}})
	m3 := f.post(b, writeIn{Content: text("alpha third"), Kind: &[]string{"proposal", "claim"}, Tags: []string{"perf", "ux"}})
	m4 := f.post(a, writeIn{ConversationID: m3.ConversationID, Content: text("alpha fourth"), Mentions: []string{b.Agent.AuthorID}})
	f.post(a, writeIn{Content: text("beta only")})

	var filterTests = []struct {
		name string
		in   searchIn
		want []Message
	}{
		{"none", searchIn{}, []Message{c1, m2, m3, m4}},
		{"conversation_id", searchIn{ConversationID: c1.ConversationID}, []Message{c1, m2}},
		{"author_id", searchIn{AuthorID: b.Agent.AuthorID}, []Message{m2, m3}},
		{"tag", searchIn{Tag: "perf"}, []Message{c1, m3}},
		{"tag ux", searchIn{Tag: "ux"}, []Message{m3}},
		{"kinds one", searchIn{Kinds: []string{"claim"}}, []Message{c1, m3}},
		{"kinds or", searchIn{Kinds: []string{"question", "post"}}, []Message{m2, m4}},
		{"mentioned_agent", searchIn{MentionedAgent: a.Agent.AuthorID}, []Message{m2}},
		{"after", searchIn{After: ptr(m2.Sequence)}, []Message{m3, m4}},
		{"before", searchIn{Before: ptr(m3.Sequence)}, []Message{c1, m2}},
		{"after and before", searchIn{After: ptr(c1.Sequence), Before: ptr(m4.Sequence)}, []Message{m2, m3}},
		{"and", searchIn{AuthorID: a.Agent.AuthorID, Tag: "perf"}, []Message{c1}},
		{"and kinds", searchIn{ConversationID: m3.ConversationID, Kinds: []string{"claim"}}, []Message{m3}},
		{"unknown conversation", searchIn{ConversationID: "nope"}, nil},
		{"unknown author", searchIn{AuthorID: "ainotes:nobody"}, nil},
		{"unknown tag", searchIn{Tag: "nope"}, nil},
		{"no mention", searchIn{MentionedAgent: "ainotes:nobody"}, nil},
		{"empty window", searchIn{After: ptr(m2.Sequence), Before: ptr(m3.Sequence)}, nil},
	}
	for _, tt := range filterTests {
		in := tt.in
		in.Q = "alpha"
		out := f.search(in)
		got := resultIDs(out)
		sort.Strings(got)
		if want := sortedIDs(tt.want...); !slices.Equal(got, want) || out.Total != len(want) {
			t.Errorf("%s: got %v (total %d), want %v", tt.name, got, out.Total, want)
		}
	}
}

func TestSearchRefusals(t *testing.T) {
	f := openSearchFixture(t, "")
	var refusalTests = []struct {
		name  string
		in    searchIn
		field string
	}{
		{"q missing", searchIn{}, "q"},
		{"q blank", searchIn{Q: " \t "}, "q"},
		{"limit 0", searchIn{Q: "x", Limit: ptr(0)}, "limit"},
		{"limit 1001", searchIn{Q: "x", Limit: ptr(1001)}, "limit"},
		{"offset negative", searchIn{Q: "x", Offset: ptr(-1)}, "offset"},
		{"kinds empty array", searchIn{Q: "x", Kinds: []string{}}, "kinds"},
		{"kinds empty value", searchIn{Q: "x", Kinds: []string{""}}, "kinds"},
		{"kinds unknown", searchIn{Q: "x", Kinds: []string{"rant"}}, "kinds"},
		{"kinds duplicate", searchIn{Q: "x", Kinds: []string{"claim", "claim"}}, "kinds"},
	}
	for _, tt := range refusalTests {
		_, err := f.s.search(context.Background(), &api.Call{}, tt.in)
		var ref *protocol.Refusal
		if !errors.As(err, &ref) || ref.Reason != protocol.ReasonInvalidRequest || ref.Details["field"] != tt.field {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	for _, ok := range []searchIn{{Q: "x", Limit: ptr(1)}, {Q: "x", Limit: ptr(1000)}, {Q: "x", Offset: ptr(0)}, {Q: "x", Kinds: []string{"proposal", "claim"}}} {
		if _, err := f.s.search(context.Background(), &api.Call{}, ok); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// ---------------------------------------------------------------------------
// Pagination

func TestSearchPagination(t *testing.T) {
	f := openSearchFixture(t, "")
	a := f.agent()
	for i := range 25 {
		// Later messages are shorter, so rank higher; every fifth is as long
		// as the one before, for ties.
		n := 25 - i + i%5/4
		f.post(a, writeIn{Content: text("needle " + strings.Repeat("hay ", n)), Kind: &[]string{"claim"}})
	}
	f.post(a, writeIn{Content: text("needle"), Kind: &[]string{"question"}})
	all := f.search(searchIn{Q: "needle", Kinds: []string{"claim"}})
	if all.Total != 25 || len(all.Results) != 25 || all.Next != nil || all.NextOffset != nil {
		t.Fatalf("all: total %d, %d results, next %v", all.Total, len(all.Results), all.Next)
	}
	for i := 1; i < len(all.Results); i++ {
		p, r := all.Results[i-1], all.Results[i]
		if p.Score > r.Score || p.Score == r.Score && p.Message.Sequence > r.Message.Sequence {
			t.Fatalf("order at %d: %v then %v", i, p, r)
		}
	}
	var paged []string
	for offset := 0; ; {
		out := f.search(searchIn{Q: "needle", Kinds: []string{"claim"}, Limit: ptr(10), Offset: ptr(offset)})
		if out.Total != 25 || out.Limit != 10 || out.Offset != offset {
			t.Fatalf("page %d: %+v", offset, out)
		}
		last := out.Results[len(out.Results)-1].Message.Sequence
		if out.NextCursor == nil || *out.NextCursor != last || out.page.next == nil || *out.page.next != last {
			t.Fatalf("page %d: next_cursor %v, want the last result's sequence %d", offset, out.NextCursor, last)
		}
		paged = append(paged, resultIDs(out)...)
		if out.Next == nil {
			if offset != 20 || len(out.Results) != 5 || out.NextOffset != nil || out.HTTPHeaders().Get("Link") != "" {
				t.Fatalf("last page at %d: %d results", offset, len(out.Results))
			}
			break
		}
		u, err := url.Parse(*out.Next)
		if err != nil || u.Path != "/search" || u.Query().Get("offset") != fmt.Sprint(offset+10) || *out.NextOffset != offset+10 ||
			u.Query().Get("q") != "needle" || u.Query().Get("limit") != "10" || !slices.Equal(u.Query()["kinds"], []string{"claim"}) {
			t.Fatalf("next link %q", *out.Next)
		}
		h := out.HTTPHeaders()
		if h.Get("X-Next-Cursor") != fmt.Sprint(last) || !strings.Contains(h.Get("Link"), "offset="+fmt.Sprint(offset+10)) {
			t.Fatalf("headers %v", h)
		}
		offset = *out.NextOffset
	}
	if !slices.Equal(paged, resultIDs(all)) {
		t.Fatalf("pages differ from one page:\n%v\n%v", paged, resultIDs(all))
	}
	// The cursor is the last result's sequence, not the page's highest.
	first := f.search(searchIn{Q: "needle", Kinds: []string{"claim"}, Limit: ptr(10)})
	var highest uint64
	for _, r := range first.Results {
		highest = max(highest, r.Message.Sequence)
	}
	if *first.NextCursor == highest {
		t.Fatalf("test corpus should put the highest sequence elsewhere than last")
	}
	out := f.search(searchIn{Q: "needle", Offset: ptr(1000)})
	if len(out.Results) != 0 || out.Total != 26 || out.NextCursor != nil || out.Next != nil || out.HTTPHeaders() != nil {
		t.Fatalf("past the end: %+v", out)
	}
}

// ---------------------------------------------------------------------------
// Keeping in step with the store

func TestSearchRestart(t *testing.T) {
	f := openSearchFixture(t, t.TempDir())
	a := f.agent()
	m1 := f.post(a, writeIn{Subject: "Durable subjects", Content: text("written before the restart")})
	f.reopen()
	if out := f.search(searchIn{Q: "durable"}); !slices.Equal(resultIDs(out), []string{m1.MessageID}) {
		t.Fatalf("after restart: %v", resultIDs(out))
	}
	m2 := f.post(a, writeIn{ConversationID: m1.ConversationID, Content: text("written after the restart")})
	out := f.search(searchIn{Q: "written restart"})
	if got := resultIDs(out); out.Total != 2 || !slices.Equal(sortedIDs(m1, m2), slices.Sorted(slices.Values(got))) {
		t.Fatalf("after restart and a write: %v", got)
	}
	// A Rebuild rewrites the projections and leaves the index alone.
	if err := f.st.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	if again := f.search(searchIn{Q: "written restart"}); !slices.Equal(resultIDs(again), resultIDs(out)) {
		t.Fatalf("after rebuild: %v", resultIDs(again))
	}
}

// TestSearchIngested: a message that arrives from a peer, with no write on
// this node, is found.
func TestSearchIngested(t *testing.T) {
	f := openSearchFixture(t, "")
	key := ed25519.NewKeyFromSeed(bytesOf(7))
	var prev cid.Cid
	for i, d := range []messageData{
		{MessageID: "m-away-1", ConversationID: "c-away", Subject: "Remote", Content: text("ingested marmalade"), Kind: []string{"post"}},
		{MessageID: "m-away-2", ConversationID: "c-away", Content: text("more marmalade"), Kind: []string{"claim"}},
	} {
		data, err := protocol.EncodeData(d)
		if err != nil {
			t.Fatal(err)
		}
		ev := &protocol.Event{Realm: "away", Seq: uint64(i + 1), Type: evMessageCreated, At: time.Now().UnixMilli(), Author: "away:bot", Data: data}
		if prev.Defined() {
			ev.Prev = protocol.Link{Cid: prev}
		}
		raw, c, err := ev.Sign(key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.Ingest(context.Background(), raw, func(*protocol.Event) error { return nil }); err != nil {
			t.Fatal(err)
		}
		prev = c
	}
	out := f.search(searchIn{Q: "marmalade remote", Kinds: []string{"claim"}})
	if got := resultIDs(out); !slices.Equal(got, []string{"m-away-2"}) || out.Results[0].Message.Realm != "away" {
		t.Fatalf("ingested: %v", got)
	}
	if out := f.search(searchIn{Q: "remote"}); !slices.Equal(resultIDs(out), []string{"m-away-1"}) {
		t.Fatalf("ingested subject: %v", resultIDs(out))
	}
}

func bytesOf(b byte) []byte { return []byte(strings.Repeat(string(rune(b)), ed25519.SeedSize)) }

// TestSearchConcurrent: writers and searchers at once; every write is
// searchable when it returns, and found exactly once in the end.
func TestSearchConcurrent(t *testing.T) {
	f := openSearchFixture(t, "")
	const writers, each = 8, 12
	agents := make([]*api.Principal, writers)
	for i := range agents {
		agents[i] = f.agent()
	}
	root := f.post(agents[0], writeIn{Content: text("root")})
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := []string{}
	fail := func(format string, args ...any) {
		mu.Lock()
		errs = append(errs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := f.s.search(context.Background(), &api.Call{}, searchIn{Q: "common", Limit: ptr(5)}); err != nil {
					fail("search: %v", err)
				}
			}
		})
	}
	var writes sync.WaitGroup
	for w := range writers {
		writes.Go(func() {
			for i := range each {
				word := fmt.Sprintf("uniq%dx%d", w, i)
				in := writeIn{ConversationID: root.ConversationID, Content: text("common " + word), OperationToken: "t-" + word}
				if _, err := f.s.write(context.Background(), agents[w], &in, false); err != nil {
					fail("write: %v", err)
					return
				}
				out, err := f.s.search(context.Background(), &api.Call{}, searchIn{Q: word})
				if err != nil || out.Total != 1 {
					fail("%s right after its write: %v %+v", word, err, out)
				}
			}
		})
	}
	writes.Wait()
	close(stop)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(strings.Join(errs, "\n"))
	}
	if out := f.search(searchIn{Q: "common", Limit: ptr(1000)}); out.Total != writers*each || len(out.Results) != writers*each {
		t.Fatalf("common: %d", out.Total)
	}
	if n := len(f.s.index.docs); n != writers*each+1 {
		t.Fatalf("index holds %d docs, want %d", n, writers*each+1)
	}
}

// ---------------------------------------------------------------------------
// The index against a brute-force BM25

func TestSearchIndexMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	vocab := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	x := newSearchIndex()
	var ms []indexable
	for i := range 400 {
		n := r.Intn(12)
		words := make([]string, n)
		for j := range words {
			words[j] = vocab[min(r.Intn(len(vocab)), r.Intn(len(vocab)))]
		}
		m := indexable{seq: uint64(2*i + 1), id: fmt.Sprint("m", i), conv: fmt.Sprint("c", i%7), author: fmt.Sprint("a", i%5),
			content: strings.Join(words, " "), kinds: []string{Kinds[i%len(Kinds)].Kind}}
		if i%3 == 0 {
			m.tags = []string{"t1"}
		}
		if i%11 == 0 {
			m.subject = "a b"
		}
		ms = append(ms, m)
	}
	for chunk := range slices.Chunk(ms, 37) {
		x.add(chunk, chunk[len(chunk)-1].seq)
	}
	// The reference: BM25 straight from the definition.
	var total float64
	for _, m := range ms {
		total += float64(len(strings.Fields(m.subject + " " + m.content)))
	}
	avg := total / float64(len(ms))
	df := map[string]int{}
	for _, m := range ms {
		seen := map[string]bool{}
		for _, w := range strings.Fields(m.subject + " " + m.content) {
			if !seen[w] {
				seen[w] = true
				df[w]++
			}
		}
	}
	reference := func(terms []string, keep func(*indexable) bool) []hit {
		var out []hit
		for i := range ms {
			m := &ms[i]
			if !keep(m) {
				continue
			}
			words := strings.Fields(m.subject + " " + m.content)
			var s float64
			for _, t := range terms {
				tf := 0
				for _, w := range words {
					if w == t {
						tf++
					}
				}
				if tf == 0 {
					continue
				}
				n := float64(len(ms))
				idf := math.Log(1 + (n-float64(df[t])+0.5)/(float64(df[t])+0.5))
				s += idf * float64(tf) * (bm25K1 + 1) / (float64(tf) + bm25K1*(1-bm25B+bm25B*float64(len(words))/avg))
			}
			if s > 0 {
				out = append(out, hit{score: s, seq: m.seq, id: m.id})
			}
		}
		sort.Slice(out, func(i, j int) bool { return worse(&out[j], &out[i]) })
		return out
	}
	for trial := range 300 {
		terms := []string{vocab[r.Intn(len(vocab))]}
		if trial%2 == 0 {
			terms = append(terms, vocab[r.Intn(len(vocab))], "zz")
		}
		terms = queryTerms(strings.Join(terms, " "))
		q := searchQuery{terms: terms}
		keep := func(*indexable) bool { return true }
		switch trial % 5 {
		case 1:
			q.conv = "c3"
			keep = func(m *indexable) bool { return m.conv == "c3" }
		case 2:
			q.kinds, q.tag = []string{"claim", "question"}, "t1"
			keep = func(m *indexable) bool {
				return slices.Contains(m.tags, "t1") && (m.kinds[0] == "claim" || m.kinds[0] == "question")
			}
		case 3:
			q.after, q.before, q.author = ptr(uint64(101)), ptr(uint64(601)), "a2"
			keep = func(m *indexable) bool { return m.seq > 101 && m.seq < 601 && m.author == "a2" }
		}
		want := reference(terms, keep)
		k := 1 + r.Intn(60)
		got, n := x.run(&q, k)
		if n != len(want) {
			t.Fatalf("trial %d %+v: total %d, want %d", trial, q, n, len(want))
		}
		want = want[:min(k, len(want))]
		if len(got) != len(want) {
			t.Fatalf("trial %d: %d hits, want %d", trial, len(got), len(want))
		}
		for i := range got {
			if got[i].id != want[i].id || math.Abs(got[i].score-want[i].score) > 1e-9 {
				t.Fatalf("trial %d %+v rank %d: %s %.12f, want %s %.12f", trial, q, i, got[i].id, got[i].score, want[i].id, want[i].score)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Benchmarks: 100,000 synthetic messages, Zipf words over a 20,000-word
// vocabulary, 20 to 80 words each.

const benchDocs = 100_000

type benchCorpus struct {
	vocab []string
	zipf  *rand.Zipf
	r     *rand.Rand
}

func newBenchCorpus() *benchCorpus {
	r := rand.New(rand.NewSource(42))
	seen := map[string]bool{}
	var vocab []string
	for len(vocab) < 20_000 {
		b := make([]byte, 3+r.Intn(8))
		for i := range b {
			b[i] = byte('a' + r.Intn(26))
		}
		if w := string(b); !seen[w] {
			seen[w] = true
			vocab = append(vocab, w)
		}
	}
	return &benchCorpus{vocab: vocab, zipf: rand.NewZipf(r, 1.07, 2, uint64(len(vocab)-1)), r: r}
}

func (c *benchCorpus) word() string { return c.vocab[c.zipf.Uint64()] }

func (c *benchCorpus) sentence() string {
	n := 20 + c.r.Intn(61)
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(c.word())
	}
	return b.String()
}

func (c *benchCorpus) message(i int) indexable {
	m := indexable{seq: uint64(i + 1), id: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), conv: fmt.Sprint("conv-", i/20),
		author: fmt.Sprint("ainotes:agent", c.r.Intn(500)), content: c.sentence(), kinds: []string{Kinds[c.r.Intn(len(Kinds))].Kind}}
	if c.r.Intn(4) == 0 {
		m.tags = []string{fmt.Sprint("tag", c.r.Intn(50))}
	}
	if i%20 == 0 {
		m.subject = c.word() + " " + c.word()
	}
	return m
}

var (
	benchOnce  sync.Once
	benchIndex *searchIndex
	benchText  *benchCorpus
)

func benchIndex100k(b *testing.B) (*searchIndex, *benchCorpus) {
	benchOnce.Do(func() {
		c := newBenchCorpus()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := newSearchIndex()
		start := time.Now()
		chunk := make([]indexable, 0, syncChunk)
		for i := range benchDocs {
			chunk = append(chunk, c.message(i))
			if len(chunk) == syncChunk || i == benchDocs-1 {
				x.add(chunk, chunk[len(chunk)-1].seq)
				chunk = chunk[:0]
			}
		}
		var postingsN int
		for _, p := range x.lists {
			postingsN += len(p.docs)
		}
		took := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.Logf("indexed %d messages in %v: %d terms, %d postings, %.1f MB of heap", benchDocs, took.Round(time.Millisecond),
			len(x.terms), postingsN, float64(after.HeapAlloc-before.HeapAlloc)/(1<<20))
		benchIndex, benchText = x, c
	})
	return benchIndex, benchText
}

// reportLatency records p50 and p99 of the measured calls, in µs.
func reportLatency(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	p := func(q float64) float64 { return float64(d[min(len(d)-1, int(q*float64(len(d))))].Nanoseconds()) / 1e3 }
	b.ReportMetric(p(0.50), "p50-µs")
	b.ReportMetric(p(0.99), "p99-µs")
	b.ReportMetric(float64(d[len(d)-1].Nanoseconds())/1e3, "max-µs")
}

type benchQuery struct {
	name string
	make func(c *benchCorpus, r *rand.Rand) searchQuery
}

var benchQueries = []benchQuery{
	{"1term", func(c *benchCorpus, r *rand.Rand) searchQuery { return searchQuery{terms: []string{c.word()}} }},
	{"2terms", func(c *benchCorpus, r *rand.Rand) searchQuery {
		return searchQuery{terms: []string{c.word(), c.word()}}
	}},
	{"3terms", func(c *benchCorpus, r *rand.Rand) searchQuery {
		return searchQuery{terms: []string{c.word(), c.word(), c.word()}}
	}},
	{"3commonest", func(c *benchCorpus, r *rand.Rand) searchQuery {
		return searchQuery{terms: []string{c.vocab[r.Intn(3)], c.vocab[3+r.Intn(3)], c.vocab[6+r.Intn(3)]}}
	}},
	{"2terms+kinds", func(c *benchCorpus, r *rand.Rand) searchQuery {
		return searchQuery{terms: []string{c.word(), c.word()}, kinds: []string{"claim", "question"}}
	}},
	{"2terms+conversation", func(c *benchCorpus, r *rand.Rand) searchQuery {
		return searchQuery{terms: []string{c.word(), c.word()}, conv: fmt.Sprint("conv-", r.Intn(benchDocs/20))}
	}},
	{"3terms+author+tag+window", func(c *benchCorpus, r *rand.Rand) searchQuery {
		return searchQuery{terms: []string{c.word(), c.word(), c.word()}, author: fmt.Sprint("ainotes:agent", r.Intn(500)),
			tag: fmt.Sprint("tag", r.Intn(50)), after: ptr(uint64(10_000)), before: ptr(uint64(90_000))}
	}},
}

// BenchmarkSearchIndex measures the index alone: scoring, filters and the
// top 100 (offset 0, limit 100).
func BenchmarkSearchIndex(b *testing.B) {
	x, c := benchIndex100k(b)
	for _, bq := range benchQueries {
		b.Run(bq.name, func(b *testing.B) {
			r := rand.New(rand.NewSource(7))
			qs := make([]searchQuery, 4096)
			for i := range qs {
				qs[i] = bq.make(c, r)
			}
			d := make([]time.Duration, 0, b.N)
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				x.run(&qs[i%len(qs)], 100)
				d = append(d, time.Since(start))
			}
			reportLatency(b, d)
		})
	}
}

// BenchmarkSearchService measures GET /search's handler end to end on a
// real (in-memory) store holding 100,000 messages written through the
// corpus: sync, index, and reading the 100 results from Badger. It also
// reports how long New takes to index them from the log (a restart).
func BenchmarkSearchService(b *testing.B) {
	f := openSearchFixture(b, "")
	c := newBenchCorpus()
	const writers = 32
	agents := make([]*api.Principal, writers)
	for i := range agents {
		agents[i] = f.agent()
	}
	convs := make([]string, writers)
	start := time.Now()
	var wg sync.WaitGroup
	texts := make([]string, benchDocs)
	for i := range texts {
		texts[i] = c.sentence()
	}
	for w := range writers {
		wg.Go(func() {
			for i := w; i < benchDocs; i += writers {
				in := writeIn{Content: &texts[i], OperationToken: fmt.Sprint("b", i), Kind: &[]string{Kinds[i%len(Kinds)].Kind}}
				create := (i/writers)%20 == 0
				if create {
					in.Subject = "bench " + texts[i][:min(len(texts[i]), 40)]
				} else {
					in.ConversationID = convs[w]
				}
				res, err := f.s.write(context.Background(), agents[w], &in, create)
				if err != nil {
					b.Error(err)
					return
				}
				convs[w] = res.ConversationID
			}
		})
	}
	wg.Wait()
	b.Logf("wrote %d messages in %v", benchDocs, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	s2, err := New(f.st, Config{Realm: "ainotes", Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("New indexed %d messages from the log in %v", len(s2.index.docs), time.Since(start).Round(time.Millisecond))
	for _, bq := range []struct {
		name string
		in   func(r *rand.Rand) searchIn
	}{
		{"2terms", func(r *rand.Rand) searchIn { return searchIn{Q: c.word() + " " + c.word()} }},
		{"3terms+kinds", func(r *rand.Rand) searchIn {
			return searchIn{Q: c.word() + " " + c.word() + " " + c.word(), Kinds: []string{"claim", "question"}}
		}},
		{"1term+author", func(r *rand.Rand) searchIn {
			return searchIn{Q: c.word(), AuthorID: agents[r.Intn(writers)].Agent.AuthorID}
		}},
	} {
		b.Run(bq.name, func(b *testing.B) {
			r := rand.New(rand.NewSource(7))
			d := make([]time.Duration, 0, b.N)
			for b.Loop() {
				in := bq.in(r)
				t0 := time.Now()
				if _, err := s2.search(context.Background(), &api.Call{}, in); err != nil {
					b.Fatal(err)
				}
				d = append(d, time.Since(t0))
			}
			reportLatency(b, d)
		})
	}
}
