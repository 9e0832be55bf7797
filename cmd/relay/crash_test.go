package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// crashAck is a write the node answered with success: what must be there
// after the crash.
type crashAck struct {
	id, in, body, cid string // in: the thread or conversation
}

// post is a Parley answer; a corpus write's is read into corpusWrite.
type post struct {
	Message struct {
		ID, Thread, Body, Kind, CID string
	}
	Thread struct {
		ID           string
		MessageCount int `json:"message_count"`
	}
}

// corpusWrite is a corpus write's answer, a message's (Message) and a
// conversation's (Conversation).
type corpusWrite struct {
	ConversationID string `json:"conversation_id"`
	MessageID      string `json:"message_id"`
	Message        struct {
		ConversationID string `json:"conversation_id"`
		Content        string
		CID            string
	}
	Conversation struct {
		MessageCount int `json:"message_count"`
	}
}

// call sends one request and decodes a 2xx answer into out. opToken, when
// set, is the corpus's Operation-Token.
func call(c *http.Client, method, url, bearer, opToken string, body, out any) (http.Header, error) {
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if opToken != "" {
		req.Header.Set("Operation-Token", opToken)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	// Read whole: an answer cut short by the kill is no acknowledgement.
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, fmt.Errorf("%s %s: %v", method, url, err)
		}
	}
	return resp.Header, nil
}

// TestCrashKill9 kills `relay serve` with SIGKILL while agents write to the
// forum and the corpus over HTTP, starts it again on the same data and
// checks that every write it acknowledged is there, exactly as answered.
func TestCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := filepath.Join(t.TempDir(), "data")
	stderr := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the node's log:\n%s", stderr)
		}
	})
	// relay serve in a process of its own, which SIGKILL ends like the
	// real one; no rate limit: the load comes from few credentials.
	serve := func() *child {
		return startServe(t, []string{"--no-p2p", "--data", dir, "--http", "127.0.0.1:0"}, []string{"RELAY_RATE_LIMIT=0"}, stderr)
	}

	node := serve()
	url := node.url
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	op, err := os.ReadFile(filepath.Join(dir, "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	const writers = 3 // of each kind
	var tokens []string
	for i := range writers {
		var out struct{ Token string }
		if _, err := call(c, "POST", url+"/api/v1/tokens", strings.TrimSpace(string(op)), "",
			map[string]any{"label": fmt.Sprint("crash", i), "rights": []string{"write"}}, &out); err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, out.Token)
	}
	type agent struct{ id, endpoint string }
	var agents []agent
	for range writers {
		var out struct {
			AgentID    string `json:"agent_id"`
			EndpointID string `json:"endpoint_id"`
		}
		if _, err := call(c, "POST", url+"/register", "", "", nil, &out); err != nil {
			t.Fatal(err)
		}
		// The guide read with the credential is what lets it write.
		if _, err := call(c, "GET", url+"/auth.md", out.AgentID, "", nil, nil); err != nil {
			t.Fatal(err)
		}
		agents = append(agents, agent{out.AgentID, out.EndpointID})
	}

	var (
		mu          sync.Mutex
		posts, msgs []crashAck
		killed      atomic.Bool
		wg          sync.WaitGroup
	)
	// An error before the kill fails the test; after it, it ends the writer.
	failed := func(err error) bool {
		if err != nil && !killed.Load() {
			t.Errorf("before the kill: %v", err)
		}
		return err != nil
	}
	// Every writer opens a thread (a conversation) of its own, and then
	// writes into every writer's, so that writes into one thread or
	// conversation race each other; every tenth write opens another.
	var threads, convs sync.Map // writer → []string, its own
	pool := func(m *sync.Map) []string {
		var all []string
		m.Range(func(_, v any) bool {
			all = append(all, v.([]string)...)
			return true
		})
		return all
	}
	for w, tok := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var own []string
			for i := 0; ; i++ {
				body := fmt.Sprintf("crash post %d/%d", w, i)
				var out post
				path := "/api/v1/boards/lobby/threads"
				if all := pool(&threads); i%10 != 0 && len(all) > 0 {
					path = "/api/v1/threads/" + all[i%len(all)] + "/messages"
				}
				if _, err := call(c, "POST", url+path, tok, "", map[string]any{"kind": "note", "body": body}, &out); failed(err) {
					return
				}
				if out.Message.ID == "" || out.Message.CID == "" {
					t.Errorf("a post answered without its id: %+v", out)
					return
				}
				mu.Lock()
				posts = append(posts, crashAck{out.Message.ID, out.Message.Thread, body, out.Message.CID})
				mu.Unlock()
				if strings.HasSuffix(path, "/threads") {
					own = append(own, out.Message.Thread)
					threads.Store(w, own[:len(own):len(own)])
				}
			}
		}()
	}
	// last is each agent's newest write, to send again after the crash as
	// an agent unsure of its outcome would.
	type attempt struct {
		path, token string
		body        map[string]any
		acked       string // the message id answered, if any
	}
	last := make([]attempt, len(agents))
	for w, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var own []string
			for i := 0; ; i++ {
				content := fmt.Sprintf("crash message %d/%d", w, i)
				at := attempt{path: "/" + a.endpoint + "/createConversation", token: fmt.Sprint("op-", i),
					body: map[string]any{"subject": fmt.Sprint("crash ", w, "/", i), "content": content}}
				if all := pool(&convs); i%10 != 0 && len(all) > 0 {
					at.path = "/" + a.endpoint + "/appendToConversation/" + all[i%len(all)]
					at.body = map[string]any{"content": content}
				}
				mu.Lock()
				last[w] = at
				mu.Unlock()
				var out corpusWrite
				if _, err := call(c, "POST", url+at.path, a.id, at.token, at.body, &out); failed(err) {
					return
				}
				if out.MessageID == "" || out.Message.CID == "" {
					t.Errorf("a corpus write answered without its id: %+v", out)
					return
				}
				mu.Lock()
				msgs = append(msgs, crashAck{out.MessageID, out.ConversationID, content, out.Message.CID})
				last[w].acked = out.MessageID
				mu.Unlock()
				if strings.HasSuffix(at.path, "/createConversation") {
					own = append(own, out.ConversationID)
					convs.Store(w, own[:len(own):len(own)])
				}
			}
		}()
	}

	// Kill once the load has run a while and both kinds have piled up
	// acknowledgements; a slow machine gets longer.
	start := time.Now()
	for {
		mu.Lock()
		np, nm := len(posts), len(msgs)
		mu.Unlock()
		if time.Since(start) > 1500*time.Millisecond && np >= 200 && nm >= 200 || time.Since(start) > 10*time.Second || t.Failed() {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	killed.Store(true)
	if err := node.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	<-node.done
	tr.CloseIdleConnections()
	t.Logf("killed after %v: %d posts and %d corpus messages acknowledged", time.Since(start).Round(time.Millisecond), len(posts), len(msgs))
	if t.Failed() {
		t.FailNow()
	}
	if len(posts) == 0 || len(msgs) == 0 {
		t.Fatal("the node acknowledged nothing of one kind")
	}

	url = serve().url
	checked := time.Now()
	var health struct {
		Status string
		Store  struct{ State string }
	}
	if _, err := call(c, "GET", url+"/api/v1/health", "", "", nil, &health); err != nil || health.Status != "ok" || health.Store.State != "ok" {
		t.Fatalf("health after the crash: %+v %v", health, err)
	}
	perThread := map[string]int{}
	for _, a := range posts {
		var out post
		if _, err := call(c, "GET", url+"/api/v1/messages/"+a.id, "", "", nil, &out); err != nil {
			t.Fatalf("acknowledged post lost: %v", err)
		}
		if m := out.Message; m.ID != a.id || m.Thread != a.in || m.Body != a.body || m.Kind != "note" || m.CID != a.cid {
			t.Fatalf("post %s is %+v, acknowledged as %+v", a.id, m, a)
		}
		perThread[a.in]++
	}
	for id, n := range perThread {
		var out post
		if _, err := call(c, "GET", url+"/api/v1/threads/"+id, "", "", nil, &out); err != nil {
			t.Fatal(err)
		}
		if out.Thread.MessageCount < n {
			t.Fatalf("thread %s counts %d messages, %d acknowledged", id, out.Thread.MessageCount, n)
		}
	}
	perConv := map[string]int{}
	for _, a := range msgs {
		var out corpusWrite
		if _, err := call(c, "GET", url+"/messages/"+a.id, "", "", nil, &out); err != nil {
			t.Fatalf("acknowledged corpus message lost: %v", err)
		}
		if m := out.Message; m.ConversationID != a.in || m.Content != a.body || m.CID != a.cid {
			t.Fatalf("corpus message %s is %+v, acknowledged as %+v", a.id, m, a)
		}
		perConv[a.in]++
	}
	for id, n := range perConv {
		var out corpusWrite
		if _, err := call(c, "GET", url+"/conversations/"+id, "", "", nil, &out); err != nil {
			t.Fatal(err)
		}
		if out.Conversation.MessageCount < n {
			t.Fatalf("conversation %s counts %d messages, %d acknowledged", id, out.Conversation.MessageCount, n)
		}
	}
	// Each agent's last write again, with its Operation-Token: the
	// idempotency record went with the message, so an acknowledged one
	// answers what it answered, and one cut short either landed whole or
	// not at all.
	for w, at := range last {
		var out corpusWrite
		hdr, err := call(c, "POST", url+at.path, agents[w].id, at.token, at.body, &out)
		if err != nil {
			t.Fatalf("agent %d's last write again: %v", w, err)
		}
		replayed := hdr.Get("Idempotent-Replayed") == "true"
		if at.acked != "" && (!replayed || out.MessageID != at.acked) {
			t.Fatalf("agent %d's acknowledged %s sent again: %s (replayed %v)", w, at.acked, out.MessageID, replayed)
		}
		if out.Message.Content != at.body["content"] {
			t.Fatalf("agent %d's last write again answers %+v", w, out.Message)
		}
	}
	// A token issued before the crash still writes, and the forum's
	// numbering goes on past everything acknowledged.
	var out post
	if _, err := call(c, "POST", url+"/api/v1/threads/"+posts[0].in+"/messages", tokens[0], "",
		map[string]any{"kind": "note", "body": "after the crash"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, a := range posts {
		if a.id == out.Message.ID {
			t.Fatalf("a post after the crash took the id %s of an acknowledged one", a.id)
		}
	}
	t.Logf("all found again in %v; %d threads, %d conversations", time.Since(checked).Round(time.Millisecond), len(perThread), len(perConv))
}
