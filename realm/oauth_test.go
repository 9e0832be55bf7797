package realm

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"relay/store"
)

// oauthClientT drives the authorization server over plain HTTP, as a
// headless client: no redirect is followed, the code is read from Location.
type oauthClientT struct {
	base     string // the node's URL
	hc       *http.Client
	id       string
	secret   string
	redirect string
	// at is where authorize and token are: /oauth, or "" for the paths
	// the seed names.
	at string
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func getJSON(t *testing.T, u string) (int, http.Header, map[string]any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header, out
}

func postJSON(t *testing.T, u string, body any) (int, http.Header, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(u, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header, out
}

// registerOAuthClient registers a client by RFC 7591.
func registerOAuthClient(t *testing.T, base string, md map[string]any) (int, map[string]any) {
	t.Helper()
	status, _, out := postJSON(t, base+"/oauth/register", md)
	return status, out
}

func newOAuthClient(t *testing.T, base string, md map[string]any) *oauthClientT {
	t.Helper()
	if md == nil {
		md = map[string]any{"redirect_uris": []string{"http://127.0.0.1:53682/callback"}, "token_endpoint_auth_method": "none",
			"grant_types": []string{"authorization_code", "refresh_token"}, "client_name": "relay test"}
	}
	status, out := registerOAuthClient(t, base, md)
	if status != 201 {
		t.Fatalf("register client: %d %v", status, out)
	}
	c := &oauthClientT{base: base, hc: noRedirect, id: out["client_id"].(string), redirect: md["redirect_uris"].([]string)[0], at: "/oauth"}
	c.secret, _ = out["client_secret"].(string)
	return c
}

func pkcePair() (verifier, challenge string) {
	verifier = rand.Text() + rand.Text() // 52 base32 characters: unreserved
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorize runs /oauth/authorize and returns the status and the Location's
// query (code, state, iss, or error).
func (c *oauthClientT) authorize(t *testing.T, params url.Values) (int, url.Values, *url.URL) {
	t.Helper()
	resp, err := c.hc.Get(c.base + c.at + "/authorize?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return resp.StatusCode, nil, nil
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, loc.Query(), loc
}

func (c *oauthClientT) authParams(challenge, scope string) url.Values {
	v := url.Values{"response_type": {"code"}, "client_id": {c.id}, "redirect_uri": {c.redirect},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "state": {"st-1"},
		"resource": {c.base + "/mcp"}}
	if scope != "" {
		v.Set("scope", scope)
	}
	return v
}

// code runs a successful authorization and returns its code.
func (c *oauthClientT) code(t *testing.T, challenge, scope string) string {
	t.Helper()
	status, q, _ := c.authorize(t, c.authParams(challenge, scope))
	if status != http.StatusFound || q.Get("code") == "" || q.Get("state") != "st-1" || q.Get("iss") != c.base {
		t.Fatalf("authorize: %d %v", status, q)
	}
	return q.Get("code")
}

// tokenRequest posts to /oauth/token.
func (c *oauthClientT) tokenRequest(t *testing.T, form url.Values) (int, http.Header, map[string]any) {
	t.Helper()
	if c.secret == "" {
		form.Set("client_id", c.id)
	}
	req, _ := http.NewRequest("POST", c.base+c.at+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.secret != "" {
		req.SetBasicAuth(url.QueryEscape(c.id), url.QueryEscape(c.secret))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header, out
}

func (c *oauthClientT) exchange(t *testing.T, code, verifier string) (int, map[string]any) {
	t.Helper()
	status, _, out := c.tokenRequest(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
		"redirect_uri": {c.redirect}, "resource": {c.base + "/mcp"}})
	return status, out
}

// grant runs the whole flow and returns an access token for scope.
func (c *oauthClientT) grant(t *testing.T, scope string) map[string]any {
	t.Helper()
	v, ch := pkcePair()
	status, out := c.exchange(t, c.code(t, ch, scope), v)
	if status != 200 {
		t.Fatalf("token: %d %v", status, out)
	}
	return out
}

// mcpCall posts one JSON-RPC message to /mcp with token and Host.
func mcpCall(t *testing.T, base, host, token string, msg string) (*http.Response, []byte) {
	t.Helper()
	return mcpCallAs(t, base, host, token, "2025-06-18", msg)
}

// mcpCallVersion is mcpCall at another protocol version, on the node's name.
func mcpCallVersion(t *testing.T, base, token, version, msg string) (*http.Response, []byte) {
	t.Helper()
	return mcpCallAs(t, base, "", token, version, msg)
}

func mcpCallAs(t *testing.T, base, host, token, version, msg string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", version)
	if host != "" {
		req.Host = host
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

func TestOAuthDiscovery(t *testing.T) {
	tn := startNode(t, "ainotes")
	base := tn.srv.URL

	// 401 names the protected-resource metadata.
	resp, _ := mcpCall(t, base, "", "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	challenges, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if resp.StatusCode != 401 || err != nil || len(challenges) != 1 || challenges[0].Scheme != "bearer" {
		t.Fatalf("401: %d %v %v", resp.StatusCode, resp.Header, err)
	}
	prmURL := challenges[0].Params["resource_metadata"]
	if prmURL != base+"/.well-known/oauth-protected-resource/mcp" {
		t.Fatalf("resource_metadata = %q", prmURL)
	}
	prm, err := oauthex.GetProtectedResourceMetadata(t.Context(), prmURL, base+"/mcp", http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != base || strings.Join(prm.ScopesSupported, " ") != "toastmachine:read toastmachine:write" {
		t.Fatalf("protected-resource metadata: %+v", prm)
	}
	if status, _, root := getJSON(t, base+"/.well-known/oauth-protected-resource"); status != 200 || root["resource"] != base+"/mcp" {
		t.Fatalf("root protected-resource metadata: %d %v", status, root)
	}
	asm, err := oauthex.GetAuthServerMeta(t.Context(), base+"/.well-known/oauth-authorization-server", base, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if asm.AuthorizationEndpoint != base+"/oauth/authorize" || asm.TokenEndpoint != base+"/oauth/token" || asm.RegistrationEndpoint != base+"/oauth/register" ||
		strings.Join(asm.ResponseTypesSupported, ",") != "code" || strings.Join(asm.CodeChallengeMethodsSupported, ",") != "S256" ||
		!asm.AuthorizationResponseIssParameterSupported {
		t.Fatalf("authorization-server metadata: %+v", asm)
	}
	// The corpus's agent registration keeps POST /register.
	if status, out := tn.do(t, "POST", "/register", "", nil); status != 201 || out["agent_id"] == nil {
		t.Fatalf("POST /register: %d %v", status, out)
	}
}

func TestOAuthRegistration(t *testing.T) {
	tn := startNode(t, "ainotes")
	base := tn.srv.URL
	var refused = []struct {
		name string
		md   map[string]any
		code string
	}{
		{"no redirect", map[string]any{"token_endpoint_auth_method": "none"}, "invalid_redirect_uri"},
		{"http off loopback", map[string]any{"redirect_uris": []string{"http://example.com/cb"}}, "invalid_redirect_uri"},
		{"custom scheme", map[string]any{"redirect_uris": []string{"myapp://cb"}}, "invalid_redirect_uri"},
		{"fragment", map[string]any{"redirect_uris": []string{"https://example.com/cb#x"}}, "invalid_redirect_uri"},
		{"relative", map[string]any{"redirect_uris": []string{"/cb"}}, "invalid_redirect_uri"},
		{"implicit", map[string]any{"redirect_uris": []string{"https://example.com/cb"}, "response_types": []string{"token"}}, "invalid_client_metadata"},
		{"password grant", map[string]any{"redirect_uris": []string{"https://example.com/cb"}, "grant_types": []string{"password"}}, "invalid_client_metadata"},
		{"auth method", map[string]any{"redirect_uris": []string{"https://example.com/cb"}, "token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata"},
	}
	for _, c := range refused {
		if status, out := registerOAuthClient(t, base, c.md); status != 400 || out["error"] != c.code {
			t.Errorf("%s: %d %v", c.name, status, out)
		}
	}
	// A fresh node: the refusals above spent this address's registrations.
	tn = startNode(t, "ainotes")
	base = tn.srv.URL
	for _, u := range []string{"http://127.0.0.1:8765/cb", "http://[::1]:8765/cb", "http://localhost/cb", "https://client.example/cb?x=1"} {
		status, out := registerOAuthClient(t, base, map[string]any{"redirect_uris": []string{u}, "token_endpoint_auth_method": "none"})
		if status != 201 || out["client_id"] == nil || out["client_secret"] != nil {
			t.Errorf("register %s: %d %v", u, status, out)
		}
	}
	// Without a method the client is confidential (RFC 7591's default).
	status, out := registerOAuthClient(t, base, map[string]any{"redirect_uris": []string{"https://client.example/cb"}})
	if status != 201 || out["token_endpoint_auth_method"] != "client_secret_basic" || out["client_secret"] == nil {
		t.Fatalf("confidential: %d %v", status, out)
	}
	// Rate-limited per address: 10 a minute.
	limited := false
	for range 12 {
		if status, h, out := postJSON(t, base+"/oauth/register", map[string]any{"redirect_uris": []string{"https://client.example/cb"}}); status == 429 {
			limited = out["error"] != nil && h.Get("Cache-Control") == "no-store"
			break
		}
	}
	if !limited {
		t.Fatal("registration is not rate-limited")
	}
}

func TestOAuthAuthorizationCode(t *testing.T) {
	tn := startNode(t, "ainotes")
	base := tn.srv.URL
	c := newOAuthClient(t, base, nil)

	// No consent: the answer is the redirect, with code, state and iss.
	verifier, challenge := pkcePair()
	status, q, loc := c.authorize(t, c.authParams(challenge, "toastmachine:read toastmachine:write"))
	if status != 302 || q.Get("code") == "" || q.Get("state") != "st-1" || q.Get("iss") != base || loc.Host != "127.0.0.1:53682" || loc.Path != "/callback" {
		t.Fatalf("authorize: %d %v", status, loc)
	}
	code := q.Get("code")

	// Not redirected: an unknown client or a redirect URI not registered.
	bad := c.authParams(challenge, "")
	bad.Set("redirect_uri", "http://127.0.0.1:53682/other")
	if status, _, _ := c.authorize(t, bad); status != 400 {
		t.Fatalf("unregistered redirect_uri: %d", status)
	}
	bad = c.authParams(challenge, "")
	bad.Set("client_id", "rlc_0000000000000000")
	if status, _, _ := c.authorize(t, bad); status != 400 {
		t.Fatalf("unknown client: %d", status)
	}
	// Redirected with an error: PKCE missing or plain, response type, resource, scope.
	var redirected = []struct {
		name string
		set  map[string]string
		code string
	}{
		{"plain", map[string]string{"code_challenge_method": "plain", "code_challenge": verifier}, "invalid_request"},
		{"no method", map[string]string{"code_challenge_method": ""}, "invalid_request"},
		{"no challenge", map[string]string{"code_challenge": ""}, "invalid_request"},
		{"token", map[string]string{"response_type": "token"}, "unsupported_response_type"},
		{"other resource", map[string]string{"resource": "https://elsewhere.example/mcp"}, "invalid_target"},
		{"unknown scopes only", map[string]string{"scope": "admin root"}, "invalid_scope"},
	}
	for _, r := range redirected {
		p := c.authParams(challenge, "")
		for k, v := range r.set {
			if v == "" {
				p.Del(k)
			} else {
				p.Set(k, v)
			}
		}
		if status, q, _ := c.authorize(t, p); status != 302 || q.Get("error") != r.code || q.Get("state") != "st-1" || q.Get("code") != "" {
			t.Errorf("%s: %d %v", r.name, status, q)
		}
	}

	// A wrong verifier is refused, and the code is spent by the attempt.
	other, _ := pkcePair()
	if status, out := c.exchange(t, code, other); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("wrong verifier: %d %v", status, out)
	}
	if status, out := c.exchange(t, code, verifier); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("a code after a failed attempt: %d %v", status, out)
	}
	// A wrong redirect_uri is refused.
	code = c.code(t, challenge, "")
	if status, _, out := c.tokenRequest(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
		"redirect_uri": {"http://127.0.0.1:53682/other"}}); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("wrong redirect_uri: %d %v", status, out)
	}
	// A code for a verifier the client never had: plain would pass it.
	_, plainChallenge := pkcePair()
	code = c.code(t, plainChallenge, "")
	if status, out := c.exchange(t, code, plainChallenge); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("the challenge as verifier (plain): %d %v", status, out)
	}

	// Success, then the same code again: refused, and its tokens revoked.
	code = c.code(t, challenge, "toastmachine:read toastmachine:write")
	status, hdr, tok := c.tokenRequest(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
		"redirect_uri": {c.redirect}, "resource": {base + "/mcp"}})
	if status != 200 || tok["token_type"] != "Bearer" || tok["expires_in"] != float64(3600) || tok["scope"] != "toastmachine:read toastmachine:write" ||
		tok["refresh_token"] == nil || hdr.Get("Cache-Control") != "no-store" {
		t.Fatalf("token: %d %v %v", status, tok, hdr)
	}
	access := tok["access_token"].(string)
	if resp, _ := mcpCall(t, base, "", access, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 200 {
		t.Fatalf("ping with the token: %d", resp.StatusCode)
	}
	if status, out := c.exchange(t, code, verifier); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("code reuse: %d %v", status, out)
	}
	if resp, _ := mcpCall(t, base, "", access, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 401 {
		t.Fatalf("a token of a replayed code still works: %d", resp.StatusCode)
	}

	// Refresh rotates; a scope wider than the grant's is refused.
	refresh := func(rt string) (int, map[string]any) {
		status, _, out := c.tokenRequest(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
		return status, out
	}
	revoked := func(what string, tok map[string]any) {
		t.Helper()
		if resp, _ := mcpCall(t, base, "", tok["access_token"].(string), `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 401 {
			t.Fatalf("%s: its access token still works: %d", what, resp.StatusCode)
		}
		if status, out := refresh(tok["refresh_token"].(string)); status != 400 || out["error"] != "invalid_grant" {
			t.Fatalf("%s: its refresh token still works: %d %v", what, status, out)
		}
	}
	tok = c.grant(t, "toastmachine:read")
	status, fresh := refresh(tok["refresh_token"].(string))
	if status != 200 || fresh["access_token"] == nil || fresh["refresh_token"] == tok["refresh_token"] || fresh["scope"] != "toastmachine:read" {
		t.Fatalf("refresh: %d %v", status, fresh)
	}
	if status, _, out := c.tokenRequest(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {fresh["refresh_token"].(string)},
		"scope": {"toastmachine:write"}}); status != 400 || out["error"] != "invalid_scope" {
		t.Fatalf("refresh widening the scope: %d %v", status, out)
	}
	// The rotated refresh token again, at once (two refreshes sent
	// together, or one retried): refused, and what the first got stands.
	if status, out := refresh(tok["refresh_token"].(string)); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("rotated refresh token: %d %v", status, out)
	}
	if resp, _ := mcpCall(t, base, "", fresh["access_token"].(string), `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 200 {
		t.Fatalf("the refreshed access token after its old refresh token came back at once: %d", resp.StatusCode)
	}
	// A code replayed after a refresh revokes what the refresh issued too.
	code = c.code(t, challenge, "toastmachine:read")
	status, first := c.exchange(t, code, verifier)
	if status != 200 {
		t.Fatalf("token: %d %v", status, first)
	}
	if status, fresh = refresh(first["refresh_token"].(string)); status != 200 {
		t.Fatalf("refresh: %d %v", status, fresh)
	}
	if status, out := c.exchange(t, code, verifier); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("code reuse: %d %v", status, out)
	}
	revoked("a grant whose code was replayed", fresh)
	if status, _, out := c.tokenRequest(t, url.Values{"grant_type": {"password"}}); status != 400 || out["error"] != "unsupported_grant_type" {
		t.Fatalf("password grant: %d %v", status, out)
	}
}

// TestOAuthSeedPaths: /authorize and /token, where the seed's MCP host has
// them, are the same endpoints as those the metadata advertises.
// TestOAuthMetadataMethods: the metadata documents answer other methods
// than GET with the corpus's 405 and Allow, not a line of text.
func TestOAuthMetadataMethods(t *testing.T) {
	tn := startNode(t, "ainotes")
	for _, path := range []string{oauthPRMetadataPath, oauthPRMetadataPath + corpusMCPPath, oauthASMetadataPath} {
		st, b, h := tn.send(t, "POST", path, nil)
		var out map[string]any
		json.Unmarshal(b, &out)
		if st != 405 || h.Get("Allow") == "" || corpusCode(out) != "method_not_allowed" {
			t.Errorf("POST %s: %d %v %s", path, st, h, b)
		}
	}
}

// TestOAuthMetadataHead: the metadata documents answer HEAD as GET
// without the body (RFC 9110, section 9.3.2), as JSON that is not sniffed.
func TestOAuthMetadataHead(t *testing.T) {
	tn := startNode(t, "ainotes")
	for _, path := range []string{oauthPRMetadataPath, oauthPRMetadataPath + corpusMCPPath, oauthASMetadataPath} {
		gst, gb, gh := tn.send(t, "GET", path, nil)
		hst, hb, hh := tn.send(t, "HEAD", path, nil)
		if gst != 200 || hst != 200 || len(hb) != 0 {
			t.Errorf("%s: GET %d, HEAD %d with %d bytes", path, gst, hst, len(hb))
		}
		if gh.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(gh.Get("Content-Type"), "application/json") {
			t.Errorf("GET %s: %v", path, gh)
		}
		if gh.Get("Content-Length") != strconv.Itoa(len(gb)) || hh.Get("Content-Length") != gh.Get("Content-Length") ||
			hh.Get("Content-Type") != gh.Get("Content-Type") || hh.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: GET %v, HEAD %v", path, gh, hh)
		}
	}
}

func TestOAuthSeedPaths(t *testing.T) {
	tn := startNode(t, "ainotes")
	c := newOAuthClient(t, tn.srv.URL, nil)
	c.at = ""
	verifier, challenge := pkcePair()
	code := c.code(t, challenge, "toastmachine:write")
	status, out := c.exchange(t, code, verifier)
	if status != 200 || out["scope"] != "toastmachine:write" {
		t.Fatalf("token at /token: %d %v", status, out)
	}
	if resp, _ := mcpCall(t, tn.srv.URL, "", out["access_token"].(string), `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 200 {
		t.Fatalf("ping with the token: %d", resp.StatusCode)
	}
	if status, _ := c.exchange(t, code, verifier); status != 400 {
		t.Fatalf("the code again, at /token: %d", status)
	}
}

// TestOAuthSeedRegisterPath: the seed's MCP host registers clients at
// /register, which here is the corpus's agent registration too: client
// metadata there registers a client that completes the flow, while an
// empty body (or {}) still registers an agent.
func TestOAuthSeedRegisterPath(t *testing.T) {
	tn := startNode(t, "ainotes")
	base := tn.srv.URL
	md := map[string]any{"redirect_uris": []string{"http://127.0.0.1:53682/callback"}, "token_endpoint_auth_method": "none", "client_name": "seed path"}
	status, _, out := postJSON(t, base+"/register", md)
	if status != 201 || out["client_id"] == nil || out["agent_id"] != nil {
		t.Fatalf("client metadata at /register: %d %v", status, out)
	}
	c := &oauthClientT{base: base, hc: noRedirect, id: out["client_id"].(string), redirect: "http://127.0.0.1:53682/callback"}
	verifier, challenge := pkcePair()
	code := c.code(t, challenge, "toastmachine:read")
	if status, out := c.exchange(t, code, verifier); status != 200 || out["scope"] != "toastmachine:read" {
		t.Fatalf("token for the client registered at /register: %d %v", status, out)
	}
	if status, _, out := postJSON(t, base+"/register", map[string]any{"redirect_uris": []string{"myapp://cb"}}); status != 400 || out["error"] != "invalid_redirect_uri" {
		t.Fatalf("bad client metadata at /register: %d %v", status, out)
	}
	for _, body := range []any{nil, map[string]any{}} {
		var status int
		var out map[string]any
		if body == nil {
			status, out = tn.do(t, "POST", "/register", "", nil)
		} else {
			status, _, out = postJSON(t, base+"/register", body)
		}
		if status != 201 || out["agent_id"] == nil {
			t.Fatalf("agent registration with %v: %d %v", body, status, out)
		}
	}
	if status, _, out := postJSON(t, base+"/register", map[string]any{"agent_name": "x"}); status != 400 || out["error"] == nil {
		t.Fatalf("an agent registration with a field: %d %v", status, out)
	}
}

func TestOAuthScopesAndConfidentialClients(t *testing.T) {
	tn := startNode(t, "ainotes")
	base := tn.srv.URL
	c := newOAuthClient(t, base, nil)
	var scopes = []struct{ asked, granted string }{
		{"", "toastmachine:read"},
		{"toastmachine:write", "toastmachine:write"},
		{"openid toastmachine:write bogus", "toastmachine:write"},
		{"toastmachine:write toastmachine:read offline_access", "toastmachine:read toastmachine:write"},
		{"openid profile", ""},
	}
	for _, s := range scopes {
		if tok := c.grant(t, s.asked); tok["scope"] != s.granted {
			t.Errorf("scope %q granted %v, want %q", s.asked, tok["scope"], s.granted)
		}
	}

	// A confidential client must authenticate; Basic and the form both work.
	cc := newOAuthClient(t, base, map[string]any{"redirect_uris": []string{"https://client.example/cb"}, "token_endpoint_auth_method": "client_secret_post"})
	verifier, challenge := pkcePair()
	code := cc.code(t, challenge, "")
	secret := cc.secret
	cc.secret = ""
	if status, out := cc.exchange(t, code, verifier); status != 401 || out["error"] != "invalid_client" {
		t.Fatalf("no client secret: %d %v", status, out)
	}
	cc.secret = secret
	code = cc.code(t, challenge, "")
	if status, out := cc.exchange(t, code, verifier); status != 200 {
		t.Fatalf("Basic: %d %v", status, out)
	}
	code = cc.code(t, challenge, "")
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier}, "redirect_uri": {cc.redirect},
		"client_id": {cc.id}, "client_secret": {"rls_wrong"}}
	resp, err := http.PostForm(base+"/oauth/token", form)
	if err != nil || resp.StatusCode != 401 {
		t.Fatalf("wrong secret: %v %d", err, resp.StatusCode)
	}
	resp.Body.Close()
	// A code is bound to its client.
	code = cc.code(t, challenge, "")
	if status, out := c.exchange(t, code, verifier); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("another client's code: %d %v", status, out)
	}
}

// TestOAuthExpiry runs the authorization server on a clock the test moves.
func TestOAuthExpiry(t *testing.T) {
	tn := startNode(t, "ainotes")
	o := tn.newOAuthServer()
	now := time.Now()
	o.now = func() time.Time { return now }
	mux := http.NewServeMux()
	o.mount(mux)
	mux.Handle(corpusMCPPath, tn.corpusMCPHandler(o))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := newOAuthClient(t, srv.URL, nil)

	verifier, challenge := pkcePair()
	code := c.code(t, challenge, "")
	now = now.Add(61 * time.Second)
	if status, out := c.exchange(t, code, verifier); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("expired code: %d %v", status, out)
	}
	tok := c.grant(t, "")
	access := tok["access_token"].(string)
	if resp, _ := mcpCall(t, srv.URL, "", access, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 200 {
		t.Fatalf("fresh token: %d", resp.StatusCode)
	}
	now = now.Add(time.Hour + time.Second)
	if resp, _ := mcpCall(t, srv.URL, "", access, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 401 {
		t.Fatalf("expired token: %d", resp.StatusCode)
	}
	// The refresh token outlives it.
	refresh := func(rt string) (int, map[string]any) {
		status, _, out := c.tokenRequest(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
		return status, out
	}
	status, fresh := refresh(tok["refresh_token"].(string))
	if status != 200 {
		t.Fatalf("refresh after the access token expired: %d %v", status, fresh)
	}
	// The rotated refresh token again, past the grace: the client and
	// someone else both hold it, and every token of its grant is revoked.
	now = now.Add(refreshGrace + time.Second)
	if status, out := refresh(tok["refresh_token"].(string)); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("rotated refresh token, later: %d %v", status, out)
	}
	if resp, _ := mcpCall(t, srv.URL, "", fresh["access_token"].(string), `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 401 {
		t.Fatalf("the grant's access token after the reuse: %d", resp.StatusCode)
	}
	if status, out := refresh(fresh["refresh_token"].(string)); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("the grant's refresh token after the reuse: %d %v", status, out)
	}
}

// TestOAuthUnusedClientsSwept: registration is open, so a client never
// given a code is swept a day after it registered; one that was, or that
// holds a live token, is kept.
func TestOAuthUnusedClientsSwept(t *testing.T) {
	tn := startNode(t, "ainotes")
	o := tn.newOAuthServer()
	now := time.Now()
	o.now = func() time.Time { return now }
	mux := http.NewServeMux()
	o.mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	used := newOAuthClient(t, srv.URL, nil)
	idle := newOAuthClient(t, srv.URL, nil)
	_, challenge := pkcePair()
	used.code(t, challenge, "")
	kept := func(c *oauthClientT) bool {
		t.Helper()
		rec, err := o.client(c.id)
		if err != nil {
			t.Fatal(err)
		}
		return rec != nil
	}
	now = now.Add(time.Hour)
	o.sweep(t.Context())
	if !kept(idle) || !kept(used) {
		t.Fatal("a client was swept within its first day")
	}
	now = now.Add(unusedClientTTL)
	o.sweep(t.Context())
	if kept(idle) {
		t.Fatal("a client never given a code outlived its day")
	}
	if !kept(used) {
		t.Fatal("a client given a code was swept")
	}
}

// TestOAuthRefreshes: two refreshes of one token sent together (the MCP
// SDK sends them when two calls meet a 401 at once) leave the client what
// one of them got; a grant refreshed again and again keeps its newest
// access tokens and a record of bounded size.
func TestOAuthRefreshes(t *testing.T) {
	tn := startNodeAt(t, "ainotes", t.TempDir(), func(c *Config) { c.RateLimit = 0 })
	base := tn.srv.URL
	c := newOAuthClient(t, base, nil)
	rt := c.grant(t, "toastmachine:read")["refresh_token"].(string)
	var wg sync.WaitGroup
	outs := make([]map[string]any, 2)
	statuses := make([]int, 2)
	for i := range 2 {
		wg.Go(func() {
			statuses[i], _, outs[i] = c.tokenRequest(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
		})
	}
	wg.Wait()
	ok := 0
	for i, out := range outs {
		if statuses[i] != 200 {
			continue
		}
		ok++
		if resp, _ := mcpCall(t, base, "", out["access_token"].(string), `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 200 {
			t.Fatalf("a refresh sent together with another: its access token %d", resp.StatusCode)
		}
		rt = out["refresh_token"].(string)
	}
	if ok != 1 {
		t.Fatalf("two refreshes of one token: %v %v", statuses, outs)
	}

	var access []string
	for range 20 {
		status, _, out := c.tokenRequest(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
		if status != 200 {
			t.Fatalf("refresh: %d %v", status, out)
		}
		rt = out["refresh_token"].(string)
		access = append(access, out["access_token"].(string))
	}
	for i, a := range access {
		resp, _ := mcpCall(t, base, "", a, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if live := i >= len(access)-grantAccessTokens; live != (resp.StatusCode == 200) {
			t.Fatalf("access token %d of %d: %d", i+1, len(access), resp.StatusCode)
		}
	}
	err := tn.store.View(func(tx *store.Tx) error {
		return tx.Iterate(pfxOAuthGrant, false, func(k, v []byte) error {
			var g oauthGrant
			if err := json.Unmarshal(v, &g); err != nil {
				return err
			}
			if len(g.Access) > grantAccessTokens || len(v) > 1024 {
				return fmt.Errorf("a grant record of %d bytes, %d access tokens", len(v), len(g.Access))
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOAuthGrantIdentity: a confidential client's grants act as one corpus
// identity, created on its first authorization; another client gets
// another. Each grant of a public client has an identity of its own, which
// its refresh keeps: anyone who knows a public client's id can run an
// authorization of it and read the code off the redirect, and so gains only
// a new identity.
func TestOAuthGrantIdentity(t *testing.T) {
	tn := startNode(t, "ainotes")
	base := tn.srv.URL
	_, agents := tn.do(t, "GET", "/agents", "", nil)
	before := agents["total"].(float64)
	confidential := map[string]any{"redirect_uris": []string{"http://127.0.0.1:53682/callback"}, "token_endpoint_auth_method": "client_secret_basic",
		"grant_types": []string{"authorization_code", "refresh_token"}}
	c := newOAuthClient(t, base, confidential)
	if _, agents = tn.do(t, "GET", "/agents", "", nil); agents["total"].(float64) != before {
		t.Fatal("registering an OAuth client made a corpus identity")
	}
	a1 := c.grant(t, "toastmachine:write")["access_token"].(string)
	a2 := c.grant(t, "toastmachine:read")["access_token"].(string)
	if _, agents = tn.do(t, "GET", "/agents", "", nil); agents["total"].(float64) != before+1 {
		t.Fatalf("two grants of one client: %v agents, want %v", agents["total"], before+1)
	}
	b1 := newOAuthClient(t, base, confidential).grant(t, "toastmachine:write")["access_token"].(string)
	author := func(tok string) string { return verifyToken(t, tn, tok).UserID }
	if author(a1) != author(a2) || author(a1) == author(b1) {
		t.Fatalf("identities: %s %s %s", author(a1), author(a2), author(b1))
	}

	public := newOAuthClient(t, base, nil)
	_, agents = tn.do(t, "GET", "/agents", "", nil)
	before = agents["total"].(float64)
	_, challenge := pkcePair()
	for range 3 {
		public.code(t, challenge, "toastmachine:write") // never exchanged
	}
	if _, agents = tn.do(t, "GET", "/agents", "", nil); agents["total"].(float64) != before {
		t.Fatalf("authorizations never exchanged made corpus identities: %v, before %v", agents["total"], before)
	}
	p1 := public.grant(t, "toastmachine:write")
	p2 := public.grant(t, "toastmachine:write")
	if author(p1["access_token"].(string)) == author(p2["access_token"].(string)) {
		t.Fatal("two grants of a public client act as one identity")
	}
	status, _, refreshed := public.tokenRequest(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {p1["refresh_token"].(string)}})
	if status != 200 || author(refreshed["access_token"].(string)) != author(p1["access_token"].(string)) {
		t.Fatalf("refreshed: %d %v", status, refreshed)
	}
}

// verifyToken runs /mcp's verifier on a token, as the test server's URL.
func verifyToken(t *testing.T, tn *testNode, token string) *auth.TokenInfo {
	t.Helper()
	req := httptest.NewRequest("POST", tn.srv.URL+"/mcp", nil)
	info, err := tn.newOAuthServer().verify(t.Context(), token, req)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestOAuthBehindProxy: behind the operator's TLS proxy (a host listed in
// AllowedHosts) the documents name https URLs; anyone else's
// X-Forwarded-Proto is ignored.
func TestOAuthBehindProxy(t *testing.T) {
	tn := startNode(t, "ainotes")
	tn.cfg.AllowedHosts = []string{"relay.example"}
	get := func(host string) map[string]any {
		req, _ := http.NewRequest("GET", tn.srv.URL+"/.well-known/oauth-authorization-server", nil)
		req.Host = host
		req.Header.Set("X-Forwarded-Proto", "https")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	if out := get("relay.example"); out["issuer"] != "https://relay.example" || out["token_endpoint"] != "https://relay.example/oauth/token" {
		t.Fatalf("behind the proxy: %v", out)
	}
	if out := get("other.example"); out["issuer"] != "http://other.example" {
		t.Fatalf("another host: %v", out)
	}
}

// FuzzOAuthInputs feeds the parsers of outside input: whatever they accept
// keeps their promise.
func FuzzOAuthInputs(f *testing.F) {
	for _, s := range []string{"https://a.example/cb", "http://127.0.0.1:1/cb", "http://evil.example/", "myapp://x", "rlk_0123456789abcdef_" + strings.Repeat("a", 43), "openid toastmachine:read", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkRedirectURI(s) == nil {
			u, err := url.Parse(s)
			if err != nil || u.Fragment != "" || !(u.Scheme == "https" || u.Scheme == "http" && isLoopback(u.Hostname())) {
				t.Fatalf("accepted redirect URI %q", s)
			}
		}
		if scopes, e := grantScopes(s); e == nil {
			for _, sc := range scopes {
				if sc != "toastmachine:read" && sc != "toastmachine:write" {
					t.Fatalf("granted %q from %q", sc, s)
				}
			}
		}
		splitSecret(s, prefixCode)
		checkVerifier(s, s)
	})
}

// TestCorpusMCPFront: /mcp answers a browser's preflight with CORS, other
// methods than POST with a corpus 405, and a missing or bad token with a
// corpus 401 whose challenge names the metadata, and says invalid_token
// when a token was sent.
func TestCorpusMCPFront(t *testing.T) {
	tn := startNode(t, "ainotes")
	base := tn.srv.URL
	st, _, h := tn.send(t, "OPTIONS", "/mcp", http.Header{"Origin": {"https://app.example"}, "Access-Control-Request-Method": {"POST"},
		"Access-Control-Request-Headers": {"authorization, content-type, mcp-protocol-version"}})
	if st != 204 || h.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "mcp-protocol-version") || h.Get("Allow") != "POST, OPTIONS" {
		t.Fatalf("preflight: %d %v", st, h)
	}
	st, b, h := tn.send(t, "GET", "/mcp", nil)
	var out map[string]any
	json.Unmarshal(b, &out)
	if st != 405 || h.Get("Allow") != "POST, OPTIONS" || corpusCode(out) != "method_not_allowed" {
		t.Fatalf("GET /mcp: %d %v %v", st, h, out)
	}
	meta := `resource_metadata="` + base + `/.well-known/oauth-protected-resource/mcp", scope="toastmachine:read toastmachine:write"`
	for _, tc := range []struct{ token, challenge string }{
		{"", `Bearer ` + meta},
		{"garbage", `Bearer ` + meta + `, error="invalid_token", error_description="not an access token of this server"`},
	} {
		resp, body := mcpCall(t, base, "", tc.token, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		var out map[string]any
		json.Unmarshal(body, &out)
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != tc.challenge || corpusCode(out) != "unauthorized" ||
			resp.Header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
			t.Errorf("token %q: %d %v %s", tc.token, resp.StatusCode, resp.Header, body)
		}
		// The seed: "never send agent_id directly to /mcp".
		if how, _ := asMap(out["error"])["how_to_proceed"].(string); !strings.Contains(how, "OAuth") || strings.Contains(how, "Bearer <agent_id>") {
			t.Errorf("token %q: how_to_proceed %q", tc.token, how)
		}
	}
	// MCP's transport: the Origin is validated, as at /api/v1/mcp.
	tok := newOAuthClient(t, base, nil).grant(t, "toastmachine:read")["access_token"].(string)
	for origin, want := range map[string]int{"": 200, "http://localhost:6274": 200, base: 200, "https://evil.example": 403, "null": 403} {
		req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var out map[string]any
		json.Unmarshal(b, &out)
		if resp.StatusCode != want || want == 403 && corpusCode(out) != "forbidden" {
			t.Errorf("Origin %q: %d %s", origin, resp.StatusCode, b)
		}
	}
}

// TestOAuthEndpointsCORS: a client in a browser registers and exchanges
// its code from a page of another origin: the preflight lets it send, and
// the answer, a refusal included, lets it read.
func TestOAuthEndpointsCORS(t *testing.T) {
	tn := startNode(t, "ainotes")
	for _, path := range []string{"/oauth/token", "/token", "/oauth/register"} {
		st, _, h := tn.send(t, "OPTIONS", path, http.Header{"Origin": {"https://app.example"}, "Access-Control-Request-Method": {"POST"},
			"Access-Control-Request-Headers": {"content-type"}})
		if st != 204 || h.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("preflight of %s: %d %v", path, st, h)
		}
		ct := "application/x-www-form-urlencoded"
		if path == "/oauth/register" {
			ct = mediaJSON
		}
		st, body, h := tn.sendBody(t, "POST", path, http.Header{"Origin": {"https://app.example"}, "Content-Type": {ct}}, "")
		if st < 400 || h.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("POST %s from another origin: %d %v %s", path, st, h, body)
		}
	}
}

// TestOAuthRegistrationRefusals: a body that is not client metadata is
// refused in RFC 7591's words, naming the member at fault but never the
// decoder's Go types; text after the object is refused, and a body over
// the limit is 413.
func TestOAuthRegistrationRefusals(t *testing.T) {
	for _, c := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"wrong element type", `{"redirect_uris":[1]}`, 400, "redirect_uris has the wrong type"},
		{"wrong type", `{"redirect_uris":["https://a.example/cb"],"client_name":5}`, 400, "client_name has the wrong type"},
		{"trailing text", `{"redirect_uris":["https://a.example/cb"]} and more`, 400, "not one JSON object"},
		{"not JSON", `redirect_uris`, 400, "not one JSON object"},
		{"too large", `{"redirect_uris":["https://a.example/` + strings.Repeat("a", oauthFormLimit) + `"]}`, 413, "over 65536 bytes"},
	} {
		body := http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(c.body)), oauthFormLimit)
		_, e := decodeClientMetadata(body)
		if e == nil || e.status != c.status || e.Code != "invalid_client_metadata" || !strings.Contains(e.Description, c.want) ||
			strings.Contains(e.Description, "Go ") || strings.Contains(e.Description, "json:") || strings.Contains(e.Description, "http:") {
			t.Errorf("%s: %+v", c.name, e)
		}
	}
	tn := startNode(t, "ainotes")
	status, _, out := postJSON(t, tn.srv.URL+"/oauth/register", map[string]any{"redirect_uris": []int{1}})
	if d, _ := out["error_description"].(string); status != 400 || strings.Contains(d, "Go struct") || !strings.Contains(d, "redirect_uris") {
		t.Errorf("over HTTP: %d %v", status, out)
	}
	md, e := decodeClientMetadata(strings.NewReader(`{"redirect_uris":["https://a.example/cb"]}` + "\n"))
	if e != nil || len(md.RedirectURIs) != 1 {
		t.Fatalf("metadata: %+v %v", md, e)
	}
}
