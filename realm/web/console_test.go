package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"relay/realm"
	"relay/realm/web"
)

// node is a realm on a loopback test server, with the console's client.
type node struct {
	*realm.Node
	url      string
	operator string
}

func startNode(t *testing.T, mod func(*realm.Config)) *node {
	t.Helper()
	cfg := realm.DefaultConfig()
	cfg.P2PAddrs = nil // no federation here
	cfg.Realm = "ainotes"
	cfg.DataDir = t.TempDir()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.P2PAddrs = nil // no federation unless a test asks for it
	if mod != nil {
		mod(&cfg)
	}
	n, err := realm.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections() // live streams never end by themselves
		srv.Close()
		n.Close()
	})
	secret, err := os.ReadFile(filepath.Join(cfg.DataDir, "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	return &node{Node: n, url: srv.URL, operator: strings.TrimSpace(string(secret))}
}

// api calls the JSON API with a bearer token.
func (n *node) api(t *testing.T, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, n.url+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
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

func (n *node) mustAPI(t *testing.T, method, path, token string, body any) map[string]any {
	t.Helper()
	status, out := n.api(t, method, path, token, body)
	if status != 200 && status != 201 {
		t.Fatalf("%s %s: %d %v", method, path, status, out)
	}
	return out
}

// browser is a cookie-keeping client that does not follow redirects.
type browser struct {
	t   *testing.T
	n   *node
	c   *http.Client
	jar *cookiejar.Jar
}

func (n *node) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, n: n, jar: jar, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{resp.StatusCode, resp.Header, string(body)}
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, _ := http.NewRequest("GET", b.n.url+path, nil)
	return b.do(req)
}

func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.n.url+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

var hiddenField = func(name string) *regexp.Regexp {
	return regexp.MustCompile(`name="` + name + `" value="([^"]*)"`)
}

// field is the value of the first hidden field of that name on a page.
func (p page) field(t *testing.T, name string) string {
	t.Helper()
	m := hiddenField(name).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no field %q on the page:\n%.2000s", name, p.body)
	}
	return m[1]
}

// login logs in with cred and returns the CSRF token of the session.
func (b *browser) login(cred string) string {
	b.t.Helper()
	lp := b.get("/console/login")
	resp := b.post("/console/login", url.Values{"secret": {cred}, "login_csrf": {lp.field(b.t, "login_csrf")}, "next": {"/console/"}})
	if resp.status != http.StatusSeeOther || resp.header.Get("Location") != "/console/" {
		b.t.Fatalf("login: %d %v\n%.1500s", resp.status, resp.header, resp.body)
	}
	q := b.get("/console/")
	if q.status != 200 {
		b.t.Fatalf("queue after login: %d", q.status)
	}
	return q.field(b.t, "csrf")
}

func sessionCookie(h http.Header) *http.Cookie {
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == "relay_session" {
			return c
		}
	}
	return nil
}

func TestSecurityHeaders(t *testing.T) {
	n := startNode(t, nil)
	b := n.browser(t)
	for _, path := range []string{"/console/login", "/console/", "/console/assets/console.css", "/console/nowhere"} {
		p := b.get(path)
		h := p.header
		if h.Get("Content-Security-Policy") != web.CSP || h.Get("X-Frame-Options") != "DENY" ||
			h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") == "" {
			t.Errorf("%s: headers %v", path, h)
		}
	}
	if !strings.Contains(web.CSP, "frame-ancestors 'none'") || strings.Contains(web.CSP, "unsafe-inline") {
		t.Fatalf("CSP %q", web.CSP)
	}
	// No inline script or style anywhere a page could carry it.
	p := b.get("/console/login")
	if regexp.MustCompile(`<script>|<script [^>]*>[^<]|<style|style="| on[a-z]+="`).MatchString(p.body) {
		t.Fatalf("inline script or style on the login page:\n%s", p.body)
	}
	// The homepage links to the console.
	home := b.get("/")
	if !strings.Contains(home.body, `href="/console/login"`) {
		t.Fatal("the homepage does not link to the console")
	}
}

func TestLoginSessionLogout(t *testing.T) {
	n := startNode(t, nil)
	b := n.browser(t)

	// Without a session every page goes to the login.
	if p := b.get("/console/tokens"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/console/login?next=") {
		t.Fatalf("anonymous: %d %v", p.status, p.header)
	}

	lp := b.get("/console/login")
	tok := lp.field(t, "login_csrf")
	// A wrong secret, and a login without the login form's token, are refused.
	if p := b.post("/console/login", url.Values{"secret": {"rlt_1_" + strings.Repeat("x", 43)}, "login_csrf": {tok}}); p.status != http.StatusUnauthorized {
		t.Fatalf("wrong secret: %d", p.status)
	}
	lp = b.get("/console/login")
	other := n.browser(t)
	if p := other.post("/console/login", url.Values{"secret": {n.operator}, "login_csrf": {lp.field(t, "login_csrf")}}); p.status != http.StatusForbidden || sessionCookie(p.header) != nil {
		t.Fatalf("login without the form's cookie: %d", p.status)
	}

	lp = b.get("/console/login")
	p := b.post("/console/login", url.Values{"secret": {n.operator}, "login_csrf": {lp.field(t, "login_csrf")}, "next": {"/console/tokens"}})
	ck := sessionCookie(p.header)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/tokens" || ck == nil {
		t.Fatalf("login: %d %v", p.status, p.header)
	}
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.Path != "/" {
		t.Fatalf("cookie %+v", ck)
	}
	// A next outside the console is not followed.
	lp = n.browser(t).get("/console/login?next=//evil.example/")
	if lp.field(t, "next") != "/console/" {
		t.Fatalf("next kept: %q", lp.field(t, "next"))
	}

	if p := b.get("/console/tokens"); p.status != 200 || !strings.Contains(p.body, "human:operator") {
		t.Fatalf("tokens page: %d", p.status)
	}
	csrf := b.get("/console/").field(t, "csrf")
	// Logout needs the CSRF token too.
	if p := b.post("/console/logout", url.Values{}); p.status != http.StatusForbidden || !strings.Contains(p.body, "csrf") {
		t.Fatalf("logout without csrf: %d", p.status)
	}
	if p := b.post("/console/logout", url.Values{"csrf": {csrf}}); p.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", p.status)
	}
	// The old cookie names no session any more, even sent by hand.
	again := n.browser(t)
	again.jar.SetCookies(mustURL(n.url), []*http.Cookie{ck})
	if p := again.get("/console/"); p.status != http.StatusSeeOther {
		t.Fatalf("after logout: %d", p.status)
	}
	// A form sent after the session ended asks for a login that leads back
	// to the page the form came from.
	p = again.post("/console/op/post_threads_id_messages", url.Values{"csrf": {csrf}, "return": {"/console/threads/th_1"}, "id": {"th_1"}, "kind": {"note"}, "body": {"late"}})
	if p.status != http.StatusUnauthorized || p.field(t, "next") != "/console/threads/th_1" {
		t.Fatalf("a form after the session ended: %d, next %q", p.status, p.field(t, "next"))
	}
}

// TestLoginRateLimited: logins past the allowance of an address are
// refused with 429 and a Retry-After: the seconds until the address may
// try again (10 a minute: one every 6 seconds).
func TestLoginRateLimited(t *testing.T) {
	n := startNode(t, nil)
	b := n.browser(t)
	tok := b.get("/console/login").field(t, "login_csrf")
	for i := range 20 {
		p := b.post("/console/login", url.Values{"secret": {"wrong"}, "login_csrf": {tok}})
		if p.status == http.StatusUnauthorized {
			tok = p.field(t, "login_csrf")
			continue
		}
		if p.status != http.StatusTooManyRequests || p.header.Get("Retry-After") != "6" || !strings.Contains(p.body, "Too many attempts") {
			t.Fatalf("attempt %d: %d, Retry-After %q", i+1, p.status, p.header.Get("Retry-After"))
		}
		if i != 10 {
			t.Fatalf("refused at attempt %d, want the 11th", i+1)
		}
		return
	}
	t.Fatal("20 wrong logins from one address, none refused")
}

// TestFormBodyBounded: a console form over 64 KiB is refused before it is
// read, whoever sends it (a login is read before its rate limit), and one
// that says no length is cut at the bound.
func TestFormBodyBounded(t *testing.T) {
	n := startNode(t, nil)
	b := n.browser(t)
	tok := b.get("/console/login").field(t, "login_csrf")
	filler := strings.Repeat("x", 1<<20)
	p := b.post("/console/login", url.Values{"secret": {n.operator}, "login_csrf": {tok}, "filler": {filler}})
	if p.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 1 MiB login form: %d, want 413", p.status)
	}
	body := url.Values{"secret": {n.operator}, "login_csrf": {tok}, "filler": {filler}}.Encode()
	req, _ := http.NewRequest("POST", n.url+"/console/login", io.MultiReader(strings.NewReader(body))) // no length: chunked
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if p := b.do(req); p.status == http.StatusSeeOther {
		t.Fatal("a chunked 1 MiB login form logged in")
	}
	tok = b.get("/console/login").field(t, "login_csrf") // the refusal's page gave a new one
	if p := b.post("/console/login", url.Values{"secret": {n.operator}, "login_csrf": {tok}}); p.status != http.StatusSeeOther {
		t.Fatalf("a login form of ordinary size: %d", p.status)
	}
}

func mustURL(s string) *url.URL {
	u, _ := url.Parse(s)
	return u
}

func TestSecureCookie(t *testing.T) {
	for _, tc := range []struct {
		name   string
		trust  bool
		secure bool
	}{{"forwarded proto untrusted", false, false}, {"forwarded proto trusted", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, func(c *realm.Config) { c.TrustForwardedProto = tc.trust })
			b := n.browser(t)
			lp := b.get("/console/login")
			req, _ := http.NewRequest("POST", n.url+"/console/login", strings.NewReader(url.Values{"secret": {n.operator}, "login_csrf": {lp.field(t, "login_csrf")}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Forwarded-Proto", "https")
			ck := sessionCookie(b.do(req).header)
			if ck == nil || ck.Secure != tc.secure {
				t.Fatalf("cookie %+v, want Secure=%v", ck, tc.secure)
			}
		})
	}
	// Over TLS itself the cookie is Secure.
	cfg := realm.DefaultConfig()
	cfg.P2PAddrs = nil // no federation here
	cfg.DataDir = t.TempDir()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.P2PAddrs = nil
	rn, err := realm.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rn.Close()
	srv := httptest.NewTLSServer(rn.Handler())
	defer srv.Close()
	secret, _ := os.ReadFile(filepath.Join(cfg.DataDir, "operator.token"))
	jar, _ := cookiejar.New(nil)
	c := srv.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	b := &browser{t: t, n: &node{url: srv.URL}, c: c, jar: jar}
	lp := b.get("/console/login")
	p := b.post("/console/login", url.Values{"secret": {strings.TrimSpace(string(secret))}, "login_csrf": {lp.field(t, "login_csrf")}})
	if ck := sessionCookie(p.header); ck == nil || !ck.Secure {
		t.Fatalf("over TLS: %+v", ck)
	}
}

func TestPasswordLogin(t *testing.T) {
	n := startNode(t, nil)
	b := n.browser(t)
	csrf := b.login(n.operator)
	other := n.browser(t)
	other.login(n.operator)
	pw := "a long enough passphrase"
	// The current credential is asked again.
	b.post("/console/settings/password", url.Values{"csrf": {csrf}, "current": {"wrong"}, "password": {pw}, "again": {pw}})
	if s := b.get("/console/settings"); !strings.Contains(s.body, "neither the operator secret nor the password") {
		t.Fatalf("a wrong current credential was not refused:\n%.3000s", s.body)
	}
	if p := b.post("/console/settings/password", url.Values{"csrf": {csrf}, "current": {n.operator}, "password": {pw}, "again": {pw}}); p.status != http.StatusSeeOther {
		t.Fatalf("set password: %d", p.status)
	}
	if s := b.get("/console/settings"); !strings.Contains(s.body, "The password is set") {
		t.Fatal("no confirmation of the password")
	}
	// Every other session ended with the change; this browser's goes on.
	if p := other.get("/console/settings"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/console/login") {
		t.Fatalf("another session after the password changed: %d %v", p.status, p.header)
	}
	if p := b.get("/console/settings"); p.status != http.StatusOK {
		t.Fatalf("the session that changed the password: %d", p.status)
	}
	fresh := n.browser(t)
	fresh.login(pw)
	lp := n.browser(t)
	l := lp.get("/console/login")
	if p := lp.post("/console/login", url.Values{"secret": {pw + "x"}, "login_csrf": {l.field(t, "login_csrf")}}); p.status != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d", p.status)
	}
}

// TestPasswordChangeRateLimited: the settings form checks the current
// credential (the operator secret or the password) as the login does, so
// it counts against the same allowance of the address: a session left open
// is no way to guess the password without limit.
func TestPasswordChangeRateLimited(t *testing.T) {
	n := startNode(t, nil)
	b := n.browser(t)
	csrf := b.login(n.operator) // one attempt of the allowance
	pw := "a long enough passphrase"
	limited := false
	for i := range 20 {
		b.post("/console/settings/password", url.Values{"csrf": {csrf}, "current": {fmt.Sprintf("guess %d", i)}, "password": {pw}, "again": {pw}})
		s := b.get("/console/settings")
		if strings.Contains(s.body, "Too many attempts") {
			if i != 9 {
				t.Fatalf("refused at guess %d, want the 10th (the login took one attempt)", i+1)
			}
			limited = true
			break
		}
		if !strings.Contains(s.body, "neither the operator secret nor the password") {
			t.Fatalf("guess %d: no refusal shown:\n%.3000s", i+1, s.body)
		}
	}
	if !limited {
		t.Fatal("20 wrong current credentials from one address, none refused")
	}
	// Past the allowance the right credential is not checked either.
	b.post("/console/settings/password", url.Values{"csrf": {csrf}, "current": {n.operator}, "password": {pw}, "again": {pw}})
	s := b.get("/console/settings")
	if !strings.Contains(s.body, "Too many attempts") {
		t.Fatalf("the right credential past the allowance:\n%.3000s", s.body)
	}
	if !strings.Contains(s.body, "not set: only the operator secret logs in") {
		t.Fatal("a password was set past the allowance")
	}
}

// TestConsoleCSRF: a console write without the session's CSRF token is
// refused with csrf and changes nothing.
func TestConsoleCSRF(t *testing.T) {
	n := startNode(t, nil)
	agent := n.mustAPI(t, "POST", "/api/v1/tokens", n.operator, map[string]any{"label": "writer", "rights": []string{"write"}})["token"].(string)
	th := n.mustAPI(t, "POST", "/api/v1/boards/lobby/threads", agent, map[string]any{"kind": "ask", "body": "Pin me?"})
	id := th["thread"].(map[string]any)["id"].(string)
	b := n.browser(t)
	csrf := b.login(n.operator)
	for _, form := range []url.Values{
		{"id": {id}},
		{"id": {id}, "csrf": {""}},
		{"id": {id}, "csrf": {csrf[:len(csrf)-2] + "xx"}},
	} {
		p := b.post("/console/op/post_threads_id_pin", form)
		if p.status != http.StatusForbidden || !strings.Contains(p.body, "csrf") {
			t.Fatalf("forged pin %v: %d", form, p.status)
		}
	}
	if got := n.mustAPI(t, "GET", "/api/v1/threads/"+id, "", nil)["thread"].(map[string]any)["pinned"]; got != false {
		t.Fatal("a forged form pinned the thread")
	}
	// With the token it works, and the console says what it did.
	if p := b.post("/console/op/post_threads_id_pin", url.Values{"id": {id}, "csrf": {csrf}, "return": {"/console/threads/" + id}}); p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/threads/"+id {
		t.Fatalf("pin: %d %v", p.status, p.header)
	}
	if got := n.mustAPI(t, "GET", "/api/v1/threads/"+id, "", nil)["thread"].(map[string]any)["pinned"]; got != true {
		t.Fatal("the pin did not happen")
	}
	if p := b.get("/console/threads/" + id); !strings.Contains(p.body, "pinned") {
		t.Fatal("no flash after the pin")
	}
	// A read is not an action.
	if p := b.post("/console/op/get_tokens", url.Values{"csrf": {csrf}}); p.status != http.StatusNotFound {
		t.Fatalf("a read as an action: %d", p.status)
	}
}

// TestAgentTextIsEscaped: whatever an agent writes renders as text.
func TestAgentTextIsEscaped(t *testing.T) {
	n := startNode(t, nil)
	agent := n.mustAPI(t, "POST", "/api/v1/tokens", n.operator, map[string]any{"label": "mallory", "rights": []string{"write"}})["token"].(string)
	evil := `<script>document.title='owned'</script><img src=x onerror=alert(1)>`
	th := n.mustAPI(t, "POST", "/api/v1/boards/lobby/threads", agent, map[string]any{
		"kind": "ask", "body": evil, "from": map[string]any{"extension": "x\"><b>"},
		"provenance": map[string]any{"model": "<i>m</i>", "client": "javascript:alert(1)"},
		"claims":     []any{map[string]any{"statement": evil, "evidence": []any{map[string]any{"kind": "note", "value": "<script>alert(2)</script>"}}}},
	})
	id := th["thread"].(map[string]any)["id"].(string)
	b := n.browser(t)
	b.login(n.operator)
	for _, path := range []string{"/console/threads/" + id, "/console/threads", "/console/"} {
		p := b.get(path)
		if p.status != 200 {
			t.Fatalf("%s: %d", path, p.status)
		}
		if strings.Contains(p.body, "<script>document") || strings.Contains(p.body, "<img src=x") || strings.Contains(p.body, `"><b>`) || strings.Contains(p.body, "<i>m</i>") {
			t.Fatalf("%s: agent text rendered as markup", path)
		}
	}
	if p := b.get("/console/threads/" + id); !strings.Contains(p.body, "&lt;script&gt;document.title=&#39;owned&#39;&lt;/script&gt;") {
		t.Fatal("the body is not shown as text")
	}
}

// TestConsoleActions: the forms of the queue, the thread and the tokens
// page, each an operation of the registry run as the human.
func TestConsoleActions(t *testing.T) {
	n := startNode(t, nil)
	agent := n.mustAPI(t, "POST", "/api/v1/tokens", n.operator, map[string]any{"label": "claude", "rights": []string{"write"}})["token"].(string)
	th := n.mustAPI(t, "POST", "/api/v1/boards/lobby/threads", agent, map[string]any{"kind": "ask", "body": "Is this a good first thread?",
		"claims": []any{map[string]any{"statement": "It is.", "evidence": []any{map[string]any{"kind": "note", "value": "looked at it"}}}}})
	id := th["thread"].(map[string]any)["id"].(string)
	claim := th["message"].(map[string]any)["claims"].([]any)[0].(string)
	app := n.mustAPI(t, "POST", "/api/v1/tokens/request", "", map[string]any{"label": "gemini", "purpose": "p", "model": "m", "client": "c", "provider": "p", "contact": "c"})
	reqID := fmt.Sprint(app["request_id"])
	feat := n.mustAPI(t, "POST", "/api/v1/features", agent, map[string]any{"title": "Subscribe", "body": "Tell me when a thread changes."})
	featID := fmt.Sprint(feat["feature"].(map[string]any)["id"])

	b := n.browser(t)
	csrf := b.login(n.operator)
	act := func(key string, form url.Values) string {
		t.Helper()
		form.Set("csrf", csrf)
		form.Set("return", "/console/")
		p := b.post("/console/op/"+key, form)
		if p.status != http.StatusSeeOther {
			t.Fatalf("%s: %d\n%.2000s", key, p.status, p.body)
		}
		q := b.get("/console/")
		m := regexp.MustCompile(`(?s)<div class="flash (ok|err)" role="(?:status|alert)"[^>]*>(.*?)</div>`).FindStringSubmatch(q.body)
		if m == nil {
			t.Fatalf("%s: no flash", key)
		}
		return m[1] + ": " + m[2]
	}

	// A refusal comes back as the registry's reason.
	if f := act("post_token_requests_id_review", url.Values{"id": {reqID}, "decision": {"reject"}}); !strings.Contains(f, "err") || !strings.Contains(f, "invalid_body") {
		t.Fatalf("reject without a reason: %s", f)
	}
	// Approve with exactly the rights ticked.
	if f := act("post_token_requests_id_review", url.Values{"id": {reqID}, "decision": {"approve"}, "rights": {"", "write", "lock"}, "justification": {"moderates the lobby"}}); !strings.Contains(f, "ok") || !strings.Contains(f, "read, write, lock") {
		t.Fatalf("approve: %s", f)
	}
	// No right ticked is read only.
	if f := act("post_tokens_id_rights", url.Values{"id": {"3"}, "rights": {""}}); !strings.Contains(f, "ainotes:gemini") || !strings.Contains(f, "holds read.") {
		t.Fatalf("rights to none: %s", f)
	}
	if f := act("post_features_id_status", url.Values{"id": {featID}, "status": {"planned"}, "note": {"next month"}}); !strings.Contains(f, "is planned") {
		t.Fatalf("feature: %s", f)
	}
	// Decided, it leaves the open requests for the decided ones.
	if f := act("post_features_id_status", url.Values{"id": {featID}, "status": {"done"}, "note": {"shipped"}}); !strings.Contains(f, "is done") {
		t.Fatalf("feature done: %s", f)
	}
	if q := b.get("/console/"); !strings.Contains(q.body, "No feature request is open.") || !strings.Contains(q.body, "Decided (1)") || !strings.Contains(q.body, "shipped") {
		t.Fatalf("the queue after the decision:\n%.3000s", q.body)
	}
	if f := act("post_claims_id_seal", url.Values{"id": {claim}}); !strings.Contains(f, "verified") {
		t.Fatalf("seal: %s", f)
	}
	if f := act("post_threads_id_llm_replies", url.Values{"id": {id}, "forbidden": {"true"}}); !strings.Contains(f, "AI replies forbidden") {
		t.Fatalf("forbid: %s", f)
	}
	if f := act("post_threads_id_messages", url.Values{"id": {id}, "kind": {"answer"}, "body": {"Yes, from the human."}, "parent": {""}}); !strings.Contains(f, "Posted") {
		t.Fatalf("post: %s", f)
	}
	got := n.mustAPI(t, "GET", "/api/v1/threads/"+id, "", nil)
	if s := got["thread"].(map[string]any); s["state"] != "answered" || s["proposal"] != false || s["llm_reply_forbidden"] != true {
		t.Fatalf("thread after the human's answer: %v", s)
	}
	if status, out := n.api(t, "POST", "/api/v1/threads/"+id+"/messages", agent, map[string]any{"kind": "note", "body": "me too"}); status != 403 || out["reason"] != "llm_reply_forbidden" {
		t.Fatalf("agent after forbid: %d %v", status, out)
	}
	if f := act("post_tokens_id_revoke", url.Values{"id": {"2"}}); !strings.Contains(f, "revoked") {
		t.Fatalf("revoke: %s", f)
	}
	if status, _ := n.api(t, "GET", "/api/v1/me", agent, nil); status != 401 {
		t.Fatalf("revoked token still works: %d", status)
	}
	// Issuing redirects to the page that shows the secret, once: the
	// secret is in no cookie and no URL, and a reload issues nothing.
	p := b.post("/console/op/post_tokens", url.Values{"csrf": {csrf}, "label": {"new agent"}, "rights": {"", "write"}})
	loc := p.header.Get("Location")
	if p.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/console/tokens?issued=") || strings.Contains(loc, "rlt_") || strings.Contains(p.header.Get("Set-Cookie"), "rlt_") {
		t.Fatalf("issue: %d %v", p.status, p.header)
	}
	other := n.browser(t)
	other.login(n.operator)
	if q := other.get(loc); strings.Contains(q.body, `<div class="secret" data-once>`) {
		t.Fatal("another session saw the secret")
	}
	p = b.get(loc)
	m := regexp.MustCompile(`<div class="secret" data-once>(rlt_[^<]+)</div>`).FindStringSubmatch(p.body)
	if p.status != 200 || m == nil {
		t.Fatalf("the issued page: %d", p.status)
	}
	if again := b.get(loc); again.status != 200 || strings.Contains(again.body, `<div class="secret" data-once>`) || !strings.Contains(again.body, "shown once") {
		t.Fatalf("the issued page again: %d", again.status)
	}
	if status, out := n.api(t, "GET", "/api/v1/me", m[1], nil); status != 200 || out["identity"] != "ainotes:new-agent" {
		t.Fatalf("issued token: %d %v", status, out)
	}
}

// TestLiveStream: /console/live says "change" after a write by anyone.
func TestLiveStream(t *testing.T) {
	n := startNode(t, nil)
	b := n.browser(t)
	b.login(n.operator)
	if p := n.browser(t).get("/console/live"); p.status != http.StatusUnauthorized {
		t.Fatalf("live without a session: %d", p.status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", n.url+"/console/live", nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("live: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(resp.Body)
	if line, _ := rd.ReadString('\n'); !strings.HasPrefix(line, "retry:") {
		t.Fatalf("first line %q", line)
	}
	n.mustAPI(t, "POST", "/api/v1/tokens/request", "", map[string]any{"label": "x", "purpose": "p", "model": "m", "client": "c", "provider": "p", "contact": "c"})
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("no change event: %v", err)
		}
		if line == "event: change\n" {
			break
		}
	}
	// Logged out (here by another page of the session), the stream says
	// so and ends: an open page does not stay "live" with nothing coming.
	b2 := n.browser(t)
	b2.jar.SetCookies(mustURL(n.url), b.jar.Cookies(mustURL(n.url)))
	csrf := b2.get("/console/settings").field(t, "csrf")
	if p := b2.post("/console/logout", url.Values{"csrf": {csrf}}); p.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", p.status)
	}
	ended := false
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			break
		}
		ended = ended || line == "event: ended\n"
	}
	if !ended {
		t.Fatal("the stream of an ended session did not say so")
	}
}

// TestPagesRender: every page answers, and a refusal is a page with the
// registry's reason and status.
func TestPagesRender(t *testing.T) {
	n := startNode(t, nil)
	agent := n.mustAPI(t, "POST", "/api/v1/tokens", n.operator, map[string]any{"label": "claude", "rights": []string{"write"}})["token"].(string)
	n.mustAPI(t, "POST", "/api/v1/boards/lobby/threads", agent, map[string]any{"kind": "ask", "body": "Hello?"})
	b := n.browser(t)
	b.login(n.operator)
	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{
		{"/console/", 200, "Proposals to confirm"},
		{"/console/boards", 200, "Lobby"},
		{"/console/boards/1", 200, "Hello?"},
		{"/console/boards/lobby", 200, "Hello?"},
		{"/console/threads", 200, "Hello?"},
		{"/console/threads?state=closed", 200, "No thread matches."},
		{"/console/threads/th_1", 200, "Post as the human"},
		{"/console/threads/1", 200, "Hello?"},
		{"/console/tokens", 200, "ainotes:"},
		{"/console/corpus", 200, "No conversation yet"},
		{"/console/corpus?search=hello", 200, "matching messages"},
		{"/console/federation", 200, "This node does not federate"},
		{"/console/settings", 200, "Set password"},
		{"/console/threads/th_99", 404, "thread_not_found"},
		{"/console/boards/nope", 404, "board_not_found"},
		{"/console/corpus/conversations/00000000-0000-4000-8000-000000000000", 404, "not_found"},
		{"/console/nowhere", 404, "not_found"},
	} {
		p := b.get(tc.path)
		if p.status != tc.status || !strings.Contains(p.body, tc.want) {
			t.Errorf("%s: %d, want %d with %q\n%.1500s", tc.path, p.status, tc.status, tc.want, p.body)
		}
	}
	// A page's path with a slash after it is the page.
	for path, want := range map[string]string{"/console/threads/": "/console/threads", "/console/boards/1/?x=1": "/console/boards/1?x=1", "/console/settings/": "/console/settings"} {
		if p := b.get(path); p.status != http.StatusMovedPermanently || p.header.Get("Location") != want {
			t.Errorf("%s: %d to %q, want %s", path, p.status, p.header.Get("Location"), want)
		}
	}
	if p := b.get("/console/nowhere/"); p.status != 404 {
		t.Errorf("/console/nowhere/: %d", p.status)
	}
	// An error page speaks to a person, not a client: no pointer to the
	// API's tools, and the way back to the list.
	if p := b.get("/console/threads/th_99"); strings.Contains(p.body, "get_threads") || !strings.Contains(p.body, `href="/console/threads">Back to the threads`) {
		t.Errorf("the missing thread's page:\n%.2000s", p.body)
	}
}

// TestConsoleHeadAndRedirects: HEAD is answered as GET without the body
// (RFC 9110, section 9.3.2), logged in or not, and the console's redirects
// keep the query.
func TestConsoleHeadAndRedirects(t *testing.T) {
	n := startNode(t, nil)
	b := n.browser(t)
	same := func(path string) {
		t.Helper()
		g := b.get(path)
		req, _ := http.NewRequest("HEAD", n.url+path, nil)
		h := b.do(req)
		if h.status != g.status || h.header.Get("Location") != g.header.Get("Location") || h.body != "" {
			t.Errorf("%s: GET %d %q, HEAD %d %q", path, g.status, g.header.Get("Location"), h.status, h.header.Get("Location"))
		}
	}
	same("/console/")
	same("/console/boards?x=1")
	if p := b.get("/console?next=x"); p.status != http.StatusMovedPermanently || p.header.Get("Location") != "/console/?next=x" {
		t.Errorf("/console?next=x: %d %q", p.status, p.header.Get("Location"))
	}
	b.login(n.operator)
	same("/console/")
	same("/console/boards/?x=1")
	if p := b.get("/console/boards/?x=1"); p.header.Get("Location") != "/console/boards?x=1" {
		t.Errorf("/console/boards/?x=1: %d %q", p.status, p.header.Get("Location"))
	}
}

// TestConsoleWrongMethod: a console path asked with a method it does not
// take is 405 with Allow, with or without a session, before any CSRF
// check; a path the console does not have stays its 404 page.
func TestConsoleWrongMethod(t *testing.T) {
	n := startNode(t, nil)
	b := n.browser(t)
	for _, loggedIn := range []bool{false, true} {
		if loggedIn {
			b.login(n.operator)
		}
		for _, tc := range []struct{ method, path, allow string }{
			{"PUT", "/console/boards", "GET, HEAD"},
			{"DELETE", "/console/settings/password", "POST"},
			{"PUT", "/console/login", "GET, HEAD, POST"},
		} {
			req, _ := http.NewRequest(tc.method, n.url+tc.path, nil)
			p := b.do(req)
			if p.status != http.StatusMethodNotAllowed || p.header.Get("Allow") != tc.allow {
				t.Errorf("logged in %v, %s %s: %d, Allow %q", loggedIn, tc.method, tc.path, p.status, p.header.Get("Allow"))
			}
		}
	}
	if p := b.get("/console/nothing-here"); p.status != http.StatusNotFound {
		t.Errorf("a missing page: %d", p.status)
	}
}
