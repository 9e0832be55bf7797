package realm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"relay/realm/api"
)

// corpusTools are the tools of /mcp, as the issue lists them.
var corpusTools = []string{"append_message", "create_conversation", "create_relationship", "get_conversation", "get_message", "get_messages",
	"get_operation_token", "list_conversations", "list_kinds", "list_relationship_types", "list_relationships", "pull_conversation",
	"retract_relationship", "search"}

// oauthSession connects the official MCP Go SDK client to /mcp with its own
// OAuth handler, headlessly: it discovers the metadata from the 401,
// registers dynamically, and its fetcher reads the code from the redirect
// /oauth/authorize answers at once.
func oauthSession(t *testing.T, base string) (*mcp.ClientSession, *auth.AuthorizationCodeHandler) {
	t.Helper()
	fetch := func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		resp, err := noRedirect.Get(args.URL)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || resp.StatusCode != http.StatusFound {
			return nil, fmt.Errorf("authorize: %d %v", resp.StatusCode, err)
		}
		q := loc.Query()
		if q.Get("error") != "" {
			return nil, fmt.Errorf("authorize: %s: %s", q.Get("error"), q.Get("error_description"))
		}
		return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{"http://127.0.0.1:53682/callback"}, TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ClientName: "relay go-sdk test",
		}},
		AuthorizationCodeFetcher: fetch,
	})
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "relay-test", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{Endpoint: base + "/mcp", OAuthHandler: h, MaxRetries: -1, DisableStandaloneSSE: true}
	cs, err := client.Connect(t.Context(), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, h
}

// toolCaller calls tools and checks what every result must be: the text is
// the structured JSON, which fits the tool's output schema (refusals too).
type toolCaller struct {
	t       *testing.T
	cs      *mcp.ClientSession
	schemas map[string]*jsonschema.Resolved
	tools   map[string]*mcp.Tool
}

func newToolCaller(t *testing.T, cs *mcp.ClientSession) *toolCaller {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tc := &toolCaller{t: t, cs: cs, schemas: map[string]*jsonschema.Resolved{}, tools: map[string]*mcp.Tool{}}
	for _, tool := range res.Tools {
		b, _ := json.Marshal(tool.OutputSchema)
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: output schema: %v", tool.Name, err)
		}
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: output schema: %v", tool.Name, err)
		}
		tc.schemas[tool.Name], tc.tools[tool.Name] = r, tool
	}
	return tc
}

func (tc *toolCaller) call(name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	tc.t.Helper()
	res, err := tc.cs.CallTool(tc.t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		tc.t.Fatalf("%s: %v", name, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var sc map[string]any
	json.Unmarshal(b, &sc)
	var fromText map[string]any
	if len(res.Content) != 1 || json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &fromText) != nil || toJSON(fromText) != toJSON(sc) {
		tc.t.Fatalf("%s: the text is not the structured content: %v", name, res.Content)
	}
	if s := tc.schemas[name]; s != nil {
		var inst any
		json.Unmarshal(b, &inst)
		if err := s.Validate(inst); err != nil {
			tc.t.Fatalf("%s: structuredContent does not fit the output schema: %v\n%s", name, err, b)
		}
	}
	return res, sc
}

// ok calls a tool that must succeed.
func (tc *toolCaller) ok(name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	tc.t.Helper()
	res, sc := tc.call(name, args)
	if res.IsError {
		tc.t.Fatalf("%s: refused: %v", name, sc)
	}
	return res, sc
}

// refused calls a tool that must be refused with code.
func (tc *toolCaller) refused(name string, args map[string]any, code string) map[string]any {
	tc.t.Helper()
	res, sc := tc.call(name, args)
	if !res.IsError || field(sc, "error", "code") != code || field(sc, "error", "how_to_proceed") == "" {
		tc.t.Fatalf("%s: want %s, got %v", name, code, sc)
	}
	return sc
}

// jsStringify writes a decoded JSON value as JavaScript's JSON.stringify
// does (keys in any order: only the length is compared), written apart from
// the server's encoder on purpose.
func jsStringify(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case nil:
			b.WriteString("null")
		case bool:
			b.WriteString(strconv.FormatBool(x))
		case json.Number:
			b.WriteString(x.String())
		case string:
			b.WriteByte('"')
			for _, r := range x {
				switch {
				case r == '"':
					b.WriteString(`\"`)
				case r == '\\':
					b.WriteString(`\\`)
				case r == '\b':
					b.WriteString(`\b`)
				case r == '\f':
					b.WriteString(`\f`)
				case r == '\n':
					b.WriteString(`\n`)
				case r == '\r':
					b.WriteString(`\r`)
				case r == '\t':
					b.WriteString(`\t`)
				case r < 0x20:
					fmt.Fprintf(&b, `\u%04x`, r)
				default:
					b.WriteRune(r)
				}
			}
			b.WriteByte('"')
		case []any:
			b.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					b.WriteByte(',')
				}
				walk(e)
			}
			b.WriteByte(']')
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteByte(',')
				}
				walk(k)
				b.WriteByte(':')
				walk(x[k])
			}
			b.WriteByte('}')
		default:
			panic(fmt.Sprintf("jsStringify: %T", v))
		}
	}
	walk(v)
	return b.String()
}

// checkRetrievalSize checks retrieval_size against the decoded structured
// content re-serialized without it.
func checkRetrievalSize(t *testing.T, name string, structured []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(structured))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	rs, ok := m["retrieval_size"].(map[string]any)
	if !ok {
		t.Fatalf("%s: no retrieval_size in %s", name, structured)
	}
	delete(m, "retrieval_size")
	n := len(jsStringify(m))
	if rs["serialized_bytes"] != json.Number(strconv.Itoa(n)) || rs["estimated_tokens"] != json.Number(strconv.Itoa((n+3)/4)) ||
		rs["estimation_method"] != "utf8-json-bytes-div4-v1" {
		t.Fatalf("%s: retrieval_size %v; re-serialized %d bytes", name, rs, n)
	}
}

// A message whose every byte count differs between careless encoders.
var trickyContent = "Latency <b>&amp;</b> \"quoted\" \\ back\\slash \u2028line\u2029para \b\f\x01 tab\t é 😀 </script>"

func TestCorpusMCPOverOAuth(t *testing.T) {
	tn := startNode(t, "ainotes")
	cs, _ := oauthSession(t, tn.srv.URL)
	tc := newToolCaller(t, cs)

	var names []string
	for name := range tc.tools {
		names = append(names, name)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != strings.Join(corpusTools, ",") {
		t.Fatalf("tools: %v", names)
	}
	for _, name := range names {
		tool := tc.tools[name]
		out, _ := json.Marshal(tool.OutputSchema)
		sized := strings.Contains(string(out), `"retrieval_size"`)
		if sized != retrievalSized[name] {
			t.Errorf("%s: retrieval_size in the output schema: %v", name, sized)
		}
		if !contentFree[name] && !strings.Contains(tool.Description, "untrusted") {
			t.Errorf("%s: the description does not warn of untrusted content", name)
		}
		if !strings.Contains(string(out), `"how_to_proceed"`) {
			t.Errorf("%s: the output schema lacks the refusal shape", name)
		}
	}

	// Write: a token first, then the write; a retry with it is the same write.
	_, tok := tc.ok("get_operation_token", nil)
	create := map[string]any{"operation_token": tok["operation_token"], "subject": "Caching <latency>", "content": trickyContent,
		"kind": []string{"question", "claim"}, "tags": []string{"perf"},
		"payload": map[string]any{"html": "<a href='x'>&</a>", "ls": "\u2028", "n": 1.5, "big": 1e21, "nul": nil}}
	res, first := tc.ok("create_conversation", create)
	if res.Meta[untrustedMetaKey] == nil {
		t.Fatalf("create_conversation: not marked untrusted: %v", res.Meta)
	}
	_, again := tc.ok("create_conversation", create)
	if again["message_id"] != first["message_id"] || again["sequence"] != first["sequence"] {
		t.Fatalf("retry: %v then %v", first, again)
	}
	conv, root := first["conversation_id"].(string), first["message_id"].(string)
	_, tok = tc.ok("get_operation_token", nil)
	_, reply := tc.ok("append_message", map[string]any{"operation_token": tok["operation_token"], "conversation_id": conv, "content": "A warm-cache run supports the latency claim."})
	_, tok = tc.ok("get_operation_token", nil)
	_, rel := tc.ok("create_relationship", map[string]any{"operation_token": tok["operation_token"], "source_message_id": reply["message_id"],
		"target_message_id": root, "relationship_type": "replies-to"})

	// Reads, and retrieval_size on exactly the seed's tools.
	reads := []struct {
		name string
		args map[string]any
	}{
		{"get_message", map[string]any{"message_id": root}},
		{"get_messages", map[string]any{"conversation_id": conv, "kinds": []string{"question"}}},
		{"get_conversation", map[string]any{"conversation_id": conv}},
		{"search", map[string]any{"query": "latency"}},
		{"pull_conversation", map[string]any{"conversation_id": conv}},
		{"list_conversations", map[string]any{"kinds": []string{"claim"}}},
		{"list_relationships", map[string]any{"conversation_id": conv, "direction": "both"}},
		{"list_kinds", nil},
		{"list_relationship_types", nil},
	}
	for _, r := range reads {
		res, sc := tc.ok(r.name, r.args)
		if _, has := sc["retrieval_size"]; has != retrievalSized[r.name] {
			t.Errorf("%s: retrieval_size present: %v", r.name, has)
		}
		if retrievalSized[r.name] {
			checkRetrievalSize(t, r.name, []byte(res.Content[0].(*mcp.TextContent).Text))
		}
		if (res.Meta[untrustedMetaKey] != nil) == contentFree[r.name] {
			t.Errorf("%s: untrusted mark %v", r.name, res.Meta)
		}
	}
	checkRetrievalSize(t, "create_conversation", mustJSON(first))
	_, got := tc.ok("get_message", map[string]any{"message_id": root})
	if field(got, "message", "content") != trickyContent {
		t.Fatalf("content round trip: %q", field(got, "message", "content"))
	}
	_, pull := tc.ok("pull_conversation", map[string]any{"conversation_id": conv})
	if pull["complete"] != true || pull["next"] != nil || len(pull["messages"].([]any)) != 2 || len(pull["relationships"].([]any)) != 1 {
		t.Fatalf("pull_conversation: %v", pull)
	}
	_, tok = tc.ok("get_operation_token", nil)
	tc.ok("retract_relationship", map[string]any{"operation_token": tok["operation_token"], "relationship_id": field(rel, "relationship", "relationship_id")})

	// Refusals in the corpus's shape, fitting the output schemas.
	tc.refused("get_message", map[string]any{"message_id": "nope"}, "not_found")
	tc.refused("create_conversation", map[string]any{"subject": "no token", "content": "x"}, "invalid_request")
	tc.refused("create_conversation", map[string]any{"operation_token": "t-agent", "subject": "s", "content": "x", "agent_id": "rla_1_x"}, "invalid_request")
	// One input type serves both writes, but each takes only its own fields.
	tc.refused("create_conversation", map[string]any{"operation_token": "t-conv", "subject": "s", "content": "x", "conversation_id": conv}, "invalid_request")
	tc.refused("append_message", map[string]any{"operation_token": "t-subj", "conversation_id": conv, "subject": "s", "content": "x"}, "invalid_request")
	// An unknown tool is a protocol error, as MCP says (the forum's seed
	// asks for its unknown_tool refusal; the corpus's does not).
	if _, err := tc.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "nope"}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("an unknown tool: %v", err)
	}
	tc.refused("pull_conversation", map[string]any{"conversation_id": conv, "max_response_bytes": 100}, "response_budget_too_small")
}

// TestCorpusMCPPullBudget pages a conversation graph through budgets that
// hold one or two records, each answer within its budget as the SDK
// serializes it.
func TestCorpusMCPPullBudget(t *testing.T) {
	tn := startNode(t, "ainotes")
	cs, h := oauthSession(t, tn.srv.URL)
	tc := newToolCaller(t, cs)
	write := func(tool string, args map[string]any) map[string]any {
		_, tok := tc.ok("get_operation_token", nil)
		args["operation_token"] = tok["operation_token"]
		_, out := tc.ok(tool, args)
		return out
	}
	first := write("create_conversation", map[string]any{"subject": "Budget", "content": strings.Repeat("root ", 100)})
	conv, root := first["conversation_id"].(string), first["message_id"].(string)
	want := 1
	for i := range 5 {
		// Code-like text: on the wire as it is, not escaped for HTML.
		m := write("append_message", map[string]any{"conversation_id": conv, "content": fmt.Sprintf("reply %d %s", i, strings.Repeat("<a&b>", 60))})
		write("create_relationship", map[string]any{"source_message_id": m["message_id"], "target_message_id": root, "relationship_type": "replies-to"})
		want += 2
	}
	// The pages are read over plain JSON-RPC, to measure the result as it
	// is on the wire (the SDK client adds fields of its own when decoding).
	ts, _ := h.TokenSource(t.Context())
	token, err := ts.Token()
	if err != nil {
		t.Fatal(err)
	}
	pull := func(args map[string]any) (json.RawMessage, map[string]any) {
		t.Helper()
		_, _, body := rawTool(t, tn.srv.URL, token.AccessToken, "pull_conversation", args)
		var resp struct {
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(body, &resp) != nil || resp.Result == nil {
			t.Fatalf("pull_conversation: %s", body)
		}
		var r map[string]any
		json.Unmarshal(resp.Result, &r)
		if r["isError"] == true {
			t.Fatalf("pull_conversation refused: %s", body)
		}
		return resp.Result, r["structuredContent"].(map[string]any)
	}
	_, full := pull(map[string]any{"conversation_id": conv})
	at := full["snapshot_sequence"]
	one, _ := pull(map[string]any{"conversation_id": conv, "limit": 1}) // the envelope and the largest record (the root)
	for _, budget := range []int{len(one) + 50, 2 * len(one)} {
		seen, calls := 0, 0
		args := map[string]any{"conversation_id": conv, "max_response_bytes": budget, "at": at}
		for {
			raw, page := pull(args)
			if len(raw) > budget {
				t.Fatalf("budget %d: an answer of %d bytes", budget, len(raw))
			}
			if bytes.Contains(raw, []byte(`\u003c`)) || bytes.Contains(raw, []byte(`\u0026`)) {
				t.Fatalf("escaped for HTML on the wire: %.300s", raw)
			}
			var text struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			json.Unmarshal(raw, &text)
			checkRetrievalSize(t, "pull_conversation", []byte(text.Content[0].Text))
			n := len(page["messages"].([]any)) + len(page["relationships"].([]any))
			if n == 0 {
				t.Fatalf("budget %d: no progress: %v", budget, page)
			}
			seen += n
			calls++
			if page["complete"] == true {
				break
			}
			args["after"], args["at"] = field(page, "next", "after"), field(page, "next", "at")
		}
		if seen != want || calls < 2 {
			t.Fatalf("budget %d: %d records in %d calls, want %d", budget, seen, calls, want)
		}
	}
	// limit bounds the records too.
	if _, page := tc.ok("pull_conversation", map[string]any{"conversation_id": conv, "limit": 3}); page["complete"] != false ||
		len(page["messages"].([]any))+len(page["relationships"].([]any)) != 3 {
		t.Fatalf("limit 3: %v", page)
	}
	// Over HTTP the budget measures the body, and no retrieval_size is added.
	status, body := tn.do(t, "GET", "/conversations/"+conv+"/graph?limit=1000", "", nil)
	if status != 200 || body["complete"] != true || body["retrieval_size"] != nil {
		t.Fatalf("GET graph: %d %v", status, body)
	}
}

// TestWholeNumberArguments: a whole number written with a fraction or an
// exponent, as a client that keeps every number a float sends it (Python's
// json writes 5.0), is the integer the tool's input schema admits, on
// both MCP endpoints.
func TestWholeNumberArguments(t *testing.T) {
	tn := startNode(t, "ainotes")
	tok := newOAuthClient(t, tn.srv.URL, nil).grant(t, "toastmachine:read")["access_token"].(string)
	for _, args := range []string{`{"limit":2.0}`, `{"limit":1e1,"after":0.0}`} {
		if _, res, body := rawTool(t, tn.srv.URL, tok, "list_conversations", json.RawMessage(args)); res == nil || res["isError"] == true {
			t.Errorf("/mcp list_conversations %s: %s", args, body)
		}
	}
	reader := tn.issue(t, "reader")
	for _, call := range []struct{ tool, args string }{
		{"get_threads", `{"limit":5.0,"offset":0.0}`},
		{"get_boards_id", `{"id":1.0}`},
		{"get_boards_id_threads", `{"id":1e0,"limit":2.5e1}`},
	} {
		msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + call.tool + `","arguments":` + call.args + `}}`
		if _, out := rawMCP(t, tn.srv.URL, reader, []byte(msg)); field(out, "result", "isError") == true || field(out, "result") == nil {
			t.Errorf("/api/v1/mcp %s %s: %v", call.tool, call.args, out)
		}
	}
}

// rawTool calls one tool over plain JSON-RPC and returns the result.
func rawTool(t *testing.T, base, token, name string, args any) (int, map[string]any, []byte) {
	t.Helper()
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}})
	resp, body := mcpCall(t, base, "", token, string(msg))
	var out map[string]any
	json.Unmarshal(body, &out)
	r, _ := out["result"].(map[string]any)
	return resp.StatusCode, r, body
}

func TestCorpusMCPScopesAndAudience(t *testing.T) {
	tn := startNode(t, "ainotes")
	base := tn.srv.URL
	c := newOAuthClient(t, base, nil)
	read := c.grant(t, "toastmachine:read")["access_token"].(string)
	write := c.grant(t, "toastmachine:write")["access_token"].(string)
	none := c.grant(t, "openid")["access_token"].(string)

	create := map[string]any{"operation_token": "op-1", "subject": "s", "content": "c"}
	var calls = []struct {
		token, tool string
		args        map[string]any
		refused     bool
	}{
		{read, "create_conversation", create, true},
		{read, "get_messages", map[string]any{}, false},
		{read, "get_operation_token", nil, true},
		{write, "get_operation_token", nil, false},
		{write, "create_conversation", create, false},
		{write, "get_messages", map[string]any{}, true},
		{none, "list_kinds", nil, true},
	}
	// A grant without the scope gets MCP's scope challenge, naming the
	// scope to authorize again for.
	challenged := func(resp *http.Response, body []byte, scope string) bool {
		var out map[string]any
		json.Unmarshal(body, &out)
		h := resp.Header.Get("WWW-Authenticate")
		return resp.StatusCode == 403 && corpusCode(out) == "forbidden" && field(out, "error", "details", "required_scope") == scope &&
			strings.HasPrefix(h, `Bearer error="insufficient_scope", scope="`+scope+`", resource_metadata="`+base+`/.well-known/oauth-protected-resource/mcp"`)
	}
	for _, cl := range calls {
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": cl.tool, "arguments": cl.args}})
		resp, body := mcpCall(t, base, "", cl.token, string(msg))
		if cl.refused {
			scope := "toastmachine:read"
			if cl.token == read {
				scope = "toastmachine:write"
			}
			if !challenged(resp, body, scope) {
				t.Errorf("%s with %.12s…: %d %v %s", cl.tool, cl.token, resp.StatusCode, resp.Header, body)
			}
			continue
		}
		var out map[string]any
		json.Unmarshal(body, &out)
		if resp.StatusCode != 200 || field(out, "result", "isError") == true {
			t.Errorf("%s with %.12s…: %d %s", cl.tool, cl.token, resp.StatusCode, body)
		}
	}
	// Resources are read as the read tools are: write does not imply read.
	for tok, want := range map[string]bool{read: true, write: false} {
		resp, body := mcpCall(t, base, "", tok, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"corpus://auth.md"}}`)
		var out map[string]any
		json.Unmarshal(body, &out)
		if got := out["result"] != nil; got != want || !want && !challenged(resp, body, "toastmachine:read") {
			t.Errorf("resources/read with %.12s…: %s", tok, body)
		}
	}
	// In a batch the tool's own check answers, in the result.
	batch := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_kinds","arguments":{}}}]`
	if resp, body := mcpCallVersion(t, base, none, "2025-03-26", batch); resp.StatusCode != 200 || !strings.Contains(string(body), `"isError":true`) || !strings.Contains(string(body), "toastmachine:read") {
		t.Errorf("a batched call without the scope: %d %s", resp.StatusCode, body)
	}
	// A URI that does not parse (a control character) gets an answer: the
	// SDK would answer nothing at all.
	for _, uri := range []string{`x\u0001y`, `\u0000://x`} {
		resp, body := mcpCall(t, base, "", read, `{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"`+uri+`"}}`)
		var out map[string]any
		json.Unmarshal(body, &out)
		if resp.StatusCode != 200 || out["id"] != float64(7) || field(out, "error", "code") != float64(-32602) {
			t.Errorf("resources/read of %s: %d %s", uri, resp.StatusCode, body)
		}
	}

	// Audience: the same token through another name of the node is refused.
	host := strings.Replace(strings.TrimPrefix(base, "http://"), "127.0.0.1", "localhost", 1)
	resp, _ := mcpCall(t, base, host, read, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="http://`+host+`/.well-known/oauth-protected-resource/mcp"`) {
		t.Fatalf("another audience: %d %v", resp.StatusCode, resp.Header)
	}
	// Only this server's access tokens open /mcp; they open nothing else.
	agent := tn.registerAgent(t, true)
	parley := tn.issue(t, "agent", "write")
	for name, tok := range map[string]string{"agent_id": agent.id, "Parley token": parley, "garbage": "rlo_0123456789abcdef_" + strings.Repeat("A", 43)} {
		resp, body := mcpCall(t, base, "", tok, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata=") {
			t.Errorf("%s on /mcp: %d %s", name, resp.StatusCode, body)
		}
	}
	endpoint := verifyToken(t, tn, write).Extra["principal"].(*api.Principal).Agent.EndpointID
	if status, out, _ := tn.write(t, corpusAgent{id: write, endpoint: endpoint}, "/createConversation", "op-2", create); status != 401 {
		t.Fatalf("an OAuth token on the HTTP API: %d %v", status, out)
	}
	// The body limit and refusals before the SDK are the corpus's.
	huge := bytes.Repeat([]byte("a"), int(tn.cfg.MaxBodyBytes)+1)
	req, _ := http.NewRequest("POST", base+"/mcp", bytes.NewReader(huge))
	req.Header.Set("Authorization", "Bearer "+read)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != 413 || corpusCode(out) != "message_too_large" {
		t.Fatalf("body over the limit: %d %v", resp.StatusCode, out)
	}
}

// TestCorpusMCPRetrievalSizeBytes checks serialized_bytes byte for byte on
// the wire: against the text copy, against an independent re-serialization
// of structuredContent and, when node is installed, against JSON.stringify.
func TestCorpusMCPRetrievalSizeBytes(t *testing.T) {
	tn := startNode(t, "ainotes")
	c := newOAuthClient(t, tn.srv.URL, nil)
	tok := c.grant(t, "toastmachine:read toastmachine:write")["access_token"].(string)
	_, r, body := rawTool(t, tn.srv.URL, tok, "create_conversation", map[string]any{"operation_token": "op-bytes", "subject": "<&> \u2028",
		"content": trickyContent, "payload": []any{"</script>", "\u2029", 0.1, -0, 1e-7, nil, map[string]any{"&": true}}})
	if r == nil || r["isError"] == true {
		t.Fatalf("create: %s", body)
	}
	text := field(r, "content").([]any)[0].(map[string]any)["text"].(string)
	rs := r["structuredContent"].(map[string]any)["retrieval_size"].(map[string]any)
	n := int(rs["serialized_bytes"].(float64))
	// The text is the result's compact JSON with retrieval_size appended
	// last: its bytes before the field, and the closing brace, are counted.
	i := strings.LastIndex(text, `,"retrieval_size":`)
	if i+1 != n || !strings.HasSuffix(text, "}") {
		t.Fatalf("serialized_bytes %d; the text has %d bytes before retrieval_size", n, i)
	}
	raw := struct {
		Result struct {
			StructuredContent json.RawMessage `json:"structuredContent"`
		} `json:"result"`
	}{}
	json.Unmarshal(body, &raw)
	checkRetrievalSize(t, "create_conversation", raw.Result.StructuredContent)
	if strings.Contains(text, `\u003c`) || strings.Contains(text, `\u2028`) || !strings.Contains(text, "</script>") {
		t.Fatalf("the text is not JSON.stringify's: %s", text)
	}

	node, err := exec.LookPath("node")
	if err != nil {
		t.Log("node not installed: JSON.stringify cross-check skipped")
		return
	}
	js := `let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const r=JSON.parse(s).result;` +
		`for (const o of [r.structuredContent, JSON.parse(r.content[0].text)]) {const want=o.retrieval_size.serialized_bytes; delete o.retrieval_size;` +
		`const got=Buffer.byteLength(JSON.stringify(o),"utf8"); if (got!==want) {console.log("mismatch", got, want); process.exit(1)}} console.log("ok")})`
	cmd := exec.Command(node, "-e", js)
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.HasPrefix(out, []byte("ok")) {
		t.Fatalf("JSON.stringify: %v %s", err, out)
	}
}

// TestCorpusMCPToolsList: tools/list over plain JSON-RPC needs the token and
// lists every tool whatever the grant's scopes.
func TestCorpusMCPToolsList(t *testing.T) {
	tn := startNode(t, "ainotes")
	c := newOAuthClient(t, tn.srv.URL, nil)
	tok := c.grant(t, "")["access_token"].(string)
	resp, body := mcpCall(t, tn.srv.URL, "", tok, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var out struct {
		Result struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"result"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil {
		t.Fatalf("tools/list: %d %s", resp.StatusCode, body)
	}
	var names []string
	for _, tool := range out.Result.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, corpusTools) {
		t.Fatalf("tools/list: %v", names)
	}
	if resp, _ := mcpCall(t, tn.srv.URL, "", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); resp.StatusCode != 401 {
		t.Fatalf("tools/list without a token: %d", resp.StatusCode)
	}
}

// TestCorpusMCPRefusalOutOfRange: a refusal a handler returns, not only
// one of the schema check, reaches an /mcp client in the corpus's codes, as
// over HTTP: an integer out of range is invalid_request, never Parley's
// invalid_body.
func TestCorpusMCPRefusalOutOfRange(t *testing.T) {
	tn := startNode(t, "ainotes")
	cs, _ := oauthSession(t, tn.srv.URL)
	tc := newToolCaller(t, cs)
	for _, args := range []map[string]any{
		{"after": 1e300},
	} {
		tc.refused("get_messages", args, "invalid_request")
	}
	_, tok := tc.ok("get_operation_token", nil)
	tc.refused("create_conversation", map[string]any{"operation_token": tok["operation_token"], "subject": "s", "content": "c",
		"schema_name": "toastmachine.object", "schema_version": 1e300}, "invalid_request")
}

// TestCorpusMCPResources: /mcp offers the corpus's documents as resources,
// each with the media type its HTTP answer has, and its records by id
// through templates; a read is the HTTP answer itself.
func TestCorpusMCPResources(t *testing.T) {
	tn := startNode(t, "ainotes")
	cs, _ := oauthSession(t, tn.srv.URL)
	ctx := context.Background()
	list, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, r := range list.Resources {
		types[r.URI] = r.MIMEType
	}
	for uri, mt := range map[string]string{"corpus://corpus/index.json": "application/json", "corpus://auth.md": "text/markdown", "corpus://llms.txt": "text/plain"} {
		if types[uri] != mt {
			t.Errorf("%s: listed as %q", uri, types[uri])
		}
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "corpus://auth.md"})
	if err != nil || len(res.Contents) != 1 || res.Contents[0].MIMEType != "text/markdown" || !strings.Contains(res.Contents[0].Text, "Operation-Token") {
		t.Fatalf("auth.md: %v %+v", err, res)
	}
	a := tn.registerAgent(t, true)
	_, m, _ := tn.write(t, a, "/createConversation", "1", map[string]any{"subject": "s", "content": "resource"})
	id := m["message_id"].(string)
	res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "corpus://messages/" + id})
	if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, `"content":"resource"`) {
		t.Fatalf("a message: %v %+v", err, res)
	}
	for _, uri := range []string{"corpus://messages/nope", "corpus://api/v1/tokens", "corpus://messages/../api/v1/tokens", "https://example.org/x"} {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("%s: read", uri)
		}
	}
}

// TestMCPResourceNotFound: a resources/read of a URI that names no
// resource is MCP's "Resource not found" (2025-06-18: -32002, the URI in
// data), at /mcp whether the template matched or not, and at /api/v1/mcp,
// which has no resources; not the invalid params the SDK gives.
func TestMCPResourceNotFound(t *testing.T) {
	tn := startNode(t, "ainotes")
	access := newOAuthClient(t, tn.srv.URL, nil).grant(t, "toastmachine:read")["access_token"].(string)
	tok := tn.issue(t, "agent", "write")
	read := func(uri string) string {
		return `{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"` + uri + `"}}`
	}
	check := func(where, uri string, b []byte) {
		t.Helper()
		var out map[string]any
		json.Unmarshal(b, &out)
		if out["id"] != float64(4) || field(out, "error", "code") != float64(-32002) || field(out, "error", "data", "uri") != uri {
			t.Errorf("%s, %s: %s", where, uri, b)
		}
	}
	for _, uri := range []string{"corpus://messages/nope", "corpus://nope", "corpus://api/v1/tokens", "https://example.org/x"} {
		for _, version := range []string{"2025-06-18", "2025-03-26", "2025-11-25"} {
			_, b := mcpCallVersion(t, tn.srv.URL, access, version, read(uri))
			check("/mcp at "+version, uri, b)
		}
		_, b := mcpRequest(t, tn.srv.URL, tok, map[string]string{"Content-Type": "application/json"}, read(uri))
		check("/api/v1/mcp", uri, b)
	}
}

// TestCorpusMCPResourceReadCountsOnce: a resources/read counts against the
// grant, as the MCP request it is, and not a second time against its
// address as an anonymous GET: with the address's allowance spent, it is
// still served, and it is never answered "not found" for want of one.
func TestCorpusMCPResourceReadCountsOnce(t *testing.T) {
	tn := startNodeAt(t, "ainotes", t.TempDir(), rateLimit(20))
	base := tn.srv.URL
	read := newOAuthClient(t, base, nil).grant(t, "toastmachine:read")["access_token"].(string)
	for i := 0; ; i++ {
		if status, _ := tn.do(t, "GET", "/kind", "", nil); status == 429 {
			break
		} else if i > 20 {
			t.Fatal("the address's allowance never ran out")
		}
	}
	for i := range 3 {
		_, body := mcpCall(t, base, "", read, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"corpus://kind"}}`)
		var out map[string]any
		json.Unmarshal(body, &out)
		if out["result"] == nil {
			t.Fatalf("resources/read %d with the address's allowance spent: %s", i, body)
		}
	}
}

// TestCallOperationMarksCorpusContent: call_api_operation at /api/v1/mcp
// marks its result untrusted when the operation it ran reads corpus
// content, as the corpus's own tools do, and not otherwise.
func TestCallOperationMarksCorpusContent(t *testing.T) {
	tn := startNode(t, "ainotes")
	cs, err := tn.mcpSession(t, tn.issue(t, "reader", "write"))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for key, marked := range map[string]bool{"get_messages": true, "search": true, "list_kinds": false, "get_manifest": false} {
		args := map[string]any{"key": key}
		if key == "search" {
			args["arguments"] = map[string]any{"q": "x"}
		}
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "call_api_operation", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", key, err, res)
		}
		if got := res.Meta[untrustedMetaKey] != nil; got != marked {
			t.Errorf("%s: marked %v, want %v", key, got, marked)
		}
	}
}

// TestCorpusMCPRefusalCodes: an argument the schema admits but the
// operation's input cannot hold (a whole number beyond 64 bits written
// with a fraction or an exponent) is refused in the corpus's words over
// /mcp, as over HTTP and call_api_operation: invalid_request, never the
// forum's invalid_body.
func TestCorpusMCPRefusalCodes(t *testing.T) {
	tn := startNode(t, "ainotes")
	tok := newOAuthClient(t, tn.srv.URL, nil).grant(t, "toastmachine:read toastmachine:write")["access_token"].(string)
	reader := tn.issue(t, "reader")
	for _, tc := range []struct {
		tool, args, field string
	}{
		{"list_conversations", `{"after":1e20}`, "after"},
		{"list_conversations", `{"limit":1e20}`, "limit"},
		{"search", `{"query":"x","offset":2.0e20}`, "offset"},
		{"get_messages", `{"limit":1E20}`, "limit"},
	} {
		t.Run(tc.tool+tc.args, func(t *testing.T) {
			_, res, body := rawTool(t, tn.srv.URL, tok, tc.tool, json.RawMessage(tc.args))
			if res["isError"] != true || field(res, "structuredContent", "error", "code") != "invalid_request" ||
				field(res, "structuredContent", "error", "details", "field") != tc.field {
				t.Errorf("/mcp: %s", body)
			}
			call := json.RawMessage(`{"key":"` + tc.tool + `","arguments":` + tc.args + `}`)
			if st, out := tn.do(t, "POST", "/api/v1/operations/"+tc.tool, reader, call); st != 400 || out["reason"] != "invalid_request" {
				t.Errorf("call_api_operation: %d %v", st, out)
			}
		})
	}
}
