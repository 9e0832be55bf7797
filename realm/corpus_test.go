package realm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"relay/realm/corpus"
)

// corpusAgent is a registered, onboarded corpus agent.
type corpusAgent struct {
	id, endpoint, author string
}

func (tn *testNode) registerAgent(t *testing.T, onboard bool) corpusAgent {
	t.Helper()
	status, out := tn.do(t, "POST", "/register", "", nil)
	if status != 201 || out["onboarding_required"] != true || field(out, "guide", "url") != "/auth.md" {
		t.Fatalf("register: %d %v", status, out)
	}
	a := corpusAgent{out["agent_id"].(string), out["endpoint_id"].(string), out["author_id"].(string)}
	if !strings.HasPrefix(a.author, "ainotes:") {
		t.Fatalf("author_id %q is not realm-prefixed", a.author)
	}
	if onboard {
		tn.onboard(t, a)
	}
	return a
}

// write sends one corpus write with an Operation-Token.
func (tn *testNode) write(t *testing.T, a corpusAgent, path, token string, body any) (int, map[string]any, http.Header) {
	t.Helper()
	var rd io.Reader
	if s, ok := body.(string); ok {
		rd = strings.NewReader(s)
	} else {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest("POST", tn.srv.URL+"/"+a.endpoint+path, rd)
	if a.id != "" { // an agent without an id: no credential at all
		req.Header.Set("Authorization", "Bearer "+a.id)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Operation-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, resp.Header
}

func corpusCode(out map[string]any) any { return field(out, "error", "code") }

func TestCorpusFirstWriteAndIdempotency(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, false)
	body := map[string]any{"subject": "AI Agents", "content": "How should autonomous agents communicate?"}
	status, out, _ := tn.write(t, a, "/createConversation", "tok-1", body)
	if status != 428 || corpusCode(out) != "onboarding_required" || field(out, "error", "details", "guide_url") != "/auth.md" || field(out, "error", "how_to_proceed") == "" {
		t.Fatalf("first write: %d %v", status, out)
	}
	// Reading the guide without the credential records nothing.
	if resp, err := http.Get(tn.srv.URL + "/auth.md"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("anonymous guide: %v", err)
	}
	if status, _, _ := tn.write(t, a, "/createConversation", "tok-1", body); status != 428 {
		t.Fatalf("write after an anonymous read: %d", status)
	}
	a = tn.onboard(t, a)
	status, first, hdr := tn.write(t, a, "/createConversation", "tok-1", body)
	if status != 201 || first["conversation_id"] == nil || first["message_id"] != first["root_message_id"] || hdr.Get("Idempotent-Replayed") != "" {
		t.Fatalf("create: %d %v", status, first)
	}
	// A retry after a lost answer returns the original result.
	status, again, hdr := tn.write(t, a, "/createConversation", "tok-1", body)
	if status != 201 || toJSON(again) != toJSON(first) || hdr.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %v", status, again)
	}
	// The same token with another payload is refused.
	status, out, _ = tn.write(t, a, "/createConversation", "tok-1", map[string]any{"subject": "AI Agents", "content": "changed"})
	if status != 409 || corpusCode(out) != "idempotency_conflict" {
		t.Fatalf("conflict: %d %v", status, out)
	}
	// The token is scoped by operation type and author.
	conv := first["conversation_id"].(string)
	status, out, _ = tn.write(t, a, "/appendToConversation/"+conv, "tok-1", map[string]any{"content": "I think a shared append-only corpus could work."})
	if status != 201 || out["conversation_id"] != conv || out["sequence"].(float64) <= first["sequence"].(float64) {
		t.Fatalf("append: %d %v", status, out)
	}
	b := tn.onboard(t, tn.registerAgent(t, false))
	if status, out, _ = tn.write(t, b, "/createConversation", "tok-1", body); status != 201 || out["conversation_id"] == conv {
		t.Fatalf("another author's token: %d %v", status, out)
	}
	// Without the header the refusal names it; a token in the body does
	// not stand in for it.
	status, out, _ = tn.write(t, a, "/createConversation", "", body)
	if status != 400 || corpusCode(out) != "invalid_request" || !strings.Contains(field(out, "error", "message").(string), "Operation-Token") {
		t.Fatalf("no token: %d %v", status, out)
	}
	withBodyToken := map[string]any{"subject": "AI Agents", "content": "c", "operation_token": "tok-body"}
	status, out, _ = tn.write(t, a, "/createConversation", "", withBodyToken)
	if status != 400 || corpusCode(out) != "invalid_request" || !strings.Contains(field(out, "error", "message").(string), "Operation-Token") {
		t.Fatalf("token in the body only: %d %v", status, out)
	}
	// A body with anything after its object is not JSON, even a stray } or ].
	for _, tail := range []string{"}", "]", "{}", " x"} {
		status, out, _ = tn.write(t, a, "/createConversation", "tok-tail", `{"subject":"s","content":"c"}`+tail)
		if status != 400 || corpusCode(out) != "invalid_request" || field(out, "error", "message") != "The body is not valid JSON." {
			t.Fatalf("body ending %q: %d %v", tail, status, out)
		}
	}
	if status, out, _ = tn.write(t, a, "/createConversation", strings.Repeat("x", 201), body); status != 400 {
		t.Fatalf("long token: %d %v", status, out)
	}
	// Another agent's endpoint is not ours to write through.
	c := a
	c.endpoint = b.endpoint
	if status, out, _ = tn.write(t, c, "/createConversation", "tok-9", body); status != 404 || corpusCode(out) != "not_found" {
		t.Fatalf("foreign endpoint: %d %v", status, out)
	}
	// No credential, or a Parley token, cannot write.
	c.id = "rla_1_" + strings.Repeat("x", 43)
	if status, out, _ = tn.write(t, c, "/createConversation", "tok-9", body); status != 401 || corpusCode(out) != "unauthorized" {
		t.Fatalf("bad credential: %d %v", status, out)
	}
}

// onboard reads the guide with the agent's credential.
func (tn *testNode) onboard(t *testing.T, a corpusAgent) corpusAgent {
	t.Helper()
	req, _ := http.NewRequest("GET", tn.srv.URL+"/auth.md", nil)
	req.Header.Set("Authorization", "Bearer "+a.id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/markdown") {
		t.Fatalf("guide: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return a
}

// TestCorpusConcurrentRetries: 32 concurrent retries of one write write it
// once.
func TestCorpusConcurrentRetries(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	body := map[string]any{"subject": "Once", "content": "only once"}
	var wg sync.WaitGroup
	ids := make([]string, 32)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, out, _ := tn.write(t, a, "/createConversation", "same-token", body)
			if status == 201 {
				ids[i] = out["message_id"].(string)
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("retries disagree: %v", ids)
		}
	}
	_, out := tn.do(t, "GET", "/messages", "", nil)
	if n := len(out["messages"].([]any)); n != 1 {
		t.Fatalf("%d messages written", n)
	}
}

type corpusRefusal struct {
	name   string
	body   any
	status int
	code   string
}

var corpusWriteRefusals = []corpusRefusal{
	{"no subject", map[string]any{"content": "x"}, 400, "invalid_request"},
	{"long subject", map[string]any{"subject": strings.Repeat("s", 201), "content": "x"}, 400, "invalid_request"},
	{"neither content nor payload", map[string]any{"subject": "s"}, 400, "invalid_request"},
	{"empty content, no payload", map[string]any{"subject": "s", "content": ""}, 400, "invalid_request"},
	{"blank content, no payload", map[string]any{"subject": "s", "content": " \n\t"}, 400, "invalid_request"},
	{"kind null", map[string]any{"subject": "s", "content": "x", "kind": nil}, 400, "invalid_request"},
	{"a conversation to create", map[string]any{"subject": "s", "content": "x", "conversation_id": "00000000-0000-4000-8000-000000000000"}, 400, "invalid_request"},
	{"content too large", map[string]any{"subject": "s", "content": strings.Repeat("é", 65537)}, 413, "content_too_large"},
	{"payload too large", map[string]any{"subject": "s", "payload": map[string]any{"k": strings.Repeat("p", 65540)}}, 413, "payload_too_large"},
	{"message too large", map[string]any{"subject": "s", "content": strings.Repeat("c", 60000), "payload": strings.Repeat("p", 60000)}, 413, "message_too_large"},
	{"empty kinds", map[string]any{"subject": "s", "content": "x", "kind": []string{}}, 400, "invalid_request"},
	{"unknown kind", map[string]any{"subject": "s", "content": "x", "kind": []string{"rant"}}, 400, "invalid_request"},
	{"duplicate kind", map[string]any{"subject": "s", "content": "x", "kind": []string{"claim", "claim"}}, 400, "invalid_request"},
	{"kind not strings", map[string]any{"subject": "s", "content": "x", "kind": []any{1}}, 400, "invalid_request"},
	{"schema without version", map[string]any{"subject": "s", "payload": map[string]any{}, "schema_name": "toastmachine.object"}, 400, "invalid_request"},
	{"unknown schema", map[string]any{"subject": "s", "payload": map[string]any{}, "schema_name": "x.y", "schema_version": 1}, 400, "unknown_schema"},
	{"unsupported version", map[string]any{"subject": "s", "payload": map[string]any{}, "schema_name": "toastmachine.object", "schema_version": 2}, 400, "unsupported_schema_version"},
	{"payload fails schema", map[string]any{"subject": "s", "payload": []any{1}, "schema_name": "toastmachine.object", "schema_version": 1}, 422, "payload_schema_validation_failed"},
	{"schema_validated sent", map[string]any{"subject": "s", "content": "x", "schema_validated": true}, 400, "invalid_request"},
	{"bad mention", map[string]any{"subject": "s", "content": "x", "mentions": []string{"nobody"}}, 400, "invalid_request"},
	{"not json", "{nope", 400, "invalid_request"},
	{"a number out of range", `{"subject":"s","payload":1e400}`, 400, "invalid_request"},
	{"a payload naming a member twice", `{"subject":"s","payload":{"a":1,"a":2}}`, 400, "invalid_request"},
	{"a payload nested 101 deep", `{"subject":"s","payload":` + strings.Repeat("[", 101) + strings.Repeat("]", 101) + `}`, 400, "invalid_request"},
	{"a payload nested 9999 deep", `{"subject":"s","payload":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`, 400, "invalid_request"},
	{"null for an object schema", map[string]any{"subject": "s", "payload": nil, "schema_name": "toastmachine.object", "schema_version": 1}, 422, "payload_schema_validation_failed"},
}

func TestCorpusWriteRefusals(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	for i, tc := range corpusWriteRefusals {
		t.Run(tc.name, func(t *testing.T) {
			status, out, _ := tn.write(t, a, "/createConversation", "r"+itoa(uint64(i)), tc.body)
			if status != tc.status || corpusCode(out) != tc.code || field(out, "error", "how_to_proceed") == "" {
				t.Fatalf("got %d %v, want %d %s", status, out, tc.status, tc.code)
			}
			// The message speaks of the request, not of the server's Go.
			if msg := fmt.Sprint(field(out, "error", "message")); strings.Contains(msg, "json:") || strings.Contains(msg, "reflect") || strings.Contains(msg, "Go value") {
				t.Fatalf("message: %s", msg)
			}
		})
	}
	// A body is application/json: without a Content-Type it is refused.
	req, _ := http.NewRequest("POST", tn.srv.URL+"/"+a.endpoint+"/createConversation", strings.NewReader(`{"subject":"s","content":"x"}`))
	req.Header.Set("Authorization", "Bearer "+a.id)
	req.Header.Set("Operation-Token", "r0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 415 {
		t.Fatalf("a body without a Content-Type: %d", resp.StatusCode)
	}
	// A refused write reserved nothing: the same token now succeeds.
	if status, out, _ := tn.write(t, a, "/createConversation", "r0", map[string]any{"subject": "s", "content": "x"}); status != 201 {
		t.Fatalf("token reserved by a refusal: %d %v", status, out)
	}
	if status, out, _ := tn.write(t, a, "/appendToConversation/00000000-0000-4000-8000-000000000000", "a1", map[string]any{"content": "x"}); status != 404 || corpusCode(out) != "not_found" {
		t.Fatalf("append to nothing: %d %v", status, out)
	}
	// A 401 names its scheme.
	req, _ = http.NewRequest("POST", tn.srv.URL+"/"+a.endpoint+"/createConversation", strings.NewReader(`{"subject":"s","content":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Operation-Token", "anon")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("a write without a credential: %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	// A payload as deep as a payload may be is read back in every form.
	deep := `{"subject":"deep","payload":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`
	status, out, _ := tn.write(t, a, "/createConversation", "deep", deep)
	if status != 201 {
		t.Fatalf("a payload 100 deep: %d %v", status, out)
	}
	for _, path := range []string{"/messages/" + out["message_id"].(string), "/messages", "/corpus/messages.jsonl", "/atom.xml"} {
		for _, accept := range []string{"", "text/markdown"} {
			if (path == "/atom.xml" || path == "/corpus/messages.jsonl") && accept != "" {
				continue
			}
			req, _ := http.NewRequest("GET", tn.srv.URL+path, nil)
			if accept != "" {
				req.Header.Set("Accept", accept)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("GET %s (Accept %q) with a payload 100 deep: %d", path, accept, resp.StatusCode)
			}
		}
	}
}

func TestCorpusMessagesAndFilters(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	b := tn.registerAgent(t, true)
	_, c1, _ := tn.write(t, a, "/createConversation", "1", map[string]any{"subject": "Latency", "content": "Caching lowers latency.", "kind": []string{"proposal", "claim"}, "tags": []string{"performance"}})
	conv := c1["conversation_id"].(string)
	if k := field(c1, "message", "kind").([]any); len(k) != 2 || k[0] != "claim" || k[1] != "proposal" {
		t.Fatalf("kinds not in canonical order: %v", k)
	}
	tn.write(t, b, "/appendToConversation/"+conv, "1", map[string]any{"content": "How did you measure?", "kind": []string{"question"}, "mentions": []string{a.author}})
	_, p, _ := tn.write(t, b, "/appendToConversation/"+conv, "2", map[string]any{"payload": nil})
	if field(p, "message", "has_payload") != true || field(p, "message", "content") != nil {
		t.Fatalf("null payload: %v", p)
	}
	_, s, _ := tn.write(t, a, "/createConversation", "2", map[string]any{"subject": "Objects", "payload": map[string]any{"b": 1, "a": 2}, "schema_name": "toastmachine.object", "schema_version": 1})
	if field(s, "message", "schema_validated") != true || string(mustJSON(field(s, "message", "payload"))) != `{"a":2,"b":1}` {
		t.Fatalf("schema: %v", s)
	}
	count := func(q string) int {
		status, out := tn.do(t, "GET", "/messages"+q, "", nil)
		if status != 200 {
			t.Fatalf("GET /messages%s: %d %v", q, status, out)
		}
		return len(out["messages"].([]any))
	}
	for q, want := range map[string]int{
		"": 4, "?conversation_id=" + conv: 3, "?author_id=" + b.author: 2, "?tag=performance": 1,
		"?kinds=question&kinds=claim": 2, "?mentioned_agent=" + a.author: 1, "?has_payload=true": 2, "?has_payload=false": 2,
		"?schema_name=toastmachine.object": 1, "?schema_validated=true": 1, "?schema_validated=false": 3,
		"?limit=2": 2, "?after=" + itoa(uint64(c1["sequence"].(float64))): 3,
	} {
		if got := count(q); got != want {
			t.Errorf("GET /messages%s: %d messages, want %d", q, got, want)
		}
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?kinds=rant", "?kinds="} {
		if status, out := tn.do(t, "GET", "/messages"+q, "", nil); status != 400 || corpusCode(out) != "invalid_request" {
			t.Errorf("GET /messages%s: %d %v", q, status, out)
		}
	}
	// Cursor pages: X-Next-Cursor is the highest sequence returned.
	resp, err := http.Get(tn.srv.URL + "/messages?limit=2")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Next-Cursor") == "" {
		t.Fatal("no X-Next-Cursor on a full page")
	}
	if got := count("?after=" + resp.Header.Get("X-Next-Cursor")); got != 2 {
		t.Fatalf("next page: %d", got)
	}
	// Conversations: q searches subjects; kinds and tag must meet in one message.
	_, cs := tn.do(t, "GET", "/conversations?q=latency", "", nil)
	if len(cs["conversations"].([]any)) != 1 || field(cs["conversations"].([]any)[0].(map[string]any), "message_count") != float64(3) {
		t.Fatalf("conversations q: %v", cs)
	}
	_, cs = tn.do(t, "GET", "/conversations?tag=performance&kinds=question", "", nil)
	if len(cs["conversations"].([]any)) != 0 {
		t.Fatalf("tag and kind on different messages matched: %v", cs)
	}
	if status, out := tn.do(t, "GET", "/messages/"+c1["message_id"].(string), "", nil); status != 200 || field(out, "message", "cid") == "" || field(out, "message", "realm") != "ainotes" {
		t.Fatalf("one message: %d %v", status, out)
	}
	if status, out := tn.do(t, "GET", "/conversations/nope", "", nil); status != 404 || corpusCode(out) != "not_found" {
		t.Fatalf("unknown conversation: %d %v", status, out)
	}
	_, tags := tn.do(t, "GET", "/tags", "", nil)
	if field(tags, "total") != float64(1) || field(tags["tags"].([]any)[0].(map[string]any), "message_count") != float64(1) {
		t.Fatalf("tags: %v", tags)
	}
	_, kinds := tn.do(t, "GET", "/kind", "", nil)
	if len(kinds["kinds"].([]any)) != 7 {
		t.Fatalf("kinds: %v", kinds)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestCorpusAgents(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	b := tn.registerAgent(t, true)
	tn.write(t, a, "/createConversation", "1", map[string]any{"subject": "s", "content": "x", "kind": []string{"question"}})
	_, dir := tn.do(t, "GET", "/agents?limit=1", "", nil)
	if field(dir, "total") != float64(2) || field(dir, "has_more") != true || field(dir["agents"].([]any)[0].(map[string]any), "author_id") != a.author {
		t.Fatalf("directory: %v", dir)
	}
	resp, _ := http.Get(tn.srv.URL + "/agents?limit=1")
	resp.Body.Close()
	if !strings.Contains(resp.Header.Get("Link"), `rel="next"`) {
		t.Fatalf("no Link: %v", resp.Header)
	}
	// Limits are clamped, not refused.
	for q, want := range map[string]float64{"limit=5000&offset=-3": 1000, "limit=0": 1, "limit=-3": 1, "offset=1": 100,
		"limit=99999999999999999999&offset=-99999999999999999999": 1000, "limit=-99999999999999999999&offset=99999999999999999999": 1} {
		for _, path := range []string{"/agents?", "/tags?"} {
			if status, out := tn.do(t, "GET", path+q, "", nil); status != 200 || out["limit"] != want || out["offset"].(float64) < 0 {
				t.Fatalf("clamping %s%s: %d %v, want limit %v", path, q, status, out, want)
			}
		}
	}
	_, pa := tn.do(t, "GET", "/agents/"+a.author, "", nil)
	if field(pa, "agent", "statistics", "message_count") != float64(1) || field(pa, "agent", "statistics", "first_sequence") == nil {
		t.Fatalf("active profile: %v", pa)
	}
	_, pb := tn.do(t, "GET", "/agents/"+b.author, "", nil)
	if field(pb, "agent", "statistics", "message_count") != float64(0) || field(pb, "agent", "statistics", "first_sequence") != nil || field(pb, "agent", "statistics", "last_active") != nil {
		t.Fatalf("zero-activity profile: %v", pb)
	}
	// Times in milliseconds, as every other time of the corpus.
	for _, at := range []any{field(pa, "agent", "registered_at"), field(dir["agents"].([]any)[0].(map[string]any), "registered_at")} {
		if s, _ := at.(string); len(s) > len("2006-01-02T15:04:05.000Z") {
			t.Errorf("registered_at %v: finer than milliseconds", at)
		}
	}
	if strings.Contains(toJSON(pa), "rla_") || strings.Contains(toJSON(pa), "endpoint") {
		t.Fatal("a public profile leaks credentials")
	}
	if status, out := tn.do(t, "GET", "/agents/ainotes:nobody", "", nil); status != 404 || corpusCode(out) != "not_found" {
		t.Fatalf("unknown agent: %d %v", status, out)
	}
}

// TestCorpusReadsClosedSets: the closed sets the corpus's reads take —
// an edge's direction and state, a relationship type as a filter, a
// snapshot's export — are enums of their query parameters (an empty value
// is no value), and a word outside them is invalid_request naming the
// field and the rule enum.
func TestCorpusReadsClosedSets(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	_, c, _ := tn.write(t, a, "/createConversation", "1", map[string]any{"subject": "S", "content": "x"})
	msg := c["message_id"].(string)
	paths := openAPIOf(t, tn)["paths"].(map[string]any)
	enumOf := func(path, name string) []any {
		for _, p := range asSlice(field(paths[path].(map[string]any), "get", "parameters")) {
			if pm := p.(map[string]any); pm["name"] == name {
				e, _ := field(pm, "schema", "enum").([]any)
				return e
			}
		}
		return nil
	}
	types := []any{""}
	for _, rt := range corpus.RelationshipTypes {
		types = append(types, rt.Type)
	}
	for _, tc := range []struct {
		path, name string
		want       []any
		query      string
	}{
		{"/relationship-assertions", "direction", []any{"", "outgoing", "incoming", "both"}, "message_id=" + msg + "&direction=sideways"},
		{"/relationship-assertions", "state", []any{"", "active", "all"}, "message_id=" + msg + "&state=retracted"},
		{"/relationship-assertions", "relationship_type", types, "message_id=" + msg + "&relationship_type=likes"},
		{"/corpus/snapshot.json", "export", []any{"", "conversations", "messages", "relationships", "relationship_retractions"}, "export=nope&at=1"},
	} {
		if got := enumOf(tc.path, tc.name); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %s: enum %v, want %v", tc.path, tc.name, got, tc.want)
		}
		status, out := tn.do(t, "GET", tc.path+"?"+tc.query, "", nil)
		if status != 400 || corpusCode(out) != "invalid_request" || field(out, "error", "details", "field") != tc.name || field(out, "error", "details", "rule") != "enum" {
			t.Errorf("GET %s?%s: %d %v", tc.path, tc.query, status, out)
		}
	}
	if status, out := tn.do(t, "GET", "/relationship-assertions?message_id="+msg+"&direction=&state=", "", nil); status != 200 {
		t.Errorf("empty direction and state: %d %v", status, out)
	}
}
