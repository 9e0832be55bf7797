package testnet

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// homeOnlyTest is an operation only a record's home realm performs, tried
// at r2 on r1's thread th_1 or its claim cl_1.
type homeOnlyTest struct {
	tool string
	path string
	args map[string]any
	want string
}

var homeOnlyTests = []homeOnlyTest{
	{"post_claims_id_seal", "/api/v1/claims/r1:cl_1/seal", map[string]any{"id": "r1:cl_1"}, "verify_right_missing"},
	{"post_threads_id_close", "/api/v1/threads/r1:th_1/close", map[string]any{"id": "r1:th_1"}, "thread_authority_missing"},
	{"post_threads_id_reopen", "/api/v1/threads/r1:th_1/reopen", map[string]any{"id": "r1:th_1"}, "thread_authority_missing"},
	{"post_threads_id_state", "/api/v1/threads/r1:th_1/state", map[string]any{"id": "r1:th_1", "state": "deferred"}, "thread_authority_missing"},
	{"post_threads_id_pin", "/api/v1/threads/r1:th_1/pin", map[string]any{"id": "r1:th_1"}, "thread_authority_missing"},
	{"post_threads_id_confirm", "/api/v1/threads/r1:th_1/confirm", map[string]any{"id": "r1:th_1"}, "thread_authority_missing"},
	{"post_threads_id_reject", "/api/v1/threads/r1:th_1/reject", map[string]any{"id": "r1:th_1"}, "thread_authority_missing"},
	{"post_threads_id_llm_replies", "/api/v1/threads/r1:th_1/llm-replies", map[string]any{"id": "r1:th_1", "forbidden": true}, "thread_authority_missing"},
}

// TestHomeOnlyRefusedAlike: r2's human, who holds every right at r2, tries
// at r2 what only r1 does to r1's thread and claim. Each is refused with
// the reason that names the missing authority (not the generic
// forbidden), the same over HTTP and MCP, with an error that names r1.
func TestHomeOnlyRefusedAlike(t *testing.T) {
	net, r1, r2 := pair(t)
	env := map[string]any{"kind": "propose", "body": "r1's operator claims.", "claims": []map[string]any{{"statement": "it holds"}}}
	if st := call(t, r1, "POST", "/api/v1/boards/lobby/threads", env, nil); st/100 != 2 {
		t.Fatalf("open: %d", st)
	}
	converge(t, net)
	for _, tt := range homeOnlyTests {
		body := map[string]any{}
		for k, v := range tt.args {
			if k != "id" {
				body[k] = v
			}
		}
		var ref struct {
			Reason  string         `json:"reason"`
			Error   string         `json:"error"`
			Details map[string]any `json:"details"`
		}
		st := call(t, r2, "POST", tt.path, body, &ref)
		if st != http.StatusForbidden || ref.Reason != tt.want || !strings.Contains(ref.Error, "r1") || ref.Details["realm"] != "r1" {
			t.Errorf("%s over HTTP: %d %+v, want 403 %s naming r1", tt.tool, st, ref, tt.want)
		}
		isErr, sc := mcpTool(t, r2, tt.tool, tt.args)
		if !isErr || sc["reason"] != ref.Reason || sc["error"] != ref.Error {
			t.Errorf("%s over MCP: isError %v %v, want HTTP's %+v", tt.tool, isErr, sc, ref)
		}
	}
}

// mcpTool calls one tool at r's /api/v1/mcp with r's credential and
// returns whether it refused and its structured content.
func mcpTool(t *testing.T, r *Realm, name string, args map[string]any) (bool, map[string]any) {
	t.Helper()
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}})
	req, _ := http.NewRequest("POST", r.URL+"/api/v1/mcp", bytes.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	req.Header.Set("Authorization", "Bearer "+r.OperatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if i := bytes.Index(b, []byte("data:")); i >= 0 && !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		b = bytes.TrimSpace(b[i+len("data:"):]) // an event stream of one answer
	}
	var out struct {
		Result struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s over MCP: %d %s: %v", name, resp.StatusCode, b, err)
	}
	return out.Result.IsError, out.Result.StructuredContent
}
