package realm

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ---------------------------------------------------------------------------
// SSE connections to /corpus/stream.

// streamClient keeps every stream on a connection of its own.
var streamClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1}}

// sseEvent is one event, or one comment, read from /corpus/stream.
type sseEvent struct {
	event, id, data string
	comment         bool
}

type sseConn struct {
	resp   *http.Response
	cancel context.CancelFunc
	events chan sseEvent
	once   sync.Once
}

// openStream opens /corpus/stream and reads it in the background.
func (tn *testNode) openStream(t testing.TB, query string, header http.Header) *sseConn {
	t.Helper()
	c, status, body := tn.tryStream(query, header)
	if status != 200 {
		t.Fatalf("stream%s: %d %s", query, status, body)
	}
	t.Cleanup(c.close)
	return c
}

func (tn *testNode) tryStream(query string, header http.Header) (*sseConn, int, string) {
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", tn.srv.URL+"/corpus/stream"+query, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := streamClient.Do(req)
	if err != nil {
		cancel()
		return nil, 0, err.Error()
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode, string(b)
	}
	c := &sseConn{resp: resp, cancel: cancel, events: make(chan sseEvent, 64)}
	go c.read()
	return c, 200, ""
}

func (c *sseConn) read() {
	defer close(c.events)
	sc := bufio.NewScanner(c.resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.data != "" || ev.comment {
				c.events <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
			ev.comment = true
		default:
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch name {
			case "event":
				ev.event = value
			case "id":
				ev.id = value
			case "data":
				ev.data += value
			}
		}
	}
}

// next returns the next change event, skipping comments.
func (c *sseConn) next(t testing.TB, wait time.Duration) sseEvent {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				t.Fatal("stream ended")
			}
			if !ev.comment {
				return ev
			}
		case <-timer.C:
			t.Fatalf("no event within %v", wait)
		}
	}
}

func (c *sseConn) close() {
	c.once.Do(func() {
		c.cancel()
		c.resp.Body.Close()
	})
}

// envelope checks an SSE event and returns its change envelope.
func (ev sseEvent) envelope(t testing.TB) map[string]any {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal([]byte(ev.data), &env); err != nil {
		t.Fatalf("event data %q: %v", ev.data, err)
	}
	if ev.event != "change" || ev.id != strconv.FormatUint(seqOf(env), 10) {
		t.Fatalf("event %q id %q for sequence %v", ev.event, ev.id, env["sequence"])
	}
	return env
}

// ---------------------------------------------------------------------------
// The stream's own contract.

func TestCorpusStream(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	_, c1, _ := tn.write(t, a, "/createConversation", "1", map[string]any{"subject": "S", "content": "one"})
	conv := c1["conversation_id"].(string)
	s1 := uint64(c1["sequence"].(float64))

	// Without a cursor it starts now: only what comes next.
	live := tn.openStream(t, "", nil)
	if ct := live.resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" || live.resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("headers: %v", live.resp.Header)
	}
	_, m2, _ := tn.write(t, a, "/appendToConversation/"+conv, "2", map[string]any{"content": "two"})
	env := live.next(t, 5*time.Second).envelope(t)
	if env["resource_id"] != m2["message_id"] || field(env, "data", "content") != "two" {
		t.Fatalf("live event: %v", env)
	}
	// after replays; it wins over Last-Event-ID.
	replay := tn.openStream(t, "?after=0", http.Header{"Last-Event-ID": {strconv.FormatUint(s1, 10)}})
	if ev := replay.next(t, 5*time.Second); ev.id != strconv.FormatUint(s1, 10) {
		t.Fatalf("after=0 started at %s", ev.id)
	}
	resumed := tn.openStream(t, "", http.Header{"Last-Event-ID": {strconv.FormatUint(s1, 10)}})
	if ev := resumed.next(t, 5*time.Second); ev.id != strconv.FormatUint(uint64(m2["sequence"].(float64)), 10) {
		t.Fatalf("Last-Event-ID resumed at %s", ev.id)
	}
	for _, tc := range []struct {
		query  string
		header http.Header
		status int
	}{
		{"", http.Header{"Last-Event-ID": {"abc"}}, 400},
		{"?after=x", nil, 400},
		{"", http.Header{"Accept": {"application/json"}}, 406},
		{"", http.Header{"Accept": {"text/event-stream;q=0"}}, 406},
	} {
		if c, status, body := tn.tryStream(tc.query, tc.header); status != tc.status {
			if c != nil {
				c.close()
			}
			t.Errorf("%s %v: %d %s", tc.query, tc.header, status, body)
		}
	}
	// Closed streams are let go.
	live.close()
	replay.close()
	resumed.close()
	eventually(t, 5*time.Second, "streams to close", func() bool { return tn.corpus.OpenStreams() == 0 })
}

// TestCorpusStreamFanout: a thousand subscribers each get every event,
// promptly, and the writers do not wait for them.
func TestCorpusStreamFanout(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 connections")
	}
	const subscribers, writes = 1000, 20
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	_, c1, _ := tn.write(t, a, "/createConversation", "0", map[string]any{"subject": "fan-out", "content": "start"})
	conv := c1["conversation_id"].(string)
	// Streams are rate-limited like any request: spread them over agents.
	var readers []corpusAgent
	for range 4 {
		readers = append(readers, tn.registerAgent(t, false))
	}
	conns := make([]*sseConn, subscribers)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, status, body := tn.tryStream("", http.Header{"Authorization": {"Bearer " + readers[i%len(readers)].id}})
			if status != 200 {
				t.Errorf("stream %d: %d %s", i, status, body)
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
	}()
	if t.Failed() {
		t.FailNow()
	}
	eventually(t, 10*time.Second, "every stream to open", func() bool { return tn.corpus.OpenStreams() == subscribers })

	start := time.Now()
	var want []string
	for i := range writes {
		_, m, _ := tn.write(t, a, "/appendToConversation/"+conv, strconv.Itoa(i+1), map[string]any{"content": "event " + strconv.Itoa(i)})
		want = append(want, strconv.FormatUint(uint64(m["sequence"].(float64)), 10))
	}
	wrote := time.Since(start)
	var slowest atomic.Int64
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, id := range want {
				ev, ok := <-c.events
				for ok && ev.comment {
					ev, ok = <-c.events
				}
				if !ok || ev.id != id {
					t.Errorf("subscriber %d, event %d: %q, want %q", i, j, ev.id, id)
					return
				}
			}
			if d := int64(time.Since(start)); d > slowest.Load() {
				slowest.Store(d)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("subscribers did not get every event within 30 s")
	}
	t.Logf("%d subscribers × %d events: writes took %v, the last subscriber was done after %v",
		subscribers, writes, wrote, time.Duration(slowest.Load()))
	for _, c := range conns {
		c.close()
	}
	eventually(t, 10*time.Second, "streams to close", func() bool { return tn.corpus.OpenStreams() == 0 })
}

// TestCorpusStreamShutdown: a shutting-down node ends its streams rather
// than waiting for them to go idle.
func TestCorpusStreamShutdown(t *testing.T) {
	n, cancel, served := servingNode(t, "ainotes", t.TempDir())
	resp, err := streamClient.Get(n.URL() + "/corpus/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	start := time.Now()
	cancel()
	if err := awaitServed(t, served, 10*time.Second, "Serve waited for the open stream"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatalf("the stream did not end cleanly: %v", err)
	}
	t.Logf("shut down in %v with a stream open", time.Since(start))
}
