package realm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// call posts (or gets) one operation over HTTP and returns status and body.
func (tn *testNode) post(t *testing.T, token, path string, body any) map[string]any {
	t.Helper()
	status, out := tn.do(t, "POST", path, token, body)
	if status != 200 {
		t.Fatalf("POST %s: %d %v", path, status, out)
	}
	return out
}

func field(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// threadState is what the scenario checks after every step.
type threadState struct {
	state    string
	origin   any // nil for a newborn thread
	proposal bool
	locked   bool
	awaiting bool
}

func (tn *testNode) checkThread(t *testing.T, step, id string, want threadState) {
	t.Helper()
	status, out := tn.do(t, "GET", "/api/v1/threads/"+id, "", nil)
	if status != 200 {
		t.Fatalf("%s: get thread: %d %v", step, status, out)
	}
	th := out["thread"].(map[string]any)
	got := threadState{th["state"].(string), th["state_origin"], th["proposal"].(bool), th["locked"].(bool), th["awaiting"].(bool)}
	if got != want {
		t.Fatalf("%s: thread is %+v, want %+v", step, got, want)
	}
}

// TestScenarioThreadLifecycle walks one thread through ask → answer →
// propose → refute with evidence → attest → seal → decide → proposed close →
// confirmed close → thread_closed → reopen.
func TestScenarioThreadLifecycle(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "asker", "write")
	b := tn.issue(t, "answerer", "write")
	c := tn.issue(t, "critic", "write")

	out := tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{
		"kind": "ask", "body": "Does caching lower latency?",
		"claims": []any{map[string]any{"statement": "Caching always lowers latency.", "evidence": []any{map[string]any{"kind": "note", "value": "folklore"}}}},
	})
	if field(out, "message", "id") != "msg_1" || field(out, "thread", "id") != "th_1" || field(out, "message", "from", "identity") != "ainotes:asker" {
		t.Fatalf("open: %v", out)
	}
	tn.checkThread(t, "ask", "th_1", threadState{"open", nil, false, false, true})

	tn.post(t, b, "/api/v1/threads/th_1/messages", map[string]any{
		"kind": "answer", "body": "With a warm cache, yes.", "parent": "msg_1",
		"claims": []any{map[string]any{"statement": "A warm cache halves p50 latency.", "evidence": []any{map[string]any{"kind": "url", "value": "https://example.org/run/1"}}}},
	})
	tn.checkThread(t, "answer", "th_1", threadState{"answered", "llm", true, false, false})

	tn.post(t, a, "/api/v1/threads/th_1/messages", map[string]any{"kind": "propose", "body": "Let us measure a cold run too.", "parent": "msg_2"})
	tn.checkThread(t, "propose", "th_1", threadState{"answered", "llm", true, false, true})

	out = tn.post(t, c, "/api/v1/threads/th_1/messages", map[string]any{
		"kind": "refute", "body": "Cold runs are slower with the cache.", "refutes": []string{"cl_1"},
		"evidence": []any{map[string]any{"kind": "log", "value": "cold p50 12ms vs 9ms"}},
	})
	if r := field(out, "message", "refutes").([]any); len(r) != 1 || r[0] != "cl_1" || field(out, "message", "awaiting") != true {
		t.Fatalf("refute: %v", out)
	}
	tn.checkThread(t, "refute", "th_1", threadState{"answered", "llm", true, false, true})
	if _, cl := tn.do(t, "GET", "/api/v1/claims/cl_1", "", nil); field(cl, "claim", "state") != "refuted" {
		t.Fatalf("refuted claim: %v", cl)
	}

	// The author cannot support its own claim; someone else can.
	if _, cl := tn.do(t, "POST", "/api/v1/claims/cl_2/attest", b, map[string]any{"verdict": "supports"}); field(cl, "claim", "state") != "unverified" {
		t.Fatalf("self-support: %v", cl)
	}
	if _, cl := tn.do(t, "POST", "/api/v1/claims/cl_2/attest", c, map[string]any{"verdict": "supports"}); field(cl, "claim", "state") != "supported" {
		t.Fatalf("attest: %v", cl)
	}
	tn.checkThread(t, "attest", "th_1", threadState{"answered", "llm", true, false, true})

	if _, cl := tn.do(t, "POST", "/api/v1/claims/cl_2/seal", tn.operator, map[string]any{}); field(cl, "claim", "state") != "verified" {
		t.Fatalf("seal: %v", cl)
	}
	// A refutation does not move a verified claim: only the human or verify do.
	tn.post(t, c, "/api/v1/threads/th_1/messages", map[string]any{
		"kind": "refute", "body": "Still unconvinced.", "refutes": []string{"cl_2"}, "evidence": []any{map[string]any{"kind": "note", "value": "n=1"}},
	})
	if _, cl := tn.do(t, "GET", "/api/v1/claims/cl_2", "", nil); field(cl, "claim", "state") != "verified" {
		t.Fatalf("verified claim moved: %v", cl)
	}

	tn.post(t, a, "/api/v1/threads/th_1/messages", map[string]any{"kind": "decide", "body": "Cache on, with a warm-up."})
	tn.checkThread(t, "decide", "th_1", threadState{"decided", "llm", true, false, false})

	tn.post(t, a, "/api/v1/threads/th_1/close", map[string]any{})
	tn.checkThread(t, "proposed close", "th_1", threadState{"closed", "llm", true, false, false})
	// A proposed close does not lock.
	tn.post(t, b, "/api/v1/threads/th_1/messages", map[string]any{"kind": "note", "body": "Noted."})

	tn.post(t, tn.operator, "/api/v1/threads/th_1/confirm", map[string]any{})
	tn.checkThread(t, "confirmed close", "th_1", threadState{"closed", "llm", false, true, false})

	for _, tok := range []string{b, a, tn.operator} {
		if status, out := tn.do(t, "POST", "/api/v1/threads/th_1/messages", tok, map[string]any{"kind": "note", "body": "late"}); status != 409 || out["reason"] != "thread_closed" {
			t.Fatalf("post into a locked thread: %d %v", status, out)
		}
	}

	// The creator's reopen is a proposal: as a proposed close does not
	// lock, a proposed reopen does not unlock; its confirmation does.
	tn.post(t, a, "/api/v1/threads/th_1/reopen", map[string]any{})
	tn.checkThread(t, "proposed reopen", "th_1", threadState{"decided", "llm", true, true, false})
	if status, out := tn.do(t, "POST", "/api/v1/threads/th_1/messages", b, map[string]any{"kind": "note", "body": "too soon"}); status != 409 || out["reason"] != "thread_closed" {
		t.Fatalf("post before the reopen is confirmed: %d %v", status, out)
	}
	tn.post(t, tn.operator, "/api/v1/threads/th_1/confirm", map[string]any{})
	tn.checkThread(t, "reopen", "th_1", threadState{"decided", "llm", false, false, false})
	tn.post(t, b, "/api/v1/threads/th_1/messages", map[string]any{"kind": "note", "body": "Open again."})

	_, ev := tn.do(t, "GET", "/api/v1/threads/th_1/events", "", nil)
	var vias []string
	for _, e := range ev["events"].([]any) {
		m := e.(map[string]any)
		vias = append(vias, fmt.Sprintf("%s:%s→%s", m["via"], m["from"], m["to"]))
	}
	want := "act:open→answered act:answered→decided close:decided→closed confirm:closed→closed reopen:closed→decided confirm:decided→decided"
	if strings.Join(vias, " ") != want {
		t.Fatalf("history:\n got %s\nwant %s", strings.Join(vias, " "), want)
	}
	// The tree nests replies under their parents.
	_, tree := tn.do(t, "GET", "/api/v1/threads/th_1", "", nil)
	roots := tree["messages"].([]any)
	if len(roots) == 0 || len(roots[0].(map[string]any)["replies"].([]any)) != 1 {
		t.Fatalf("tree: %v", roots)
	}
}

// TestReopenLiftsAModelsPendingReopen: a model's reopen of a confirmed
// close is a proposal, and the thread stays locked. The refusal of a post
// there says what to do, reopen first (creator, lock, human); the human's
// or a lock holder's reopen then lifts the lock, over HTTP and MCP alike,
// rather than call the locked thread open and refuse.
func TestReopenLiftsAModelsPendingReopen(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	b := tn.issue(t, "beta", "write")
	l := tn.issue(t, "warden", "write", "lock")
	sessions := tn.mcpSessions(t, l, tn.operator)
	for i, tok := range []string{tn.operator, l} {
		th := fmt.Sprintf("th_%d", i+1)
		tn.post(t, a, "/api/v1/boards/lobby/threads", map[string]any{"kind": "ask", "body": "Which cache?"})
		tn.post(t, a, "/api/v1/threads/"+th+"/close", map[string]any{})
		tn.post(t, l, "/api/v1/threads/"+th+"/confirm", map[string]any{})
		tn.post(t, a, "/api/v1/threads/"+th+"/reopen", map[string]any{})
		tn.checkThread(t, "proposed reopen", th, threadState{"open", "llm", true, true, true})
		if status, out := tn.do(t, "POST", "/api/v1/threads/"+th+"/reopen", a, map[string]any{}); status != 409 || out["reason"] != "state_invalid" {
			t.Fatalf("the creator's second reopen: %d %v", status, out)
		}
		if i == 0 {
			tn.post(t, tok, "/api/v1/threads/"+th+"/reopen", map[string]any{})
			tn.checkThread(t, "the human's reopen", th, threadState{"open", "user", false, false, true})
		} else {
			res, err := sessions[tok].CallTool(context.Background(), &mcp.CallToolParams{Name: "post_threads_id_reopen", Arguments: map[string]any{"id": th}})
			if err != nil || res.IsError {
				t.Fatalf("a lock holder's reopen over MCP: %v %v", err, res.StructuredContent)
			}
			tn.checkThread(t, "a lock holder's reopen", th, threadState{"open", "llm", false, false, true})
		}
		tn.post(t, b, "/api/v1/threads/"+th+"/messages", map[string]any{"kind": "answer", "body": "The LRU one."})
	}
}

// parityCase is one refusal that must look the same over HTTP and MCP.
type parityCase struct {
	reason, token, method, path, tool string
	args                              map[string]any
	status                            int
}

// TestRefusalParity produces every reason Parley can produce from an
// operation, over HTTP and over MCP, with the same status and reason.
func TestRefusalParity(t *testing.T) {
	tn := startNode(t, "ainotes")
	reader := tn.issue(t, "reader")
	a := tn.issue(t, "alpha", "write")
	b := tn.issue(t, "beta", "write")

	// Fixtures: th_1 by alpha with claim cl_1, superseded by cl_2; th_2
	// closed and confirmed; th_3 with AI replies forbidden (claim cl_3); two access
	// requests, one pending, one rejected.
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "q", "claims": []any{map[string]any{"statement": "s1"}}})
	tn.post(t, a, "/api/v1/threads/th_1/messages", map[string]any{"kind": "refine", "body": "sharper", "relates_to": []string{"cl_1"}, "claims": []any{map[string]any{"statement": "s2"}}})
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "note", "body": "to close"})
	tn.post(t, tn.operator, "/api/v1/threads/th_2/close", map[string]any{})
	tn.post(t, a, "/api/v1/boards/lobby/threads", map[string]any{"kind": "ask", "body": "humans only", "claims": []any{map[string]any{"statement": "s3"}}})
	tn.post(t, tn.operator, "/api/v1/threads/th_3/llm-replies", map[string]any{"forbidden": true})
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "decided by the human"})
	tn.post(t, tn.operator, "/api/v1/threads/th_4/messages", map[string]any{"kind": "decide", "body": "so it is"})
	tn.post(t, a, "/api/v1/boards", map[string]any{"slug": "other", "name": "Other"})
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "who answers?"})
	applicant := map[string]any{"label": "newbie", "purpose": "p", "model": "m", "client": "c", "provider": "pr", "contact": "x@example.org"}
	r1 := tn.post(t, "", "/api/v1/tokens/request", applicant)
	tn.post(t, "", "/api/v1/tokens/request", applicant)
	tn.post(t, tn.operator, "/api/v1/token-requests/2/review", map[string]any{"decision": "reject", "reason": "no"})
	if r1["request_id"].(float64) != 1 {
		t.Fatalf("request id: %v", r1)
	}
	png := base64.StdEncoding.EncodeToString([]byte("not an image at all"))
	big := base64.StdEncoding.EncodeToString(make([]byte, 5<<20+1))

	cases := []parityCase{
		{"invalid_body", a, "POST", "/api/v1/threads/th_1/messages", "post_threads_id_messages", map[string]any{"id": "th_1", "kind": "shout", "body": "x"}, 400},
		{"invalid_body", a, "POST", "/api/v1/threads/th_1/messages", "post_threads_id_messages", map[string]any{"id": "th_1", "kind": "note", "body": ""}, 400},
		{"invalid_body", a, "POST", "/api/v1/threads/th_1/messages", "post_threads_id_messages", map[string]any{"id": "th_1", "kind": "note", "body": "x", "colour": 1}, 400},
		{"invalid_body", a, "POST", "/api/v1/boards/1/threads", "post_boards_id_threads", map[string]any{"id": 1, "kind": "ask", "body": "x", "thread": ""}, 400},
		{"invalid_body", a, "POST", "/api/v1/threads/th_1/state", "post_threads_id_state", map[string]any{"id": "th_1", "state": "paused"}, 400},
		{"invalid_body", a, "GET", "/api/v1/inbox?extension=a%20b", "get_inbox", map[string]any{"extension": "a b"}, 400},
		{"invalid_body", a, "GET", "/api/v1/threads?state=paused", "get_threads", map[string]any{"state": "paused"}, 400},
		{"board_not_found", a, "GET", "/api/v1/threads?board=99", "get_threads", map[string]any{"board": 99}, 404},
		{"invalid_body", a, "POST", "/api/v1/inbox/ack", "post_inbox_ack", map[string]any{"extension": strings.Repeat("x", 41)}, 400},
		{"invalid_body", b, "POST", "/api/v1/claims/cl_2/attest", "post_claims_id_attest", map[string]any{"id": "cl_2", "verdict": "supports", "from": map[string]any{"extension": ""}}, 400},
		{"token_read_only", reader, "POST", "/api/v1/threads/th_1/messages", "post_threads_id_messages", map[string]any{"id": "th_1", "kind": "note", "body": "x"}, 403},
		{"token_right_missing", a, "POST", "/api/v1/threads/th_1/pin", "post_threads_id_pin", map[string]any{"id": "th_1"}, 403},
		{"verify_right_missing", a, "POST", "/api/v1/claims/cl_2/seal", "post_claims_id_seal", map[string]any{"id": "cl_2"}, 403},
		{"request_not_found", tn.operator, "GET", "/api/v1/token-requests/99", "get_token_requests_id", map[string]any{"id": 99}, 404},
		{"request_forbidden", a, "GET", "/api/v1/token-requests/1", "get_token_requests_id", map[string]any{"id": 1}, 403},
		{"request_decided", tn.operator, "POST", "/api/v1/token-requests/2/review", "post_token_requests_id_review", map[string]any{"id": 2, "decision": "approve"}, 409},
		{"user_session_required", a, "POST", "/api/v1/tokens", "post_tokens", map[string]any{"label": "x"}, 403},
		{"user_session_required", a, "POST", "/api/v1/threads/th_1/llm-replies", "post_threads_id_llm_replies", map[string]any{"id": "th_1", "forbidden": true}, 403},
		{"board_not_found", a, "POST", "/api/v1/boards/99/threads", "post_boards_id_threads", map[string]any{"id": 99, "kind": "ask", "body": "x"}, 404},
		{"board_not_found", a, "POST", "/api/v1/boards/99/threads", "post_boards_id_threads", map[string]any{"id": 99, "kind": "note", "body": "x", "thread": "th_1"}, 404},
		{"thread_not_found", a, "POST", "/api/v1/boards/2/threads", "post_boards_id_threads", map[string]any{"id": 2, "kind": "note", "body": "x", "thread": "th_1"}, 404},
		{"invalid_body", b, "POST", "/api/v1/claims/cl_2/attest", "post_claims_id_attest", map[string]any{"id": "cl_2", "verdict": "inconclusive", "note": "a\u0001b"}, 400},
		{"thread_authority_missing", a, "POST", "/api/v1/threads/th_4/state", "post_threads_id_state", map[string]any{"id": "th_4", "state": "obsolete"}, 403},
		{"thread_not_found", a, "POST", "/api/v1/threads/th_99/messages", "post_threads_id_messages", map[string]any{"id": "th_99", "kind": "note", "body": "x"}, 404},
		{"parent_not_found", b, "POST", "/api/v1/threads/th_1/messages", "post_threads_id_messages", map[string]any{"id": "th_1", "kind": "note", "body": "x", "parent": "msg_99"}, 404},
		{"claim_not_found", a, "GET", "/api/v1/claims/cl_99", "get_claims_id", map[string]any{"id": "cl_99"}, 404},
		// A number with a leading zero or a sign is no key, in a URL as in MCP's text.
		{"thread_not_found", a, "GET", "/api/v1/threads/01", "get_threads_id", map[string]any{"id": "01"}, 404},
		{"claim_not_found", a, "GET", "/api/v1/claims/+1", "get_claims_id", map[string]any{"id": "+1"}, 404},
		{"thread_closed", b, "POST", "/api/v1/threads/th_2/messages", "post_threads_id_messages", map[string]any{"id": "th_2", "kind": "note", "body": "x"}, 409},
		{"thread_authority_missing", b, "POST", "/api/v1/threads/th_1/close", "post_threads_id_close", map[string]any{"id": "th_1"}, 403},
		{"self_reply", a, "POST", "/api/v1/threads/th_1/messages", "post_threads_id_messages", map[string]any{"id": "th_1", "kind": "answer", "body": "x", "parent": "msg_1"}, 409},
		{"self_reply", a, "POST", "/api/v1/threads/th_5/messages", "post_threads_id_messages", map[string]any{"id": "th_5", "kind": "answer", "body": "x"}, 409},
		{"state_invalid", a, "POST", "/api/v1/threads/th_1/reopen", "post_threads_id_reopen", map[string]any{"id": "th_1"}, 409},
		{"state_not_settable", a, "POST", "/api/v1/threads/th_1/state", "post_threads_id_state", map[string]any{"id": "th_1", "state": "closed"}, 400},
		{"nothing_to_confirm", tn.operator, "POST", "/api/v1/threads/th_1/confirm", "post_threads_id_confirm", map[string]any{"id": "th_1"}, 409},
		{"llm_reply_forbidden", b, "POST", "/api/v1/threads/th_3/messages", "post_threads_id_messages", map[string]any{"id": "th_3", "kind": "answer", "body": "x"}, 403},
		{"llm_reply_forbidden", b, "POST", "/api/v1/claims/cl_3/attest", "post_claims_id_attest", map[string]any{"id": "cl_3", "verdict": "supports"}, 403},
		{"llm_reply_forbidden", b, "POST", "/api/v1/threads/th_1/messages", "post_threads_id_messages", map[string]any{"id": "th_1", "kind": "refute", "body": "x", "refutes": []string{"cl_3"}, "evidence": []any{map[string]any{"kind": "note", "value": "v"}}}, 403},
		{"evidence_required", b, "POST", "/api/v1/threads/th_1/messages", "post_threads_id_messages", map[string]any{"id": "th_1", "kind": "refute", "body": "x", "refutes": []string{"cl_2"}}, 400},
		{"evidence_required", b, "POST", "/api/v1/threads/th_1/messages", "post_threads_id_messages", map[string]any{"id": "th_1", "kind": "refute", "body": "x"}, 400},
		{"evidence_required", b, "POST", "/api/v1/claims/cl_2/attest", "post_claims_id_attest", map[string]any{"id": "cl_2", "verdict": "refutes"}, 400},
		{"claim_superseded", b, "POST", "/api/v1/claims/cl_1/attest", "post_claims_id_attest", map[string]any{"id": "cl_1", "verdict": "supports"}, 409},
		{"image_missing", b, "POST", "/api/v1/threads/th_1/messages", "post_threads_id_messages", map[string]any{"id": "th_1", "kind": "note", "body": "x", "image": map[string]any{}}, 400},
		{"image_type", b, "POST", "/api/v1/threads/th_1/messages", "post_threads_id_messages", map[string]any{"id": "th_1", "kind": "note", "body": "x", "image": map[string]any{"data": png}}, 400},
		{"image_too_large", b, "POST", "/api/v1/threads/th_1/messages", "post_threads_id_messages", map[string]any{"id": "th_1", "kind": "note", "body": "x", "image": map[string]any{"data": big}}, 413},
		{"operation_not_found", a, "GET", "/api/v1/operations/nope", "get_api_operation", map[string]any{"key": "nope"}, 404},
		{"conflict", a, "POST", "/api/v1/boards", "post_boards", map[string]any{"slug": "lobby", "name": "Again"}, 409},
		{"not_found", tn.operator, "POST", "/api/v1/tokens/99/revoke", "post_tokens_id_revoke", map[string]any{"id": 99}, 404},
		{"forbidden", tn.operator, "POST", "/api/v1/tokens/1/rights", "post_tokens_id_rights", map[string]any{"id": 1, "rights": []string{"read"}}, 403},
	}
	sessions := tn.mcpSessions(t, reader, a, b, tn.operator)
	for _, tc := range cases {
		t.Run(tc.reason+"/"+tc.tool, func(t *testing.T) {
			var body any
			if tc.method == "POST" {
				body = tc.args
			}
			status, out := tn.do(t, tc.method, tc.path, tc.token, body)
			if status != tc.status || out["reason"] != tc.reason {
				t.Fatalf("http: %d %v, want %d %s", status, out, tc.status, tc.reason)
			}
			res, err := sessions[tc.token].CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
			if err != nil {
				t.Fatalf("mcp: %v", err)
			}
			sc, _ := res.StructuredContent.(map[string]any)
			if !res.IsError || sc["reason"] != tc.reason {
				t.Fatalf("mcp: isError=%v %v, want %s", res.IsError, sc, tc.reason)
			}
		})
	}
}

// TestRefusalOrder: when a request fails several checks, what is wrong with
// the request itself (its body: invalid_body, evidence_required,
// state_not_settable) is said before what the node finds looking it up
// (thread_not_found, claim_not_found, llm_reply_forbidden,
// claim_superseded), over HTTP and MCP alike, as a message's envelope is.
func TestRefusalOrder(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	b := tn.issue(t, "beta", "write")
	// th_1 by alpha with claim cl_1, superseded by cl_2; th_2 with AI
	// replies forbidden (claim cl_3).
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "q", "claims": []any{map[string]any{"statement": "s1"}}})
	tn.post(t, a, "/api/v1/threads/th_1/messages", map[string]any{"kind": "refine", "body": "sharper", "relates_to": []string{"cl_1"}, "claims": []any{map[string]any{"statement": "s2"}}})
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "humans only", "claims": []any{map[string]any{"statement": "s3"}}})
	tn.post(t, tn.operator, "/api/v1/threads/th_2/llm-replies", map[string]any{"forbidden": true})
	ev := []any{map[string]any{"kind": "note", "value": "v"}}

	cases := []struct {
		name string
		parityCase
	}{
		// A message: the envelope first (the reference behaviour).
		{"message: bad kind, no thread", parityCase{"invalid_body", b, "POST", "/api/v1/threads/th_99/messages", "post_threads_id_messages", map[string]any{"id": "th_99", "kind": "shout", "body": "x"}, 400}},
		{"message: refute without evidence, no claim", parityCase{"evidence_required", b, "POST", "/api/v1/threads/th_1/messages", "post_threads_id_messages", map[string]any{"id": "th_1", "kind": "refute", "body": "x", "refutes": []string{"cl_99"}}, 400}},
		{"message: refute without evidence, superseded claim", parityCase{"evidence_required", b, "POST", "/api/v1/threads/th_1/messages", "post_threads_id_messages", map[string]any{"id": "th_1", "kind": "refute", "body": "x", "refutes": []string{"cl_1"}}, 400}},
		// An attestation: its verdict and evidence first.
		{"attest: bad verdict, no claim", parityCase{"invalid_body", b, "POST", "/api/v1/claims/cl_99/attest", "post_claims_id_attest", map[string]any{"id": "cl_99", "verdict": "agrees"}, 400}},
		{"attest: refutes without evidence, no claim", parityCase{"evidence_required", b, "POST", "/api/v1/claims/cl_99/attest", "post_claims_id_attest", map[string]any{"id": "cl_99", "verdict": "refutes"}, 400}},
		{"attest: bad verdict, AI replies forbidden", parityCase{"invalid_body", b, "POST", "/api/v1/claims/cl_3/attest", "post_claims_id_attest", map[string]any{"id": "cl_3", "verdict": "agrees"}, 400}},
		{"attest: refutes without evidence, superseded claim", parityCase{"evidence_required", b, "POST", "/api/v1/claims/cl_1/attest", "post_claims_id_attest", map[string]any{"id": "cl_1", "verdict": "refutes"}, 400}},
		{"attest: refutes with evidence, no claim", parityCase{"claim_not_found", b, "POST", "/api/v1/claims/cl_99/attest", "post_claims_id_attest", map[string]any{"id": "cl_99", "verdict": "refutes", "evidence": ev}, 404}},
		{"attest: superseded", parityCase{"claim_superseded", b, "POST", "/api/v1/claims/cl_1/attest", "post_claims_id_attest", map[string]any{"id": "cl_1", "verdict": "refutes", "evidence": ev}, 409}},
		// A side state: the state named first.
		{"state: not a state, no thread", parityCase{"invalid_body", a, "POST", "/api/v1/threads/th_99/state", "post_threads_id_state", map[string]any{"id": "th_99", "state": "paused"}, 400}},
		{"state: closed, no thread", parityCase{"state_not_settable", a, "POST", "/api/v1/threads/th_99/state", "post_threads_id_state", map[string]any{"id": "th_99", "state": "closed"}, 400}},
		{"state: deferred, no thread", parityCase{"thread_not_found", a, "POST", "/api/v1/threads/th_99/state", "post_threads_id_state", map[string]any{"id": "th_99", "state": "deferred"}, 404}},
		{"state: closed, no authority", parityCase{"state_not_settable", b, "POST", "/api/v1/threads/th_1/state", "post_threads_id_state", map[string]any{"id": "th_1", "state": "closed"}, 400}},
	}
	sessions := tn.mcpSessions(t, a, b)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, out := tn.do(t, tc.method, tc.path, tc.token, tc.args)
			if status != tc.status || out["reason"] != tc.reason {
				t.Fatalf("http: %d %v, want %d %s", status, out, tc.status, tc.reason)
			}
			res, err := sessions[tc.token].CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
			if err != nil {
				t.Fatalf("mcp: %v", err)
			}
			if sc, _ := res.StructuredContent.(map[string]any); !res.IsError || sc["reason"] != tc.reason {
				t.Fatalf("mcp: isError=%v %v, want %s", res.IsError, sc, tc.reason)
			}
		})
	}
}

// TestRefusalOrderCredentialFirst: over HTTP, a write's credential and
// rights are checked before its body is read as JSON, as they are before
// its schema: a broken body sent without a token is unauthenticated, with
// a read-only token token_read_only; only a writer hears invalid_json.
func TestRefusalOrderCredentialFirst(t *testing.T) {
	tn := startNode(t, "ainotes")
	reader := tn.issue(t, "reader")
	a := tn.issue(t, "alpha", "write")
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "q"})
	for _, tc := range []struct {
		name, token, path, reason string
		status                    int
	}{
		{"no token", "", "/api/v1/threads/th_1/messages", "unauthenticated", 401},
		{"a bad token", "rlt_9_nope", "/api/v1/threads/th_1/messages", "unauthenticated", 401},
		{"a read-only token", reader, "/api/v1/threads/th_1/messages", "token_read_only", 403},
		{"a read-only token, a side state", reader, "/api/v1/threads/th_1/state", "token_read_only", 403},
		{"a writer without pin", a, "/api/v1/threads/th_1/pin", "token_right_missing", 403},
		{"a writer", a, "/api/v1/threads/th_1/messages", "invalid_json", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := http.Header{"Content-Type": {"application/json"}}
			if tc.token != "" {
				hdr.Set("Authorization", "Bearer "+tc.token)
			}
			status, body, _ := tn.sendBody(t, "POST", tc.path, hdr, `{"kind":"note","body":`)
			var out map[string]any
			if err := json.Unmarshal(body, &out); err != nil || status != tc.status || out["reason"] != tc.reason {
				t.Fatalf("%d %s, want %d %s", status, body, tc.status, tc.reason)
			}
		})
	}
}

// fieldParityCase is a body refused as invalid_body, and the field and rule
// the refusal must name over both transports.
type fieldParityCase struct {
	name, body, field, rule string
}

var fieldParityCases = []fieldParityCase{
	{"several unknown", `{"kind":"note","body":"x","zeta":1,"mid":2,"alpha":3}`, "alpha", "unknown_field"},
	{"several unknown, reversed", `{"alpha":3,"mid":2,"zeta":1,"kind":"note","body":"x"}`, "alpha", "unknown_field"},
	{"unknown with a space", `{"kind":"note","body":"x","my field":1}`, "my field", "unknown_field"},
	{"unknown with quotes", `{"kind":"note","body":"x","say \"hi\"":1}`, `say "hi"`, "unknown_field"},
	{"unknown with ]", `{"kind":"note","body":"x","a]b":1,"z":2}`, "a]b", "unknown_field"},
	{"unknown beyond ASCII", `{"kind":"note","body":"x","ключ":1,"naïve":2}`, "naïve", "unknown_field"},
	{"missing", `{"body":"x"}`, "kind", "required"},
	{"wrong type", `{"kind":"note","body":7}`, "body", "type"},
	{"too long", `{"kind":"note","body":"` + strings.Repeat("é", 501) + `"}`, "body", "max_length"},
	{"unknown in from", `{"kind":"note","body":"x","from":{"extension":"w","x y":1,"x]":2}}`, "from.x y", "unknown_field"},
	{"unknown in a claim", `{"kind":"note","body":"x","claims":[{"statement":"s","z":1,"é":2}]}`, "claims[0].z", "unknown_field"},
	{"missing in a claim", `{"kind":"note","body":"x","claims":[{"statement":"s"},{}]}`, "claims[1].statement", "required"},
	{"empty extension", `{"kind":"note","body":"x","from":{"extension":""}}`, "from.extension", "min_length"},
	{"empty parent", `{"kind":"note","body":"x","parent":""}`, "parent", "min_length"},
	{"empty thread", `{"kind":"note","body":"x","thread":""}`, "thread", "min_length"},
	{"relates_to not a key", `{"kind":"note","body":"x","relates_to":["th_1","nope"]}`, "relates_to[1]", "format"},
	{"relates_to to nothing", `{"kind":"note","body":"x","relates_to":["th_1","msg_99"]}`, "relates_to[1]", "not_found"},
}

// TestRefusalFieldParity: the same invalid body is refused with the same
// message, field and rule over HTTP and over MCP, every time, whatever the
// order of its members.
func TestRefusalFieldParity(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "q"})
	cs, err := tn.mcpSession(t, a)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, tc := range fieldParityCases {
		t.Run(tc.name, func(t *testing.T) {
			args := json.RawMessage(`{"id":"th_1",` + tc.body[1:])
			var first string
			for range 5 {
				status, out := tn.do(t, "POST", "/api/v1/threads/th_1/messages", a, json.RawMessage(tc.body))
				details, _ := out["details"].(map[string]any)
				if status != 400 || out["reason"] != "invalid_body" || details["field"] != tc.field || details["rule"] != tc.rule {
					t.Fatalf("http: %d %v, want field %q, rule %s", status, out, tc.field, tc.rule)
				}
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "post_threads_id_messages", Arguments: args})
				if err != nil {
					t.Fatalf("mcp: %v", err)
				}
				sc, _ := res.StructuredContent.(map[string]any)
				if !res.IsError || toJSON(sc) != toJSON(out) {
					t.Fatalf("mcp: isError=%v %v, http %v", res.IsError, sc, out)
				}
				if first == "" {
					first = toJSON(out)
				} else if toJSON(out) != first {
					t.Fatalf("refused as %s, then as %s", first, toJSON(out))
				}
			}
		})
	}
}

// TestKeyArgumentNamesItsField: an id that is no key (a negative number, a
// fraction, a boolean) is invalid_body naming the field, over HTTP and MCP.
func TestKeyArgumentNamesItsField(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "q"})
	if st, out := tn.do(t, "GET", "/api/v1/threads/-1", a, nil); st != 400 || out["reason"] != "invalid_body" || field(out, "details", "field") != "id" {
		t.Errorf("http /threads/-1: %d %v", st, out)
	}
	for _, id := range []any{-1, 1.5, true} {
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_threads_id","arguments":{"id":%v}}}`, id)
		_, res := rawMCP(t, tn.srv.URL, a, []byte(msg))
		if field(res, "result", "isError") != true || field(res, "result", "structuredContent", "reason") != "invalid_body" || field(res, "result", "structuredContent", "details", "field") != "id" {
			t.Errorf("mcp id %v: %v", id, res)
		}
	}
	// A key inside the envelope is named as the client wrote it, never
	// after the Go type that holds it ("Envelope.parent").
	for _, parent := range []any{-5, 1.5, true} {
		for _, f := range []string{"parent", "thread"} {
			env := map[string]any{"kind": "note", "body": "x", f: parent}
			if st, out := tn.do(t, "POST", "/api/v1/threads/th_1/messages", a, env); st != 400 || field(out, "details", "field") != f {
				t.Errorf("http %s %v: %d %v", f, parent, st, out)
			}
			args, _ := json.Marshal(map[string]any{"id": 1, "kind": "note", "body": "x", f: parent})
			_, res := rawMCP(t, tn.srv.URL, a, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"post_threads_id_messages","arguments":`+string(args)+`}}`))
			if field(res, "result", "structuredContent", "details", "field") != f {
				t.Errorf("mcp %s %v: %v", f, parent, res)
			}
		}
	}
}

// TestWideIntegerParity: an integer beyond 64 bits is the same argument in
// a URL and in MCP's JSON, the nearest one within: a limit or offset is
// clamped, an id names nothing, a range refuses it by its bounds, with the
// same answer over both transports, for the forum and the corpus.
func TestWideIntegerParity(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "q"})
	agent := tn.registerAgent(t, true)
	_, conv, _ := tn.write(t, agent, "/createConversation", "op-1", map[string]any{"subject": "s", "content": "x"})
	corpusTok := newOAuthClient(t, tn.srv.URL, nil).grant(t, "toastmachine:read")["access_token"].(string)
	const wide = "99999999999999999999"
	for _, tc := range []struct {
		token, path, tool, args string
	}{
		{a, "/api/v1/threads?limit=" + wide, "get_threads", `{"limit":` + wide + `}`},
		{a, "/api/v1/threads?limit=-" + wide, "get_threads", `{"limit":-` + wide + `}`},
		{a, "/api/v1/boards/1/threads?offset=" + wide, "get_boards_id_threads", `{"id":1,"offset":` + wide + `}`},
		{a, "/api/v1/inbox?limit=" + wide, "get_inbox", `{"limit":` + wide + `}`},
		{tn.operator, "/api/v1/token-requests/" + wide, "get_token_requests_id", `{"id":` + wide + `}`},
		{a, "/api/v1/threads/18446744073709551616", "get_threads_id", `{"id":18446744073709551616}`},
		{a, "/api/v1/claims/" + wide, "get_claims_id", `{"id":` + wide + `}`},
		{"", "/conversations?after=" + wide, "list_conversations", `{"after":` + wide + `}`},
		{"", "/search?q=x&offset=" + wide, "search", `{"query":"x","offset":` + wide + `}`},
		{"", "/conversations/" + conv["conversation_id"].(string) + "/graph?max_response_bytes=" + wide, "pull_conversation",
			`{"conversation_id":"` + conv["conversation_id"].(string) + `","max_response_bytes":` + wide + `}`},
	} {
		t.Run(tc.tool+tc.args, func(t *testing.T) {
			status, out := tn.do(t, "GET", tc.path, tc.token, nil)
			msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tc.tool + `","arguments":` + tc.args + `}}`
			var res map[string]any
			if tc.token == "" {
				_, res, _ = rawTool(t, tn.srv.URL, corpusTok, tc.tool, json.RawMessage(tc.args))
			} else {
				_, rpc := rawMCP(t, tn.srv.URL, tc.token, []byte(msg))
				res, _ = rpc["result"].(map[string]any)
			}
			sc, _ := res["structuredContent"].(map[string]any)
			delete(sc, "retrieval_size") // /mcp's own measure of the result
			if (status != 200) != (res["isError"] == true) || toJSON(sc) != toJSON(out) {
				t.Errorf("http %d %s\nmcp  %v %s", status, toJSON(out), res["isError"], toJSON(sc))
			}
		})
	}
}

// TestWholeNumberParity: a whole number written with a fraction or an
// exponent (2.0, 1e1) is the integer it is to JSON Schema, in a URL as in
// MCP's JSON, with the same answer over both transports; a fraction is
// refused alike.
func TestWholeNumberParity(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	for i := range 3 {
		tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": fmt.Sprintf("q%d", i)})
	}
	agent := tn.registerAgent(t, true)
	tn.write(t, agent, "/createConversation", "op-1", map[string]any{"subject": "s", "content": "x"})
	corpusTok := newOAuthClient(t, tn.srv.URL, nil).grant(t, "toastmachine:read")["access_token"].(string)
	for _, tc := range []struct {
		token, path, tool, args string
	}{
		{a, "/api/v1/threads?limit=2.0", "get_threads", `{"limit":2.0}`},
		{a, "/api/v1/threads?limit=1e1", "get_threads", `{"limit":1e1}`},
		{a, "/api/v1/threads?limit=1.5", "get_threads", `{"limit":1.5}`},
		{a, "/api/v1/threads?limit=1e30", "get_threads", `{"limit":1e30}`},
		{a, "/api/v1/threads?limit=-1e-3", "get_threads", `{"limit":-1e-3}`},
		{a, "/api/v1/boards/1/threads?offset=1.0&limit=0.1e1", "get_boards_id_threads", `{"id":1,"offset":1.0,"limit":0.1e1}`},
		{a, "/api/v1/inbox?limit=2E0", "get_inbox", `{"limit":2E0}`},
		{"", "/conversations?limit=1.0", "list_conversations", `{"limit":1.0}`},
		{"", "/search?q=x&limit=1e0", "search", `{"query":"x","limit":1e0}`},
	} {
		t.Run(tc.tool+tc.args, func(t *testing.T) {
			status, out := tn.do(t, "GET", tc.path, tc.token, nil)
			msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tc.tool + `","arguments":` + tc.args + `}}`
			var res map[string]any
			if tc.token == "" {
				_, res, _ = rawTool(t, tn.srv.URL, corpusTok, tc.tool, json.RawMessage(tc.args))
			} else {
				_, rpc := rawMCP(t, tn.srv.URL, tc.token, []byte(msg))
				res, _ = rpc["result"].(map[string]any)
			}
			sc, _ := res["structuredContent"].(map[string]any)
			delete(sc, "retrieval_size")
			if (status != 200) != (res["isError"] == true) || toJSON(sc) != toJSON(out) {
				t.Errorf("http %d %s\nmcp  %v %s", status, toJSON(out), res["isError"], toJSON(sc))
			}
		})
	}
}
