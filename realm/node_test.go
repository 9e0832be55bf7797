package realm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"relay/realm/api"
	"relay/store"
)

// testNode is a node on a loopback test server.
type testNode struct {
	*Node
	srv      *httptest.Server
	operator string
}

func startNode(t *testing.T, realmName string) *testNode {
	t.Helper()
	return startNodeAt(t, realmName, t.TempDir())
}

// startNodeAt starts a node on the data directory dir; realmName may be
// empty for the one dir belongs to. Each of with changes the configuration
// before the node opens.
func startNodeAt(t testing.TB, realmName, dir string, with ...func(*Config)) *testNode {
	t.Helper()
	cfg := DefaultConfig()
	cfg.P2PAddrs = nil // no federation here
	cfg.Realm = realmName
	cfg.DataDir = dir
	cfg.Logger = slog.New(slog.DiscardHandler)
	for _, f := range with {
		f(&cfg)
	}
	n, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() {
		srv.Close()
		n.Close()
	})
	secret, err := os.ReadFile(filepath.Join(cfg.DataDir, "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	return &testNode{Node: n, srv: srv, operator: strings.TrimSpace(string(secret))}
}

// rateLimit is a configuration change for startNodeAt.
func rateLimit(perMinute int) func(*Config) { return func(c *Config) { c.RateLimit = perMinute } }

// servingNode opens a node on dir and serves it on a loopback port, as
// `relay serve` does, until cancel; served then gets what Serve returned.
func servingNode(t *testing.T, realmName, dir string, with ...func(*Config)) (n *Node, cancel context.CancelFunc, served <-chan error) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.P2PAddrs = nil // no federation here
	cfg.Realm = realmName
	cfg.DataDir = dir
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.DiscardHandler)
	for _, f := range with {
		f(&cfg)
	}
	n, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx) }()
	return n, cancel, done
}

// awaitServed is what Serve returned, once it has; it fails the test with
// what when Serve is still running after within.
func awaitServed(t *testing.T, served <-chan error, within time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-served:
		return err
	case <-time.After(within):
		t.Fatal(what)
		return nil
	}
}

// do sends a JSON request and decodes the JSON answer.
func (tn *testNode) do(t *testing.T, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, tn.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: decode: %v", method, path, err)
	}
	return resp.StatusCode, out
}

func (tn *testNode) issue(t *testing.T, label string, rights ...string) string {
	t.Helper()
	status, out := tn.do(t, "POST", "/api/v1/tokens", tn.operator, map[string]any{"label": label, "rights": rights})
	if status != 200 {
		t.Fatalf("issue: %d %v", status, out)
	}
	return out["token"].(string)
}

// mcpSessions connects one MCP session per token, closed when the test
// ends.
func (tn *testNode) mcpSessions(t *testing.T, tokens ...string) map[string]*mcp.ClientSession {
	t.Helper()
	sessions := map[string]*mcp.ClientSession{}
	for _, tok := range tokens {
		cs, err := tn.mcpSession(t, tok)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		sessions[tok] = cs
	}
	return sessions
}

// mcpSession connects the official MCP Go SDK client with a bearer token.
func (tn *testNode) mcpSession(t *testing.T, token string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "relay-test", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   tn.srv.URL + "/api/v1/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: token}},
		MaxRetries: -1,
	}
	return client.Connect(context.Background(), transport, nil)
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestHealthAndManifest(t *testing.T) {
	tn := startNode(t, "ainotes")
	status, h := tn.do(t, "GET", "/api/v1/health", "", nil)
	if status != 200 || h["status"] != "ok" || h["realm"] != "ainotes" || h["schema"].(float64) < 1 || h["version"] == "" {
		t.Fatalf("health: %d %v", status, h)
	}
	if p := h["pragmas"].(map[string]any); p["sync_writes"] != true {
		t.Fatalf("health pragmas: %v", p)
	}
	status, m := tn.do(t, "GET", "/api/v1/manifest", "", nil)
	if status != 200 || m["parley"] != "1" || m["realm"] != "ainotes" {
		t.Fatalf("manifest: %d %v", status, m)
	}
	keys := map[string]bool{}
	for _, e := range m["endpoints"].([]any) {
		keys[e.(map[string]any)["key"].(string)] = true
	}
	for _, k := range []string{"get_manifest", "get_health", "list_api_operations", "get_api_operation", "call_api_operation", "post_tokens"} {
		if !keys[k] {
			t.Errorf("manifest lacks endpoint %s", k)
		}
	}
	if got := len(m["endpoints"].([]any)); got != len(tn.reg.Operations()) {
		t.Errorf("manifest lists %d endpoints, registry has %d", got, len(tn.reg.Operations()))
	}
	// An operation's contract names its tool where there is one, and the
	// endpoint that has it.
	for _, tc := range []struct{ key, tool, mcp string }{
		{"get_manifest", "get_manifest", "/api/v1/mcp"},
		{"search", "search", "/mcp"},
		{"post_register", "", ""},
	} {
		_, op := tn.do(t, "GET", "/api/v1/operations/"+tc.key, "", nil)
		if tool, _ := op["tool"].(string); tool != tc.tool || op["key"] != tc.key {
			t.Errorf("%s: tool %v", tc.key, op)
		}
		if at, _ := op["mcp"].(string); at != tc.mcp {
			t.Errorf("%s: mcp %v", tc.key, op)
		}
	}
}

func TestOperatorTokenFile(t *testing.T) {
	tn := startNode(t, "local")
	fi, err := os.Stat(tn.OperatorTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("operator.token mode %v, want 0600", fi.Mode().Perm())
	}
	p, err := tn.auth.Authenticate(tn.operator)
	if err != nil || !p.Human || p.Identity.String() != "human:operator" {
		t.Fatalf("operator principal %+v, %v", p, err)
	}
}

// TestNewOperatorSecret: a lost operator.token is not the end of the
// realm: a start with NewOperatorSecret gives the same operator credential
// (same identity) a new secret, written there, and the old one stops
// working; a start without it leaves the credential as it is.
func TestNewOperatorSecret(t *testing.T) {
	dir := t.TempDir()
	open := func(renew bool) *Node {
		t.Helper()
		cfg := DefaultConfig()
		cfg.P2PAddrs = nil
		cfg.Realm, cfg.DataDir, cfg.NewOperatorSecret = "local", dir, renew
		cfg.Logger = slog.New(slog.DiscardHandler)
		n, err := Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	file := filepath.Join(dir, "operator.token")
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	n := open(false)
	old := read()
	n.Close()
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	n = open(false) // starts, and writes nothing
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a start without the flag wrote the file: %v", err)
	}
	if _, err := n.auth.Authenticate(old); err != nil {
		t.Fatalf("the old secret stopped working without the flag: %v", err)
	}
	n.Close()

	n = open(false)
	cookie, _, err := n.sessions.Create(context.Background(), "secret")
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	n = open(true)
	defer n.Close()
	if n.sessions.Live(cookie) {
		t.Fatal("a console session opened before the new secret is still open")
	}
	renewed := read()
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the new file: %v, %v", fi, err)
	}
	if _, err := n.auth.Authenticate(old); err == nil {
		t.Fatal("the old secret still works")
	}
	p, err := n.auth.Authenticate(renewed)
	if err != nil || !p.Human || p.Identity.String() != "human:operator" {
		t.Fatalf("the new secret: %+v, %v", p, err)
	}
	if entries, _ := os.ReadDir(dir); slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), ".operator.token-") }) {
		t.Fatal("a temporary file was left behind")
	}
}

func TestReopenKeepsRealmAndCredentials(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.P2PAddrs = nil // no federation here
	cfg.Realm, cfg.DataDir = "first", dir
	cfg.Logger = slog.New(slog.DiscardHandler)
	n, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	peer := n.PeerID()
	tok, err := n.auth.Issue(context.Background(), "Bot One", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()

	cfg.Realm = "" // the data directory knows its realm
	n, err = Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n.Realm() != "first" || n.PeerID() != peer || n.OperatorTokenFile != "" {
		t.Fatalf("reopened as %s %s (operator file %q)", n.Realm(), n.PeerID(), n.OperatorTokenFile)
	}
	if p, err := n.auth.Authenticate(tok.Token); err != nil || p.Identity.String() != "first:bot-one" {
		t.Fatalf("token after reopen: %+v %v", p, err)
	}
	n.Close()

	cfg.Realm = "second"
	if _, err := Open(context.Background(), cfg); err == nil {
		t.Fatal("a data directory opened under another realm name")
	}
}

// TestHumanNamedOnce: the human is named when the realm is created; a later
// start takes that name whatever it is given, or refuses another, and the
// manifest says the identity the operator's secret acts as.
func TestHumanNamedOnce(t *testing.T) {
	dir := t.TempDir()
	open := func(human string) (*Node, error) {
		cfg := DefaultConfig()
		cfg.P2PAddrs = nil
		cfg.Realm, cfg.DataDir, cfg.HumanName = "first", dir, human
		cfg.Logger = slog.New(slog.DiscardHandler)
		return Open(context.Background(), cfg)
	}
	manifestHuman := func(n *Node) any {
		rec := httptest.NewRecorder()
		n.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/manifest", nil))
		var m map[string]any
		json.Unmarshal(rec.Body.Bytes(), &m)
		return m["human"]
	}
	n, err := open("Alice")
	if err != nil {
		t.Fatal(err)
	}
	if p := n.auth.human(); p.Identity.String() != "human:alice" || manifestHuman(n) != "human:alice" {
		t.Fatalf("created as %s, manifest %v", p.Identity, manifestHuman(n))
	}
	n.Close()
	for _, same := range []string{"", "alice"} {
		n, err := open(same)
		if err != nil {
			t.Fatalf("--human %q: %v", same, err)
		}
		if got := manifestHuman(n); got != "human:alice" {
			t.Errorf("--human %q: the manifest says %v", same, got)
		}
		n.Close()
	}
	if _, err := open("bob"); err == nil || !strings.Contains(err.Error(), "human:alice") {
		t.Fatalf("renamed to bob: %v", err)
	}
	if _, err := open("::"); err == nil {
		t.Fatal("a human's name without a letter or digit")
	}
	// A bad realm name is refused before anything is made.
	cfg := DefaultConfig()
	cfg.P2PAddrs, cfg.Realm, cfg.DataDir = nil, "Bad Name", filepath.Join(dir, "new")
	if _, err := Open(context.Background(), cfg); err == nil {
		t.Fatal("realm name \"Bad Name\" taken")
	}
	if _, err := os.Stat(cfg.DataDir); err == nil {
		t.Fatal("a refused start made its data directory")
	}
}

// TestInMemoryDirectoryStaysSo: a data directory whose realm lived in
// memory is refused to a store on disk, whose new chain under the same key
// would fork the one peers may hold.
func TestInMemoryDirectoryStaysSo(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.P2PAddrs = nil
	cfg.Realm, cfg.DataDir = "demo", dir
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.InMemory = true
	n, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	cfg.InMemory = false
	if _, err := Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "in memory") {
		t.Fatalf("a store on disk under an in-memory realm's key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "store")); err == nil {
		t.Fatal("the refused start left a store behind")
	}
}

// startedOnce opens a node of realm demo on dir, without federation, and
// closes it: a data directory as a first start leaves it. It returns the
// configuration, to open it again.
func startedOnce(t *testing.T, dir string) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.P2PAddrs = nil
	cfg.Realm, cfg.DataDir = "demo", dir
	cfg.Logger = slog.New(slog.DiscardHandler)
	n, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	return cfg
}

// TestLostKeyRefused: a data directory that held a realm and lost its key
// is refused, and left as it was, rather than given a new key that would
// sign the realm's next events after ones signed by the old.
func TestLostKeyRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := startedOnce(t, dir)
	before, err := os.ReadFile(filepath.Join(dir, "realm.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "realm.key")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "realm.key") {
		t.Fatalf("a realm without its key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "realm.key")); err == nil {
		t.Fatal("the refused start made a new key")
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "realm.json")); string(after) != string(before) {
		t.Fatalf("the refused start rewrote realm.json: %s", after)
	}
}

// TestLostStoreRefused: a data directory whose store was deleted, emptied
// or lost its data is refused, and left as it was, rather than started as a
// new store: that would sign a new chain of the realm from seq 1, a fork of
// the one its peers hold, and replace the operator secret.
func TestLostStoreRefused(t *testing.T) {
	for _, damage := range []struct {
		name string
		do   func(t *testing.T, store string)
	}{
		{"store removed", func(t *testing.T, store string) {
			if err := os.RemoveAll(store); err != nil {
				t.Fatal(err)
			}
		}},
		{"store emptied", func(t *testing.T, store string) {
			if err := os.RemoveAll(store); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(store, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"store replaced by an empty one", func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			scfg := store.DefaultConfig(dir)
			scfg.Logger = slog.New(slog.DiscardHandler)
			st, err := store.Open(scfg)
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
		}},
	} {
		t.Run(damage.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := startedOnce(t, dir)
			secret, err := os.ReadFile(filepath.Join(dir, "operator.token"))
			if err != nil {
				t.Fatal(err)
			}
			damage.do(t, filepath.Join(dir, "store"))
			for range 2 { // and a refused start leaves nothing that a later one takes
				if _, err := Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "store is missing or empty") {
					t.Fatalf("a realm without its store: %v", err)
				}
			}
			if after, _ := os.ReadFile(filepath.Join(dir, "operator.token")); string(after) != string(secret) {
				t.Fatal("the refused start replaced the operator secret")
			}
		})
	}
}

// TestWrongKeyRefused: a data directory whose realm.key is not the key
// its realm was created with (another realm's, copied over it) is refused,
// and left as it was, rather than signing the realm's next events with a
// key its chain does not verify under.
func TestWrongKeyRefused(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	startedOnce(t, other)
	cfg := startedOnce(t, dir)
	before, err := os.ReadFile(filepath.Join(dir, "realm.json"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(other, "realm.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "realm.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "realm.key") {
		if n != nil {
			n.Close()
		}
		t.Fatalf("a realm under another key: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "realm.json")); string(after) != string(before) {
		t.Fatalf("the refused start rewrote realm.json: %s", after)
	}
}

func TestTokensLifecycle(t *testing.T) {
	tn := startNode(t, "ainotes")
	tok := tn.issue(t, "OpenCode", "write", "pin")
	p, err := tn.auth.Authenticate(tok)
	if err != nil || p.Identity.String() != "ainotes:opencode" || !p.Rights.Has("pin") || p.Rights.Has("lock") {
		t.Fatalf("issued principal %+v %v", p, err)
	}
	// Same label: a distinct identity.
	tok2 := tn.issue(t, "OpenCode")
	if p2, _ := tn.auth.Authenticate(tok2); p2.Identity.String() != "ainotes:opencode-2" {
		t.Fatalf("second identity %v", p2.Identity)
	}
	// An agent may not issue tokens.
	if status, out := tn.do(t, "POST", "/api/v1/tokens", tok, map[string]any{"label": "x"}); status != 403 || out["reason"] != "user_session_required" {
		t.Fatalf("agent issuing: %d %v", status, out)
	}
	// Re-right, then revoke.
	if status, out := tn.do(t, "POST", "/api/v1/tokens/"+itoa(p.TokenID)+"/rights", tn.operator, map[string]any{"rights": []string{"lock"}}); status != 200 {
		t.Fatalf("rights: %d %v", status, out)
	}
	if p, _ := tn.auth.Authenticate(tok); !p.Rights.Has("lock") || p.Rights.Has("write") {
		t.Fatalf("rights after change: %v", p.Rights)
	}
	if status, out := tn.do(t, "POST", "/api/v1/tokens/"+itoa(p.TokenID)+"/revoke", tn.operator, nil); status != 200 || out["revoked_at"] == nil {
		t.Fatalf("revoke: %d %v", status, out)
	}
	if status, out := tn.do(t, "GET", "/api/v1/manifest", tok, nil); status != 401 || out["reason"] != "unauthenticated" {
		t.Fatalf("revoked token: %d %v", status, out)
	}
	status, out := tn.do(t, "GET", "/api/v1/tokens", tn.operator, nil)
	if status != 200 || len(out["tokens"].([]any)) != 3 {
		t.Fatalf("list: %d %v", status, out)
	}
	if strings.Contains(toJSON(out), "hash") {
		t.Fatal("token list leaks hashes")
	}
}

func TestHTTPErrors(t *testing.T) {
	tn := startNode(t, "ainotes")
	tests := []struct {
		name, method, path, token string
		body                      any
		status                    int
		reason                    string
	}{
		{"unknown endpoint", "GET", "/api/v1/nope", "", nil, 404, "unknown_endpoint"},
		{"wrong method", "DELETE", "/api/v1/manifest", "", nil, 405, "method_not_allowed"},
		{"bad token", "GET", "/api/v1/manifest", "rlt_1_" + strings.Repeat("x", 43), nil, 401, "unauthenticated"},
		{"garbage token", "GET", "/api/v1/manifest", "hello", nil, 401, "unauthenticated"},
		{"no token on human route", "GET", "/api/v1/tokens", "", nil, 401, "unauthenticated"},
		{"unknown operation", "GET", "/api/v1/operations/nope", "", nil, 404, "operation_not_found"},
		{"unknown field", "POST", "/api/v1/tokens", "OPERATOR", map[string]any{"label": "a", "colour": "red"}, 400, "invalid_body"},
		{"missing field", "POST", "/api/v1/tokens", "OPERATOR", map[string]any{}, 400, "invalid_body"},
		{"bad right", "POST", "/api/v1/tokens", "OPERATOR", map[string]any{"label": "a", "rights": []string{"root"}}, 400, "invalid_body"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			token := tc.token
			if token == "OPERATOR" {
				token = tn.operator
			}
			status, out := tn.do(t, tc.method, tc.path, token, tc.body)
			if status != tc.status || out["reason"] != tc.reason {
				t.Fatalf("got %d %v, want %d %s", status, out, tc.status, tc.reason)
			}
		})
	}
	// Not JSON at all.
	req, _ := http.NewRequest("POST", tn.srv.URL+"/api/v1/tokens", strings.NewReader("{nope"))
	req.Header.Set("Authorization", "Bearer "+tn.operator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != 400 || out["reason"] != "invalid_json" {
		t.Fatalf("invalid json: %d %v", resp.StatusCode, out)
	}
	// Too large, refused before it is read whole.
	req, _ = http.NewRequest("POST", tn.srv.URL+"/api/v1/tokens", bytes.NewReader(make([]byte, tn.cfg.MaxBodyBytes+1)))
	req.Header.Set("Authorization", "Bearer "+tn.operator)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != 413 || out["reason"] != "payload_too_large" {
		t.Fatalf("too large: %d %v", resp.StatusCode, out)
	}
}

func TestMCPRefusesWithoutToken(t *testing.T) {
	tn := startNode(t, "ainotes")
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, tc := range []struct {
		name, auth, reason string
	}{
		{"no token", "", "token_required"},
		{"bad token", "Bearer rlt_9_" + strings.Repeat("a", 43), "unauthenticated"},
	} {
		req, _ := http.NewRequest("POST", tn.srv.URL+"/api/v1/mcp", strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != 401 || out["reason"] != tc.reason || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %d %v", tc.name, resp.StatusCode, out)
		}
	}
	if _, err := tn.mcpSession(t, ""); err == nil {
		t.Fatal("the SDK client connected without a token")
	}
}

func TestMCPClient(t *testing.T) {
	tn := startNode(t, "ainotes")
	tok := tn.issue(t, "reader")
	cs, err := tn.mcpSession(t, tok)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx := context.Background()
	if v := cs.InitializeResult().ProtocolVersion; v == "" {
		t.Fatal("no protocol version negotiated")
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	parleyTools := 0
	for _, op := range tn.reg.Operations() {
		if op.Surface == api.Parley && op.ToolName() != "" {
			parleyTools++
		}
	}
	if len(tools.Tools) != parleyTools {
		t.Fatalf("%d tools, %d Parley operations", len(tools.Tools), parleyTools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_manifest", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("get_manifest: %v %+v", err, res)
	}
	if m := res.StructuredContent.(map[string]any); m["realm"] != "ainotes" {
		t.Fatalf("manifest over MCP: %v", m)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_api_operations", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_api_operations: %v %+v", err, res)
	}
	ops := res.StructuredContent.(map[string]any)["operations"].([]any)
	if len(ops) != len(tn.reg.Operations()) {
		t.Fatalf("catalog has %d operations", len(ops))
	}
	// An unknown tool is a refusal like any other.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
	if err != nil || !res.IsError || res.StructuredContent.(map[string]any)["reason"] != "unknown_tool" {
		t.Fatalf("unknown tool: %v %+v", err, res)
	}
}

// TestParity: the same operation gives the same result and the same refusal
// over HTTP, over MCP and through call_api_operation.
func TestParity(t *testing.T) {
	tn := startNode(t, "ainotes")
	agent := tn.issue(t, "agent", "write")
	cases := []struct {
		name, key, method, path, token string
		args                           map[string]any
		reason                         string // empty: success
	}{
		{"human-only refused", "post_tokens", "POST", "/api/v1/tokens", agent, map[string]any{"label": "x"}, "user_session_required"},
		{"unknown field", "post_tokens", "POST", "/api/v1/tokens", tn.operator, map[string]any{"label": "x", "bogus": 1}, "invalid_body"},
		{"operation not found", "get_api_operation", "GET", "/api/v1/operations/nope", agent, map[string]any{"key": "nope"}, "operation_not_found"},
		{"operation contract", "get_api_operation", "GET", "/api/v1/operations/get_manifest", agent, map[string]any{"key": "get_manifest"}, ""},
		{"health", "get_health", "GET", "/api/v1/health", agent, map[string]any{}, ""},
	}
	cs, err := tn.mcpSession(t, agent)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.method == "POST" {
				body = tc.args
			}
			status, httpOut := tn.do(t, tc.method, tc.path, tc.token, body)
			var mcpOut map[string]any
			if tc.token == agent {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.key, Arguments: tc.args})
				if err != nil {
					t.Fatal(err)
				}
				if res.IsError != (tc.reason != "") {
					t.Fatalf("mcp isError=%v, want reason %q: %v", res.IsError, tc.reason, res.StructuredContent)
				}
				mcpOut = res.StructuredContent.(map[string]any)
			}
			if tc.reason != "" {
				if httpOut["reason"] != tc.reason || status == 200 {
					t.Fatalf("http: %d %v", status, httpOut)
				}
				if mcpOut != nil && mcpOut["reason"] != tc.reason {
					t.Fatalf("mcp: %v", mcpOut)
				}
				return
			}
			if status != 200 {
				t.Fatalf("http: %d %v", status, httpOut)
			}
			if mcpOut != nil && normalize(httpOut) != normalize(mcpOut) {
				t.Fatalf("http and mcp differ:\n%s\n%s", normalize(httpOut), normalize(mcpOut))
			}
		})
	}
	// call_api_operation goes through the same check.
	status, out := tn.do(t, "POST", "/api/v1/operations/call_api_operation", agent, map[string]any{"arguments": map[string]any{"key": "post_tokens", "arguments": map[string]any{"label": "x"}}})
	if status != 400 || out["reason"] != "invalid_body" {
		t.Fatalf("call_api_operation on itself: %d %v", status, out)
	}
	status, out = tn.do(t, "POST", "/api/v1/operations/post_tokens", agent, map[string]any{"arguments": map[string]any{"label": "x"}})
	if status != 403 || out["reason"] != "user_session_required" {
		t.Fatalf("call_api_operation post_tokens as agent: %d %v", status, out)
	}
	status, out = tn.do(t, "POST", "/api/v1/operations/get_manifest", agent, map[string]any{})
	if status != 200 || out["result"].(map[string]any)["realm"] != "ainotes" {
		t.Fatalf("call_api_operation get_manifest: %d %v", status, out)
	}
}

// normalize drops what differs between two calls of the same read.
func normalize(m map[string]any) string {
	c := map[string]any{}
	for k, v := range m {
		switch k {
		case "time", "uptime_seconds", "store":
			continue
		}
		c[k] = v
	}
	return toJSON(c)
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestServeShutdownUnderLoad: a request sent while the node shuts down
// gets an answer, or its connection is refused before it is sent. A
// connection closed under a request the client has written (a reset, an
// EOF) leaves the client unsure whether a write happened, and a POST
// without an Operation-Token cannot be retried safely.
func TestServeShutdownUnderLoad(t *testing.T) {
	n, cancel, served := servingNode(t, "ainotes", t.TempDir(), rateLimit(0))
	var answered atomic.Int64
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: &http.Transport{}} // keep-alive, each its own connection
			for {
				resp, err := c.Post(n.URL()+"/register", "application/json", nil)
				if err != nil {
					if op := (*net.OpError)(nil); !errors.As(err, &op) || op.Op != "dial" {
						errs <- err
					}
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				answered.Add(1)
			}
		}()
	}
	eventually(t, 10*time.Second, "requests to be answered", func() bool { return answered.Load() >= 200 })
	cancel()
	wg.Wait()
	if err := awaitServed(t, served, 20*time.Second, "Serve did not return"); err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Errorf("a request sent during the shutdown got neither an answer nor a refused connection: %v", err)
	}
}

// TestServeShutdownCutsStalledBody: a client that sent its headers and
// stalls in its body holds the shutdown only for a few seconds, and gets a
// refusal: its request was not acknowledged, so nothing is lost.
func TestServeShutdownCutsStalledBody(t *testing.T) {
	n, cancel, served := servingNode(t, "ainotes", t.TempDir())
	c, err := net.Dial("tcp", strings.TrimPrefix(n.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\":"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the handler is reading the body
	start := time.Now()
	cancel()
	if err := awaitServed(t, served, 15*time.Second, "Serve waited for a stalled request body"); err != nil {
		t.Fatal(err)
	}
	t.Logf("shut down in %v with a stalled body", time.Since(start))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil { // closed: the client knows it never finished the request
		return
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode < 400 {
		t.Errorf("the stalled request got %d %s", resp.StatusCode, b)
	}
	t.Logf("the stalled request got %d %s", resp.StatusCode, b)
}

// TestServeShutdownCutsStalledUploads: as TestServeShutdownCutsStalledBody,
// for a forum write and an MCP call, whose bodies their own code reads: a
// client that sends the headers and stalls in the body does not hold a
// graceful shutdown beyond the body's grace, and Serve returns without
// error.
func TestServeShutdownCutsStalledUploads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	n, cancel, served := servingNode(t, "stalled", dir)
	secret, err := os.ReadFile(filepath.Join(dir, "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(secret))
	var conns []net.Conn
	for _, path := range []string{"/api/v1/boards/lobby/threads", "/api/v1/mcp"} {
		c, err := net.Dial("tcp", n.listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"kind\":",
			path, n.listener.Addr(), token)
		conns = append(conns, c)
	}
	// Another request answered: the server is past reading their headers.
	resp, err := http.Get(n.URL() + "/api/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	start := time.Now()
	cancel()
	if err := awaitServed(t, served, 10*time.Second, "Serve waited for the stalled uploads"); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("a stalled upload's connection was not ended: %v", err)
		}
	}
	t.Logf("shut down in %v with two uploads stalled", time.Since(start))
}

// TestServeExitsWhenTheStoreCannotClose: with its data directory deleted
// under it, Badger retries writing its memtable out forever; the shutdown
// gives up on the store after storeCloseTimeout rather than hang.
func TestServeExitsWhenTheStoreCannotClose(t *testing.T) {
	defer func(d time.Duration) { storeCloseTimeout = d }(storeCloseTimeout)
	storeCloseTimeout = time.Second
	dir := filepath.Join(t.TempDir(), "data")
	n, cancel, served := servingNode(t, "gone", dir)
	secret, err := os.ReadFile(filepath.Join(dir, "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", n.URL()+"/api/v1/tokens", strings.NewReader(`{"label":"x","rights":["read"]}`))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(secret)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("issuing a token: %d", resp.StatusCode)
	}
	// The store is left open for the rest of this test binary: Badger
	// retries its flush every second, in vain and quietly.
	if err := os.RemoveAll(dir); err != nil { // the memtable now has nowhere to go
		t.Fatal(err)
	}
	cancel()
	if err := awaitServed(t, served, 20*time.Second, "Serve waited for a store that cannot close"); err == nil || !strings.Contains(err.Error(), "store not closed") {
		t.Fatalf("Serve returned %v, want the store's timeout", err)
	}
}
