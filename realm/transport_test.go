package realm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"relay/realm/parley"
	"relay/realm/session"
	"relay/store"
)

// rawMCP posts one JSON-RPC message to /api/v1/mcp.
func rawMCP(t *testing.T, url, token string, body []byte) (*http.Response, map[string]any) {
	t.Helper()
	resp, b := mcpRequest(t, url, token, map[string]string{"Content-Type": "application/json", "MCP-Protocol-Version": "2025-06-18"}, string(body))
	var out map[string]any
	json.Unmarshal(b, &out)
	return resp, out
}

// mcpRequest posts body to /api/v1/mcp with the headers given, a bearer
// token when one is, and the Accept MCP asks for.
func mcpRequest(t *testing.T, url, token string, hdr map[string]string, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/api/v1/mcp", strings.NewReader(body))
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestRateLimitHTTPAndMCP(t *testing.T) {
	tn := startNodeAt(t, "ainotes", t.TempDir(), rateLimit(3))
	n, srv := tn.Node, tn.srv
	tok, err := n.auth.Issue(t.Context(), "agent", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	get := func() *http.Response {
		req, _ := http.NewRequest("GET", srv.URL+"/api/v1/manifest", nil)
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for i := 0; i < 3; i++ { // the burst
		if resp := get(); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	resp := get()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("over the limit over HTTP: %d %v", resp.StatusCode, resp.Header)
	}
	// The same bucket covers MCP.
	r, out := rawMCP(t, srv.URL, tok.Token, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if r.StatusCode != 429 || out["reason"] != "rate_limited" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("over the limit over MCP: %d %v", r.StatusCode, out)
	}
	// Anonymous callers have a bucket of their own, by address.

	if status, _ := tn.do(t, "GET", "/api/v1/health", "", nil); status != 200 {
		t.Fatalf("anonymous: %d", status)
	}
	_, man := tn.do(t, "GET", "/api/v1/manifest", "", nil)
	if field(man, "limits", "requests_per_minute") != float64(3) {
		t.Fatalf("manifest does not show the limit in force: %v", man["limits"])
	}
}

func TestTransportRefusals(t *testing.T) {
	tn := startNode(t, "ainotes")
	tok := tn.issue(t, "agent", "write")
	// unknown_tool over MCP, unknown_endpoint over HTTP.
	_, out := rawMCP(t, tn.srv.URL, tok, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{}}}`))
	if field(out, "result", "isError") != true || field(out, "result", "structuredContent", "reason") != "unknown_tool" {
		t.Fatalf("unknown tool: %v", out)
	}
	if status, out := tn.do(t, "POST", "/api/v1/nope", tok, map[string]any{}); status != 404 || out["reason"] != "unknown_endpoint" {
		t.Fatalf("unknown endpoint: %d %v", status, out)
	}
	// A body larger than the largest legal request is refused before it is
	// read whole, over HTTP and over MCP.
	huge := bytes.Repeat([]byte("a"), int(tn.cfg.MaxBodyBytes)+1)
	req, _ := http.NewRequest("POST", tn.srv.URL+"/api/v1/threads/th_1/messages", bytes.NewReader(huge))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("http payload too large: %d", resp.StatusCode)
	}
	r, out := rawMCP(t, tn.srv.URL, tok, huge)
	if r.StatusCode != 413 || out["reason"] != "payload_too_large" {
		t.Fatalf("mcp payload too large: %d %v", r.StatusCode, out)
	}
	// A session cookie is not a token.
	req, _ = http.NewRequest("POST", tn.srv.URL+"/api/v1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Cookie", "relay_session=abc")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]any
	json.NewDecoder(resp.Body).Decode(&ref)
	resp.Body.Close()
	if resp.StatusCode != 401 || ref["reason"] != "token_required" {
		t.Fatalf("cookie on MCP: %d %v", resp.StatusCode, ref)
	}
}

// Every operation the node serves has its input checked by a compiled
// shape first: a schema that lost it would still be right, only slower,
// and no other test would notice.
func TestOperationsShaped(t *testing.T) {
	tn := startNode(t, "shapes")
	n := 0
	for _, op := range tn.Registry().Operations() {
		if op.Input == nil {
			continue
		}
		n++
		if !op.Shaped() {
			b, _ := json.Marshal(op.Input)
			t.Errorf("%s: its input has no shape: %s", op.Key, b)
		}
	}
	if n < 20 {
		t.Fatalf("only %d operations with an input", n)
	}
}

// TestNotTextRefused: a body that is not UTF-8, or escapes half a
// surrogate pair, is refused as invalid_json over HTTP and MCP alike, for
// the forum and the corpus, and nothing is stored.
func TestNotTextRefused(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "q"})
	ag := tn.registerAgent(t, true)
	before := tn.Store().Sequence()
	for _, body := range []string{"\xff\xfe", `a\ud800b`, `\udc00`} {
		post := func(path string, header http.Header) (int, map[string]any) {
			header.Set("Content-Type", "application/json")
			st, b, _ := tn.sendBody(t, "POST", path, header, `{"kind":"note","body":"`+body+`","subject":"s","content":"`+body+`"}`)
			var out map[string]any
			json.Unmarshal(b, &out)
			return st, out
		}
		// The forum's envelope has no subject or content: the text is
		// refused before the unknown fields would be.
		if st, out := post("/api/v1/threads/th_1/messages", http.Header{"Authorization": {"Bearer " + a}}); st != 400 || out["reason"] != "invalid_json" {
			t.Errorf("forum, %q: %d %v", body, st, out)
		}
		if st, out := post("/"+ag.endpoint+"/createConversation", http.Header{"Authorization": {"Bearer " + ag.id}, "Operation-Token": {"t-" + body}}); st != 400 || corpusCode(out) != "invalid_request" { // the corpus's code for invalid_json
			t.Errorf("corpus, %q: %d %v", body, st, out)
		}
		msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"post_threads_id_messages","arguments":{"id":"th_1","kind":"note","body":"` + body + `"}}}`
		_, out := rawMCP(t, tn.srv.URL, a, []byte(msg))
		res, _ := out["result"].(map[string]any)
		sc, _ := res["structuredContent"].(map[string]any)
		if res["isError"] != true || sc["reason"] != "invalid_json" {
			t.Errorf("mcp, %q: %v", body, out)
		}
	}
	if after := tn.Store().Sequence(); after != before {
		t.Fatalf("stored %d events", after-before)
	}
}

// TestContentEncodingRefused: a body sent with a content coding the node
// does not decode (gzip) is refused as an unsupported media type on every
// write path, rather than read as JSON text it is not (or, when the bytes
// happen to be plain JSON, stored as if the label were not there).
func TestContentEncodingRefused(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	ag := tn.registerAgent(t, true)
	before := tn.Store().Sequence()
	for _, coding := range []string{"gzip", "br, gzip", "x-unknown"} {
		send := func(path string, header http.Header, body string) (int, map[string]any) {
			header.Set("Content-Type", "application/json")
			header.Set("Content-Encoding", coding)
			st, b, _ := tn.sendBody(t, "POST", path, header, body)
			var out map[string]any
			json.Unmarshal(b, &out)
			return st, out
		}
		if st, out := send("/api/v1/boards/1/threads", http.Header{"Authorization": {"Bearer " + a}}, `{"kind":"ask","body":"q"}`); st != 415 || out["reason"] != "unsupported_media_type" {
			t.Errorf("forum, %s: %d %v", coding, st, out)
		}
		if st, out := send("/"+ag.endpoint+"/createConversation", http.Header{"Authorization": {"Bearer " + ag.id}, "Operation-Token": {"ce-" + coding}}, `{"subject":"s","content":"c"}`); st != 415 || corpusCode(out) != "unsupported_media_type" ||
			!strings.Contains(fmt.Sprint(field(out, "error", "how_to_proceed")), "without Content-Encoding") {
			t.Errorf("corpus, %s: %d %v", coding, st, out)
		}
		resp, b := mcpRequest(t, tn.srv.URL, a, map[string]string{"Content-Type": "application/json", "Content-Encoding": coding},
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"post_boards_id_threads","arguments":{"id":"1","kind":"ask","body":"q"}}}`)
		if resp.StatusCode != 415 || !bytes.Contains(b, []byte(`"reason":"unsupported_media_type"`)) {
			t.Errorf("mcp, %s: %d %s", coding, resp.StatusCode, b)
		}
	}
	// identity is no coding at all.
	st, _, _ := tn.sendBody(t, "POST", "/api/v1/boards/1/threads", http.Header{"Authorization": {"Bearer " + a}, "Content-Type": {"application/json"}, "Content-Encoding": {"identity"}}, `{"kind":"ask","body":"q"}`)
	if st != 200 {
		t.Fatalf("Content-Encoding identity: %d", st)
	}
	if after := tn.Store().Sequence(); after != before+1 {
		t.Fatalf("stored %d events, want 1", after-before)
	}
}

// TestRejectedWritesDoNotCount: a corpus write the node rejects does not use
// up the agent's allowance (the seed), while its reads and accepted writes
// do; a Parley refusal is a request like any other.
func TestRejectedWritesDoNotCount(t *testing.T) {
	tn := startNodeAt(t, "ainotes", t.TempDir(), rateLimit(4))
	n := tn.Node
	a := tn.registerAgent(t, true) // the guide is a document, not an operation: not counted
	for i := range 9 {
		body, status := map[string]any{"subject": "", "content": "x"}, 400
		switch i % 3 {
		case 1:
			body = map[string]any{"subject": "s", "content": "x", "kind": []string{"rant"}}
		case 2: // the payload's own limit, not the body's
			body, status = map[string]any{"subject": "s", "payload": strings.Repeat("p", 65540)}, 413
		}
		if got, out, _ := tn.write(t, a, "/createConversation", "bad-"+itoa(uint64(i)), body); got != status {
			t.Fatalf("rejected write %d: %d %v", i, got, out)
		}
	}
	for i := range 4 {
		if status, out, _ := tn.write(t, a, "/createConversation", "ok-"+itoa(uint64(i)), map[string]any{"subject": "s", "content": "x"}); status != 201 {
			t.Fatalf("write %d of the allowance: %d %v", i, status, out)
		}
	}
	if status, out, _ := tn.write(t, a, "/createConversation", "over", map[string]any{"subject": "s", "content": "x"}); status != 429 || corpusCode(out) != "rate_limited" {
		t.Fatalf("over the allowance: %d %v", status, out)
	}

	// A body over the node's limit is counted: the node read it.
	tn2 := startNodeAt(t, "ainotes", t.TempDir(), rateLimit(2), func(c *Config) { c.MaxBodyBytes = 1 << 10 })
	b := tn2.registerAgent(t, true)
	big := map[string]any{"subject": "s", "content": strings.Repeat("c", 2<<10)}
	if status, out, _ := tn2.write(t, b, "/createConversation", "big", big); status != 413 || corpusCode(out) != "message_too_large" {
		t.Fatalf("a body over the limit: %d %v", status, out)
	}
	if status, out, _ := tn2.write(t, b, "/createConversation", "ok", map[string]any{"subject": "s", "content": "x"}); status != 201 {
		t.Fatalf("the allowance's second write: %d %v", status, out)
	}
	if status, out, _ := tn2.write(t, b, "/createConversation", "over", map[string]any{"subject": "s", "content": "x"}); status != 429 {
		t.Fatalf("after a body over the limit and a write: %d %v", status, out)
	}

	tok, err := n.auth.Issue(t.Context(), "agent", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if status, _ := tn.do(t, "POST", "/api/v1/threads/th_9/messages", tok.Token, map[string]any{"kind": "note", "body": "x"}); status == 429 {
			t.Fatalf("parley request %d refused by the limit", i)
		}
	}
	if status, _ := tn.do(t, "POST", "/api/v1/threads/th_9/messages", tok.Token, map[string]any{"kind": "note", "body": "x"}); status != 429 {
		t.Fatalf("a fifth parley request: %d", status)
	}
}

// TestRefusalsWithoutCredentialCount: a write refused for want of a
// credential is not refunded (no agent's allowance is at stake), and
// requests with a credential that does not authenticate are counted
// against their address, over HTTP and both MCP endpoints: before, neither
// ever met the limit.
func TestRefusalsWithoutCredentialCount(t *testing.T) {
	tn := startNodeAt(t, "ainotes", t.TempDir(), rateLimit(3))
	a := tn.registerAgent(t, true)
	anonymous := func(token string) (int, map[string]any) {
		status, out, _ := tn.write(t, corpusAgent{endpoint: a.endpoint}, "/createConversation", token, map[string]any{"subject": "s", "content": "x"})
		return status, out
	}
	for i := range 2 { // the registration above was one
		if status, out := anonymous("anon-" + itoa(uint64(i))); status != 401 {
			t.Fatalf("anonymous write %d: %d %v", i, status, out)
		}
	}
	if status, out := anonymous("anon-over"); status != 429 || corpusCode(out) != "rate_limited" {
		t.Fatalf("anonymous write over the limit: %d %v", status, out)
	}

	tn = startNodeAt(t, "ainotes", t.TempDir(), rateLimit(3))
	for i := range 3 {
		if status, out := tn.do(t, "GET", "/api/v1/me", "not-a-token", nil); status != 401 {
			t.Fatalf("bad token %d: %d %v", i, status, out)
		}
	}
	if status, out := tn.do(t, "GET", "/api/v1/me", "not-a-token", nil); status != 429 || out["reason"] != "rate_limited" {
		t.Fatalf("bad token over the limit over HTTP: %d %v", status, out)
	}
	if r, out := rawMCP(t, tn.srv.URL, "not-a-token", []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)); r.StatusCode != 429 || out["reason"] != "rate_limited" {
		t.Fatalf("bad token over the limit on /api/v1/mcp: %d %v", r.StatusCode, out)
	}
	if resp, _ := mcpCall(t, tn.srv.URL, "", "not-a-token", `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 429 {
		t.Fatalf("bad token over the limit on /mcp: %d", resp.StatusCode)
	}
}

// TestMCPJSONRPCErrors: what the SDK refuses in plain text is answered as
// JSON-RPC 2.0 errors: a parse error or an invalid request with the id
// null, a request for an unknown method with "method not found" under its
// id; a notification of an unknown method is accepted and ignored.
func TestMCPJSONRPCErrors(t *testing.T) {
	tn := startNode(t, "ainotes")
	tok := tn.issue(t, "agent", "write")
	for _, tc := range []struct {
		body   string
		status int
		id     any
		code   float64
	}{
		{`{"jsonrpc":"2.0","id":1,`, 400, nil, -32700},
		{`not json`, 400, nil, -32700},
		{`"x"`, 400, nil, -32600},
		{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, 400, nil, -32600},
		{`{"jsonrpc":"2.0","id":1}`, 400, nil, -32600},
		{`{"jsonrpc":"2.0","id":7,"method":"foo/bar"}`, 200, float64(7), -32601},
		{`{"jsonrpc":"2.0","id":"seven","method":"foo/bar"}`, 200, "seven", -32601},
		// Ids the SDK would echo changed: refused, not answered wrongly.
		{`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, 400, nil, -32600},
		{`{"jsonrpc":"2.0","id":1e3,"method":"ping"}`, 400, nil, -32600},
		{`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, 400, nil, -32600},
		{`{"jsonrpc":"2.0","id":-12345678901234567890,"method":"ping"}`, 400, nil, -32600},
		{"{\"jsonrpc\":\"2.0\",\"id\":\"a\xffb\",\"method\":\"ping\"}", 400, nil, -32600},
		{`{"jsonrpc":"2.0","id":"a\ud800b","method":"ping"}`, 400, nil, -32600},
		{`{"jsonrpc":"2.0","id":"\udc00","method":"ping"}`, 400, nil, -32600},
		// Params the methods cannot take: invalid params, in plain words.
		{`{"jsonrpc":"2.0","id":8,"method":"logging/setLevel"}`, 200, float64(8), -32602},
		{`{"jsonrpc":"2.0","id":8,"method":"logging/setLevel","params":{"level":"loud"}}`, 200, float64(8), -32602},
		{`{"jsonrpc":"2.0","id":8,"method":"initialize"}`, 200, float64(8), -32602},
		{`{"jsonrpc":"2.0","id":8,"method":"initialize","params":{"protocolVersion":5,"capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`, 200, float64(8), -32602},
		{`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{}}`, 200, float64(8), -32602},
		{`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"get_manifest","arguments":[]}}`, 200, float64(8), -32602},
		{`{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"cursor":5}}`, 200, float64(8), -32602},
		{`{"jsonrpc":"2.0","id":8,"method":"ping","params":[1]}`, 200, float64(8), -32602},
	} {
		resp, out := rawMCP(t, tn.srv.URL, tok, []byte(tc.body))
		e, _ := out["error"].(map[string]any)
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" || out["jsonrpc"] != "2.0" ||
			out["id"] != tc.id || e["code"] != tc.code || e["message"] == "" {
			t.Errorf("%s: %d %s %v", tc.body, resp.StatusCode, resp.Header.Get("Content-Type"), out)
		}
		if m := fmt.Sprint(e["message"]); strings.Contains(m, "jsonrpc2") || strings.Contains(m, "mcp.") || strings.Contains(m, "unmarshal") {
			t.Errorf("%s: the SDK's types in the message: %v", tc.body, e["message"])
		}
	}
	resp, _ := rawMCP(t, tn.srv.URL, tok, []byte(`{"jsonrpc":"2.0","method":"notifications/foo"}`))
	if resp.StatusCode != 202 {
		t.Errorf("an unknown notification: %d", resp.StatusCode)
	}
	// What the SDK answers itself is untouched.
	if _, out := rawMCP(t, tn.srv.URL, tok, []byte(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)); out["id"] != float64(3) || out["result"] == nil {
		t.Errorf("ping: %v", out)
	}
	// The largest id taken comes back as sent.
	if _, b := postMCP(t, tn.srv.URL, tok, "application/json", "", `{"jsonrpc":"2.0","id":-9007199254740991,"method":"ping"}`); !bytes.Contains(b, []byte(`"id":-9007199254740991`)) {
		t.Errorf("the largest id: %s", b)
	}
}

// postMCP posts body to /api/v1/mcp with the Content-Type and Origin given
// ("" sends none) and returns the status and body.
func postMCP(t *testing.T, url, token, contentType, origin, body string) (int, []byte) {
	t.Helper()
	hdr := map[string]string{}
	if contentType != "" {
		hdr["Content-Type"] = contentType
	}
	if origin != "" {
		hdr["Origin"] = origin
	}
	resp, b := mcpRequest(t, url, token, hdr, body)
	return resp.StatusCode, b
}

// TestMCPContentType: a message that is not application/json is refused
// with 415 and the reason, in each endpoint's shape, not the SDK's text.
func TestMCPContentType(t *testing.T) {
	tn := startNode(t, "ainotes")
	tok := tn.issue(t, "agent", "read")
	for _, ct := range []string{"text/plain", ""} {
		if st, b := postMCP(t, tn.srv.URL, tok, ct, "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`); st != 415 || !bytes.Contains(b, []byte(`"reason":"unsupported_media_type"`)) {
			t.Errorf("Content-Type %q: %d %s", ct, st, b)
		}
	}
}

// TestMCPOrigin: MCP's transport says servers MUST validate the Origin
// header; /api/v1/mcp takes none, its own, a loopback page's and an
// allowed host's, and refuses any other site's with 403.
func TestMCPOrigin(t *testing.T) {
	tn := startNode(t, "ainotes")
	tok := tn.issue(t, "agent", "read")
	u, _ := url.Parse(tn.srv.URL)
	for _, tc := range []struct {
		origin string
		status int
	}{
		{"", 200},
		{"http://" + u.Host, 200},
		{"http://localhost:6274", 200},
		{"http://127.0.0.1:3000", 200},
		{"http://[::1]:3000", 200},
		{"https://evil.example", 403},
		{"http://127.0.0.1.evil.example", 403},
		{"null", 403},
		{"file://", 403},
	} {
		st, b := postMCP(t, tn.srv.URL, tok, "application/json", tc.origin, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if st != tc.status || (tc.status == 403 && !bytes.Contains(b, []byte(`"reason":"forbidden"`))) {
			t.Errorf("Origin %q: %d %s", tc.origin, st, b)
		}
	}
}

// TestMCPReboundHost: on a loopback connection a Host that is not a
// loopback name (DNS rebinding) is refused with 403 and the reason, not the
// SDK's plain text; a name listed in AllowedHosts passes.
func TestMCPReboundHost(t *testing.T) {
	tn := startNode(t, "ainotes")
	tok := tn.issue(t, "agent", "read")
	tn.cfg.AllowedHosts = []string{"proxy.example"}
	for host, want := range map[string]int{"relay.example.com": 403, "proxy.example": 200, "localhost": 200, "LOCALHOST": 403, "[::1]:80": 200} {
		req, _ := http.NewRequest("POST", tn.srv.URL+"/api/v1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want == 403 && !bytes.Contains(b, []byte(`"reason":"forbidden"`))) {
			t.Errorf("Host %q: %d %s", host, resp.StatusCode, b)
		}
	}
}

// TestDuplicateMembersRefused: a request that names a member twice, at any
// depth, is refused as invalid_json over HTTP and MCP alike, rather than
// taken with its last value; the corpus refuses it in a payload too.
func TestDuplicateMembersRefused(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "q"})
	before := tn.Store().Sequence()
	for _, body := range []string{
		`{"kind":"note","body":"first","body":"second"}`,
		`{"kind":"note","body":"x","provenance":{"model":"a","model":"b"}}`,
		`{"kind":"note","body":"x","claims":[{"statement":"s","statement":"t"}]}`,
	} {
		st, out := tn.do(t, "POST", "/api/v1/threads/th_1/messages", a, json.RawMessage(body))
		if st != 400 || out["reason"] != "invalid_json" {
			t.Errorf("http %s: %d %v", body, st, out)
		}
		msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"post_threads_id_messages","arguments":{"id":"th_1",` + body[1:] + `}}`
		_, res := rawMCP(t, tn.srv.URL, a, []byte(msg))
		if field(res, "result", "isError") != true || field(res, "result", "structuredContent", "reason") != "invalid_json" {
			t.Errorf("mcp %s: %v", body, res)
		}
	}
	// In a message's params, batched or not, the MCP front refuses it:
	// the SDK would take the last.
	params := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_threads","name":"post_threads_id_messages","arguments":{"id":"th_1","kind":"note","body":"dup"}}}`
	for _, msg := range []string{params, "[" + params + "]"} {
		resp, out := rawMCP(t, tn.srv.URL, a, []byte(msg))
		if resp.StatusCode != 400 || field(out, "error", "code") != float64(-32600) {
			t.Errorf("mcp %s: %d %v", msg, resp.StatusCode, out)
		}
	}
	if after := tn.Store().Sequence(); after != before {
		t.Fatalf("stored %d events", after-before)
	}
}

// TestParleyMCPMethods: /api/v1/mcp takes POST; OPTIONS lists it, and GET
// or DELETE are refused in Parley's shape with Allow.
func TestParleyMCPMethods(t *testing.T) {
	tn := startNode(t, "ainotes")
	for _, m := range []string{"GET", "DELETE", "PUT"} {
		st, b, hdr := tn.send(t, m, "/api/v1/mcp", nil)
		var out map[string]any
		json.Unmarshal(b, &out)
		if st != 405 || hdr.Get("Allow") != "POST, OPTIONS" || out["reason"] != "method_not_allowed" {
			t.Errorf("%s: %d %v %v", m, st, hdr, out)
		}
	}
	if st, _, hdr := tn.send(t, "OPTIONS", "/api/v1/mcp", nil); st != 204 || hdr.Get("Allow") != "POST, OPTIONS" {
		t.Errorf("OPTIONS: %d %v", st, hdr)
	}
}

// TestMCPUnsupportedProtocolVersion: an MCP-Protocol-Version the node does
// not support is 400 with a JSON-RPC error naming the versions it does, for
// a request, a notification and a response alike, at both endpoints: also
// one that sorts after every supported version, which the SDK would take
// for its newest draft's (a notification accepted, a request refused for a
// missing _meta field).
func TestMCPUnsupportedProtocolVersion(t *testing.T) {
	tn := startNode(t, "ainotes")
	tok := tn.issue(t, "agent", "write")
	access := newOAuthClient(t, tn.srv.URL, nil).grant(t, "toastmachine:read toastmachine:write")["access_token"].(string)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"VERSION","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, version := range []string{"1999-01-01", "2099-01-01", "garbage", "zzz"} {
		for _, msg := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized","params":{` + meta + `}}`,
			`{"jsonrpc":"2.0","id":1,"result":{}}`,
		} {
			msg = strings.ReplaceAll(msg, "VERSION", version)
			hdr := map[string]string{"Content-Type": "application/json", "MCP-Protocol-Version": version, "Mcp-Method": "notifications/initialized"}
			for endpoint, post := range map[string]func() (*http.Response, []byte){
				"/api/v1/mcp": func() (*http.Response, []byte) { return mcpRequest(t, tn.srv.URL, tok, hdr, msg) },
				"/mcp":        func() (*http.Response, []byte) { return mcpCallVersion(t, tn.srv.URL, access, version, msg) },
			} {
				resp, b := post()
				var out map[string]any
				json.Unmarshal(b, &out)
				e, _ := out["error"].(map[string]any)
				if resp.StatusCode != 400 || e["code"] != float64(-32600) || !strings.Contains(fmt.Sprint(e["message"]), "2025-06-18") {
					t.Errorf("%s, version %s, %s: %d %s", endpoint, version, msg, resp.StatusCode, b)
				}
			}
		}
	}
}

// TestMCPBatchCounts: a JSON-RPC batch (protocol 2025-03-26) is as many
// requests as it holds messages for the rate limit, and text after it is
// refused rather than left to the SDK, which would ignore it.
func TestMCPBatchCounts(t *testing.T) {
	tn := startNodeAt(t, "ainotes", t.TempDir(), rateLimit(6))
	n, srv := tn.Node, tn.srv
	tok, err := n.auth.Issue(t.Context(), "agent", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string) int {
		req, _ := http.NewRequest("POST", srv.URL+"/api/v1/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-03-26")
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	ping := `{"jsonrpc":"2.0","id":%d,"method":"ping"}`
	batch := "[" + fmt.Sprintf(ping, 1) + "," + fmt.Sprintf(ping, 2) + "," + fmt.Sprintf(ping, 3) + "]"
	// Trailing text would make the SDK run a batch not counted: refused
	// (each a request of the 6 a minute).
	for _, bad := range []string{batch + " x", batch + "]", batch + fmt.Sprintf(ping, 9)} {
		if st := post(bad); st != 400 {
			t.Fatalf("%s: %d", bad, st)
		}
	}
	if st := post(batch); st != 200 {
		t.Fatalf("a batch of 3, the rest of the limit: %d", st)
	}
	if st := post(fmt.Sprintf(ping, 4)); st != 429 {
		t.Fatalf("a fourth request: %d", st)
	}
}

// TestMCPBatch: a JSON-RPC batch (before protocol 2025-06-18) is answered
// message by message, as JSON-RPC 2.0 says: a refusal of one (params it
// cannot take, a method it does not have, an initialize) is its own
// response, the others are served, notifications get none, and a batch of
// notifications alone gets 202. From 2025-06-18 a batch is refused.
func TestMCPBatch(t *testing.T) {
	tn := startNode(t, "ainotes")
	tok := tn.issue(t, "agent", "write")
	post := func(version, body string) (int, []byte) {
		hdr := map[string]string{"Content-Type": "application/json"}
		if version != "" {
			hdr["MCP-Protocol-Version"] = version
		}
		resp, b := mcpRequest(t, tn.srv.URL, tok, hdr, body)
		return resp.StatusCode, b
	}
	batch := `[{"jsonrpc":"2.0","id":8,"method":"resources/read","params":{"uri":"corpus://a\u0001"}},` +
		`{"jsonrpc":"2.0","id":9,"method":"ping"},` +
		`{"jsonrpc":"2.0","id":10,"method":"nope"},` +
		`{"jsonrpc":"2.0","method":"notifications/zzz"},` +
		`{"jsonrpc":"2.0","id":11,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"c","version":"1"}}},` +
		`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"get_manifest","arguments":{}}},` +
		`1]`
	for _, version := range []string{"2025-03-26", ""} {
		status, b := post(version, batch)
		var out []map[string]any
		if err := json.Unmarshal(b, &out); status != 200 || err != nil || len(out) != 6 {
			t.Fatalf("version %q: %d %s", version, status, b)
		}
		byID := map[any]map[string]any{}
		for _, m := range out {
			byID[m["id"]] = m
		}
		for id, code := range map[float64]float64{8: -32602, 10: -32601, 11: -32600} {
			if field(byID[id], "error", "code") != code {
				t.Errorf("version %q, id %v: %v", version, id, byID[id])
			}
		}
		if byID[float64(9)]["result"] == nil || field(byID[float64(12)], "result", "structuredContent", "version") == nil {
			t.Errorf("version %q: the requests beside the refused ones: %s", version, b)
		}
		if field(byID[nil], "error", "code") != float64(-32600) {
			t.Errorf("version %q: a member that is no message: %s", version, b)
		}
	}
	if status, b := post("2025-03-26", `[{"jsonrpc":"2.0","method":"notifications/initialized"}]`); status != 202 || len(b) != 0 {
		t.Errorf("notifications alone: %d %s", status, b)
	}
	for _, bad := range []string{`[]`} {
		if status, b := post("2025-03-26", bad); status != 400 || !strings.Contains(string(b), "-32600") {
			t.Errorf("%s: %d %s", bad, status, b)
		}
	}
	if status, b := post("2025-06-18", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`); status != 400 || !strings.Contains(string(b), "batches ended") {
		t.Errorf("a batch at 2025-06-18: %d %s", status, b)
	}
}

// TestHTTPArgsText: a query parameter, path segment or header that is not
// UTF-8 is refused rather than marshalled into U+FFFD (two Operation-Tokens
// would become one); an empty key in the query is no key.
func TestHTTPArgsText(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "q"})
	if st, out := tn.do(t, "GET", "/api/v1/threads?board=", "", nil); st != 200 || len(out["threads"].([]any)) != 1 {
		t.Fatalf("?board=: %d %v", st, out)
	}
	for _, path := range []string{"/api/v1/threads?creator=%FF", "/api/v1/threads/th_%FF"} {
		if st, out := tn.do(t, "GET", path, "", nil); st != 400 || out["reason"] != "invalid_body" {
			t.Errorf("%s: %d %v", path, st, out)
		}
	}
	ag := tn.registerAgent(t, true)
	header := http.Header{"Authorization": {"Bearer " + ag.id}, "Content-Type": {"application/json"}, "Operation-Token": {"a\xff"}}
	if st, b, _ := tn.sendBody(t, "POST", "/"+ag.endpoint+"/createConversation", header, `{"subject":"s","content":"x"}`); st != 400 {
		t.Fatalf("an Operation-Token that is not UTF-8: %d %s", st, b)
	}
}

// TestHeldWritesAre503: a write that must wait for this realm's chain to be
// brought level, longer than writes wait, is refused as unavailable with a
// Retry-After, over HTTP and over MCP alike; a read goes on.
func TestHeldWritesAre503(t *testing.T) {
	defer func(d time.Duration) { store.AuthorHoldWait = d }(store.AuthorHoldWait)
	store.AuthorHoldWait = 20 * time.Millisecond
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	release := tn.store.HoldAuthoring()
	defer release()
	status, body, hdr := tn.sendBody(t, "POST", "/api/v1/boards/lobby/threads",
		http.Header{"Authorization": {"Bearer " + a}, "Content-Type": {"application/json"}}, `{"kind":"ask","body":"held?"}`)
	var out map[string]any
	json.Unmarshal(body, &out)
	if status != 503 || out["reason"] != "unavailable" || hdr.Get("Retry-After") != "5" {
		t.Fatalf("held write over HTTP: %d %v %v", status, hdr, out)
	}
	_, res := rawMCP(t, tn.srv.URL, a, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"post_boards_id_threads","arguments":{"id":"lobby","kind":"ask","body":"held?"}}}`))
	if field(res, "result", "structuredContent", "reason") != "unavailable" {
		t.Fatalf("held write over MCP: %v", res)
	}
	if st, _ := tn.do(t, "GET", "/api/v1/threads", a, nil); st != 200 {
		t.Fatalf("a read while writes are held: %d", st)
	}
}

// TestPrivateAnswersNotStored: what answers one caller, or carries a
// secret, is never kept by a cache (RFC 9111, section 5.2.2.5): a 200
// without Cache-Control is heuristically cacheable (RFC 9110, section
// 15.1), and a browser session's cookie does not stop a shared cache the
// way an Authorization header does (RFC 9111, section 3.5).
func TestPrivateAnswersNotStored(t *testing.T) {
	tn := startNode(t, "ainotes")
	cookie, _, err := tn.sessions.Create(context.Background(), session.ViaSecret)
	if err != nil {
		t.Fatal(err)
	}
	bearer := http.Header{"Authorization": {"Bearer " + tn.operator}}
	sess := http.Header{"Cookie": {session.CookieName + "=" + cookie}}
	for _, tc := range []struct {
		method, path string
		header       http.Header
		body         string
	}{
		{"GET", "/api/v1/me", bearer, ""},
		{"GET", "/api/v1/me", sess, ""},
		{"HEAD", "/api/v1/me", sess, ""},
		{"GET", "/api/v1/inbox", sess, ""},
		{"GET", "/api/v1/tokens", sess, ""},
		{"GET", "/api/v1/tokens", nil, ""}, // its refusal too
		{"POST", "/api/v1/tokens", bearer, `{"label":"x","rights":["write"]}`},
		{"POST", "/api/v1/tokens/request", nil, `{"label":"a","purpose":"p","model":"m","client":"c","provider":"p","contact":"c"}`},
		{"POST", "/register", nil, ""},
	} {
		st, _, h := tn.sendBody(t, tc.method, tc.path, tc.header, tc.body)
		if h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s %s: %d, Cache-Control %q", tc.method, tc.path, st, h.Get("Cache-Control"))
		}
	}
}

// TestMetricsHeaders: /metrics, for the operator's scraper, is not sniffed
// and grants no script CORS, on GET as on OPTIONS and a 405.
func TestMetricsHeaders(t *testing.T) {
	tn := startNode(t, "ainotes")
	for _, method := range []string{"GET", "OPTIONS", "POST"} {
		st, _, h := tn.send(t, method, "/metrics", http.Header{"Origin": {"https://app.example"}})
		if h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s /metrics: %d, CORS %v", method, st, h)
		}
		if method == "GET" && (st != 200 || h.Get("X-Content-Type-Options") != "nosniff") {
			t.Errorf("GET /metrics: %d %v", st, h)
		}
	}
}

// writeJSON writes a result that appends its own JSON (a post's answer)
// as its encoder writes any other: the same bytes, newline and length.
func TestWriteJSONAppender(t *testing.T) {
	at := time.Date(2026, 12, 1, 6, 30, 0, 0, time.UTC)
	for _, out := range []parley.PostOut{
		{Message: parley.MessageOut{ID: "msg_1", Body: "a <b> & c", CreatedAt: at}, Thread: parley.ThreadOut{ID: "th_1", Title: strings.Repeat("x", 5000)}},
		{Message: parley.MessageOut{ID: "msg_2", Provenance: map[string]any{"b": 1, "a": "<x>"}}}, // left to the encoder
	} {
		w := httptest.NewRecorder()
		writeJSON(w, http.StatusOK, out)
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.Body.Bytes(), want.Bytes()) || w.Header().Get("Content-Length") != fmt.Sprint(want.Len()) {
			t.Errorf("writeJSON:\n got %s (%s bytes)\nwant %s", w.Body.Bytes(), w.Header().Get("Content-Length"), want.Bytes())
		}
	}
}
