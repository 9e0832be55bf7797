package realm

// Forum tests: Parley v1 flows end to end on real nodes over HTTP (and MCP
// where the seed names a tool): access applications and reviews, the inbox,
// feature requests, boards and their counters, thread listing and
// moderation, claims, images, extensions, and durability across a restart
// and a rebuild of the projections.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"relay/protocol"
	"relay/realm/parley"
)

// forumRefused sends a request that must be refused with status and reason,
// and returns the refusal.
func forumRefused(t *testing.T, tn *testNode, method, path, token string, body any, status int, reason string) map[string]any {
	t.Helper()
	got, out := tn.do(t, method, path, token, body)
	if got != status || out["reason"] != reason {
		t.Fatalf("%s %s: got %d %v, want %d %s", method, path, got, out, status, reason)
	}
	return out
}

// forumGet reads path and fails unless it answers 200.
func forumGet(t *testing.T, tn *testNode, path, token string) map[string]any {
	t.Helper()
	status, out := tn.do(t, "GET", path, token, nil)
	if status != 200 {
		t.Fatalf("GET %s: %d %v", path, status, out)
	}
	return out
}

// forumIDs lists the "id" of every entry of out[list].
func forumIDs(out map[string]any, list string) []string {
	ids := []string{}
	items, _ := out[list].([]any)
	for _, it := range items {
		switch id := it.(map[string]any)["id"].(type) {
		case string:
			ids = append(ids, id)
		case float64:
			ids = append(ids, itoa(uint64(id)))
		}
	}
	return ids
}

func forumSame(a, b []string) bool { return slices.Equal(a, b) }

// forumTick waits, polling the clock, until a later millisecond: event times
// have millisecond resolution, and the orders under test need distinct times.
func forumTick() {
	start := time.Now().UnixMilli()
	for time.Now().UnixMilli() <= start+1 {
		runtime.Gosched()
	}
}

// forumCall calls one MCP tool and returns its structured content and
// whether it is a refusal.
func forumCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("mcp %s: %v", tool, err)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	return sc, res.IsError
}

func forumSession(t *testing.T, tn *testNode, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := tn.mcpSession(t, token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func forumStrings(v any) []string {
	out := []string{}
	items, _ := v.([]any)
	for _, it := range items {
		s, _ := it.(string)
		out = append(out, s)
	}
	return out
}

// ---------------------------------------------------------------------------
// 1. Access: application, polling, review, withdrawal, operator changes.

func forumApplication(label string) map[string]any {
	return map[string]any{"label": label, "purpose": "reviews diffs", "model": "model-1", "client": "opencode", "provider": "acme", "contact": "ops@example.org"}
}

var forumApplyFieldTests = []struct {
	name, field string
	value       any // nil: the field is left out
}{
	{"label missing", "label", nil},
	{"purpose missing", "purpose", nil},
	{"model missing", "model", nil},
	{"client missing", "client", nil},
	{"provider missing", "provider", nil},
	{"contact missing", "contact", nil},
	{"label blank", "label", "   "},
	{"contact empty", "contact", ""},
}

func TestForumAccessFlow(t *testing.T) {
	tn := startNode(t, "ainotes")

	t.Run("every field required", func(t *testing.T) {
		for _, tc := range forumApplyFieldTests {
			t.Run(tc.name, func(t *testing.T) {
				body := forumApplication("x")
				if tc.value == nil {
					delete(body, tc.field)
				} else {
					body[tc.field] = tc.value
				}
				out := forumRefused(t, tn, "POST", "/api/v1/tokens/request", "", body, 400, "invalid_body")
				if field(out, "details", "field") != tc.field {
					t.Fatalf("details.field = %v, want %s: %v", field(out, "details", "field"), tc.field, out)
				}
			})
		}
	})

	// Request 1: applied for without a token; answered with a read-only
	// token and a request id.
	app := tn.post(t, "", "/api/v1/tokens/request", forumApplication("Newbie"))
	tok, _ := app["token"].(string)
	if tok == "" || app["request_id"] != float64(1) || app["status"] != "pending" || app["identity"] != "ainotes:newbie" || app["poll"] != "/api/v1/token-requests/1" {
		t.Fatalf("application: %v", app)
	}
	me := forumGet(t, tn, "/api/v1/me", tok)
	if me["identity"] != "ainotes:newbie" || slices.Contains(forumStrings(me["rights"]), "write") {
		t.Fatalf("me of the applicant: %v", me)
	}
	t.Run("the read-only token names its right", func(t *testing.T) {
		app, me := forumStrings(app["rights"]), forumStrings(me["rights"])
		req := forumStrings(field(forumGet(t, tn, "/api/v1/token-requests/1", tok), "request", "rights"))
		if !forumSame(app, []string{"read"}) || !forumSame(me, []string{"read"}) || !forumSame(req, []string{"read"}) {
			t.Fatalf("an applicant's token shows rights %v (application), %v (get_me), %v (request), want [read]: applyToken issues it with nil rights", app, me, req)
		}
	})
	forumGet(t, tn, "/api/v1/boards", tok)
	forumRefused(t, tn, "POST", "/api/v1/boards/1/threads", tok, map[string]any{"kind": "ask", "body": "may I?"}, 403, "token_read_only")

	// The applicant polls over HTTP and over MCP.
	if r := forumGet(t, tn, "/api/v1/token-requests/1", tok); field(r, "request", "status") != "pending" || field(r, "request", "label") != "Newbie" {
		t.Fatalf("poll: %v", r)
	}
	cs := forumSession(t, tn, tok)
	if r, isErr := forumCall(t, cs, "get_token_requests_id", map[string]any{"id": 1}); isErr || field(r, "request", "status") != "pending" || field(r, "request", "id") != float64(1) {
		t.Fatalf("poll over MCP: %v", r)
	}
	if r, isErr := forumCall(t, cs, "get_token_requests_id", map[string]any{"id": 99}); !isErr || r["reason"] != "request_not_found" {
		t.Fatalf("unknown request over MCP: %v", r)
	}

	// Another agent may neither read, withdraw nor review it.
	other := tn.issue(t, "other", "write")
	forumRefused(t, tn, "GET", "/api/v1/token-requests/1", other, nil, 403, "request_forbidden")
	forumRefused(t, tn, "POST", "/api/v1/token-requests/1/withdraw", other, map[string]any{}, 403, "request_forbidden")
	forumRefused(t, tn, "POST", "/api/v1/token-requests/1/review", other, map[string]any{"decision": "approve"}, 403, "token_right_missing")
	if l := forumGet(t, tn, "/api/v1/token-requests", other); len(l["requests"].([]any)) != 0 {
		t.Fatalf("another agent lists foreign requests: %v", l)
	}
	if r, isErr := forumCall(t, forumSession(t, tn, other), "get_token_requests_id", map[string]any{"id": 1}); !isErr || r["reason"] != "request_forbidden" {
		t.Fatalf("foreign request over MCP: %v", r)
	}
	forumRefused(t, tn, "GET", "/api/v1/token-requests/1", "", nil, 401, "unauthenticated")

	// Requests 2 (deferred, then approved with lock), 3 (rejected) and 4
	// (withdrawn).
	tok2 := tn.post(t, "", "/api/v1/tokens/request", forumApplication("Second"))["token"].(string)
	tok3 := tn.post(t, "", "/api/v1/tokens/request", forumApplication("Third"))["token"].(string)
	tok4 := tn.post(t, "", "/api/v1/tokens/request", forumApplication("Fourth"))["token"].(string)

	reviewer := tn.issue(t, "reviewer", "grant")
	if l := forumGet(t, tn, "/api/v1/token-requests", reviewer); !forumSame(forumIDs(l, "requests"), []string{"1", "2", "3", "4"}) {
		t.Fatalf("a grant holder lists all: %v", forumIDs(l, "requests"))
	}
	if l := forumGet(t, tn, "/api/v1/token-requests", tn.operator); len(l["requests"].([]any)) != 4 {
		t.Fatalf("the human lists all: %v", l)
	}
	if l := forumGet(t, tn, "/api/v1/token-requests", tok2); !forumSame(forumIDs(l, "requests"), []string{"2"}) {
		t.Fatalf("an applicant lists its own: %v", forumIDs(l, "requests"))
	}
	review := func(id string, body map[string]any) map[string]any {
		t.Helper()
		return tn.post(t, reviewer, "/api/v1/token-requests/"+id+"/review", body)
	}

	r := review("1", map[string]any{"decision": "in_review"})
	if field(r, "request", "status") != "in_review" || field(r, "request", "reviewed_by") != "ainotes:reviewer" || field(r, "request", "decided_at") != nil {
		t.Fatalf("in_review: %v", r)
	}
	if r := forumGet(t, tn, "/api/v1/token-requests/1", tok); field(r, "request", "status") != "in_review" {
		t.Fatalf("applicant sees in_review: %v", r)
	}
	if l := forumGet(t, tn, "/api/v1/token-requests?status=in_review", reviewer); !forumSame(forumIDs(l, "requests"), []string{"1"}) {
		t.Fatalf("status filter: %v", forumIDs(l, "requests"))
	}
	r = review("1", map[string]any{"decision": "approve", "rights": []string{"write", "pin"}})
	if rights := forumStrings(field(r, "request", "rights")); field(r, "request", "status") != "approved" || field(r, "request", "decided_at") == nil ||
		!slices.Contains(rights, "write") || !slices.Contains(rights, "pin") || slices.Contains(rights, "lock") {
		t.Fatalf("approve: %v", r)
	}
	// The same token now writes: no new token.
	if out := tn.post(t, tok, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "now I may"}); field(out, "message", "from", "identity") != "ainotes:newbie" {
		t.Fatalf("post after approval: %v", out)
	}
	tn.post(t, tok, "/api/v1/threads/th_1/pin", map[string]any{})

	// A grant holder grants neither grant nor verify; lock needs a
	// justification; a rejection needs a reason.
	forumRefused(t, tn, "POST", "/api/v1/token-requests/2/review", reviewer, map[string]any{"decision": "approve", "rights": []string{"write", "grant"}}, 403, "user_session_required")
	if out := forumRefused(t, tn, "POST", "/api/v1/token-requests/2/review", reviewer, map[string]any{"decision": "approve", "rights": []string{"write", "lock"}}, 400, "invalid_body"); field(out, "details", "field") != "justification" {
		t.Fatalf("lock without justification: %v", out)
	}
	if out := forumRefused(t, tn, "POST", "/api/v1/token-requests/2/review", reviewer, map[string]any{"decision": "reject"}, 400, "invalid_body"); field(out, "details", "field") != "reason" {
		t.Fatalf("reject without reason: %v", out)
	}
	if out := forumRefused(t, tn, "POST", "/api/v1/token-requests/2/review", reviewer, map[string]any{"decision": "maybe"}, 400, "invalid_body"); field(out, "details", "field") != "decision" {
		t.Fatalf("unknown decision: %v", out)
	}
	if out := forumRefused(t, tn, "POST", "/api/v1/token-requests/2/review", reviewer, map[string]any{"decision": "approve", "rights": []string{"root"}}, 400, "invalid_body"); field(out, "details", "field") != "rights" ||
		strings.Contains(out["error"].(string), "protocol:") || !strings.Contains(out["error"].(string), `"root"`) {
		t.Fatalf("unknown right: %v", out)
	}
	// Deferred, then reviewed again.
	r = review("2", map[string]any{"decision": "defer", "reason": "say more about the purpose"})
	if field(r, "request", "status") != "deferred" || field(r, "request", "reason") != "say more about the purpose" || field(r, "request", "decided_at") != nil {
		t.Fatalf("defer: %v", r)
	}
	if r := forumGet(t, tn, "/api/v1/token-requests/2", tok2); field(r, "request", "status") != "deferred" {
		t.Fatalf("applicant sees deferred: %v", r)
	}
	r = review("2", map[string]any{"decision": "approve", "rights": []string{"write", "pin", "lock"}, "justification": "moderates the lobby"})
	if field(r, "request", "status") != "approved" || field(r, "request", "justification") != "moderates the lobby" || !slices.Contains(forumStrings(field(r, "request", "rights")), "lock") {
		t.Fatalf("approve with lock after defer: %v", r)
	}
	if me := forumGet(t, tn, "/api/v1/me", tok2); !slices.Contains(forumStrings(me["rights"]), "lock") {
		t.Fatalf("rights of the approved token: %v", me)
	}
	// Rejected, with the reason shown to the applicant.
	review("3", map[string]any{"decision": "reject", "reason": "no contact reachable"})
	if r := forumGet(t, tn, "/api/v1/token-requests/3", tok3); field(r, "request", "status") != "rejected" || field(r, "request", "reason") != "no contact reachable" {
		t.Fatalf("applicant sees the rejection: %v", r)
	}
	forumRefused(t, tn, "POST", "/api/v1/boards/1/threads", tok3, map[string]any{"kind": "ask", "body": "x"}, 403, "token_read_only")
	// Withdrawn by its applicant.
	if r := tn.post(t, tok4, "/api/v1/token-requests/4/withdraw", map[string]any{}); field(r, "request", "status") != "withdrawn" {
		t.Fatalf("withdraw: %v", r)
	}

	for _, tc := range []struct{ name, id, token string }{
		{"review approved", "1", reviewer},
		{"review rejected", "3", reviewer},
		{"review withdrawn", "4", reviewer},
		{"human reviews approved", "1", tn.operator},
		{"withdraw approved", "1", tok},
		{"withdraw rejected", "3", tok3},
		{"withdraw withdrawn", "4", tok4},
	} {
		t.Run("request_decided/"+tc.name, func(t *testing.T) {
			path := "/api/v1/token-requests/" + tc.id + "/review"
			body := map[string]any{"decision": "approve"}
			if strings.HasPrefix(tc.name, "withdraw") {
				path, body = "/api/v1/token-requests/"+tc.id+"/withdraw", map[string]any{}
			}
			forumRefused(t, tn, "POST", path, tc.token, body, 409, "request_decided")
		})
	}
	for _, tc := range []struct{ name, method, path string }{
		{"get", "GET", "/api/v1/token-requests/99"},
		{"review", "POST", "/api/v1/token-requests/99/review"},
		{"withdraw", "POST", "/api/v1/token-requests/99/withdraw"},
	} {
		t.Run("request_not_found/"+tc.name, func(t *testing.T) {
			var body any
			if tc.method == "POST" {
				body = map[string]any{"decision": "defer"}
				if tc.name == "withdraw" {
					body = map[string]any{}
				}
			}
			forumRefused(t, tn, tc.method, tc.path, reviewer, body, 404, "request_not_found")
		})
	}

	// The operator changes the rights, then revokes.
	p, err := tn.auth.Authenticate(tok)
	if err != nil {
		t.Fatal(err)
	}
	forumRefused(t, tn, "POST", "/api/v1/tokens/"+itoa(p.TokenID)+"/rights", reviewer, map[string]any{"rights": []string{}}, 403, "user_session_required")
	if out := tn.post(t, tn.operator, "/api/v1/tokens/"+itoa(p.TokenID)+"/rights", map[string]any{"rights": []string{}}); !forumSame(forumStrings(out["rights"]), []string{"read"}) {
		t.Fatalf("rights change: %v", out)
	}
	forumRefused(t, tn, "POST", "/api/v1/threads/th_1/messages", tok, map[string]any{"kind": "note", "body": "x"}, 403, "token_read_only")
	if r := forumGet(t, tn, "/api/v1/token-requests/1", tok); !forumSame(forumStrings(field(r, "request", "rights")), []string{"read"}) {
		t.Fatalf("the request shows the rights now: %v", r)
	}
	tn.post(t, tn.operator, "/api/v1/tokens/"+itoa(p.TokenID)+"/revoke", nil)
	forumRefused(t, tn, "GET", "/api/v1/token-requests/1", tok, nil, 401, "unauthenticated")
	forumRefused(t, tn, "GET", "/api/v1/me", tok, nil, 401, "unauthenticated")
}

// TestForumReviewOwnRequest: a request is reviewed by someone other than
// its applicant. A token given grant while its own request waits cannot
// decide that request, over HTTP, MCP or call_api_operation, and so cannot
// give itself write, pin or lock; another grant holder and the human still
// can.
func TestForumReviewOwnRequest(t *testing.T) {
	tn := startNode(t, "ainotes")
	app := tn.post(t, "", "/api/v1/tokens/request", forumApplication("Climber"))
	tok := app["token"].(string)
	p, err := tn.auth.Authenticate(tok)
	if err != nil {
		t.Fatal(err)
	}
	// The operator makes the applicant a reviewer before its own request is decided.
	tn.post(t, tn.operator, "/api/v1/tokens/"+itoa(p.TokenID)+"/rights", map[string]any{"rights": []string{"grant"}})
	approve := map[string]any{"decision": "approve", "rights": []string{"write", "pin", "lock"}, "justification": "trust me"}
	forumRefused(t, tn, "POST", "/api/v1/token-requests/1/review", tok, approve, 403, "request_forbidden")
	forumRefused(t, tn, "POST", "/api/v1/token-requests/1/review", tok, map[string]any{"decision": "in_review"}, 403, "request_forbidden")
	forumRefused(t, tn, "POST", "/api/v1/operations/post_token_requests_id_review", tok,
		map[string]any{"arguments": map[string]any{"id": 1, "decision": "approve"}}, 403, "request_forbidden")
	cs := forumSession(t, tn, tok)
	if r, isErr := forumCall(t, cs, "post_token_requests_id_review", map[string]any{"id": 1, "decision": "approve"}); !isErr || r["reason"] != "request_forbidden" {
		t.Fatalf("own review over MCP: %v", r)
	}
	if me := forumGet(t, tn, "/api/v1/me", tok); !forumSame(forumStrings(me["rights"]), []string{"read", "grant"}) {
		t.Fatalf("rights after refused self-reviews: %v", me["rights"])
	}
	if r := forumGet(t, tn, "/api/v1/token-requests/1", tok); field(r, "request", "status") != "pending" {
		t.Fatalf("the request after refused self-reviews: %v", r)
	}
	// Someone else decides it.
	reviewer := tn.issue(t, "reviewer", "grant")
	if r := tn.post(t, reviewer, "/api/v1/token-requests/1/review", map[string]any{"decision": "approve"}); field(r, "request", "status") != "approved" || field(r, "request", "reviewed_by") != "ainotes:reviewer" {
		t.Fatalf("review by another grant holder: %v", r)
	}
}

// TestForumRevokedTokenTakesNoRights: a revoked token authenticates no
// more, so approving its application, or giving it rights, would answer
// with rights nothing honours: both are refused, over HTTP and MCP, and the
// application stays undecided for a rejection.
func TestForumRevokedTokenTakesNoRights(t *testing.T) {
	tn := startNode(t, "ainotes")
	app := tn.post(t, "", "/api/v1/tokens/request", forumApplication("Gone"))
	p, err := tn.auth.Authenticate(app["token"].(string))
	if err != nil {
		t.Fatal(err)
	}
	tn.post(t, tn.operator, "/api/v1/tokens/"+itoa(p.TokenID)+"/revoke", nil)
	forumRefused(t, tn, "POST", "/api/v1/token-requests/1/review", tn.operator, map[string]any{"decision": "approve"}, 409, "conflict")
	forumRefused(t, tn, "POST", "/api/v1/tokens/"+itoa(p.TokenID)+"/rights", tn.operator, map[string]any{"rights": []string{"write"}}, 409, "conflict")
	cs := forumSession(t, tn, tn.operator)
	if r, isErr := forumCall(t, cs, "post_token_requests_id_review", map[string]any{"id": 1, "decision": "approve"}); !isErr || r["reason"] != "conflict" {
		t.Fatalf("approving a revoked token's request over MCP: %v", r)
	}
	if r := forumGet(t, tn, "/api/v1/token-requests/1", tn.operator); field(r, "request", "status") != "pending" || !forumSame(forumStrings(field(r, "request", "rights")), []string{"read"}) {
		t.Fatalf("the request after refused approvals: %v", r)
	}
	if r := tn.post(t, tn.operator, "/api/v1/token-requests/1/review", map[string]any{"decision": "reject", "reason": "revoked"}); field(r, "request", "status") != "rejected" {
		t.Fatalf("rejecting a revoked token's request: %v", r)
	}
}

// ---------------------------------------------------------------------------
// 2. Inbox.

func forumInbox(t *testing.T, tn *testNode, token string, q url.Values) map[string]any {
	t.Helper()
	path := "/api/v1/inbox"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return forumGet(t, tn, path, token)
}

func TestForumInbox(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	b := tn.issue(t, "beta", "write")
	none := url.Values{}
	since0 := url.Values{"since": {"0"}}

	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "How do you solve X?"})
	if ids := forumIDs(forumInbox(t, tn, a, none), "threads"); len(ids) != 0 {
		t.Fatalf("A's own ask awaits A: %v", ids)
	}
	tn.post(t, b, "/api/v1/threads/th_1/messages", map[string]any{"kind": "answer", "body": "Like this.", "parent": "msg_1"})
	if ids := forumIDs(forumInbox(t, tn, a, none), "threads"); len(ids) != 0 {
		t.Fatalf("an answer does not await, but A's inbox has %v", ids)
	}
	tn.post(t, b, "/api/v1/threads/th_1/messages", map[string]any{"kind": "ask", "body": "And how do you solve Y?", "parent": "msg_1"})
	in := forumInbox(t, tn, a, none)
	if ids := forumIDs(in, "threads"); !forumSame(ids, []string{"th_1"}) || in["identity"] != "ainotes:alpha" {
		t.Fatalf("B's ask back: A's inbox %v", in)
	}
	if ids := forumIDs(forumInbox(t, tn, b, none), "threads"); len(ids) != 0 {
		t.Fatalf("B's own ask is in B's inbox: %v", ids)
	}

	// since and cursor.
	cursor := in["cursor"].(float64)
	if cursor <= 0 || in["since"] != float64(0) {
		t.Fatalf("cursor %v since %v", in["cursor"], in["since"])
	}
	cur := itoa(uint64(cursor))
	if out := forumInbox(t, tn, a, url.Values{"since": {cur}}); len(forumIDs(out, "threads")) != 0 || out["cursor"] != cursor || out["since"] != cursor {
		t.Fatalf("since the cursor: %v", out)
	}
	if ids := forumIDs(forumInbox(t, tn, a, url.Values{"since": {itoa(uint64(cursor) - 1)}}), "threads"); !forumSame(ids, []string{"th_1"}) {
		t.Fatalf("since before the cursor: %v", ids)
	}
	forumRefused(t, tn, "GET", "/api/v1/inbox?since=yesterday", a, nil, 400, "invalid_body")

	// ack: get_inbox without since starts after the acknowledged cursor.
	ack := tn.post(t, a, "/api/v1/inbox/ack", map[string]any{})
	if ack["cursor"].(float64) < cursor {
		t.Fatalf("ack: %v", ack)
	}
	if out := forumInbox(t, tn, a, none); len(forumIDs(out, "threads")) != 0 || out["since"] != ack["cursor"] {
		t.Fatalf("after ack: %v", out)
	}
	tn.post(t, b, "/api/v1/threads/th_1/messages", map[string]any{"kind": "note", "body": "A remark."})
	if ids := forumIDs(forumInbox(t, tn, a, none), "threads"); len(ids) != 0 {
		t.Fatalf("a note awaits nobody: %v", ids)
	}
	tn.post(t, b, "/api/v1/threads/th_1/messages", map[string]any{"kind": "request", "body": "Please run the benchmark."})
	if ids := forumIDs(forumInbox(t, tn, a, none), "threads"); !forumSame(ids, []string{"th_1"}) {
		t.Fatalf("a new awaiting message after the ack: %v", ids)
	}
	if out := tn.post(t, a, "/api/v1/inbox/ack", map[string]any{"cursor": 0}); out["cursor"] != float64(0) {
		t.Fatalf("ack with a cursor: %v", out)
	}
	if ids := forumIDs(forumInbox(t, tn, a, none), "threads"); !forumSame(ids, []string{"th_1"}) {
		t.Fatalf("after acknowledging cursor 0: %v", ids)
	}
	// A cursor beyond the node's sequence would hide what is still to come.
	if out := forumRefused(t, tn, "POST", "/api/v1/inbox/ack", a, map[string]any{"cursor": 1 << 40}, 400, "invalid_body"); field(out, "details", "field") != "cursor" {
		t.Fatalf("a cursor from the future: %v", out)
	}
	// The same over MCP.
	cs := forumSession(t, tn, a)
	if out, isErr := forumCall(t, cs, "post_inbox_ack", map[string]any{}); isErr || out["cursor"].(float64) < cursor {
		t.Fatalf("post_inbox_ack: %v", out)
	}
	if out, isErr := forumCall(t, cs, "get_inbox", map[string]any{}); isErr || len(forumIDs(out, "threads")) != 0 {
		t.Fatalf("get_inbox after ack over MCP: %v", out)
	}
	// since takes the cursor as an answer gives it, a number, as well as
	// its digits: the same inbox as over HTTP.
	for _, since := range []any{cursor - 1, itoa(uint64(cursor) - 1)} {
		want := forumInbox(t, tn, a, url.Values{"since": {itoa(uint64(cursor) - 1)}})
		if out, isErr := forumCall(t, cs, "get_inbox", map[string]any{"since": since}); isErr || toJSON(out) != toJSON(want) {
			t.Fatalf("get_inbox since %#v over MCP: %v, over HTTP %v", since, out, want)
		}
	}
	if out, isErr := forumCall(t, cs, "get_inbox", map[string]any{"since": -1}); !isErr || out["reason"] != "invalid_body" || field(out, "details", "field") != "since" {
		t.Fatalf("get_inbox since -1 over MCP: %v", out)
	}
	forumRefused(t, tn, "GET", "/api/v1/inbox?since=-1", a, nil, 400, "invalid_body")

	// Per extension: A's message with w1 awaits A's other extensions.
	tn.post(t, b, "/api/v1/boards/1/threads", map[string]any{"kind": "note", "body": "Extensions thread"})
	tn.post(t, a, "/api/v1/threads/th_2/messages", map[string]any{"kind": "ask", "body": "Who reviews this?", "from": map[string]any{"extension": "w1"}})
	for _, tc := range []struct {
		name, token, ext string
		want             bool
	}{
		{"other extension", a, "w2", true},
		{"same extension", a, "w1", false},
		{"other identity", b, "", true},
	} {
		t.Run("extension/"+tc.name, func(t *testing.T) {
			q := url.Values{"since": {"0"}}
			if tc.ext != "" {
				q.Set("extension", tc.ext)
			}
			out := forumInbox(t, tn, tc.token, q)
			if got := slices.Contains(forumIDs(out, "threads"), "th_2"); got != tc.want {
				t.Fatalf("th_2 in inbox: %v, want %v (%v)", got, tc.want, forumIDs(out, "threads"))
			}
			if out["extension"] != nil && out["extension"] != tc.ext {
				t.Fatalf("extension echoed: %v", out["extension"])
			}
		})
	}
	// The acknowledged cursor is per extension.
	tn.post(t, a, "/api/v1/inbox/ack", map[string]any{"extension": "w2"})
	if ids := forumIDs(forumInbox(t, tn, a, url.Values{"extension": {"w2"}}), "threads"); len(ids) != 0 {
		t.Fatalf("w2 after its ack: %v", ids)
	}
	if ids := forumIDs(forumInbox(t, tn, a, url.Values{"extension": {"w3"}}), "threads"); !slices.Contains(ids, "th_2") {
		t.Fatalf("w3 is not acknowledged: %v", ids)
	}

	// Locked and set-aside threads are not in the inbox; a proposed close
	// does not lock.
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "note", "body": "To be closed"})
	tn.post(t, b, "/api/v1/threads/th_3/messages", map[string]any{"kind": "ask", "body": "Before you close it?"})
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "note", "body": "To be deferred"})
	tn.post(t, b, "/api/v1/threads/th_4/messages", map[string]any{"kind": "ask", "body": "Later?"})
	if ids := forumIDs(forumInbox(t, tn, a, since0), "threads"); !slices.Contains(ids, "th_3") || !slices.Contains(ids, "th_4") {
		t.Fatalf("before closing: %v", ids)
	}
	tn.post(t, a, "/api/v1/threads/th_3/close", map[string]any{})
	if ids := forumIDs(forumInbox(t, tn, a, since0), "threads"); !slices.Contains(ids, "th_3") {
		t.Fatalf("a proposed close removed th_3: %v", ids)
	}
	tn.post(t, tn.operator, "/api/v1/threads/th_3/confirm", map[string]any{})
	tn.post(t, tn.operator, "/api/v1/threads/th_4/state", map[string]any{"state": "deferred"})
	for _, tok := range []string{a, b} {
		ids := forumIDs(forumInbox(t, tn, tok, since0), "threads")
		if slices.Contains(ids, "th_3") || slices.Contains(ids, "th_4") {
			t.Fatalf("locked or deferred thread in an inbox: %v", ids)
		}
	}
	// A thread on which the human forbade AI replies awaits no model:
	// the model may not react there (llm_reply_forbidden).
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "note", "body": "Humans only, soon"})
	tn.post(t, b, "/api/v1/threads/th_5/messages", map[string]any{"kind": "ask", "body": "Will you answer?"})
	if ids := forumIDs(forumInbox(t, tn, a, since0), "threads"); !slices.Contains(ids, "th_5") {
		t.Fatalf("before the forbid: %v", ids)
	}
	tn.post(t, tn.operator, "/api/v1/threads/th_5/llm-replies", map[string]any{"forbidden": true})
	forumRefused(t, tn, "POST", "/api/v1/threads/th_5/messages", a, map[string]any{"kind": "answer", "body": "Yes."}, 403, "llm_reply_forbidden")
	if ids := forumIDs(forumInbox(t, tn, a, since0), "threads"); slices.Contains(ids, "th_5") {
		t.Fatalf("a thread closed to AI replies awaits a model: %v", ids)
	}
	tn.post(t, tn.operator, "/api/v1/threads/th_5/llm-replies", map[string]any{"forbidden": false})
	if ids := forumIDs(forumInbox(t, tn, a, since0), "threads"); !slices.Contains(ids, "th_5") {
		t.Fatalf("after the forbid is lifted: %v", ids)
	}
	forumRefused(t, tn, "GET", "/api/v1/inbox", "", nil, 401, "unauthenticated")
}

// ---------------------------------------------------------------------------
// 3. Feature requests.

var forumFeatureLimitTests = []struct {
	name, title, body, field string
}{
	{"title empty", "", "body", "title"},
	{"title blank", "   ", "body", "title"},
	{"title 121", strings.Repeat("t", 121), "body", "title"},
	{"body empty", "title", "", "body"},
	{"body 2001", "title", strings.Repeat("b", 2001), "body"},
}

func TestForumFeatures(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha") // read is enough to ask for a tool
	b := tn.issue(t, "beta", "write")
	g := tn.issue(t, "granter", "grant")

	for _, tc := range forumFeatureLimitTests {
		t.Run("limits/"+tc.name, func(t *testing.T) {
			out := forumRefused(t, tn, "POST", "/api/v1/features", a, map[string]any{"title": tc.title, "body": tc.body}, 400, "invalid_body")
			if field(out, "details", "field") != tc.field {
				t.Fatalf("details.field: %v", out)
			}
			// An empty text is missing, a long one too long.
			if want := map[bool]string{true: "required", false: "max_length"}[strings.Contains(tc.name, "empty") || strings.Contains(tc.name, "blank")]; field(out, "details", "rule") != want {
				t.Fatalf("details.rule: %v, want %s", out, want)
			}
		})
	}
	// At the limits (in code points: one emoji is one).
	f1 := tn.post(t, a, "/api/v1/features", map[string]any{"title": strings.Repeat("🙂", 120), "body": strings.Repeat("b", 2000)})
	if field(f1, "feature", "status") != "open" || field(f1, "feature", "requester") != "ainotes:alpha" || field(f1, "feature", "id") != float64(1) {
		t.Fatalf("feature: %v", f1)
	}
	tn.post(t, a, "/api/v1/features", map[string]any{"title": "search", "body": "full-text search over threads", "from": map[string]any{"extension": "w1"}})
	tn.post(t, b, "/api/v1/features", map[string]any{"title": "export", "body": "export a thread as markdown"})
	forumRefused(t, tn, "POST", "/api/v1/features", "", map[string]any{"title": "x", "body": "y"}, 401, "unauthenticated")

	for _, tc := range []struct {
		name, token string
		want        []string
	}{
		{"agent sees its own", a, []string{"1", "2"}},
		{"other agent sees its own", b, []string{"3"}},
		{"grant holder sees all", g, []string{"1", "2", "3"}},
		{"human sees all", tn.operator, []string{"1", "2", "3"}},
	} {
		t.Run("list/"+tc.name, func(t *testing.T) {
			if ids := forumIDs(forumGet(t, tn, "/api/v1/features", tc.token), "features"); !forumSame(ids, tc.want) {
				t.Fatalf("got %v, want %v", ids, tc.want)
			}
		})
	}
	if r, isErr := forumCall(t, forumSession(t, tn, b), "get_features", map[string]any{}); isErr || !forumSame(forumIDs(r, "features"), []string{"3"}) {
		t.Fatalf("get_features over MCP: %v", r)
	}
	// A status that is none, as a thread state that is none, is refused on
	// both transports.
	forumRefused(t, tn, "GET", "/api/v1/features?status=nope", a, nil, 400, "invalid_body")
	if r, isErr := forumCall(t, forumSession(t, tn, b), "get_features", map[string]any{"status": "nope"}); !isErr || r["reason"] != "invalid_body" {
		t.Fatalf("get_features with an unknown status over MCP: %v", r)
	}

	for _, tc := range []struct {
		name, token string
		body        map[string]any
		status      int
		reason      string
	}{
		{"agent without grant", a, map[string]any{"status": "accepted"}, 403, "token_right_missing"},
		{"writer without grant", b, map[string]any{"status": "accepted"}, 403, "token_right_missing"},
		{"status outside the enum", tn.operator, map[string]any{"status": "maybe"}, 400, "invalid_body"},
		{"note too long", tn.operator, map[string]any{"status": "planned", "note": strings.Repeat("n", 501)}, 400, "invalid_body"},
	} {
		t.Run("status/"+tc.name, func(t *testing.T) {
			forumRefused(t, tn, "POST", "/api/v1/features/1/status", tc.token, tc.body, tc.status, tc.reason)
		})
	}
	forumRefused(t, tn, "POST", "/api/v1/features/99/status", tn.operator, map[string]any{"status": "done"}, 404, "not_found")
	for _, st := range []string{"open", "accepted", "planned", "done", "rejected"} {
		if out := tn.post(t, tn.operator, "/api/v1/features/2/status", map[string]any{"status": st}); field(out, "feature", "status") != st {
			t.Fatalf("status %s: %v", st, out)
		}
	}
	out := tn.post(t, tn.operator, "/api/v1/features/1/status", map[string]any{"status": "accepted", "note": "next release"})
	if field(out, "feature", "status") != "accepted" || field(out, "feature", "decided_by") != "human:operator" || field(out, "feature", "note") != "next release" {
		t.Fatalf("the human decides: %v", out)
	}
	if out := tn.post(t, g, "/api/v1/features/3/status", map[string]any{"status": "planned"}); field(out, "feature", "decided_by") != "ainotes:granter" {
		t.Fatalf("a grant holder decides: %v", out)
	}
	if ids := forumIDs(forumGet(t, tn, "/api/v1/features?status=accepted", a), "features"); !forumSame(ids, []string{"1"}) {
		t.Fatalf("the requester sees the decision: %v", ids)
	}

	resp, err := http.Get(tn.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if m := regexp.MustCompile(`(?m)^relay_feature_requests_total (\S+)$`).FindSubmatch(metrics); m == nil || string(m[1]) != "3" {
		t.Fatalf("relay_feature_requests_total: %q", m)
	}
}

// ---------------------------------------------------------------------------
// 4. Boards.

var forumBadSlugTests = []struct{ name, slug string }{
	{"empty", ""},
	{"space", "bad slug"},
	{"upper case", "Eng"},
	{"leading dash", "-eng"},
	{"underscore", "a_b"},
	{"41 characters", strings.Repeat("a", 41)},
}

type forumCounters struct{ threads, messages, waiting, open int }

func forumBoardCounters(t *testing.T, tn *testNode, ref string) forumCounters {
	t.Helper()
	b := forumGet(t, tn, "/api/v1/boards/"+ref, "")["board"].(map[string]any)
	return forumCounters{int(b["threads"].(float64)), int(b["messages"].(float64)), int(b["waiting"].(float64)), int(b["open"].(float64))}
}

func TestForumBoards(t *testing.T) {
	tn := startNode(t, "ainotes")
	reader := tn.issue(t, "reader")
	a := tn.issue(t, "alpha", "write")
	b := tn.issue(t, "beta", "write")

	boards := forumGet(t, tn, "/api/v1/boards", "")["boards"].([]any)
	if lobby := boards[0].(map[string]any); len(boards) != 1 || lobby["id"] != float64(1) || lobby["slug"] != "lobby" || lobby["name"] != "Lobby" {
		t.Fatalf("boards: %v", boards)
	}
	forumRefused(t, tn, "POST", "/api/v1/boards", reader, map[string]any{"slug": "eng", "name": "Engineering"}, 403, "token_read_only")
	forumRefused(t, tn, "POST", "/api/v1/boards", "", map[string]any{"slug": "eng", "name": "Engineering"}, 401, "unauthenticated")
	for _, tc := range forumBadSlugTests {
		t.Run("slug/"+tc.name, func(t *testing.T) {
			out := forumRefused(t, tn, "POST", "/api/v1/boards", a, map[string]any{"slug": tc.slug, "name": "x"}, 400, "invalid_body")
			if field(out, "details", "field") != "slug" {
				t.Fatalf("details: %v", out)
			}
		})
	}
	forumRefused(t, tn, "POST", "/api/v1/boards", a, map[string]any{"slug": "eng", "name": ""}, 400, "invalid_body")
	eng := tn.post(t, a, "/api/v1/boards", map[string]any{"slug": "eng", "name": "Engineering", "description": "builds"})
	if field(eng, "board", "id") != float64(2) || field(eng, "board", "slug") != "eng" || field(eng, "board", "creator") != "ainotes:alpha" || field(eng, "board", "cid") == "" {
		t.Fatalf("post_boards: %v", eng)
	}
	for _, slug := range []string{"eng", "lobby"} {
		forumRefused(t, tn, "POST", "/api/v1/boards", b, map[string]any{"slug": slug, "name": "Again"}, 409, "conflict")
	}
	tn.post(t, a, "/api/v1/boards", map[string]any{"slug": strings.Repeat("z", 40), "name": "Forty"})
	if ids := forumIDs(forumGet(t, tn, "/api/v1/boards", ""), "boards"); !forumSame(ids, []string{"1", "2", "3"}) {
		t.Fatalf("boards: %v", ids)
	}
	byID, bySlug := forumGet(t, tn, "/api/v1/boards/2", ""), forumGet(t, tn, "/api/v1/boards/eng", "")
	if toJSON(byID) != toJSON(bySlug) || field(byID, "board", "name") != "Engineering" {
		t.Fatalf("by id %v, by slug %v", byID, bySlug)
	}
	forumRefused(t, tn, "GET", "/api/v1/boards/99", "", nil, 404, "board_not_found")
	forumRefused(t, tn, "GET", "/api/v1/boards/nope", "", nil, 404, "board_not_found")
	forumRefused(t, tn, "GET", "/api/v1/boards/nope/threads", "", nil, 404, "board_not_found")
	if r, isErr := forumCall(t, forumSession(t, tn, reader), "get_boards_id", map[string]any{"id": "eng"}); isErr || field(r, "board", "id") != float64(2) {
		t.Fatalf("get_boards_id over MCP: %v", r)
	}

	// Counters move as threads are opened, answered, closed and reopened.
	steps := []struct {
		name string
		do   func(t *testing.T)
		want forumCounters
	}{
		{"empty", func(t *testing.T) {}, forumCounters{0, 0, 0, 0}},
		{"ask opened", func(t *testing.T) {
			tn.post(t, a, "/api/v1/boards/eng/threads", map[string]any{"kind": "ask", "body": "first"}) // th_1
		}, forumCounters{1, 1, 1, 1}},
		{"answered", func(t *testing.T) {
			tn.post(t, b, "/api/v1/threads/th_1/messages", map[string]any{"kind": "answer", "body": "yes", "parent": "msg_1"})
		}, forumCounters{1, 2, 0, 1}},
		{"note opened", func(t *testing.T) {
			tn.post(t, a, "/api/v1/boards/2/threads", map[string]any{"kind": "note", "body": "second"}) // th_2
		}, forumCounters{2, 3, 0, 2}},
		{"second ask opened", func(t *testing.T) {
			tn.post(t, b, "/api/v1/boards/eng/threads", map[string]any{"kind": "ask", "body": "third"}) // th_3
		}, forumCounters{3, 4, 1, 3}},
		{"note closed by the human", func(t *testing.T) {
			tn.post(t, tn.operator, "/api/v1/threads/th_2/close", map[string]any{})
		}, forumCounters{3, 4, 1, 2}},
		{"answered thread proposed closed by its creator", func(t *testing.T) {
			tn.post(t, a, "/api/v1/threads/th_1/close", map[string]any{})
		}, forumCounters{3, 4, 1, 1}},
		{"closed note reopened", func(t *testing.T) {
			tn.post(t, tn.operator, "/api/v1/threads/th_2/reopen", map[string]any{})
		}, forumCounters{3, 4, 1, 2}},
		{"answer on the second ask", func(t *testing.T) {
			tn.post(t, a, "/api/v1/threads/th_3/messages", map[string]any{"kind": "answer", "body": "no", "parent": "msg_4"})
		}, forumCounters{3, 5, 0, 2}},
	}
	for _, st := range steps {
		st.do(t)
		if got := forumBoardCounters(t, tn, "eng"); got != st.want {
			t.Fatalf("%s: counters %+v, want %+v", st.name, got, st.want)
		}
	}
	if got := forumBoardCounters(t, tn, "lobby"); got != (forumCounters{}) {
		t.Fatalf("lobby moved: %+v", got)
	}

	// A thread closed by the human while its last act awaits a reply no
	// longer waits: nobody may answer a locked thread.
	t.Run("closed ask stops waiting", func(t *testing.T) {
		tn.post(t, b, "/api/v1/threads/th_3/messages", map[string]any{"kind": "ask", "body": "follow-up?"})
		if got := forumBoardCounters(t, tn, "eng"); got != (forumCounters{3, 6, 1, 2}) {
			t.Fatalf("after the follow-up ask: %+v", got)
		}
		tn.post(t, tn.operator, "/api/v1/threads/th_3/close", map[string]any{})
		if got := forumBoardCounters(t, tn, "eng"); got.open != 1 {
			t.Fatalf("after the human's close: %+v", got)
		}
		if got := forumBoardCounters(t, tn, "eng"); got.waiting != 0 {
			t.Fatal("board counter waiting still counts a locked thread whose last act was an ask (parley projector saveThread counts t.Awaiting without t.State.Locked()/side states, unlike the inbox's awaits)")
		}
	})

	// Continuing a thread through its board; a thread of another board is
	// not found there.
	out := tn.post(t, a, "/api/v1/boards/eng/threads", map[string]any{"kind": "note", "body": "continued", "thread": "th_2"})
	if field(out, "thread", "id") != "th_2" || field(out, "message", "thread") != "th_2" || field(out, "thread", "message_count") != float64(2) {
		t.Fatalf("continue through the board: %v", out)
	}
	if ids := forumIDs(forumGet(t, tn, "/api/v1/threads?board=eng", ""), "threads"); len(ids) != 3 {
		t.Fatalf("continuing opened a thread: %v", ids)
	}
	forumRefused(t, tn, "POST", "/api/v1/boards/lobby/threads", a, map[string]any{"kind": "note", "body": "wrong board", "thread": "th_2"}, 404, "thread_not_found")
	forumRefused(t, tn, "POST", "/api/v1/boards/eng/threads", a, map[string]any{"kind": "note", "body": "no such", "thread": "th_99"}, 404, "thread_not_found")
	if r, isErr := forumCall(t, forumSession(t, tn, b), "post_boards_id_threads", map[string]any{"id": 2, "kind": "note", "body": "over MCP", "thread": 2}); isErr || field(r, "thread", "id") != "th_2" {
		t.Fatalf("continue over MCP: %v", r)
	}
}

func TestForumBoardThreadOrder(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write", "pin")
	tn.post(t, a, "/api/v1/boards", map[string]any{"slug": "order", "name": "Order"})
	open := func(kind, body string) string {
		forumTick()
		return field(tn.post(t, a, "/api/v1/boards/order/threads", map[string]any{"kind": kind, "body": body}), "thread", "id").(string)
	}
	oldAsk := open("ask", "old ask")
	pinned := open("note", "to pin")
	forumTick()
	tn.post(t, a, "/api/v1/threads/"+pinned+"/pin", map[string]any{})
	oldNote := open("note", "old note")
	newNote := open("note", "new note")
	newAsk := open("ask", "new ask")
	pinnedAsk := open("ask", "pinned ask")
	forumTick()
	tn.post(t, tn.operator, "/api/v1/threads/"+pinnedAsk+"/pin", map[string]any{})
	// A reply makes an old note the most recent.
	forumTick()
	tn.post(t, tn.operator, "/api/v1/threads/"+oldNote+"/messages", map[string]any{"kind": "note", "body": "bump"})

	want := []string{pinnedAsk, pinned, newAsk, oldAsk, oldNote, newNote}
	if ids := forumIDs(forumGet(t, tn, "/api/v1/boards/order/threads", ""), "threads"); !forumSame(ids, want) {
		t.Fatalf("order %v, want %v", ids, want)
	}
	if ids := forumIDs(forumGet(t, tn, "/api/v1/boards/order/threads?limit=2", ""), "threads"); !forumSame(ids, want[:2]) {
		t.Fatalf("limit: %v", ids)
	}
	// Unpinned, it sorts among the others.
	forumTick()
	tn.post(t, a, "/api/v1/threads/"+pinned+"/pin", map[string]any{"pinned": false})
	want = []string{pinnedAsk, newAsk, oldAsk, pinned, oldNote, newNote}
	if ids := forumIDs(forumGet(t, tn, "/api/v1/boards/order/threads", ""), "threads"); !forumSame(ids, want) {
		t.Fatalf("after unpin: %v, want %v", ids, want)
	}
	r, isErr := forumCall(t, forumSession(t, tn, a), "get_boards_id_threads", map[string]any{"id": "order", "state": "open"})
	if isErr || !forumSame(forumIDs(r, "threads"), want) {
		t.Fatalf("get_boards_id_threads over MCP: %v", r)
	}
}

// ---------------------------------------------------------------------------
// 5. Threads: listing, side states, proposals, pins, AI replies, keys.

// TestForumRefuteOfAMessage: a refute contradicts with evidence, naming
// claims in refutes or, without them, what it answers; it awaits a reply.
// Without evidence it is evidence_required, whether it names claims or not.
func TestForumRefuteOfAMessage(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	b := tn.issue(t, "beta", "write")
	first := tn.post(t, a, "/api/v1/boards/lobby/threads", map[string]any{"kind": "note", "body": "the cache is never stale"})
	parent := field(first, "message", "id")
	out := tn.post(t, b, "/api/v1/threads/th_1/messages", map[string]any{"kind": "refute", "body": "it is, after a restart",
		"parent": parent, "evidence": []any{map[string]any{"kind": "log", "value": "stale read at 12:01"}}})
	if field(out, "message", "kind") != "refute" || field(out, "thread", "awaiting") != true {
		t.Fatalf("a refute of a message: %v", out)
	}
	forumRefused(t, tn, "POST", "/api/v1/threads/th_1/messages", b, map[string]any{"kind": "refute", "body": "no", "parent": parent}, 400, "evidence_required")
}

func TestForumThreadFilters(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	b := tn.issue(t, "beta", "write")
	tn.post(t, a, "/api/v1/boards", map[string]any{"slug": "eng", "name": "Engineering"})

	first := tn.post(t, a, "/api/v1/boards/lobby/threads", map[string]any{"kind": "ask", "body": "lobby ask"}) // th_1: open, awaiting
	since := field(first, "thread", "updated_at").(string)
	forumTick()
	tn.post(t, b, "/api/v1/boards/eng/threads", map[string]any{"kind": "note", "body": "eng note"}) // th_2: open
	forumTick()
	tn.post(t, a, "/api/v1/boards/eng/threads", map[string]any{"kind": "ask", "body": "eng ask"}) // th_3
	tn.post(t, b, "/api/v1/threads/th_3/messages", map[string]any{"kind": "answer", "body": "done", "parent": "msg_3"})

	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"all, most recent first", "", []string{"th_3", "th_2", "th_1"}},
		{"board by slug", "board=lobby", []string{"th_1"}},
		{"board by id", "board=2", []string{"th_3", "th_2"}},
		{"state open", "state=open", []string{"th_2", "th_1"}},
		{"state answered", "state=answered", []string{"th_3"}},
		{"state closed", "state=closed", []string{}},
		{"awaiting", "awaiting=true", []string{"th_1"}},
		{"not awaiting", "awaiting=false", []string{"th_3", "th_2"}},
		{"creator", "creator=ainotes:alpha", []string{"th_3", "th_1"}},
		{"creator unknown", "creator=ainotes:nobody", []string{}},
		{"since", "since=" + url.QueryEscape(since), []string{"th_3", "th_2"}},
		{"realm", "realm=ainotes", []string{"th_3", "th_2", "th_1"}},
		{"other realm", "realm=elsewhere", []string{}},
		{"board and awaiting", "board=eng&awaiting=false&creator=ainotes:beta", []string{"th_2"}},
		{"limit", "limit=1", []string{"th_3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ids := forumIDs(forumGet(t, tn, "/api/v1/threads?"+tc.query, ""), "threads"); !forumSame(ids, tc.want) {
				t.Fatalf("got %v, want %v", ids, tc.want)
			}
		})
	}
	forumRefused(t, tn, "GET", "/api/v1/threads?since=yesterday", "", nil, 400, "invalid_body")
	forumRefused(t, tn, "GET", "/api/v1/threads?board=nope", "", nil, 404, "board_not_found")
	r, isErr := forumCall(t, forumSession(t, tn, a), "get_threads", map[string]any{"board": "eng", "awaiting": false})
	if isErr || !forumSame(forumIDs(r, "threads"), []string{"th_3", "th_2"}) {
		t.Fatalf("get_threads over MCP: %v", r)
	}
}

func TestForumThreadSideStates(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	b := tn.issue(t, "beta", "write")
	l := tn.issue(t, "moderator", "write", "lock")
	n := 0
	open := func() string {
		n++
		tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "side state case"})
		return "th_" + itoa(uint64(n))
	}

	for _, tc := range []struct {
		name, token, state string
		status             int
		reason             string
		want               threadState
	}{
		{"creator proposes deferred", a, "deferred", 200, "", threadState{"deferred", "llm", true, false, true}},
		{"creator proposes obsolete", a, "obsolete", 200, "", threadState{"obsolete", "llm", true, false, true}},
		{"human sets rejected", tn.operator, "rejected", 200, "", threadState{"rejected", "user", false, false, true}},
		{"human sets deferred", tn.operator, "deferred", 200, "", threadState{"deferred", "user", false, false, true}},
		{"lock holder sets obsolete", l, "obsolete", 200, "", threadState{"obsolete", "llm", false, false, true}},
		{"stranger", b, "deferred", 403, "thread_authority_missing", threadState{"open", nil, false, false, true}},
		{"forward state", a, "answered", 400, "state_not_settable", threadState{"open", nil, false, false, true}},
		{"closed", a, "closed", 400, "state_not_settable", threadState{"open", nil, false, false, true}},
		{"no such state", b, "paused", 400, "invalid_body", threadState{"open", nil, false, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := open()
			status, out := tn.do(t, "POST", "/api/v1/threads/"+id+"/state", tc.token, map[string]any{"state": tc.state, "note": "why"})
			if status != tc.status || (tc.reason != "" && out["reason"] != tc.reason) {
				t.Fatalf("got %d %v, want %d %s", status, out, tc.status, tc.reason)
			}
			tn.checkThread(t, tc.name, id, tc.want)
		})
	}

	// The human confirms the creator's proposal; the history shows both.
	id := open()
	tn.post(t, a, "/api/v1/threads/"+id+"/state", map[string]any{"state": "deferred", "note": "later"})
	out := tn.post(t, tn.operator, "/api/v1/threads/"+id+"/confirm", map[string]any{})
	if field(out, "thread", "state_confirmed_by") != "human:operator" || field(out, "thread", "state_confirmed_at") == nil {
		t.Fatalf("confirm: %v", out)
	}
	tn.checkThread(t, "confirmed deferral", id, threadState{"deferred", "llm", false, false, true})
	ev := forumGet(t, tn, "/api/v1/threads/"+id+"/events", "")["events"].([]any)
	if len(ev) != 2 || ev[0].(map[string]any)["via"] != "state" || ev[0].(map[string]any)["note"] != "later" || ev[1].(map[string]any)["via"] != "confirm" {
		t.Fatalf("history: %v", ev)
	}
	// Confirmed, it is set aside: a second side state needs a reopen.
	forumRefused(t, tn, "POST", "/api/v1/threads/"+id+"/state", tn.operator, map[string]any{"state": "obsolete"}, 409, "state_invalid")
	forumRefused(t, tn, "POST", "/api/v1/threads/"+id+"/reopen", a, map[string]any{}, 403, "thread_authority_missing")
	tn.post(t, tn.operator, "/api/v1/threads/"+id+"/reopen", map[string]any{})
	tn.checkThread(t, "reopened", id, threadState{"open", "user", false, false, true})
}

func TestForumThreadRejectProposal(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	b := tn.issue(t, "beta", "write")
	n := 0
	for _, tc := range []struct {
		name  string
		setup func(id string)
		want  threadState
	}{
		{"proposal over the born state", func(id string) {
			tn.post(t, a, "/api/v1/threads/"+id+"/state", map[string]any{"state": "deferred"})
		}, threadState{"open", nil, false, false, true}},
		{"proposal over a confirmed answer", func(id string) {
			tn.post(t, b, "/api/v1/threads/"+id+"/messages", map[string]any{"kind": "answer", "body": "a"})
			tn.post(t, tn.operator, "/api/v1/threads/"+id+"/confirm", map[string]any{})
			tn.post(t, a, "/api/v1/threads/"+id+"/state", map[string]any{"state": "obsolete"})
		}, threadState{"answered", "llm", false, false, false}},
		{"proposed close over a human's decision", func(id string) {
			tn.post(t, tn.operator, "/api/v1/threads/"+id+"/messages", map[string]any{"kind": "decide", "body": "so be it"})
			tn.post(t, a, "/api/v1/threads/"+id+"/close", map[string]any{})
		}, threadState{"decided", "user", false, false, false}},
		{"a model's answer is itself a proposal", func(id string) {
			tn.post(t, b, "/api/v1/threads/"+id+"/messages", map[string]any{"kind": "answer", "body": "a"})
		}, threadState{"open", nil, false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n++
			id := "th_" + itoa(uint64(n))
			tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": tc.name})
			tc.setup(id)
			forumRefused(t, tn, "POST", "/api/v1/threads/"+id+"/reject", a, map[string]any{}, 403, "token_right_missing")
			tn.post(t, tn.operator, "/api/v1/threads/"+id+"/reject", map[string]any{"note": "no"})
			tn.checkThread(t, tc.name, id, tc.want)
			ev := forumGet(t, tn, "/api/v1/threads/"+id+"/events", "")["events"].([]any)
			if last := ev[len(ev)-1].(map[string]any); last["via"] != "reject" || last["by"] != "human:operator" {
				t.Fatalf("history: %v", ev)
			}
			// The restored state says the same in the thread and in its
			// history: a new thread's state has no origin, nor a
			// confirmation to show.
			th := forumGet(t, tn, "/api/v1/threads/"+id, "")["thread"].(map[string]any)
			if last := ev[len(ev)-1].(map[string]any); last["origin"] != th["state_origin"] {
				t.Fatalf("history says origin %v, the thread %v", last["origin"], th["state_origin"])
			}
			if _, by := th["state_confirmed_by"]; by != (th["state_confirmed_at"] != nil) {
				t.Fatalf("confirmed by %v at %v", th["state_confirmed_by"], th["state_confirmed_at"])
			}
			forumRefused(t, tn, "POST", "/api/v1/threads/"+id+"/reject", tn.operator, map[string]any{}, 409, "nothing_to_confirm")
		})
	}
}

// TestForumMarkOverProposal: the human's (or a lock holder's) answer or
// decide on a thread a model proposed as answered or decided is a mark of
// the same state, so it is confirmed, as a state the human sets is; a
// model's same mark leaves the proposal pending.
func TestForumMarkOverProposal(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	b := tn.issue(t, "beta", "write")
	lk := tn.issue(t, "moderator", "write", "lock")
	n := 0
	for _, tc := range []struct {
		name    string
		propose func(id string)
		by      string
		kind    string
		want    threadState
	}{
		{"the human answers a proposed answered", func(id string) {
			tn.post(t, b, "/api/v1/threads/"+id+"/messages", map[string]any{"kind": "answer", "body": "a"})
		}, tn.operator, "answer", threadState{"answered", "user", false, false, false}},
		{"the human decides a proposed decided", func(id string) {
			tn.post(t, a, "/api/v1/threads/"+id+"/messages", map[string]any{"kind": "decide", "body": "d"})
		}, tn.operator, "decide", threadState{"decided", "user", false, false, false}},
		{"a lock holder decides a proposed decided", func(id string) {
			tn.post(t, a, "/api/v1/threads/"+id+"/messages", map[string]any{"kind": "decide", "body": "d"})
		}, lk, "decide", threadState{"decided", "llm", false, false, false}},
		{"a model answers a proposed answered", func(id string) {
			tn.post(t, b, "/api/v1/threads/"+id+"/messages", map[string]any{"kind": "answer", "body": "a"})
		}, a, "answer", threadState{"answered", "llm", true, false, false}},
		{"the creator decides its own proposed decided", func(id string) {
			tn.post(t, a, "/api/v1/threads/"+id+"/messages", map[string]any{"kind": "decide", "body": "d"})
		}, a, "decide", threadState{"decided", "llm", true, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n++
			id := "th_" + itoa(uint64(n))
			tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": tc.name})
			tc.propose(id)
			out := tn.post(t, tc.by, "/api/v1/threads/"+id+"/messages", map[string]any{"kind": tc.kind, "body": "so it is", "from": map[string]any{"extension": "again"}})
			if field(out, "thread", "proposal") != tc.want.proposal {
				t.Fatalf("answer of the post: %v", out["thread"])
			}
			tn.checkThread(t, tc.name, id, tc.want)
		})
	}
}

func TestForumThreadPinAndLLMReplies(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	p := tn.issue(t, "pinner", "pin")
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "pin me", "claims": []map[string]any{{"statement": "pinning helps"}}})

	forumRefused(t, tn, "POST", "/api/v1/threads/th_1/pin", a, map[string]any{}, 403, "token_right_missing")
	if out := tn.post(t, p, "/api/v1/threads/th_1/pin", map[string]any{}); field(out, "thread", "pinned") != true {
		t.Fatalf("pin: %v", out)
	}
	if th := forumGet(t, tn, "/api/v1/threads/th_1", ""); field(th, "thread", "pinned") != true {
		t.Fatalf("pinned thread: %v", th)
	}
	if out := tn.post(t, p, "/api/v1/threads/th_1/pin", map[string]any{"pinned": false}); field(out, "thread", "pinned") != false {
		t.Fatalf("unpin: %v", out)
	}
	forumRefused(t, tn, "POST", "/api/v1/threads/th_99/pin", p, map[string]any{}, 404, "thread_not_found")

	// AI replies forbidden: by the human only; models are refused, the human is not.
	forumRefused(t, tn, "POST", "/api/v1/threads/th_1/llm-replies", a, map[string]any{"forbidden": true}, 403, "user_session_required")
	if out := tn.post(t, tn.operator, "/api/v1/threads/th_1/llm-replies", map[string]any{"forbidden": true}); field(out, "thread", "llm_reply_forbidden") != true {
		t.Fatalf("forbid: %v", out)
	}
	forumRefused(t, tn, "POST", "/api/v1/threads/th_1/messages", a, map[string]any{"kind": "note", "body": "me too"}, 403, "llm_reply_forbidden")
	forumRefused(t, tn, "POST", "/api/v1/boards/1/threads", a, map[string]any{"kind": "note", "body": "me too", "thread": "th_1"}, 403, "llm_reply_forbidden")
	// An attestation is a reaction too; the human's is not refused.
	b := tn.issue(t, "beta", "write")
	forumRefused(t, tn, "POST", "/api/v1/claims/cl_1/attest", b, map[string]any{"verdict": "supports"}, 403, "llm_reply_forbidden")
	if out := tn.post(t, tn.operator, "/api/v1/claims/cl_1/attest", map[string]any{"verdict": "supports"}); field(out, "claim", "state") != "supported" {
		t.Fatalf("the human attests: %v", out)
	}
	if out := tn.post(t, tn.operator, "/api/v1/threads/th_1/messages", map[string]any{"kind": "answer", "body": "the human answers"}); field(out, "message", "author_kind") != "user" {
		t.Fatalf("the human posts: %v", out)
	}
	tn.post(t, tn.operator, "/api/v1/threads/th_1/llm-replies", map[string]any{"forbidden": false})
	tn.post(t, a, "/api/v1/threads/th_1/messages", map[string]any{"kind": "note", "body": "allowed again"})
}

func TestForumThreadKeys(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	b := tn.issue(t, "beta", "write")
	opened := tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "keys"})
	thCID := field(opened, "thread", "cid").(string)
	msgCID := field(opened, "message", "cid").(string)
	if thCID == "" || thCID != msgCID {
		t.Fatalf("a thread's CID is its opening message's: %q %q", thCID, msgCID)
	}
	second := tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "note", "body": "other thread"})

	for _, tc := range []struct{ name, key string }{
		{"key", "th_1"},
		{"number", "1"},
		{"realm-prefixed key", "ainotes:th_1"},
		{"CID", thCID},
	} {
		t.Run("get/"+tc.name, func(t *testing.T) {
			out := forumGet(t, tn, "/api/v1/threads/"+tc.key, "")
			if field(out, "thread", "id") != "th_1" || field(out, "thread", "cid") != thCID {
				t.Fatalf("%s: %v", tc.key, out)
			}
			if ev := forumGet(t, tn, "/api/v1/threads/"+tc.key+"/events", ""); ev["thread"] != "th_1" {
				t.Fatalf("events by %s: %v", tc.key, ev)
			}
		})
	}
	for _, tc := range []struct{ name, key string }{
		{"unknown key", "th_99"},
		{"another realm", "elsewhere:th_1"},
		{"a board's CID", field(forumGet(t, tn, "/api/v1/boards/1", ""), "board", "cid").(string)},
		{"garbage", "th_x"},
	} {
		t.Run("not found/"+tc.name, func(t *testing.T) {
			forumRefused(t, tn, "GET", "/api/v1/threads/"+tc.key, "", nil, 404, "thread_not_found")
		})
	}
	cs := forumSession(t, tn, b)
	for _, tc := range []struct {
		name string
		id   any
	}{
		{"integer", 1},
		{"key", "th_1"},
		{"realm-prefixed key", "ainotes:th_1"},
		{"CID", thCID},
	} {
		t.Run("mcp/"+tc.name, func(t *testing.T) {
			if out, isErr := forumCall(t, cs, "get_threads_id", map[string]any{"id": tc.id}); isErr || field(out, "thread", "id") != "th_1" {
				t.Fatalf("get_threads_id %v: %v", tc.id, out)
			}
		})
	}

	// parent and the path's thread given as CIDs.
	ans := tn.post(t, b, "/api/v1/threads/"+thCID+"/messages", map[string]any{"kind": "answer", "body": "by CID", "parent": msgCID})
	if field(ans, "message", "parent") != "msg_1" || field(ans, "message", "thread") != "th_1" {
		t.Fatalf("parent as CID: %v", ans)
	}
	ansCID := field(ans, "message", "cid").(string)
	out := tn.post(t, a, "/api/v1/threads/th_1/messages", map[string]any{"kind": "note", "body": "reply to the answer", "parent": ansCID, "thread": "th_1"})
	if field(out, "message", "parent") != "msg_3" {
		t.Fatalf("parent as a reply's CID: %v", out)
	}
	// The envelope's thread may name the path's thread by any of its keys.
	for _, tc := range []struct{ name, path, thread string }{
		{"number in the envelope", "th_1", "1"},
		{"number in the path", "1", "th_1"},
		{"realm-prefixed key in the envelope", "th_1", "ainotes:th_1"},
		{"CID in the envelope", "th_1", thCID},
		{"CID in the path", thCID, "th_1"},
	} {
		t.Run("envelope thread/"+tc.name, func(t *testing.T) {
			status, out := tn.do(t, "POST", "/api/v1/threads/"+tc.path+"/messages", b, map[string]any{"kind": "note", "body": tc.name, "thread": tc.thread})
			if status == 400 && field(out, "details", "rule") == "conflict" {
				t.Fatalf("thread %q refused as differing from the path's %q, though both name th_1 (parley.sameKey compares keys without resolving the realm's own name or CIDs): %v", tc.thread, tc.path, out)
			}
			if status != 200 || field(out, "message", "thread") != "th_1" {
				t.Fatalf("%d %v", status, out)
			}
		})
	}
	forumRefused(t, tn, "POST", "/api/v1/threads/th_1/messages", b, map[string]any{"kind": "note", "body": "x", "thread": "th_2"}, 400, "invalid_body")
	if out, isErr := forumCall(t, cs, "post_threads_id_messages", map[string]any{"id": 1, "kind": "note", "body": "numeric parent", "parent": 1}); isErr || field(out, "message", "parent") != "msg_1" {
		t.Fatalf("numbers over MCP: %v", out)
	}
	// A message of another thread is not a parent here, by key or CID.
	forumRefused(t, tn, "POST", "/api/v1/threads/th_1/messages", b, map[string]any{"kind": "note", "body": "x", "parent": field(second, "message", "cid")}, 404, "parent_not_found")
	forumRefused(t, tn, "POST", "/api/v1/threads/th_1/messages", b, map[string]any{"kind": "note", "body": "x", "parent": "msg_2"}, 404, "parent_not_found")
	tree := forumGet(t, tn, "/api/v1/threads/"+thCID, "")
	root := tree["messages"].([]any)[0].(map[string]any)
	if len(root["replies"].([]any)) != 2 {
		t.Fatalf("tree: %v", tree["messages"])
	}
	// null for an optional field is its absence, as answers write it: over
	// HTTP and MCP alike, a null thread on a board opens a thread.
	nulls := map[string]any{"kind": "note", "body": "nulls", "thread": nil, "parent": nil, "provenance": nil}
	if out := tn.post(t, b, "/api/v1/threads/th_1/messages", nulls); field(out, "message", "parent") != nil || field(out, "message", "thread") != "th_1" {
		t.Fatalf("nulls over HTTP: %v", out)
	}
	if out := tn.post(t, b, "/api/v1/boards/1/threads", nulls); field(out, "thread", "id") == "th_1" {
		t.Fatalf("a null thread on a board: %v", out)
	}
	nulls["id"] = "th_1"
	if out, isErr := forumCall(t, cs, "post_threads_id_messages", nulls); isErr || field(out, "message", "thread") != "th_1" {
		t.Fatalf("nulls over MCP: %v", out)
	}
}

// ---------------------------------------------------------------------------
// 6. Claims.

func TestForumClaims(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	b := tn.issue(t, "beta", "write")
	c := tn.issue(t, "critic", "write")
	claim := func(s string) []any { return []any{map[string]any{"statement": s}} }
	getClaim := func(id string) map[string]any {
		t.Helper()
		return forumGet(t, tn, "/api/v1/claims/"+id, "")["claim"].(map[string]any)
	}

	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "claims", "claims": claim("first")}) // cl_1
	cases := []struct {
		name, token string
		env         map[string]any
		old         string // the claim the refine names
		superseded  bool
	}{
		{"same author, new claim, naming the old", a,
			map[string]any{"kind": "refine", "body": "sharper", "relates_to": []string{"cl_1"}, "claims": claim("first, sharper")}, "cl_1", true}, // cl_2
		{"another author", b,
			map[string]any{"kind": "refine", "body": "mine is better", "relates_to": []string{"cl_2"}, "claims": claim("another")}, "cl_2", false}, // cl_3
		{"same author, no new claim", b,
			map[string]any{"kind": "refine", "body": "only words", "relates_to": []string{"cl_3"}}, "cl_3", false},
		{"same author, a note", b,
			map[string]any{"kind": "note", "body": "not a refine", "relates_to": []string{"cl_3"}, "claims": claim("noted")}, "cl_3", false}, // cl_4
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn.post(t, tc.token, "/api/v1/threads/th_1/messages", tc.env)
			old := getClaim(tc.old)
			if got := old["state"] == "superseded"; got != tc.superseded {
				t.Fatalf("%s superseded=%v, want %v: %v", tc.old, got, tc.superseded, old)
			}
			if tc.superseded && old["superseded_by"] != "cl_2" {
				t.Fatalf("superseded_by: %v", old["superseded_by"])
			}
			if !tc.superseded && old["superseded_by"] != nil {
				t.Fatalf("superseded_by set: %v", old["superseded_by"])
			}
		})
	}
	forumRefused(t, tn, "POST", "/api/v1/claims/cl_1/attest", c, map[string]any{"verdict": "supports"}, 409, "claim_superseded")

	// Attestations say who (with the extension) and when.
	before := time.Now().Add(-time.Minute)
	tn.post(t, c, "/api/v1/claims/cl_2/attest", map[string]any{"verdict": "supports", "from": map[string]any{"extension": "checker"}, "note": "reproduced"})
	tn.post(t, b, "/api/v1/claims/cl_2/attest", map[string]any{"verdict": "inconclusive"})
	cl := getClaim("cl_2")
	atts := cl["attestations"].([]any)
	if cl["state"] != "supported" || len(atts) != 2 {
		t.Fatalf("attested claim: %v", cl)
	}
	for i, want := range []struct{ verdict, who, ext string }{{"supports", "ainotes:critic", "checker"}, {"inconclusive", "ainotes:beta", ""}} {
		at := atts[i].(map[string]any)
		when, err := time.Parse(time.RFC3339Nano, at["at"].(string))
		if at["verdict"] != want.verdict || field(at, "by", "identity") != want.who || (field(at, "by", "extension") != nil && field(at, "by", "extension") != want.ext) ||
			err != nil || when.Before(before) || at["cid"] == "" {
			t.Fatalf("attestation %d: %v", i, at)
		}
	}
	if ext := field(atts[0].(map[string]any), "by", "extension"); ext != "checker" {
		t.Fatalf("attestation extension: %v", ext)
	}
	// The author's own support does not lift its claim.
	tn.post(t, b, "/api/v1/claims/cl_3/attest", map[string]any{"verdict": "supports"})
	if cl := getClaim("cl_3"); cl["state"] != "unverified" || len(cl["attestations"].([]any)) != 1 {
		t.Fatalf("self-support: %v", cl)
	}

	all := forumGet(t, tn, "/api/v1/threads/th_1/claims", "")
	states := map[string]string{}
	for _, x := range all["claims"].([]any) {
		m := x.(map[string]any)
		states[m["id"].(string)] = m["state"].(string)
	}
	want := map[string]string{"cl_1": "superseded", "cl_2": "supported", "cl_3": "unverified", "cl_4": "unverified"}
	if all["thread"] != "th_1" || toJSON(states) != toJSON(want) || !forumSame(forumIDs(all, "claims"), []string{"cl_1", "cl_2", "cl_3", "cl_4"}) {
		t.Fatalf("thread claims: %v", all)
	}
	if r, isErr := forumCall(t, forumSession(t, tn, a), "get_threads_id_claims", map[string]any{"id": 1}); isErr || len(r["claims"].([]any)) != 4 {
		t.Fatalf("get_threads_id_claims over MCP: %v", r)
	}
	forumRefused(t, tn, "GET", "/api/v1/threads/th_9/claims", "", nil, 404, "thread_not_found")
}

// ---------------------------------------------------------------------------
// 7. Images.

func forumPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	img.Set(0, 0, color.RGBA{255, 0, 0, 255})
	img.Set(2, 1, color.RGBA{0, 0, 255, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// noisePNG is a PNG of random pixels, which do not compress: about 640 KB,
// over the part size images are stored in.
func noisePNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 400, 400))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range img.Pix {
		img.Pix[i] = byte(rng.Uint32())
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	if buf.Len() <= 256<<10 {
		t.Fatalf("the noise compressed to %d bytes", buf.Len())
	}
	return buf.Bytes()
}

func TestForumImages(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	pic := forumPNG(t)
	b64 := base64.StdEncoding.EncodeToString(pic)

	out := tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "note", "body": "a picture", "image": map[string]any{"data": b64}})
	img, _ := field(out, "message", "image").(map[string]any)
	cid, _ := img["cid"].(string)
	if cid == "" || img["media_type"] != "image/png" || img["url"] != "/api/v1/images/"+cid || img["bytes"] != float64(len(pic)) {
		t.Fatalf("image: %v", img)
	}
	resp, err := http.Get(tn.srv.URL + img["url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || !bytes.Equal(got, pic) {
		t.Fatalf("GET image: %d %s, %d bytes (want %d)", resp.StatusCode, resp.Header.Get("Content-Type"), len(got), len(pic))
	}
	// A client that holds the bytes asks whether they changed: they never do.
	etag := resp.Header.Get("ETag")
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		req, _ := http.NewRequest("GET", tn.srv.URL+img["url"].(string), nil)
		req.Header.Set("If-None-Match", inm)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 304 || len(body) != 0 || resp.Header.Get("ETag") != etag || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("If-None-Match %s: %d, %d bytes, %v", inm, resp.StatusCode, len(body), resp.Header)
		}
	}
	// A tag of an image not held here is no answer for it: 404, as without one.
	missing := protocol.BlobCID([]byte("no such image")).String()
	req, _ := http.NewRequest("GET", tn.srv.URL+"/api/v1/images/"+missing, nil)
	req.Header.Set("If-None-Match", `"`+missing+`"`)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != 404 || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("If-None-Match of a missing image: %d %v", resp.StatusCode, resp.Header)
	}
	// The same bytes as a data: URL are the same blob.
	again := tn.post(t, a, "/api/v1/threads/th_1/messages", map[string]any{"kind": "note", "body": "again", "image": map[string]any{"data": "data:image/png;base64," + b64}})
	if field(again, "message", "image", "cid") != cid {
		t.Fatalf("same bytes, another CID: %v", field(again, "message", "image"))
	}
	if th := forumGet(t, tn, "/api/v1/threads/th_1", ""); field(th["messages"].([]any)[0].(map[string]any), "image", "cid") != cid {
		t.Fatalf("thread tree lacks the image: %v", th)
	}
	resp, err = http.Get(tn.srv.URL + "/api/v1/images/" + field(out, "message", "cid").(string))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("a message CID served as an image: %d", resp.StatusCode)
	}

	// A picture over the store's part size is kept in parts and served whole.
	big := bytes.NewBuffer(noisePNG(t))
	bigOut := tn.post(t, a, "/api/v1/threads/th_1/messages", map[string]any{"kind": "note", "body": "a big picture", "image": map[string]any{"data": base64.StdEncoding.EncodeToString(big.Bytes())}})
	resp, err = http.Get(tn.srv.URL + field(bigOut, "message", "image", "url").(string))
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, big.Bytes()) {
		t.Fatalf("GET big image: %d, %d bytes (want %d)", resp.StatusCode, len(got), big.Len())
	}

	link := "https://example.org/chart.png"
	if out := tn.post(t, a, "/api/v1/threads/th_1/messages", map[string]any{"kind": "note", "body": "a link", "image": map[string]any{"url": link}}); field(out, "message", "image", "url") != link || field(out, "message", "image", "cid") != nil {
		t.Fatalf("image url: %v", field(out, "message", "image"))
	}
	for _, tc := range []struct {
		name   string
		image  map[string]any
		status int
		reason string
		rule   string
	}{
		{"url and data", map[string]any{"url": link, "data": b64}, 400, "invalid_body", "conflict"},
		{"not a URL", map[string]any{"url": "chart.png"}, 400, "invalid_body", ""},
		{"url too long", map[string]any{"url": "https://example.org/" + strings.Repeat("a", 2000)}, 400, "invalid_body", ""},
		{"not base64", map[string]any{"data": "%%%"}, 400, "invalid_body", ""},
		{"neither", map[string]any{}, 400, "image_missing", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := forumRefused(t, tn, "POST", "/api/v1/threads/th_1/messages", a, map[string]any{"kind": "note", "body": "x", "image": tc.image}, tc.status, tc.reason)
			if tc.rule != "" && field(out, "details", "rule") != tc.rule {
				t.Fatalf("details: %v", out)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 8. Extensions.

func TestForumExtensions(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	b := tn.issue(t, "beta", "write")
	w := func(ext string) map[string]any { return map[string]any{"extension": ext} }

	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "from w1", "from": w("w1")})       // msg_1
	tn.post(t, a, "/api/v1/threads/th_1/messages", map[string]any{"kind": "note", "body": "from w2", "from": w("w2")}) // msg_2
	if me := forumGet(t, tn, "/api/v1/me", a); !forumSame(forumStrings(me["extensions"]), []string{"w2", "w1"}) {
		t.Fatalf("extensions: %v", me)
	}
	if me := forumGet(t, tn, "/api/v1/me", b); me["extensions"] == nil || len(me["extensions"].([]any)) != 0 {
		t.Fatalf("no extensions yet: %v", me)
	}

	for _, tc := range []struct {
		name, token, ext string
		status           int
		reason           string
	}{
		{"same identity, other extension", a, "w1", 200, ""},
		{"same identity, no extension", a, "", 200, ""},
		{"other identity, same extension", b, "w2", 200, ""},
		{"same identity, same extension", a, "w2", 409, "self_reply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]any{"kind": "answer", "body": "reply to msg_2", "parent": "msg_2"}
			if tc.ext != "" {
				env["from"] = w(tc.ext)
			}
			status, out := tn.do(t, "POST", "/api/v1/threads/th_1/messages", tc.token, env)
			if status != tc.status || (tc.reason != "" && out["reason"] != tc.reason) {
				t.Fatalf("got %d %v, want %d %s", status, out, tc.status, tc.reason)
			}
			if status == 200 && (field(out, "message", "from", "extension") != nil && field(out, "message", "from", "extension") != tc.ext) {
				t.Fatalf("from: %v", field(out, "message", "from"))
			}
		})
	}
	// A message without an extension is answered by the bare line only from an extension.
	tn.post(t, b, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "bare"}) // th_2, msg_6
	forumRefused(t, tn, "POST", "/api/v1/threads/th_2/messages", b, map[string]any{"kind": "answer", "body": "self", "parent": "msg_6"}, 409, "self_reply")
	tn.post(t, b, "/api/v1/threads/th_2/messages", map[string]any{"kind": "answer", "body": "from a sub-line", "parent": "msg_6", "from": w("reviewer")})
	// Without a parent, an answer answers what the thread awaits: the
	// same line's own ask is refused, another's taken.
	tn.post(t, b, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "no parent"}) // th_3
	forumRefused(t, tn, "POST", "/api/v1/threads/th_3/messages", b, map[string]any{"kind": "answer", "body": "self"}, 409, "self_reply")
	tn.post(t, b, "/api/v1/threads/th_3/messages", map[string]any{"kind": "note", "body": "a note is no answer"})
	tn.post(t, b, "/api/v1/threads/th_3/messages", map[string]any{"kind": "ask", "body": "again"})
	tn.post(t, b, "/api/v1/threads/th_3/messages", map[string]any{"kind": "answer", "body": "from a sub-line", "from": w("reviewer")})
	tn.post(t, a, "/api/v1/threads/th_3/messages", map[string]any{"kind": "answer", "body": "from another line"})

	tn.post(t, a, "/api/v1/threads/th_1/messages", map[string]any{"kind": "note", "body": "w1 again", "from": w("w1")})
	if me := forumGet(t, tn, "/api/v1/me", a); !forumSame(forumStrings(me["extensions"]), []string{"w1", "w2"}) {
		t.Fatalf("extensions after w1 again: %v", me)
	}
	if r, isErr := forumCall(t, forumSession(t, tn, a), "get_me", map[string]any{}); isErr || !forumSame(forumStrings(r["extensions"]), []string{"w1", "w2"}) {
		t.Fatalf("get_me over MCP: %v", r)
	}
	for _, ext := range []string{strings.Repeat("x", 41), "has space", "a:b"} {
		forumRefused(t, tn, "POST", "/api/v1/threads/th_1/messages", a, map[string]any{"kind": "note", "body": "x", "from": w(ext)}, 400, "invalid_body")
	}
	tn.post(t, a, "/api/v1/threads/th_1/messages", map[string]any{"kind": "note", "body": "forty", "from": w(strings.Repeat("x", 40))})
}

// ---------------------------------------------------------------------------
// 9. Durability across a restart, and a rebuild of the projections.

// forumOpenAt opens a node of realm ainotes on dir and serves it; close
// shuts both down (idempotent, and run at cleanup too).
func forumOpenAt(t *testing.T, dir string) (tn *testNode, close func()) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.P2PAddrs = nil // no federation here
	cfg.Realm, cfg.DataDir = "ainotes", dir
	cfg.Logger = slog.New(slog.DiscardHandler)
	n, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	var once sync.Once
	close = func() {
		once.Do(func() {
			srv.Close()
			if err := n.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	t.Cleanup(close)
	secret, err := os.ReadFile(filepath.Join(dir, "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	return &testNode{Node: n, srv: srv, operator: strings.TrimSpace(string(secret))}, close
}

// forumSnapshot reads every projection the durability test compares.
func forumSnapshot(t *testing.T, tn *testNode, token string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range []string{
		"/api/v1/threads/th_1", "/api/v1/threads/th_1/events", "/api/v1/threads/th_1/claims",
		"/api/v1/claims/cl_1", "/api/v1/boards/1", "/api/v1/boards", "/api/v1/threads",
		"/api/v1/boards/1/threads", "/api/v1/me",
	} {
		out[p] = toJSON(forumGet(t, tn, p, token))
	}
	out["/api/v1/inbox?since=0"] = toJSON(forumGet(t, tn, "/api/v1/inbox?since=0", token))
	return out
}

func forumCompare(t *testing.T, step string, want, got map[string]string) {
	t.Helper()
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %s differs:\nbefore %s\n after %s", step, p, w, got[p])
		}
	}
}

func TestForumDurability(t *testing.T) {
	dir := t.TempDir()
	tn, closeNode := forumOpenAt(t, dir)
	a := tn.issue(t, "alpha", "write")
	b := tn.issue(t, "beta", "write")
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "Is the log the truth?",
		"claims": []any{map[string]any{"statement": "Projections can be rebuilt from the log.", "evidence": []any{map[string]any{"kind": "url", "value": "https://example.org/design"}}}}})
	tn.post(t, b, "/api/v1/threads/th_1/messages", map[string]any{"kind": "answer", "body": "Yes.", "parent": "msg_1", "from": map[string]any{"extension": "w1"},
		"image": map[string]any{"data": base64.StdEncoding.EncodeToString(forumPNG(t))}})
	tn.post(t, b, "/api/v1/claims/cl_1/attest", map[string]any{"verdict": "supports", "note": "rebuilt twice"})
	tn.post(t, tn.operator, "/api/v1/threads/th_1/confirm", map[string]any{})
	tn.post(t, b, "/api/v1/threads/th_1/messages", map[string]any{"kind": "ask", "body": "Anything else?", "from": map[string]any{"extension": "w1"}})
	tn.post(t, tn.operator, "/api/v1/threads/th_1/pin", map[string]any{})
	before := forumSnapshot(t, tn, a)
	meB := toJSON(forumGet(t, tn, "/api/v1/me", b))
	imgURL := field(forumGet(t, tn, "/api/v1/threads/th_1", ""), "thread", "id") // sanity: the thread is there
	if imgURL != "th_1" || !strings.Contains(before["/api/v1/claims/cl_1"], `"state":"supported"`) {
		t.Fatalf("setup: %v", before)
	}
	closeNode()

	tn, _ = forumOpenAt(t, dir)
	forumCompare(t, "reopen", before, forumSnapshot(t, tn, a))
	if got := toJSON(forumGet(t, tn, "/api/v1/me", b)); got != meB {
		t.Errorf("reopen: B's extensions %s, want %s", got, meB)
	}
	th := forumGet(t, tn, "/api/v1/threads/th_1", "")
	if field(th, "thread", "state") != "answered" || field(th, "thread", "proposal") != false || field(th, "thread", "message_count") != float64(3) {
		t.Fatalf("thread after reopen: %v", th["thread"])
	}
	if cl := forumGet(t, tn, "/api/v1/claims/cl_1", ""); field(cl, "claim", "state") != "supported" || len(field(cl, "claim", "attestations").([]any)) != 1 {
		t.Fatalf("claim after reopen: %v", cl)
	}
	imgPath := field(th["messages"].([]any)[0].(map[string]any)["replies"].([]any)[0].(map[string]any), "image", "url").(string)
	resp, err := http.Get(tn.srv.URL + imgPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("image after reopen: %d", resp.StatusCode)
	}

	if err := tn.Store().Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	forumCompare(t, "rebuild", before, forumSnapshot(t, tn, a))
	resp, err = http.Get(tn.srv.URL + imgPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("image after rebuild: %d", resp.StatusCode)
	}
	// Numbering goes on where it stopped.
	out := tn.post(t, a, "/api/v1/threads/th_1/messages", map[string]any{"kind": "answer", "body": "Nothing.", "parent": "msg_3"})
	if field(out, "message", "id") != "msg_4" || field(out, "thread", "message_count") != float64(4) {
		t.Fatalf("post after rebuild: %v", out)
	}
	if out := tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "note", "body": "new", "claims": []any{map[string]any{"statement": "s"}}}); field(out, "thread", "id") != "th_2" || field(out, "message", "claims").([]any)[0] != "cl_2" {
		t.Fatalf("open after rebuild: %v", out)
	}
}

// TestForumReopenHigherBeatsLower: what the human closed, only the human
// reopens; a lock holder's close the creator may propose to reopen, and the
// thread stays locked until that proposal is confirmed.
func TestForumReopenHigherBeatsLower(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	b := tn.issue(t, "beta", "write")
	l := tn.issue(t, "moderator", "write", "lock")
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "closed by the human"})
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "closed by a lock holder"})

	tn.post(t, tn.operator, "/api/v1/threads/th_1/close", map[string]any{})
	forumRefused(t, tn, "POST", "/api/v1/threads/th_1/reopen", a, map[string]any{}, 403, "thread_authority_missing")
	forumRefused(t, tn, "POST", "/api/v1/threads/th_1/reopen", l, map[string]any{}, 403, "thread_authority_missing")
	tn.checkThread(t, "the human's close stands", "th_1", threadState{"closed", "user", false, true, true})
	tn.post(t, tn.operator, "/api/v1/threads/th_1/reopen", map[string]any{})
	tn.checkThread(t, "reopened by the human", "th_1", threadState{"open", "user", false, false, true})

	tn.post(t, l, "/api/v1/threads/th_2/close", map[string]any{})
	tn.post(t, a, "/api/v1/threads/th_2/reopen", map[string]any{})
	tn.checkThread(t, "the creator's proposed reopen", "th_2", threadState{"open", "llm", true, true, true})
	// The refusal says what lifts the lock: not another reopen.
	if out := forumRefused(t, tn, "POST", "/api/v1/threads/th_2/messages", b, map[string]any{"kind": "note", "body": "x"}, 409, "thread_closed"); !strings.Contains(out["error"].(string), "confirm") {
		t.Fatalf("the refusal does not say the reopen awaits confirmation: %v", out)
	}
	// Rejected, the close stands; proposed again and confirmed, it opens.
	tn.post(t, l, "/api/v1/threads/th_2/reject", map[string]any{})
	tn.checkThread(t, "the reopen rejected", "th_2", threadState{"closed", "llm", false, true, true})
	tn.post(t, a, "/api/v1/threads/th_2/reopen", map[string]any{})
	tn.post(t, l, "/api/v1/threads/th_2/confirm", map[string]any{})
	tn.checkThread(t, "the reopen confirmed", "th_2", threadState{"open", "llm", false, false, true})
	tn.post(t, b, "/api/v1/threads/th_2/messages", map[string]any{"kind": "note", "body": "open again"})
}

// TestForumThreadPages: both thread listings page with limit and offset,
// has_more telling whether a next page exists; together the pages list
// every thread once.
func TestForumThreadPages(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	for range 5 {
		tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "a thread"})
	}
	for _, base := range []string{"/api/v1/threads?limit=2", "/api/v1/boards/1/threads?limit=2"} {
		seen := map[string]bool{}
		for i, more := range []bool{true, true, false} {
			_, out := tn.do(t, "GET", base+"&offset="+itoa(uint64(2*i)), "", nil)
			page, _ := out["threads"].([]any)
			if out["has_more"] != more || len(page) != min(2, 5-2*i) {
				t.Fatalf("%s, page %d: %v", base, i, out)
			}
			for _, th := range page {
				seen[th.(map[string]any)["id"].(string)] = true
			}
		}
		if len(seen) != 5 {
			t.Fatalf("%s: %d threads over the pages", base, len(seen))
		}
		forumRefused(t, tn, "GET", base+"&offset=-1", "", nil, 400, "invalid_body")
		if st, out := tn.do(t, "GET", base+"&offset=9223372036854775807", "", nil); st != 200 || out["has_more"] != false || len(out["threads"].([]any)) != 0 {
			t.Fatalf("%s at the largest offset: %d %v", base, st, out)
		}
	}
	// Over MCP too, where a panic would not be recovered.
	cs, err := tn.mcpSession(t, a)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_threads", Arguments: map[string]any{"offset": int64(9223372036854775807)}})
	if err != nil || res.IsError {
		t.Fatalf("get_threads at the largest offset over MCP: %v %v", err, res)
	}
}

// TestForumTextsRefuseControlCharacters: what a client names or describes
// holds no control character but newline and tab, as the envelope's body,
// and a board's slug is not digits only, which name boards by number.
func TestForumTextsRefuseControlCharacters(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	for _, tc := range []struct {
		name, path, token string
		body              map[string]any
		field, rule       string
	}{
		{"board name", "/api/v1/boards", a, map[string]any{"slug": "esc", "name": "\x1b[2J"}, "name", "control_character"},
		{"board description", "/api/v1/boards", a, map[string]any{"slug": "nul", "name": "n", "description": "a\x00b"}, "description", "control_character"},
		{"board slug of digits", "/api/v1/boards", a, map[string]any{"slug": "2", "name": "two"}, "slug", "format"},
		{"feature title", "/api/v1/features", a, map[string]any{"title": "t\x07", "body": "b"}, "title", "control_character"},
		{"token label", "/api/v1/tokens", tn.operator, map[string]any{"label": "x\x1b"}, "label", "control_character"},
		{"application", "/api/v1/tokens/request", "", func() map[string]any { m := forumApplication("ok"); m["purpose"] = "p\x1b[2J"; return m }(), "purpose", "control_character"},
		{"close note", "/api/v1/threads/th_1/close", tn.operator, map[string]any{"note": "\x1b"}, "note", "control_character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "close note" {
				tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "q"})
			}
			out := forumRefused(t, tn, "POST", tc.path, tc.token, tc.body, 400, "invalid_body")
			if field(out, "details", "field") != tc.field || field(out, "details", "rule") != tc.rule {
				t.Fatalf("details: %v", out)
			}
		})
	}
	// Newlines and tabs are text.
	tn.post(t, a, "/api/v1/boards", map[string]any{"slug": "b2", "name": "two", "description": "line\n\tand more"})
}

// TestForumClosedSets: the speech acts and thread states are enums of the
// operations' inputs, in the OpenAPI document and in tools/list, and a
// word outside them is refused in their words on both transports; an empty
// ?state= is no filter, as before.
func TestForumClosedSets(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	acts := make([]any, len(protocol.Acts))
	for i, act := range protocol.Acts {
		acts[i] = string(act)
	}
	states := []any{""}
	for _, st := range protocol.States {
		states = append(states, string(st))
	}

	doc := forumGet(t, tn, "/openapi.json", "")
	post := field(doc, "paths", "/api/v1/threads/{id}/messages", "post", "requestBody", "content", "application/json", "schema", "properties", "kind", "enum")
	if !reflect.DeepEqual(post, acts) {
		t.Errorf("the OpenAPI kind: %v", post)
	}
	params, _ := field(doc, "paths", "/api/v1/threads", "get", "parameters").([]any)
	var stateEnum any
	for _, p := range params {
		if p := p.(map[string]any); p["name"] == "state" {
			stateEnum = field(p, "schema", "enum")
		}
	}
	if !reflect.DeepEqual(stateEnum, states) {
		t.Errorf("the OpenAPI state filter: %v", stateEnum)
	}

	cs := forumSession(t, tn, a)
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name != "post_threads_id_messages" {
			continue
		}
		b, _ := json.Marshal(tool.InputSchema)
		var schema map[string]any
		json.Unmarshal(b, &schema)
		if got := field(schema, "properties", "kind", "enum"); !reflect.DeepEqual(got, acts) {
			t.Errorf("tools/list kind: %v", got)
		}
	}

	tn.post(t, a, "/api/v1/boards/lobby/threads", map[string]any{"kind": "note", "body": "x"})
	out := forumRefused(t, tn, "POST", "/api/v1/threads/th_1/messages", a, map[string]any{"kind": "question", "body": "x"}, 400, "invalid_body")
	if field(out, "details", "field") != "kind" || field(out, "details", "rule") != "enum" {
		t.Errorf("over HTTP: %v", out)
	}
	r, isErr := forumCall(t, cs, "post_threads_id_messages", map[string]any{"id": "th_1", "kind": "question", "body": "x"})
	if !isErr || r["reason"] != "invalid_body" || field(r, "details", "field") != "kind" || field(r, "details", "rule") != "enum" {
		t.Errorf("over MCP: %v", r)
	}
	forumRefused(t, tn, "GET", "/api/v1/threads?state=paused", a, nil, 400, "invalid_body")
	if ids := forumIDs(forumGet(t, tn, "/api/v1/threads?state=", a), "threads"); len(ids) != 1 {
		t.Errorf("?state= lists %v", ids)
	}
}

// closedSetCase is a closed set of words an operation's input takes: where
// its enum is in the input schema, the words, and a request with a word
// outside it, over HTTP and over MCP, and the field the refusal names.
type closedSetCase struct {
	name, tool, method, path string
	schema                   []string // the path to the enum in the input schema; a GET's: the query parameter's name
	words                    []any
	token                    string
	httpPath                 string
	body                     map[string]any
	args                     map[string]any
	field                    string
}

// closedSetWords are a set's words as a schema's enum holds them.
func closedSetWords[T ~string](values []T) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// checkClosedSets checks each set in the OpenAPI document and in
// tools/list, and the refusal of a word outside it on both transports.
func checkClosedSets(t *testing.T, tn *testNode, cases []closedSetCase) {
	t.Helper()
	doc := forumGet(t, tn, "/openapi.json", "")
	tools := map[string]map[string]any{}
	cs := forumSession(t, tn, tn.operator)
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		b, _ := json.Marshal(tool.InputSchema)
		var schema map[string]any
		json.Unmarshal(b, &schema)
		tools[tool.Name] = schema
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op := strings.ToLower(tc.method)
			if tc.method == "GET" {
				var got any
				params, _ := field(doc, "paths", tc.path, op, "parameters").([]any)
				for _, p := range params {
					if p := p.(map[string]any); p["name"] == tc.schema[0] {
						got = field(p, "schema", "enum")
					}
				}
				if want := append([]any{""}, tc.words...); !reflect.DeepEqual(got, want) {
					t.Errorf("the OpenAPI parameter %s: %v, want %v", tc.schema[0], got, want)
				}
				if got := field(tools[tc.tool], "properties", tc.schema[0], "enum"); !reflect.DeepEqual(got, tc.words) {
					t.Errorf("tools/list %s: %v, want %v", tc.schema[0], got, tc.words)
				}
			} else {
				path := append([]string{"paths", tc.path, op, "requestBody", "content", "application/json", "schema"}, tc.schema...)
				if got := field(doc, path...); !reflect.DeepEqual(got, tc.words) {
					t.Errorf("the OpenAPI document: %v, want %v", got, tc.words)
				}
				if got := field(tools[tc.tool], tc.schema...); !reflect.DeepEqual(got, tc.words) {
					t.Errorf("tools/list: %v, want %v", got, tc.words)
				}
			}
			var body any
			if tc.body != nil {
				body = tc.body
			}
			out := forumRefused(t, tn, tc.method, tc.httpPath, tc.token, body, 400, "invalid_body")
			if field(out, "details", "field") != tc.field || field(out, "details", "rule") != "enum" {
				t.Errorf("over HTTP: %v", out)
			}
			cs := forumSession(t, tn, tc.token)
			r, isErr := forumCall(t, cs, tc.tool, tc.args)
			if !isErr || r["reason"] != "invalid_body" || field(r, "details", "field") != tc.field || field(r, "details", "rule") != "enum" {
				t.Errorf("over MCP: %v", r)
			}
		})
	}
}

// TestForumClosedSetsOfOtherInputs: verdicts, evidence kinds, a feature
// request's status, an access review's decision and the requests' status
// filter are enums of the inputs, as the speech acts are.
func TestForumClosedSetsOfOtherInputs(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.issue(t, "alpha", "write")
	tn.post(t, a, "/api/v1/boards/lobby/threads", map[string]any{"kind": "note", "body": "x", "claims": []any{map[string]any{"statement": "s"}}})
	tn.post(t, a, "/api/v1/features", map[string]any{"title": "a tool", "body": "it would help"})
	tn.post(t, "", "/api/v1/tokens/request", forumApplication("Newbie"))
	bad := []any{map[string]any{"kind": "rumour", "value": "v"}}
	kinds := closedSetWords(protocol.EvidenceKinds)
	checkClosedSets(t, tn, []closedSetCase{
		{name: "verdict", tool: "post_claims_id_attest", method: "POST", path: "/api/v1/claims/{id}/attest",
			schema: []string{"properties", "verdict", "enum"}, words: closedSetWords(protocol.Verdicts), token: a,
			httpPath: "/api/v1/claims/cl_1/attest", body: map[string]any{"verdict": "agrees"},
			args: map[string]any{"id": "cl_1", "verdict": "agrees"}, field: "verdict"},
		{name: "evidence of an attestation", tool: "post_claims_id_attest", method: "POST", path: "/api/v1/claims/{id}/attest",
			schema: []string{"properties", "evidence", "items", "properties", "kind", "enum"}, words: kinds, token: a,
			httpPath: "/api/v1/claims/cl_1/attest", body: map[string]any{"verdict": "refutes", "evidence": bad},
			args: map[string]any{"id": "cl_1", "verdict": "refutes", "evidence": bad}, field: "evidence[0].kind"},
		{name: "evidence of a claim", tool: "post_threads_id_messages", method: "POST", path: "/api/v1/threads/{id}/messages",
			schema: []string{"properties", "claims", "items", "properties", "evidence", "items", "properties", "kind", "enum"}, words: kinds, token: a,
			httpPath: "/api/v1/threads/th_1/messages", body: map[string]any{"kind": "note", "body": "x", "claims": []any{map[string]any{"statement": "s", "evidence": bad}}},
			args: map[string]any{"id": "th_1", "kind": "note", "body": "x", "claims": []any{map[string]any{"statement": "s", "evidence": bad}}}, field: "claims[0].evidence[0].kind"},
		{name: "evidence of a refutation", tool: "post_threads_id_messages", method: "POST", path: "/api/v1/threads/{id}/messages",
			schema: []string{"properties", "evidence", "items", "properties", "kind", "enum"}, words: kinds, token: a,
			httpPath: "/api/v1/threads/th_1/messages", body: map[string]any{"kind": "refute", "body": "x", "refutes": []string{"cl_1"}, "evidence": bad},
			args: map[string]any{"id": "th_1", "kind": "refute", "body": "x", "refutes": []string{"cl_1"}, "evidence": bad}, field: "evidence[0].kind"},
		{name: "feature decision", tool: "post_features_id_status", method: "POST", path: "/api/v1/features/{id}/status",
			schema: []string{"properties", "status", "enum"}, words: closedSetWords(parley.FeatureStatuses), token: tn.operator,
			httpPath: "/api/v1/features/1/status", body: map[string]any{"status": "maybe"},
			args: map[string]any{"id": 1, "status": "maybe"}, field: "status"},
		{name: "feature filter", tool: "get_features", method: "GET", path: "/api/v1/features",
			schema: []string{"status"}, words: closedSetWords(parley.FeatureStatuses), token: a,
			httpPath: "/api/v1/features?status=nope", args: map[string]any{"status": "nope"}, field: "status"},
		{name: "review decision", tool: "post_token_requests_id_review", method: "POST", path: "/api/v1/token-requests/{id}/review",
			schema: []string{"properties", "decision", "enum"}, words: closedSetWords(Decisions), token: tn.operator,
			httpPath: "/api/v1/token-requests/1/review", body: map[string]any{"decision": "maybe"},
			args: map[string]any{"id": 1, "decision": "maybe"}, field: "decision"},
		{name: "requests filter", tool: "get_token_requests", method: "GET", path: "/api/v1/token-requests",
			schema: []string{"status"}, words: closedSetWords(RequestStatuses), token: tn.operator,
			httpPath: "/api/v1/token-requests?status=nope", args: map[string]any{"status": "nope"}, field: "status"},
	})
	// An empty filter is no filter; a word of the set filters.
	if ids := forumIDs(forumGet(t, tn, "/api/v1/features?status=", a), "features"); len(ids) != 1 {
		t.Errorf("?status= lists features %v", ids)
	}
	if ids := forumIDs(forumGet(t, tn, "/api/v1/token-requests?status=", tn.operator), "requests"); len(ids) != 1 {
		t.Errorf("?status= lists requests %v", ids)
	}
	if ids := forumIDs(forumGet(t, tn, "/api/v1/token-requests?status=approved", tn.operator), "requests"); len(ids) != 0 {
		t.Errorf("?status=approved lists requests %v", ids)
	}
	// The stored records' schemas list no enum: an output is what was stored.
	if got := field(forumGet(t, tn, "/openapi.json", ""), "paths", "/api/v1/features/{id}/status", "post", "responses", "200", "content", "application/json", "schema", "properties", "feature", "properties", "status"); got == nil || field(got.(map[string]any), "enum") != nil {
		t.Errorf("an output lists %v", got)
	}
}
