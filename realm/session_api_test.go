package realm

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"relay/realm/session"
)

// sessionDo sends a request carrying the human's session cookie (and the
// CSRF header when csrf is set), and decodes the JSON answer.
func (tn *testNode) sessionDo(t *testing.T, method, path, cookie, csrf, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, tn.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.AddCookie(&http.Cookie{Name: session.CookieName, Value: cookie})
	if csrf != "" {
		req.Header.Set(session.CSRFHeader, csrf)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestSessionOverAPI: the seed's reasons for the human's browser session.
// The session is the human on the Parley API; a write over it without the
// CSRF token is csrf; MCP refuses it with token_required; and human-only
// operations refuse agent tokens with user_session_required.
func TestSessionOverAPI(t *testing.T) {
	tn := startNode(t, "ainotes")
	cookie, _, err := tn.sessions.Create(context.Background(), session.ViaSecret)
	if err != nil {
		t.Fatal(err)
	}
	csrf := session.CSRFToken(cookie)

	if status, out := tn.sessionDo(t, "GET", "/api/v1/me", cookie, "", ""); status != 200 || out["identity"] != "human:operator" || out["human"] != true {
		t.Fatalf("me over a session: %d %v", status, out)
	}
	issue := `{"label":"via-session","rights":["write"]}`
	for _, bad := range []string{"", "nope", csrf[:len(csrf)-1]} {
		if status, out := tn.sessionDo(t, "POST", "/api/v1/tokens", cookie, bad, issue); status != 403 || out["reason"] != "csrf" {
			t.Fatalf("write with csrf %q: %d %v", bad, status, out)
		}
	}
	// Even a public write is a session write once the cookie is sent.
	if status, out := tn.sessionDo(t, "POST", "/api/v1/tokens/request", cookie, "", `{"label":"a","purpose":"p","model":"m","client":"c","provider":"p","contact":"c"}`); status != 403 || out["reason"] != "csrf" {
		t.Fatalf("public write over a session without csrf: %d %v", status, out)
	}
	status, out := tn.sessionDo(t, "POST", "/api/v1/tokens", cookie, csrf, issue)
	if status != 200 || out["identity"] != "ainotes:via-session" {
		t.Fatalf("write with csrf: %d %v", status, out)
	}
	agent := out["token"].(string)

	// MCP: a session cookie is not a token.
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	if status, out := tn.sessionDo(t, "POST", "/api/v1/mcp", cookie, csrf, init); status != 401 || out["reason"] != "token_required" {
		t.Fatalf("MCP with a session: %d %v", status, out)
	}

	// Human-only operations refuse an agent's token, over HTTP and MCP.
	th := tn.post(t, agent, "/api/v1/boards/lobby/threads", map[string]any{"kind": "ask", "body": "Who may forbid replies?"})
	tid := field(th, "thread", "id").(string)
	for _, tc := range []struct{ path, body string }{
		{"/api/v1/tokens", `{"label":"x"}`},
		{"/api/v1/threads/" + tid + "/llm-replies", `{"forbidden":true}`},
		{"/api/v1/tokens/1/revoke", `{}`},
	} {
		req, _ := http.NewRequest("POST", tn.srv.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+agent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != 403 || out["reason"] != "user_session_required" {
			t.Errorf("POST %s as an agent: %d %v", tc.path, resp.StatusCode, out)
		}
	}
	cs := forumSession(t, tn, agent)
	if res, isErr := forumCall(t, cs, "post_threads_id_llm_replies", map[string]any{"id": tid, "forbidden": true}); !isErr || res["reason"] != "user_session_required" {
		t.Fatalf("MCP human-only as an agent: %v", res)
	}
	// The session may (with its CSRF token): it is the human.
	if status, out := tn.sessionDo(t, "POST", "/api/v1/threads/"+tid+"/llm-replies", cookie, csrf, `{"forbidden":true}`); status != 200 || field(out, "thread", "llm_reply_forbidden") != true {
		t.Fatalf("human-only over a session: %d %v", status, out)
	}

	// An ended session is no one: reads are anonymous, writes unauthenticated.
	if err := tn.sessions.End(context.Background(), cookie); err != nil {
		t.Fatal(err)
	}
	if status, out := tn.sessionDo(t, "GET", "/api/v1/me", cookie, "", ""); status != 401 || out["reason"] != "unauthenticated" {
		t.Fatalf("me after logout: %d %v", status, out)
	}
}
