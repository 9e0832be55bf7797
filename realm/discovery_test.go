package realm

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDiscoveryDocuments: every document is served with its type, a
// validator and CORS, whatever Accept says; HEAD and 304 work.
func TestDiscoveryDocuments(t *testing.T) {
	tn := startNode(t, "ainotes")
	for _, doc := range documents {
		for _, acc := range []string{"", "application/json", "text/html"} {
			status, body, hdr := tn.send(t, "GET", doc.Path, acceptHeader(acc))
			if status != 200 || mediaOf(hdr) != doc.MediaType || len(body) == 0 {
				t.Errorf("%s (Accept %q): %d %s", doc.Path, acc, status, hdr.Get("Content-Type"))
				continue
			}
			if hdr.Get("ETag") == "" || hdr.Get("Cache-Control") == "" || hdr.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("%s: headers %v", doc.Path, hdr)
			}
			if strings.HasPrefix(doc.MediaType, "application/") {
				var v any
				if err := json.Unmarshal(body, &v); err != nil {
					t.Errorf("%s is not JSON: %v", doc.Path, err)
				}
			}
		}
		if doc.Path == "/health" {
			continue // its ETag changes with its uptime
		}
		_, body, hdr := tn.send(t, "GET", doc.Path, nil)
		if st, b, _ := tn.send(t, "GET", doc.Path, http.Header{"If-None-Match": {hdr.Get("ETag")}}); st != 304 || len(b) != 0 {
			t.Errorf("%s If-None-Match: %d", doc.Path, st)
		}
		if st, b, h := tn.send(t, "HEAD", doc.Path, nil); st != 200 || len(b) != 0 || h.Get("ETag") != hdr.Get("ETag") || h.Get("Content-Length") != itoa(uint64(len(body))) {
			t.Errorf("HEAD %s: %d %v", doc.Path, st, h)
		}
	}
	if _, _, hdr := tn.send(t, "GET", "/health", nil); hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("/health Cache-Control %q", hdr.Get("Cache-Control"))
	}
	status, _, _ := tn.send(t, "POST", "/llms.txt", nil)
	if status != 405 {
		t.Errorf("POST /llms.txt: %d", status)
	}
}

func TestHomepage(t *testing.T) {
	tn := startNode(t, "ainotes")
	for _, tc := range []struct {
		accept, want string
		status       int
	}{
		{"", mediaHTML, 200},
		{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", mediaHTML, 200},
		{"text/markdown", mediaMarkdown, 200},
		{"text/markdown, text/html;q=0.5", mediaMarkdown, 200},
		{"text/html;q=0, */*", mediaMarkdown, 200},
		{"application/json", "", 406},
	} {
		status, body, hdr := tn.send(t, "GET", "/", acceptHeader(tc.accept))
		if status != tc.status || !strings.Contains(hdr.Get("Vary"), "Accept") {
			t.Errorf("Accept %q: %d Vary %q", tc.accept, status, hdr.Get("Vary"))
			continue
		}
		if status != 200 {
			var out map[string]any
			if json.Unmarshal(body, &out) != nil || corpusCode(out) != "not_acceptable" {
				t.Errorf("Accept %q: %s", tc.accept, body)
			}
			continue
		}
		if mediaOf(hdr) != tc.want || !strings.Contains(hdr.Get("Link"), `rel="api-catalog"`) {
			t.Errorf("Accept %q: %s Link %q", tc.accept, hdr.Get("Content-Type"), hdr.Get("Link"))
		}
		if tc.want == mediaHTML && !bytes.Contains(body, []byte("<!doctype html>")) || tc.want == mediaMarkdown && !bytes.HasPrefix(body, []byte("# relay realm ainotes")) {
			t.Errorf("Accept %q: %.100s", tc.accept, body)
		}
	}
}

// htmlPages are the node's HTML pages for people: the homepage and the
// protocol.
var htmlPages = []string{"/", "/parley.html"}

// TestHTMLPagesIcon: each HTML page names the node's icon, which is
// served, so that a browser does not ask for /favicon.ico (a 404).
func TestHTMLPagesIcon(t *testing.T) {
	tn := startNode(t, "ainotes")
	icon := `<link rel="icon" href="/console/assets/icon.svg" type="image/svg+xml">`
	for _, path := range htmlPages {
		if _, body, _ := tn.send(t, "GET", path, acceptHeader("text/html")); !bytes.Contains(body, []byte(icon)) {
			t.Errorf("%s does not name the icon", path)
		}
	}
	if st, body, hdr := tn.send(t, "GET", "/console/assets/icon.svg", nil); st != 200 || mediaOf(hdr) != "image/svg+xml" || !bytes.Contains(body, []byte("<svg")) {
		t.Errorf("the icon: %d %s", st, hdr.Get("Content-Type"))
	}
}

// TestHTMLPagesLandmarks: each HTML page holds its content in one main
// landmark. The homepage offers no search form: /search answers JSON,
// Markdown or JSON-LD, none of which a browser shows as a page, so the
// homepage names the operation instead.
func TestHTMLPagesLandmarks(t *testing.T) {
	tn := startNode(t, "ainotes")
	for _, path := range htmlPages {
		_, b, _ := tn.send(t, "GET", path, acceptHeader("text/html"))
		body := string(b)
		open, end := strings.Index(body, "<main>"), strings.Index(body, "</main>")
		if strings.Count(body, "<main>") != 1 || open < 0 || end < open || strings.Index(body, "<h1>") < open || strings.LastIndex(body, "</table>") > end {
			t.Errorf("%s: its content is not in one <main>", path)
		}
		if strings.Contains(body, "<form") || strings.Contains(body, "<input") {
			t.Errorf("%s has a form", path)
		}
	}
	if _, body, _ := tn.send(t, "GET", "/", acceptHeader("text/html")); !bytes.Contains(body, []byte("<code>GET /search?q=words</code>")) {
		t.Error("the homepage does not name the search")
	}
}

// TestHTMLPagesTablesScroll: every table of the HTML pages sits in a
// region that scrolls it sideways, which a keyboard can focus and a
// screen reader names, and so does every preformatted block.
func TestHTMLPagesTablesScroll(t *testing.T) {
	tn := startNode(t, "ainotes")
	region := regexp.MustCompile(`<div class="scroll" tabindex="0" role="region" aria-label="[^"]+">$`)
	for _, path := range htmlPages {
		_, b, _ := tn.send(t, "GET", path, acceptHeader("text/html"))
		body := string(b)
		for _, at := range regexp.MustCompile(`<table\b`).FindAllStringIndex(body, -1) {
			if !region.MatchString(body[:at[0]]) {
				t.Errorf("%s: a table not in a focusable, named region: %.100s", path, body[at[0]:])
			}
		}
		for _, pre := range regexp.MustCompile(`<pre\b[^>]*>`).FindAllString(body, -1) {
			if !strings.Contains(pre, `tabindex="0"`) || !strings.Contains(pre, `role="region"`) || !strings.Contains(pre, `aria-label="`) {
				t.Errorf("%s: %s is not a focusable, named region", path, pre)
			}
		}
	}
}

// TestHTMLPagesSecurityHeaders: each HTML page sends a policy that allows
// its own inline style (by the hash of the style it serves) and images
// from this origin, and nothing else: no script, form, frame or base;
// and it may not be framed, nor tell other sites where it was. The
// Markdown homepage is no page a browser runs: it has no policy.
func TestHTMLPagesSecurityHeaders(t *testing.T) {
	tn := startNode(t, "ainotes")
	for _, doc := range documents {
		if doc.MediaType == mediaHTML && doc.csp == "" {
			t.Errorf("%s is HTML without a policy", doc.Path)
		}
	}
	style := regexp.MustCompile(`(?s)<style>(.*?)</style>`)
	for _, path := range htmlPages {
		for _, hdr := range []http.Header{nil, acceptHeader("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")} {
			_, body, h := tn.send(t, "GET", path, hdr)
			csp := h.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "img-src 'self'", "form-action 'none'", "frame-ancestors 'none'", "base-uri 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("%s: the policy %q lacks %q", path, csp, want)
				}
			}
			m := style.FindSubmatch(body)
			if m == nil {
				t.Fatalf("%s has no style", path)
			}
			sum := sha256.Sum256(m[1])
			if want := "style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "';"; !strings.Contains(csp, want) || strings.Contains(csp, "unsafe") || strings.Contains(csp, "script-src") {
				t.Errorf("%s: the policy %q, want %q for its style and no script", path, csp, want)
			}
			if h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "same-origin" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cross-Origin-Opener-Policy") != "same-origin" {
				t.Errorf("%s: headers %v", path, h)
			}
		}
	}
	if _, _, h := tn.send(t, "GET", "/", acceptHeader("text/markdown")); h.Get("Content-Security-Policy") != "" {
		t.Errorf("the Markdown homepage has a policy: %q", h.Get("Content-Security-Policy"))
	}
}

// TestBreakable: a path or a name in an HTML table may break before a
// slash (not a leading one) and after an underscore, and stays escaped.
func TestBreakable(t *testing.T) {
	for in, want := range map[string]string{
		"/api/v1/threads/{id}":     "/api<wbr>/v1<wbr>/threads<wbr>/{id}",
		"token_read_only":          "token_<wbr>read_<wbr>only",
		"application/linkset+json": "application<wbr>/linkset+json",
		"<b>_&":                    "&lt;b&gt;_<wbr>&amp;",
		"plain":                    "plain",
	} {
		if got := string(breakable(in)); got != want {
			t.Errorf("breakable(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDiscoveryContent(t *testing.T) {
	tn := startNode(t, "ainotes")
	get := func(path string) string {
		t.Helper()
		status, body, _ := tn.send(t, "GET", path, nil)
		if status != 200 {
			t.Fatalf("%s: %d", path, status)
		}
		return string(body)
	}
	llms, full := get("/llms.txt"), get("/llms-full.txt")
	for _, want := range []string{"# Parley v1", "# The corpus", "POST /api/v1/mcp", "GET /api/v1/manifest", "GET /corpus/index.json",
		"POST /register", "text/markdown", "application/ld+json", "/.well-known/api-catalog", "untrusted"} {
		if !strings.Contains(llms, want) {
			t.Errorf("/llms.txt lacks %q", want)
		}
	}
	if !strings.HasPrefix(full, llms) {
		t.Error("/llms-full.txt does not begin with /llms.txt")
	}
	for _, op := range tn.reg.Operations() {
		if !strings.Contains(full, "#### `"+op.Method+" "+op.Path+"` — `"+op.Key+"`") {
			t.Errorf("/llms-full.txt lacks %s", op.Key)
		}
		if !strings.Contains(llms, op.Path) {
			t.Errorf("/llms.txt lacks %s %s", op.Method, op.Path)
		}
	}
	for _, want := range []string{"`conversation_id` (path, string, required)", "`Operation-Token` (header", "`kinds` (query, array of string)", "`subject` (body, string, required)"} {
		if !strings.Contains(full, want) {
			t.Errorf("/llms-full.txt lacks %q", want)
		}
	}
	agents := get("/agents.txt")
	for _, want := range []string{"## Minimal read workflow", "## Minimal write workflow", "/auth.md", "/service.jsonld", "/corpus/index.json", "untrusted"} {
		if !strings.Contains(agents, want) {
			t.Errorf("/agents.txt lacks %q", want)
		}
	}
	robots := get("/robots.txt")
	if !strings.Contains(robots, "Content-Signal: "+contentSignal) || !strings.Contains(robots, "Sitemap: "+tn.srv.URL+"/sitemap.xml") {
		t.Errorf("/robots.txt:\n%s", robots)
	}
	auth := get("/auth.md")
	for _, want := range []string{"## HTTP first-write quick start", "## MCP OAuth connection", "/oauth/authorize", "Operation-Token", "428"} {
		if !strings.Contains(auth, want) {
			t.Errorf("/auth.md lacks %q", want)
		}
	}
	if !strings.Contains(get("/how-to-use"), "## Integrator security: untrusted content") {
		t.Error("/how-to-use lacks the integrator security section")
	}

	// The API catalog, and its alias.
	status, body, hdr := tn.send(t, "GET", apiCatalogPath, nil)
	var cat struct {
		Linkset []map[string]any `json:"linkset"`
	}
	if status != 200 || mediaOf(hdr) != mediaLinkset || json.Unmarshal(body, &cat) != nil || len(cat.Linkset) != 1 {
		t.Fatalf("api-catalog: %d %s %s", status, hdr.Get("Content-Type"), body)
	}
	// RFC 9727, section 4.2: the linkset names the api-catalog profile.
	if _, params, err := mime.ParseMediaType(hdr.Get("Content-Type")); err != nil || params["profile"] != "https://www.rfc-editor.org/info/rfc9727" {
		t.Errorf("api-catalog: Content-Type %q lacks the RFC 9727 profile", hdr.Get("Content-Type"))
	}
	desc := cat.Linkset[0]["service-desc"].([]any)[0].(map[string]any)
	if cat.Linkset[0]["anchor"] != tn.srv.URL+"/" || desc["href"] != tn.srv.URL+"/openapi.json" {
		t.Errorf("api-catalog: %v", cat.Linkset[0])
	}
	if _, alias, h := tn.send(t, "GET", apiCatalogPath+".json", nil); mediaOf(h) != mediaJSON || !bytes.Equal(alias, body) {
		t.Errorf("api-catalog.json: %s", h.Get("Content-Type"))
	}

	var svc ServiceOut
	if err := json.Unmarshal([]byte(get("/service.json")), &svc); err != nil || len(svc.Protocols) != 2 || svc.ContentSignal != contentSignal {
		t.Errorf("service.json: %v %+v", err, svc)
	}
	var vocab map[string]any
	json.Unmarshal([]byte(get("/vocab.jsonld")), &vocab)
	ctx, _ := vocab["@context"].(map[string]any)
	if ctx["content"] != "schema:text" || ctx["@vocab"] != tn.srv.URL+"/vocab#" || len(vocab["@graph"].([]any)) == 0 {
		t.Errorf("vocab.jsonld: %v", vocab)
	}
	// /auth.md still onboards: the first write goes through after it.
	a := tn.registerAgent(t, false)
	if st, _, _ := tn.write(t, a, "/createConversation", "disc-1", map[string]any{"subject": "s", "content": "c"}); st != 428 {
		t.Fatalf("before the guide: %d", st)
	}
	tn.onboard(t, a)
	if st, out, _ := tn.write(t, a, "/createConversation", "disc-1", map[string]any{"subject": "s", "content": "c"}); st != 201 {
		t.Fatalf("after the guide: %d %v", st, out)
	}
}

// TestLLMsTxtLinks: /llms.txt opens as llmstxt.org has it (an H1, then a
// blockquote), and its list of documents is a file list in that format, one
// "- [name](url): notes" a line with an absolute URL, so tools that read
// llms.txt find the links.
func TestLLMsTxtLinks(t *testing.T) {
	tn := startNode(t, "ainotes")
	status, body, _ := tn.send(t, "GET", "/llms.txt", nil)
	if status != 200 {
		t.Fatalf("/llms.txt: %d", status)
	}
	lines := strings.Split(string(body), "\n")
	if !strings.HasPrefix(lines[0], "# ") || lines[1] != "" || !strings.HasPrefix(lines[2], "> ") {
		t.Errorf("/llms.txt does not open with an H1 and a blockquote: %q", lines[:3])
	}
	_, section, ok := strings.Cut(string(body), "\n## Discovery documents\n\n")
	if !ok {
		t.Fatal("/llms.txt has no Discovery documents section")
	}
	section, _, _ = strings.Cut(section, "\n\n")
	item := regexp.MustCompile(`^- \[([^\]]+)\]\(([^)]+)\)(?:: .+)?$`)
	linked := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(section), "\n") {
		m := item.FindStringSubmatch(line)
		if m == nil || !strings.HasPrefix(m[2], tn.srv.URL+"/") {
			t.Errorf("/llms.txt: not a file-list link with an absolute URL: %q", line)
			continue
		}
		linked[strings.TrimPrefix(m[2], tn.srv.URL)] = true
	}
	for _, doc := range documents {
		if !doc.hidden && !linked[doc.Path] {
			t.Errorf("/llms.txt does not link %s", doc.Path)
		}
	}
}

// TestOpenAPI: the document lists every registry operation with its
// parameters, bodies and both error shapes; with openapi-spec-validator
// installed (pip: openapi-spec-validator), it must validate as OpenAPI 3.1.
func TestOpenAPI(t *testing.T) {
	tn := startNode(t, "ainotes")
	status, body, hdr := tn.send(t, "GET", "/openapi.json", nil)
	if status != 200 || mediaOf(hdr) != mediaJSON {
		t.Fatalf("openapi.json: %d %s", status, hdr.Get("Content-Type"))
	}
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Servers    []map[string]any                     `json:"servers"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas         map[string]any `json:"schemas"`
			SecuritySchemes map[string]any `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" || doc.Servers[0]["url"] != tn.srv.URL || doc.Components.SecuritySchemes["bearer"] == nil ||
		doc.Components.Schemas["CorpusError"] == nil || doc.Components.Schemas["ParleyRefusal"] == nil {
		t.Fatalf("openapi: %s %v %v", doc.OpenAPI, doc.Servers, doc.Components)
	}
	ids := map[string]bool{}
	for _, op := range tn.reg.Operations() {
		o := doc.Paths[op.Path][strings.ToLower(op.Method)]
		if o == nil || o["operationId"] != op.Key {
			t.Errorf("openapi lacks %s (%s %s)", op.Key, op.Method, op.Path)
			continue
		}
		ids[op.Key] = true
		params := map[string]string{}
		for _, p := range asSlice(o["parameters"]) {
			pm := p.(map[string]any)
			params[pm["name"].(string)] = pm["in"].(string)
		}
		for name := range pathParams(op.Path) {
			if params[name] != "path" {
				t.Errorf("%s: path parameter %s: %v", op.Key, name, params)
			}
		}
		for header := range op.Headers {
			if params[header] != "header" {
				t.Errorf("%s: header %s: %v", op.Key, header, params)
			}
		}
		if op.Method == http.MethodPost && bodySchema(op) != nil && o["requestBody"] == nil {
			t.Errorf("%s: no request body", op.Key)
		}
		responses := o["responses"].(map[string]any)
		def, _ := responses["default"].(map[string]any)
		ref := field(def, "content", "application/json", "schema", "$ref")
		if want := map[bool]string{true: "#/components/schemas/CorpusError", false: "#/components/schemas/ParleyRefusal"}[op.Surface == 1]; ref != want {
			t.Errorf("%s: error schema %v", op.Key, ref)
		}
		for _, mt := range op.Representations {
			st := "200"
			if op.Status != 0 {
				st = itoa(uint64(op.Status))
			}
			if field(responses[st].(map[string]any), "content", mt) == nil {
				t.Errorf("%s: no %s response", op.Key, mt)
			}
		}
	}
	if q := doc.Paths["/messages"]["get"]; q != nil {
		found := false
		for _, p := range asSlice(q["parameters"]) {
			if pm := p.(map[string]any); pm["name"] == "kinds" && pm["in"] == "query" && pm["explode"] == true {
				found = true
			}
		}
		if !found {
			t.Error("GET /messages: kinds is not a repeated query parameter")
		}
	}
	for _, p := range []string{"/", "/llms.txt", "/.well-known/api-catalog", "/mcp", "/api/v1/mcp"} {
		if doc.Paths[p] == nil {
			t.Errorf("openapi lacks %s", p)
		}
	}

	validator, err := exec.LookPath("openapi-spec-validator")
	if err != nil {
		if os.Getenv("RELAY_OPENAPI_CHECK") != "" {
			t.Fatal("RELAY_OPENAPI_CHECK is set but openapi-spec-validator is not installed (pip install openapi-spec-validator)")
		}
		t.Log("openapi-spec-validator not installed: the OpenAPI 3.1 validation is skipped")
		return
	}
	file := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(validator, "--schema", "3.1", file).CombinedOutput()
	if err != nil {
		t.Fatalf("openapi-spec-validator: %v\n%s", err, out)
	}
	t.Logf("openapi-spec-validator: %s", bytes.TrimSpace(out))
}

// openAPIOf is the node's /openapi.json, decoded.
func openAPIOf(t *testing.T, tn *testNode) map[string]any {
	t.Helper()
	status, body, _ := tn.send(t, "GET", "/openapi.json", nil)
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); status != 200 || err != nil {
		t.Fatalf("openapi.json: %d %v", status, err)
	}
	return doc
}

// TestOpenAPIHeaders: a header the node sends with an answer is one the
// document names for that answer: the MCP endpoints' 401 challenge, and the
// api-catalog Link of the homepage and the catalog.
func TestOpenAPIHeaders(t *testing.T) {
	tn := startNode(t, "ainotes")
	paths := openAPIOf(t, tn)["paths"].(map[string]any)
	documented := func(path, method, status, header string) bool {
		h, _ := field(paths[path].(map[string]any), method, "responses", status, "headers", header).(map[string]any)
		return h != nil
	}
	for _, path := range []string{"/api/v1/mcp", "/mcp"} {
		st, _, hdr := tn.sendBody(t, "POST", path, http.Header{"Content-Type": {mediaJSON}, "Accept": {"application/json, text/event-stream"}},
			`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if st != 401 || hdr.Get("WWW-Authenticate") == "" {
			t.Fatalf("POST %s without a token: %d, WWW-Authenticate %q", path, st, hdr.Get("WWW-Authenticate"))
		}
		if !documented(path, "post", "401", "WWW-Authenticate") {
			t.Errorf("POST %s: the 401 sends WWW-Authenticate, which the document does not name", path)
		}
	}
	for path, item := range paths {
		for method, o := range item.(map[string]any) {
			if _, created := field(o.(map[string]any), "responses", "201").(map[string]any); created && !documented(path, method, "201", "Location") {
				t.Errorf("%s %s: the 201 sends Location, which the document does not name", method, path)
			}
		}
	}
	// Every operation, a discovery document's too, documents its refusals.
	for path, item := range paths {
		for method, o := range item.(map[string]any) {
			if _, ok := field(o.(map[string]any), "responses", "default").(map[string]any); !ok {
				t.Errorf("%s %s documents no refusal (default)", method, path)
			}
		}
	}
	for _, path := range []string{"/", apiCatalogPath} {
		st, _, hdr := tn.send(t, "GET", path, nil)
		if st != 200 || hdr.Get("Link") == "" {
			t.Fatalf("GET %s: %d, Link %q", path, st, hdr.Get("Link"))
		}
		if !documented(path, "get", "200", "Link") {
			t.Errorf("GET %s: the 200 sends Link, which the document does not name", path)
		}
	}
}

// TestOpenAPIQuery: a query parameter's schema admits what the query string
// can carry and the node takes: no null (a query string has none: ?limit=null
// is the text "null", refused), and an empty value where the node takes it
// for no value (?board= lists every board's threads).
func TestOpenAPIQuery(t *testing.T) {
	tn := startNode(t, "ainotes")
	for path, item := range openAPIOf(t, tn)["paths"].(map[string]any) {
		for method, o := range item.(map[string]any) {
			for _, p := range asSlice(o.(map[string]any)["parameters"]) {
				pm := p.(map[string]any)
				if pm["in"] != "query" {
					continue
				}
				s := pm["schema"].(map[string]any)
				if slices.Contains(asSlice(s["type"]), any("null")) {
					t.Errorf("%s %s: query parameter %s admits null: %v", method, path, pm["name"], s["type"])
				}
				if s["minLength"] != nil {
					t.Errorf("%s %s: query parameter %s refuses the empty value the node takes: %v", method, path, pm["name"], s)
				}
			}
		}
	}
	if st, body, _ := tn.send(t, "GET", "/api/v1/threads?board=", nil); st != 200 {
		t.Errorf("GET /api/v1/threads?board=: %d %s", st, body)
	}
	if st, _, _ := tn.send(t, "GET", "/messages?limit=null", nil); st != 400 {
		t.Errorf("GET /messages?limit=null: %d", st)
	}
}

// TestOpenAPIArrayItems: a schema that admits an array says what the array
// holds. JSON Schema 2020-12 allows an array schema without items, but then
// any element validates and generators type the array as unknown; linters
// (Spectral's array-items) refuse it.
func TestOpenAPIArrayItems(t *testing.T) {
	tn := startNode(t, "ainotes")
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			typ := v["type"]
			if (typ == "array" || slices.Contains(asSlice(typ), any("array"))) && v["items"] == nil && v["prefixItems"] == nil {
				t.Errorf("%s: an array schema without items: %v", at, v)
			}
			for k, e := range v {
				walk(at+"/"+k, e)
			}
		case []any:
			for i, e := range v {
				walk(at+"/"+itoa(uint64(i)), e)
			}
		}
	}
	walk("#", openAPIOf(t, tn))
}

func asSlice(v any) []any { s, _ := v.([]any); return s }
