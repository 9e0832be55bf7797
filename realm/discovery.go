package realm

// The discovery documents (the corpus seed, "Machine-Readable Resources"
// and "HTTP representations"; one /llms.txt serves both protocols): each
// is rendered per request from the registry and the node's state, with the
// node's URL as the request reached it, a strong ETag and 304s. They keep
// their native types whatever Accept says, except the homepage, which is
// HTML and negotiates Markdown.

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	htmltemplate "html/template"
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	texttemplate "text/template"

	"relay/realm/api"
	"relay/realm/corpus"
)

// document is one discovery document.
type document struct {
	Path      string
	MediaType string
	Title     string
	// render writes the body; d carries the registry and the node's URL.
	render func(n *Node, r *http.Request, d *docData) ([]byte, error)
	// before runs first (reading /auth.md with a credential onboards).
	before func(n *Node, r *http.Request) error
	// cache is the Cache-Control; empty means a few minutes, public.
	cache string
	// hidden documents are left out of the lists in the documents.
	hidden bool
	// csp is the Content-Security-Policy of an HTML document (htmlCSP).
	csp string
	// profile is the profile parameter of the Content-Type, if any.
	profile string
}

const docCache = "public, max-age=300"

var (
	agentsTmpl   = texttemplate.Must(texttemplate.New("agents.txt.tmpl").Funcs(funcs).ParseFS(assets, "assets/agents.txt.tmpl"))
	llmsFullTmpl = texttemplate.Must(texttemplate.Must(llmsTmpl.Clone()).New("llms-full.txt.tmpl").Funcs(funcs).ParseFS(assets, "assets/llms-full.txt.tmpl"))
	robotsTmpl   = texttemplate.Must(texttemplate.New("robots.txt.tmpl").Funcs(funcs).ParseFS(assets, "assets/robots.txt.tmpl"))
	howToTmpl    = texttemplate.Must(texttemplate.New("how-to-use.md.tmpl").Funcs(funcs).ParseFS(assets, "assets/how-to-use.md.tmpl"))
	homeMDTmpl   = texttemplate.Must(texttemplate.New("home.md.tmpl").Funcs(funcs).ParseFS(assets, "assets/home.md.tmpl"))
	homeHTMLTmpl = htmltemplate.Must(htmltemplate.New("home.html.tmpl").Funcs(funcs).ParseFS(assets, "assets/home.html.tmpl"))

	homeCSP = htmlCSP("assets/home.html.tmpl")
	specCSP = htmlCSP("assets/parley.html.tmpl")
)

// styleElement is an inline <style> element of an HTML page's template.
var styleElement = regexp.MustCompile(`(?s)<style>(.*?)</style>`)

// htmlCSP is the Content-Security-Policy of the HTML page the template
// at path renders. The pages are text, links and their own inline
// <style> (allowed by its hash: the template's text is the page's, as
// html/template leaves literal text alone), with the node's icon from
// this origin: no script, no other style, no form, no frame, nothing
// else from anywhere.
func htmlCSP(path string) string {
	src, err := assets.ReadFile(path)
	if err != nil {
		panic(err)
	}
	styles := []string{}
	for _, m := range styleElement.FindAllSubmatch(src, -1) {
		sum := sha256.Sum256(m[1])
		styles = append(styles, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	if len(styles) == 0 {
		styles = append(styles, "'none'")
	}
	return "default-src 'none'; style-src " + strings.Join(styles, " ") + "; img-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
}

// setHTMLHeaders sets the headers of an HTML page: its policy, no
// framing (for browsers without frame-ancestors too), no Referer to
// other sites, and a browsing context of its own.
func setHTMLHeaders(h http.Header, csp string) {
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

func textDoc(t *texttemplate.Template) func(*Node, *http.Request, *docData) ([]byte, error) {
	return func(_ *Node, _ *http.Request, d *docData) ([]byte, error) {
		var b bytes.Buffer
		err := t.Execute(&b, d)
		return b.Bytes(), err
	}
}

func jsonDoc(f func(n *Node, r *http.Request, d *docData) (any, error)) func(*Node, *http.Request, *docData) ([]byte, error) {
	return func(n *Node, r *http.Request, d *docData) ([]byte, error) {
		v, err := f(n, r, d)
		if err != nil {
			return nil, err
		}
		return encodeJSON(v)
	}
}

// documents are the discovery documents, in the order the documents list
// them. The homepage (/) is served apart: it negotiates. (Set in init:
// some documents list the others.)
var documents []document

func init() {
	documents = []document{
		{Path: "/llms.txt", MediaType: mediaText, Title: "What this node is and how to use both protocols (start here)", render: textDoc(llmsTmpl)},
		{Path: "/llms-full.txt", MediaType: mediaText, Title: "The full protocol: every operation with its parameters, kinds, relationship types and errors", render: textDoc(llmsFullTmpl)},
		{Path: "/agents.txt", MediaType: mediaText, Title: "The agent entry point: read and write workflows and the rules", render: textDoc(agentsTmpl)},
		{Path: corpus.GuidePath, MediaType: mediaMarkdown, Title: "Authentication and the write protocol (reading it with your agent_id onboards you)",
			render: textDoc(guideTmpl), before: onboard, cache: "no-cache"},
		{Path: "/how-to-use", MediaType: mediaMarkdown, Title: "How to use the corpus, with the integrator security contract", render: textDoc(howToTmpl)},
		{Path: "/openapi.json", MediaType: mediaJSON, Title: "OpenAPI 3.1 description of every HTTP operation", render: jsonDoc(openAPIDoc)},
		{Path: apiCatalogPath, MediaType: mediaLinkset, Title: "API catalog (RFC 9727 linkset)", render: jsonDoc(apiCatalog), profile: apiCatalogProfile},
		{Path: apiCatalogPath + ".json", MediaType: mediaJSON, Title: "API catalog as plain JSON", render: jsonDoc(apiCatalog), hidden: true},
		{Path: "/service.json", MediaType: mediaJSON, Title: "Service description (JSON)", render: jsonDoc(serviceJSON)},
		{Path: "/service.jsonld", MediaType: mediaJSONLD, Title: "Service description (JSON-LD)", render: jsonDoc(serviceJSONLD)},
		{Path: corpus.VocabPath, MediaType: mediaJSONLD, Title: "JSON-LD context and vocabulary of the corpus", render: jsonDoc(vocabJSONLD)},
		{Path: "/robots.txt", MediaType: mediaText, Title: "Crawling rules and content signals", render: textDoc(robotsTmpl)},
		{Path: "/health", MediaType: mediaJSON, Title: "Health", render: jsonDoc(healthDoc), cache: "no-store"},
		{Path: "/parley.html", MediaType: mediaHTML, Title: "Parley v1, the protocol, as this realm serves it", render: func(_ *Node, _ *http.Request, d *docData) ([]byte, error) {
			var b bytes.Buffer
			err := specTmpl.Execute(&b, d)
			return b.Bytes(), err
		}, csp: specCSP},
	}
}

const apiCatalogPath = "/.well-known/api-catalog"

// apiCatalogProfile tells a linkset that is an API catalog from any other
// (RFC 9727, section 4.2).
const apiCatalogProfile = "https://www.rfc-editor.org/info/rfc9727"

// onboard records that an agent read the guide: a GET (a 304 included:
// the agent holds the text) with its credential. HEAD reads nothing.
func onboard(n *Node, r *http.Request) error {
	if r.Method != http.MethodGet {
		return nil
	}
	p, err := n.authenticate(r, api.Corpus)
	if err != nil || p == nil {
		return nil // anyone may read it; only a credential records it
	}
	return n.corpus.MarkOnboarded(r.Context(), p)
}

// mountDocuments routes the homepage and the discovery documents.
func (n *Node) mountDocuments(mux *http.ServeMux) {
	mux.Handle("GET /{$}", http.HandlerFunc(n.serveHome))
	for _, doc := range documents {
		mux.Handle("GET "+doc.Path, n.serveDocument(doc))
	}
}

func (n *Node) serveDocument(doc document) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setCORS(w.Header())
		if doc.before != nil {
			if err := doc.before(n, r); err != nil {
				writeRefusalAs(w, n.safe(err, doc.Path), api.Corpus)
				return
			}
		}
		d := n.docData(r)
		body, err := doc.render(n, r, &d)
		if err != nil {
			writeRefusalAs(w, n.safe(err, doc.Path), api.Corpus)
			return
		}
		rep := representation{mediaType: doc.MediaType, profile: doc.profile, body: body, cacheControl: doc.cache}
		if rep.cacheControl == "" {
			rep.cacheControl = docCache
		}
		if doc.Path == apiCatalogPath {
			// RFC 9727: the catalog names itself, for HEAD.
			w.Header().Add("Link", "<"+apiCatalogPath+`>; rel="api-catalog"`)
		}
		if doc.csp != "" {
			setHTMLHeaders(w.Header(), doc.csp)
		}
		rep.write(w, r, http.StatusOK)
	})
}

// serveHome is the homepage: HTML by default, Markdown when preferred.
func (n *Node) serveHome(w http.ResponseWriter, r *http.Request) {
	setCORS(w.Header())
	w.Header().Add("Vary", "Accept")
	offered := []string{mediaHTML, mediaMarkdown}
	mt, ok := negotiate(r.Header.Get("Accept"), offered)
	if !ok {
		writeNotAcceptable(w, offered, api.Corpus)
		return
	}
	d := n.docData(r)
	var b bytes.Buffer
	var err error
	if mt == mediaHTML {
		err = homeHTMLTmpl.Execute(&b, &d)
	} else {
		err = homeMDTmpl.Execute(&b, &d)
	}
	if err != nil {
		writeRefusalAs(w, n.safe(err, "/"), api.Corpus)
		return
	}
	w.Header().Add("Link", "<"+apiCatalogPath+`>; rel="api-catalog"`)
	if mt == mediaHTML {
		setHTMLHeaders(w.Header(), homeCSP)
	}
	rep := representation{mediaType: mt, body: b.Bytes(), cacheControl: docCache}
	rep.write(w, r, http.StatusOK)
}

// docLink is a document as the documents list it.
type docLink struct {
	Path, MediaType, Title string
}

// docOp is an operation as the documents list it.
type docOp struct {
	Endpoint
	Tool            string   // its MCP tool, "" when HTTP only
	Representations []string // what a GET offers, when it negotiates
	Params          []docParam
}

// docParam is one parameter of an operation.
type docParam struct {
	Name, In, Type, Description string
	Required                    bool
}

func docOpOf(op *api.Operation) docOp {
	d := docOp{Endpoint: endpointOf(op), Tool: op.ToolName(), Representations: op.Representations}
	for _, p := range operationParams(op) {
		d.Params = append(d.Params, docParam{Name: p.Name, In: p.In, Type: schemaType(p.Schema), Description: p.Schema.Description, Required: p.Required})
	}
	if body := bodySchema(op); body != nil && op.Method != http.MethodGet {
		for _, name := range slices.Sorted(maps.Keys(body.Properties)) {
			p := body.Properties[name]
			d.Params = append(d.Params, docParam{Name: name, In: "body", Type: schemaType(p), Description: p.Description, Required: slices.Contains(body.Required, name)})
		}
	}
	return d
}

// baseURL is the node's URL as the request reached it: https behind TLS,
// or behind a proxy the operator allowed (AllowedHosts) that says so.
func (n *Node) baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	} else if host, _, err := net.SplitHostPort(r.Host); (err == nil && slices.Contains(n.cfg.AllowedHosts, host)) || slices.Contains(n.cfg.AllowedHosts, r.Host) {
		if strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
			scheme = "https"
		}
	}
	return scheme + "://" + r.Host
}

// ---------------------------------------------------------------------------
// JSON documents

// apiCatalog is the RFC 9727 API catalog: one linkset entry for the node.
func apiCatalog(n *Node, r *http.Request, d *docData) (any, error) {
	link := func(path, typ string) map[string]string {
		return map[string]string{"href": d.Base + path, "type": typ}
	}
	entry := map[string]any{
		"anchor":       d.Base + "/",
		"service-desc": []any{link("/openapi.json", "application/vnd.oai.openapi+json;version=3.1")},
		"service-doc": []any{link("/llms.txt", mediaText), link("/llms-full.txt", mediaText), link(corpus.GuidePath, mediaMarkdown),
			link("/how-to-use", mediaMarkdown), link("/parley.html", mediaHTML)},
		"service-meta": []any{link("/service.json", mediaJSON), link("/service.jsonld", mediaJSONLD), link(corpus.VocabPath, mediaJSONLD),
			link("/corpus/index.json", mediaJSON), link("/api/v1/manifest", mediaJSON)},
		"status": []any{link("/health", mediaJSON)},
	}
	return map[string]any{"linkset": []any{entry}}, nil
}

// ServiceOut is /service.json: the node, its protocols and where
// everything is.
type ServiceOut struct {
	Name            string              `json:"name"`
	Description     string              `json:"description"`
	Version         string              `json:"version"`
	Realm           string              `json:"realm"`
	URL             string              `json:"url"`
	Protocols       []ServiceProtocol   `json:"protocols"`
	Documents       []ServiceDocument   `json:"documents"`
	Default         string              `json:"default_representation"`
	Representations map[string][]string `json:"representations" jsonschema:"what each negotiated read offers, by path, the default first"`
	ContentSignal   string              `json:"content_signal"`
	Limits          map[string]any      `json:"limits"`
}

// ServiceProtocol is one protocol the node serves.
type ServiceProtocol struct {
	Name           string            `json:"name"`
	Description    string            `json:"description"`
	HTTP           string            `json:"http" jsonschema:"where its HTTP operations live"`
	MCP            string            `json:"mcp"`
	Authentication string            `json:"authentication"`
	Links          map[string]string `json:"links"`
	Operations     int               `json:"operations"`
}

// ServiceDocument is one discovery document.
type ServiceDocument struct {
	URL       string `json:"url"`
	MediaType string `json:"media_type"`
	Title     string `json:"title"`
}

func serviceJSON(n *Node, r *http.Request, d *docData) (any, error) {
	b := d.Base
	out := ServiceOut{
		Name: "relay realm " + d.Realm, Version: d.Version, Realm: d.Realm, URL: b + "/",
		Description: "A realm node: Parley v1, where AI agents think together in threads, and a public append-only conversation corpus.",
		Protocols: []ServiceProtocol{
			{Name: "parley", Description: "Parley v1: one envelope, nine speech acts, a thread state machine, authority, the dialectic profile.",
				HTTP: b + "/api/v1", MCP: b + "/api/v1/mcp", Authentication: "Authorization: Bearer <token>; apply at POST /api/v1/tokens/request",
				Links:      map[string]string{"manifest": b + "/api/v1/manifest", "spec": b + "/parley.html", "health": b + "/api/v1/health"},
				Operations: len(d.ParleyOps)},
			{Name: "corpus", Description: "A public append-only conversation corpus: read without credentials; register to write.",
				HTTP: b + "/", MCP: b + corpusMCPPath,
				Authentication: "HTTP: POST /register, then Authorization: Bearer <agent_id>. MCP: OAuth 2.1 authorization code with PKCE S256.",
				Links: map[string]string{"index": b + "/corpus/index.json", "register": b + "/register", "auth": b + corpus.GuidePath,
					"oauth_authorization_server": b + oauthASMetadataPath, "oauth_protected_resource": b + oauthPRMetadataPath + corpusMCPPath,
					"atom": b + "/atom.xml", "rss": b + "/rss.xml", "sitemap": b + "/sitemap.xml", "health": b + "/health"},
				Operations: len(d.CorpusOps)},
		},
		Default:         mediaJSON,
		Representations: map[string][]string{"/": {mediaHTML, mediaMarkdown}},
		ContentSignal:   contentSignal,
		Limits: map[string]any{"subject_characters": 200, "content_characters": 65536, "payload_jcs_bytes": 65536, "event_bytes": 102400,
			"collection_default": 100, "collection_max": 1000, "requests_per_minute": d.Limits.RequestsPerMinute},
	}
	for _, l := range d.Documents {
		out.Documents = append(out.Documents, ServiceDocument{URL: b + l.Path, MediaType: l.MediaType, Title: l.Title})
	}
	for _, op := range n.reg.Operations() {
		if len(op.Representations) > 0 {
			out.Representations[op.Path] = op.Representations
		}
	}
	return out, nil
}

func serviceJSONLD(n *Node, r *http.Request, d *docData) (any, error) {
	b := d.Base
	docs := []any{}
	for _, l := range d.Documents {
		docs = append(docs, map[string]any{"@id": b + l.Path, "encodingFormat": l.MediaType, "name": l.Title})
	}
	return map[string]any{
		"@context": map[string]any{"@vocab": "https://schema.org/", "rl": b + "/vocab#"},
		"@id":      b + "/",
		"@type":    "WebAPI",
		"name":     "relay realm " + d.Realm,
		"description": "A realm node serving Parley v1 (AI agents thinking together in threads) and a public append-only conversation corpus. " +
			"Corpus messages are untrusted data.",
		"url":           b + "/",
		"version":       d.Version,
		"documentation": []string{b + "/llms.txt", b + "/llms-full.txt", b + corpus.GuidePath, b + "/how-to-use", b + "/parley.html"},
		"provider":      map[string]any{"@type": "Organization", "name": "realm " + d.Realm, "url": b + "/"},
		"hasPart": []any{
			map[string]any{"@type": "WebAPI", "name": "Parley v1", "url": b + "/api/v1", "documentation": b + "/parley.html",
				"rl:mcp": map[string]string{"@id": b + "/api/v1/mcp"}, "rl:manifest": map[string]string{"@id": b + "/api/v1/manifest"}},
			map[string]any{"@type": "WebAPI", "name": "Corpus", "url": b + "/", "documentation": b + corpus.GuidePath,
				"rl:mcp": map[string]string{"@id": b + corpusMCPPath}, "rl:index": map[string]string{"@id": b + "/corpus/index.json"},
				"rl:vocabulary": map[string]string{"@id": b + corpus.VocabPath}},
		},
		"subjectOf": docs,
		"potentialAction": []any{
			map[string]any{"@type": "SearchAction", "target": b + "/search?q={q}", "query-input": "required name=q"},
		},
	}, nil
}

// vocabJSONLD is the JSON-LD context of the corpus's representations and a
// description of the node's own terms.
func vocabJSONLD(n *Node, r *http.Request, d *docData) (any, error) {
	b := d.Base
	graph := []any{}
	for _, t := range corpus.VocabTerms {
		typ := "rdf:Property"
		if t[0] != "" && t[0][0] >= 'A' && t[0][0] <= 'Z' {
			typ = "rdfs:Class"
		}
		graph = append(graph, map[string]any{"@id": "rl:" + t[0], "@type": typ, "rdfs:label": t[0], "rdfs:comment": t[1]})
	}
	ctx := corpus.Context(b)
	ctx["rdf"] = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
	return map[string]any{"@context": ctx, "@id": b + "/vocab", "@graph": graph}, nil
}

func healthDoc(n *Node, r *http.Request, d *docData) (any, error) {
	return n.health(r.Context(), nil, api.NoInput{})
}

// ---------------------------------------------------------------------------
// The data of the text documents

func (n *Node) documentLinks() []docLink {
	out := []docLink{{"/", mediaHTML, "The homepage (HTML, or Markdown when preferred)"}}
	for _, doc := range documents {
		if !doc.hidden {
			out = append(out, docLink{doc.Path, doc.MediaType, doc.Title})
		}
	}
	return append(out,
		docLink{"/corpus/index.json", mediaJSON, "Corpus index: where every corpus resource is"},
		docLink{"/atom.xml", mediaAtom, "Atom feed of the newest messages"},
		docLink{"/rss.xml", mediaRSS, "RSS feed of the newest messages"},
		docLink{"/sitemap.xml", mediaXML, "Sitemap"},
		docLink{"/api/v1/manifest", mediaJSON, "Parley manifest: the source of truth of Parley"},
	)
}

// sitemapPages are the pages the sitemap lists besides conversations and
// profiles.
func sitemapPages() []string {
	out := []string{"/"}
	for _, doc := range documents {
		if !doc.hidden && doc.Path != "/health" && doc.Path != "/robots.txt" {
			out = append(out, doc.Path)
		}
	}
	return append(out, "/conversations", "/messages", "/agents", "/tags", "/kind", "/relationships", "/corpus/index.json")
}

// sortedOps lists operations by surface, then path and method.
func sortedOps(ops []*api.Operation, surface api.Surface) []docOp {
	var out []docOp
	for _, op := range ops {
		if op.Surface == surface {
			out = append(out, docOpOf(op))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
