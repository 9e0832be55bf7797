package corpus

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// syncFixture is a corpus on an in-memory store, written through the
// service.
type syncFixture struct {
	t   testing.TB
	st  *store.Store
	s   *Service
	p   *api.Principal
	ops int
}

func openSyncFixture(t testing.TB, cfg Config) *syncFixture {
	t.Helper()
	scfg := store.DefaultConfig("")
	scfg.InMemory = true
	scfg.Logger = slog.New(slog.DiscardHandler)
	scfg.Realm = "ainotes"
	scfg.Key = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	st, err := store.Open(scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg.Realm, cfg.Logger = "ainotes", slog.New(slog.DiscardHandler)
	s, err := New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, rec, err := s.register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := s.principal(rec, nil)
	if err := s.MarkOnboarded(ctx, p); err != nil {
		t.Fatal(err)
	}
	return &syncFixture{t: t, st: st, s: s, p: p}
}

// writeN writes n messages (each a new conversation) and returns their
// sequences.
func (f *syncFixture) writeN(n int) []uint64 {
	f.t.Helper()
	var seqs []uint64
	for range n {
		f.ops++
		content := fmt.Sprint("message ", f.ops)
		in := writeIn{OperationToken: fmt.Sprint("sync-", f.ops), Subject: "s", Content: &content}
		res, err := f.s.write(context.Background(), f.p, &in, true)
		if err != nil {
			f.t.Fatal(err)
		}
		seqs = append(seqs, res.Sequence)
	}
	return seqs
}

// ---------------------------------------------------------------------------
// scanSeq against a brute-force reading of the same keys.

func TestScanSeq(t *testing.T) {
	f := openSyncFixture(t, Config{})
	pfx := []byte("p/co/zz/")
	// Dense runs, sparse runs and every block boundary that matters.
	held := map[uint64]bool{}
	for _, s := range []uint64{1, 2, 3, 255, 256, 257, 511, 512, 1000, 65535, 65536, 65537, 70000, 1 << 24, 1<<24 + 1, 1<<32 + 5} {
		held[s] = true
	}
	for s := uint64(60000); s < 60600; s++ {
		held[s] = true
	}
	r := rand.New(rand.NewSource(1))
	for range 300 {
		held[uint64(r.Intn(200000))+1] = true
	}
	_, err := f.st.Submit(context.Background(), func(tx *store.Tx) (*protocol.Draft, error) {
		for s := range held {
			if err := tx.Set(binary.BigEndian.AppendUint64(append([]byte(nil), pfx...), s), []byte(fmt.Sprint(s))); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sorted := slices.Sorted(maps.Keys(held))
	brute := func(after, upTo uint64, limit int) []uint64 {
		var out []uint64
		for _, s := range sorted {
			if s > after && s <= upTo && len(out) < limit {
				out = append(out, s)
			}
		}
		return out
	}
	scan := func(after, upTo uint64, limit int) []uint64 {
		var out []uint64
		err := f.st.View(func(tx *store.Tx) error {
			return scanSeq(tx, pfx, after, upTo, func(seq uint64, v []byte) error {
				if string(v) != fmt.Sprint(seq) {
					t.Fatalf("sequence %d holds %q", seq, v)
				}
				if len(out) == limit {
					return store.ErrStop
				}
				out = append(out, seq)
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	bounds := []uint64{0, 1, 2, 254, 255, 256, 257, 510, 511, 512, 999, 1000, 60000, 60255, 60256, 60599, 65535, 65536, 70000, 200001, 1 << 24, 1<<32 + 5, 1<<32 + 10}
	for range 300 {
		bounds = append(bounds, uint64(r.Intn(200002)))
	}
	for i, after := range bounds {
		for _, upTo := range []uint64{after, after + 1, after + 300, after + 70000, bounds[(i*7)%len(bounds)], 1<<32 + 10} {
			for _, limit := range []int{1, 5, 1 << 30} {
				if upTo > 1<<32+10 && upTo != 1<<32+10 {
					continue
				}
				if got, want := scan(after, upTo, limit), brute(after, upTo, limit); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("(%d, %d] limit %d: %v, want %v", after, upTo, limit, got, want)
				}
			}
		}
	}
}

// TestListingsSeekTheCursor checks that a page of GET /messages and GET
// /conversations deep in the corpus costs what a first page costs: the
// listing seeks to after rather than reading every record below it.
func TestListingsSeekTheCursor(t *testing.T) {
	f := openSyncFixture(t, Config{})
	seqs := f.writeN(1500)
	ctx := context.Background()
	one := 1
	allocs := func(what string, after uint64, list func(in *uint64) (int, error)) float64 {
		return testing.AllocsPerRun(5, func() {
			n, err := list(&after)
			if err != nil || n != 1 {
				t.Fatalf("%s after %d: %d records, %v", what, after, n, err)
			}
		})
	}
	messages := func(after *uint64) (int, error) {
		out, err := f.s.listMessages(ctx, nil, messagesIn{After: after, Limit: &one})
		return len(out.Messages), err
	}
	conversations := func(after *uint64) (int, error) {
		out, err := f.s.listConversations(ctx, nil, conversationsIn{After: after, Limit: &one})
		return len(out.Conversations), err
	}
	for what, list := range map[string]func(*uint64) (int, error){"messages": messages, "conversations": conversations} {
		first, deep := allocs(what, 0, list), allocs(what, seqs[len(seqs)-3], list)
		if deep > 2*first+100 {
			t.Errorf("%s: a page after %d allocates %.0f times, the first page %.0f: the listing reads what it skips", what, seqs[len(seqs)-3], deep, first)
		}
	}
}

// ---------------------------------------------------------------------------
// The tail of changes in memory.

// storeChanges is what the store holds in (after, upTo].
func (f *syncFixture) storeChanges(after, upTo uint64) []change {
	f.t.Helper()
	cs, _, err := readChanges(f.st, after, upTo, 1<<30)
	if err != nil {
		f.t.Fatal(err)
	}
	return cs
}

func seqsOf(cs []change) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i] = c.seq
	}
	return out
}

func TestTail(t *testing.T) {
	f := openSyncFixture(t, Config{})
	tl := &tail{maxEntries: 8, maxBytes: 1 << 20}
	check := func(step string) {
		t.Helper()
		tl.mu.RLock()
		from, upTo, entries := tl.from, tl.upTo, tl.entries
		tl.mu.RUnlock()
		if want := f.storeChanges(from, upTo); fmt.Sprint(seqsOf(entries)) != fmt.Sprint(seqsOf(want)) || len(entries) > tl.maxEntries {
			t.Fatalf("%s: the tail holds %v for (%d, %d], the store %v", step, seqsOf(entries), from, upTo, seqsOf(want))
		}
		// Every read from a cursor it covers is what the store says.
		for after := from; after <= upTo+1; after++ {
			got, end, ok := tl.read(after, 3)
			want := f.storeChanges(after, upTo)
			if len(want) > 3 {
				want = want[:3]
			}
			if !ok || fmt.Sprint(seqsOf(got)) != fmt.Sprint(seqsOf(want)) || (len(want) < 3 && end != max(upTo, after)) {
				t.Fatalf("%s: read after %d: %v end %d ok %v, want %v", step, after, seqsOf(got), end, ok, seqsOf(want))
			}
		}
		if from > 0 {
			if _, _, ok := tl.read(from-1, 3); ok {
				t.Fatalf("%s: a read before the tail succeeded", step)
			}
		}
	}
	f.writeN(3)
	if err := tl.fill(f.st, f.st.Sequence()); err != nil {
		t.Fatal(err)
	}
	check("first fill, everything fits")
	r := rand.New(rand.NewSource(2))
	for i := range 40 {
		f.writeN(r.Intn(12))
		if err := tl.fill(f.st, f.st.Sequence()); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprint("fill ", i))
	}
	// Bytes bound it too.
	tl = &tail{maxEntries: 100, maxBytes: 1200}
	if err := tl.fill(f.st, f.st.Sequence()); err != nil {
		t.Fatal(err)
	}
	check("bytes")
}

// ---------------------------------------------------------------------------
// Streams: behind the tail, heartbeats, shutdown.

// streamServer serves the stream operation over HTTP as the node does.
func streamServer(t *testing.T, s *Service) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := streamIn{LastEventID: r.Header.Get("Last-Event-ID")}
		if a := r.URL.Query().Get("after"); a != "" {
			var n uint64
			fmt.Sscan(a, &n)
			in.After = &n
		}
		out, err := s.openStream(r.Context(), nil, in)
		if err == nil {
			err = out.WriteHTTP(w, r)
		}
		if err != nil {
			http.Error(w, err.Error(), 400)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// sseLines reads a stream's lines into a channel.
func sseLines(t *testing.T, url string) (<-chan string, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); resp.Body.Close() }) }
	t.Cleanup(stop)
	return lines, stop
}

func nextLine(t *testing.T, lines <-chan string, prefix string) string {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended before a %q line", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("no %q line", prefix)
		}
	}
}

func TestStreamBehindTheTail(t *testing.T) {
	f := openSyncFixture(t, Config{})
	f.s.feed.tail.maxEntries = 4 // most of what follows is read from the store
	seqs := f.writeN(20)
	srv := streamServer(t, f.s)
	// A stream that keeps up fills the tail with the newest four.
	live, _ := sseLines(t, srv.URL)
	nextLine(t, live, ": changes after")
	f.s.feed.tail.mu.RLock()
	idle := f.s.feed.tail.upTo == 0
	f.s.feed.tail.mu.RUnlock()
	if !idle {
		t.Fatal("an idle stream read")
	}
	more := f.writeN(1)
	if got := nextLine(t, live, "id: "); got != fmt.Sprint("id: ", more[0]) {
		t.Fatalf("live: %s", got)
	}
	// One from the start gets all of them, in order, through the store and
	// then the tail.
	all, _ := sseLines(t, srv.URL+"?after=0")
	for _, s := range append(seqs, more...) {
		if got := nextLine(t, all, "id: "); got != fmt.Sprint("id: ", s) {
			t.Fatalf("replay: %s, want %d", got, s)
		}
	}
}

func TestStreamHeartbeatAndClose(t *testing.T) {
	f := openSyncFixture(t, Config{StreamHeartbeat: 30 * time.Millisecond, MaxStreams: 1})
	srv := streamServer(t, f.s)
	lines, stop := sseLines(t, srv.URL)
	if l := nextLine(t, lines, "retry: "); l != "retry: 3000" {
		t.Fatalf("first line %q", l)
	}
	for range 3 {
		nextLine(t, lines, ": keep-alive")
	}
	// One stream at most: the second is refused.
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "Too many open streams") {
		t.Fatalf("a stream past MaxStreams: %d %s", resp.StatusCode, body)
	}
	// Shutdown ends the stream.
	f.s.CloseStreams()
	for range lines {
	}
	stop()
	deadline := time.Now().Add(5 * time.Second)
	for f.s.OpenStreams() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stream is still counted")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestStreamsPerAddress: one client address holds at most
// MaxStreamsPerAddr streams (an IPv6 /64 counts as one address), so one
// client cannot take every stream there is; another address still gets
// one, a closed stream frees its place, and loopback is not bounded.
func TestStreamsPerAddress(t *testing.T) {
	f := openSyncFixture(t, Config{StreamHeartbeat: time.Hour, MaxStreamsPerAddr: 2})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("X-From"); a != "" {
			r.RemoteAddr = a
		}
		out, err := f.s.openStream(r.Context(), nil, streamIn{})
		if err == nil {
			err = out.WriteHTTP(w, r)
		}
		var ref *protocol.Refusal
		if errors.As(err, &ref) {
			http.Error(w, err.Error(), ref.Status())
		} else if err != nil {
			http.Error(w, err.Error(), 500)
		}
	}))
	t.Cleanup(srv.Close)
	open := func(addr string) (int, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("X-From", addr)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
		}
		t.Cleanup(cancel)
		return resp.StatusCode, cancel
	}
	_, first := open("203.0.113.5:1000")
	open("203.0.113.5:1001")
	if status, _ := open("203.0.113.5:1002"); status != 429 {
		t.Fatalf("a third stream from one address: %d", status)
	}
	open("[2001:db8::1]:1000")
	open("[2001:db8::2]:1000")
	if status, _ := open("[2001:db8::3]:1000"); status != 429 {
		t.Fatalf("a third stream from one /64: %d", status)
	}
	if status, _ := open("198.51.100.9:1000"); status != 200 {
		t.Fatalf("another address: %d", status)
	}
	for i := range 3 {
		if status, _ := open(fmt.Sprintf("127.0.0.1:%d", 2000+i)); status != 200 {
			t.Fatalf("loopback stream %d: %d", i, status)
		}
	}
	first()
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, cancel := open("203.0.113.5:1003")
		if status == 200 {
			break
		}
		cancel()
		if time.Now().After(deadline) {
			t.Fatal("a closed stream did not free its place")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFeedNotify(t *testing.T) {
	fd := newFeed(Config{})
	w1 := fd.wait()
	fd.notify()
	select {
	case <-w1:
	default:
		t.Fatal("notify did not close the channel taken before it")
	}
	w2 := fd.wait()
	select {
	case <-w2:
		t.Fatal("a fresh channel is closed")
	default:
	}
	// Concurrent notifies close each channel once.
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() { defer wg.Done(); fd.notify() }()
	}
	wg.Wait()
	<-w2
}

// ---------------------------------------------------------------------------
// Accept.

var acceptTests = []struct {
	header string
	want   bool
}{
	{"", true},
	{"*/*", true},
	{"application/*", true},
	{"application/x-ndjson", true},
	{"Application/X-NDJSON", true},
	{"application/ndjson", true},
	{"application/jsonl;q=0.5", true},
	{"text/html, */*;q=0.1", true},
	{"application/json", false},
	{"text/*", false},
	{"application/x-ndjson;q=0", false},
	{"application/x-ndjson;q=0, */*", false},
	{"application/*;q=0, application/x-ndjson", true},
	{"*/*;q=0", false},
	{"application/ndjson;q=0", false},
	// No valid media range: as if there were no header, as the negotiated
	// resources take it; a range with a q outside 0..1 is dropped.
	{"foo", true},
	{"text/markdown;q=abc", true},
	{"application/x-ndjson;q=2", true},
	{"application/json, application/x-ndjson;q=2", false},
	{"application/json, application/x-ndjson;q=-1", false},
	{"application/json, foo", false},
	{"*", true},
}

func TestAccepts(t *testing.T) {
	for _, tc := range acceptTests {
		if got := accepts(tc.header, ndjsonType, ndjsonAliases...); got != tc.want {
			t.Errorf("accepts(%q) = %v, want %v", tc.header, got, tc.want)
		}
	}
}
