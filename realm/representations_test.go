package realm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/piprate/json-gold/ld"
)

// corpusFixture is a node with one agent, one conversation of two messages.
type corpusFixture struct {
	*testNode
	agent               corpusAgent
	conv, first, second string
	firstSeq, secondSeq uint64
	samples             map[string]string // operation key → a path that reads it
}

func newCorpusFixture(t *testing.T) *corpusFixture {
	t.Helper()
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	st, c, _ := tn.write(t, a, "/createConversation", "rep-1", map[string]any{
		"subject": "Latency *and* caching", "content": "The benchmark measured lower latency.\n# not a heading", "kind": []string{"claim"},
		"tags": []string{"performance"}})
	if st != 201 {
		t.Fatalf("create: %d %v", st, c)
	}
	conv := c["conversation_id"].(string)
	st, m, _ := tn.write(t, a, "/appendToConversation/"+conv, "rep-2", map[string]any{
		"content": "Does it account for warm caches?", "kind": []string{"challenge", "question"}, "payload": map[string]any{"runs": 3}})
	if st != 201 {
		t.Fatalf("append: %d %v", st, m)
	}
	f := &corpusFixture{testNode: tn, agent: a, conv: conv, first: c["message_id"].(string), second: m["message_id"].(string),
		firstSeq: uint64(c["sequence"].(float64)), secondSeq: uint64(m["sequence"].(float64))}
	relate := func(token, typ string) string {
		st, r, _ := tn.write(t, a, "/createRelationship", token, map[string]any{"source_message_id": f.second, "target_message_id": f.first, "relationship_type": typ})
		if st != 201 {
			t.Fatalf("relate: %d %v", st, r)
		}
		return field(r, "relationship", "relationship_id").(string)
	}
	rel := relate("rep-rel-1", "replies-to")
	retracted := relate("rep-rel-2", "extends")
	st, x, _ := tn.write(t, a, "/retractRelationship/"+retracted, "rep-rel-3", map[string]any{})
	if st != 201 {
		t.Fatalf("retract: %d %v", st, x)
	}
	f.samples = map[string]string{
		"list_conversations":       "/conversations",
		"get_conversation":         "/conversations/" + conv,
		"get_messages":             "/messages",
		"get_message":              "/messages/" + f.second,
		"search":                   "/search?q=latency",
		"get_agents":               "/agents",
		"get_agents_author_id":     "/agents/" + a.author,
		"get_corpus_index_json":    "/corpus/index.json",
		"get_corpus_snapshot_json": "/corpus/snapshot.json",

		"get_tags":                "/tags",
		"list_kinds":              "/kind",
		"list_relationship_types": "/relationships",
		"get_relationship_types":  "/relationship-types",
		"list_relationships":      "/relationship-assertions?message_id=" + f.first,
		"pull_conversation":       "/conversations/" + conv + "/graph",

		"get_relationship_assertions_relationship_id": "/relationship-assertions/" + rel,
		"get_relationship_retractions_retraction_id":  "/relationship-retractions/" + field(x, "retraction", "retraction_id").(string),

		"get_corpus_changes_jsonl":  "/corpus/changes.jsonl",
		"get_corpus_messages_jsonl": "/corpus/messages.jsonl",
		"get_atom_xml":              "/atom.xml",
		"get_rss_xml":               "/rss.xml",
		"get_sitemap_xml":           "/sitemap.xml",
	}
	return f
}

// send sends a request with headers and returns status, body and headers.
func (tn *testNode) send(t *testing.T, method, path string, header http.Header) (int, []byte, http.Header) {
	t.Helper()
	return tn.sendBody(t, method, path, header, "")
}

// sendBody is send with a body, sent as it is.
func (tn *testNode) sendBody(t *testing.T, method, path string, header http.Header, body string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, tn.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes(), resp.Header
}

func acceptHeader(v string) http.Header { return http.Header{"Accept": {v}} }

func mediaOf(h http.Header) string {
	mt, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.TrimSpace(mt)
}

// TestCorpusRepresentations: every read that declares representations, in
// every Accept the table names.
func TestCorpusRepresentations(t *testing.T) {
	f := newCorpusFixture(t)
	sseSkipped := false
	for _, op := range f.reg.Operations() {
		if len(op.Representations) == 0 {
			continue
		}
		if op.Key == "get_corpus_stream" {
			sseSkipped = true // its 406s are tested with the stream
			continue
		}
		path, ok := f.samples[op.Key]
		if !ok {
			t.Errorf("%s declares representations but the test has no sample path", op.Key)
			continue
		}
		offered := op.Representations
		has := func(mt string) bool { return slices.Contains(offered, mt) }
		type row struct {
			accept string
			want   string // "" means 406
		}
		rows := []row{{"", offered[0]}, {"*/*", offered[0]}, {"image/png", ""}, {offered[0] + ";q=0", ""}}
		if has(mediaJSON) {
			rows = append(rows, row{"application/json", mediaJSON}, row{"text/markdown, application/json", mediaJSON}, row{"text/html", ""})
			if has(mediaMarkdown) {
				rows = append(rows, row{"text/markdown", mediaMarkdown}, row{"application/json;q=0.5, text/markdown", mediaMarkdown},
					row{"application/json;q=0, */*", mediaMarkdown})
			} else {
				rows = append(rows, row{"text/markdown", ""})
			}
			if has(mediaJSONLD) {
				rows = append(rows, row{"application/ld+json", mediaJSONLD}, row{"application/ld+json;q=0.9, text/markdown;q=0.1", mediaJSONLD})
			} else {
				rows = append(rows, row{"application/ld+json", ""})
			}
		}
		if has(mediaXML) {
			rows = append(rows, row{"application/json", ""}, row{"text/markdown", ""}, row{"text/xml", mediaXMLT}, row{"application/xml", mediaXML})
		}
		for _, rw := range rows {
			h := http.Header{}
			if rw.accept != "" {
				h.Set("Accept", rw.accept)
			}
			status, body, hdr := f.send(t, "GET", path, h)
			if !strings.Contains(hdr.Get("Vary"), "Accept") || hdr.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("%s Accept %q: Vary %q, CORS %q", path, rw.accept, hdr.Get("Vary"), hdr.Get("Access-Control-Allow-Origin"))
			}
			if rw.want == "" {
				if status != 406 {
					t.Errorf("%s Accept %q: %d %s, want 406", path, rw.accept, status, body)
					continue
				}
				checkNotAcceptable(t, path, body, hdr, offered)
				continue
			}
			if status != 200 || mediaOf(hdr) != rw.want {
				t.Errorf("%s Accept %q: %d %s, want 200 %s", path, rw.accept, status, hdr.Get("Content-Type"), rw.want)
				continue
			}
			if hdr.Get("Content-Signal") != contentSignal {
				t.Errorf("%s: Content-Signal %q", path, hdr.Get("Content-Signal"))
			}
			if !strings.HasPrefix(rw.want, "application/x-ndjson") && (hdr.Get("ETag") == "" || hdr.Get("Cache-Control") == "") {
				t.Errorf("%s Accept %q: ETag %q, Cache-Control %q", path, rw.accept, hdr.Get("ETag"), hdr.Get("Cache-Control"))
			}
			switch rw.want {
			case mediaJSON, mediaJSONLD:
				var v map[string]any
				if err := json.Unmarshal(body, &v); err != nil {
					t.Errorf("%s as %s: %v", path, rw.want, err)
				} else if rw.want == mediaJSONLD && v["@context"] != f.srv.URL+"/vocab.jsonld" {
					t.Errorf("%s: @context %v", path, v["@context"])
				}
			case mediaMarkdown:
				if !bytes.HasPrefix(body, []byte("# ")) {
					t.Errorf("%s as Markdown: %.80q", path, body)
				}
			}
		}
	}
	if !sseSkipped {
		t.Error("the stream does not declare its representation")
	}
}

func checkNotAcceptable(t *testing.T, path string, body []byte, hdr http.Header, offered []string) {
	t.Helper()
	if xmlOnly(offered) {
		if mediaOf(hdr) != mediaText || !bytes.Contains(body, []byte(offered[0])) {
			t.Errorf("%s 406: %s %q", path, hdr.Get("Content-Type"), body)
		}
		return
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil || corpusCode(out) != "not_acceptable" {
		t.Errorf("%s 406: %s", path, body)
		return
	}
	got, _ := field(out, "error", "details", "offered").([]any)
	if len(got) != len(offered) {
		t.Errorf("%s 406 offers %v, want %v", path, got, offered)
	}
	for i := range got {
		if got[i] != offered[i] {
			t.Errorf("%s 406 offers %v, want %v", path, got, offered)
		}
	}
}

func TestCorpusConditionalRequests(t *testing.T) {
	f := newCorpusFixture(t)
	msg := "/messages/" + f.second
	_, jsonBody, j := f.send(t, "GET", msg, nil)
	_, _, md := f.send(t, "GET", msg, acceptHeader(mediaMarkdown))
	_, _, ldh := f.send(t, "GET", msg, acceptHeader(mediaJSONLD))
	etag, lm := j.Get("ETag"), j.Get("Last-Modified")
	if etag == "" || lm == "" || etag == md.Get("ETag") || etag == ldh.Get("ETag") || md.Get("ETag") == ldh.Get("ETag") {
		t.Fatalf("validators: json %q %q, markdown %q, json-ld %q", etag, lm, md.Get("ETag"), ldh.Get("ETag"))
	}
	if j.Get("Cache-Control") != "public, max-age=86400, immutable" {
		t.Errorf("a message's Cache-Control: %q", j.Get("Cache-Control"))
	}
	for _, tc := range []struct {
		name   string
		method string
		header http.Header
		status int
	}{
		{"If-None-Match", "GET", http.Header{"If-None-Match": {etag}}, 304},
		{"weak If-None-Match", "GET", http.Header{"If-None-Match": {"W/" + etag}}, 304},
		{"one of a list", "GET", http.Header{"If-None-Match": {`"nope", ` + etag}}, 304},
		{"star", "GET", http.Header{"If-None-Match": {"*"}}, 304},
		{"HEAD If-None-Match", "HEAD", http.Header{"If-None-Match": {etag}}, 304},
		{"another representation's ETag", "GET", http.Header{"If-None-Match": {etag}, "Accept": {mediaMarkdown}}, 200},
		{"the Markdown ETag for Markdown", "GET", http.Header{"If-None-Match": {md.Get("ETag")}, "Accept": {mediaMarkdown}}, 304},
		{"If-Modified-Since", "GET", http.Header{"If-Modified-Since": {lm}}, 304},
		{"If-Modified-Since later", "GET", http.Header{"If-Modified-Since": {time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}}, 304},
		{"If-Modified-Since earlier", "GET", http.Header{"If-Modified-Since": {"Mon, 02 Jan 2006 15:04:05 GMT"}}, 200},
		{"If-None-Match wins", "GET", http.Header{"If-None-Match": {`"nope"`}, "If-Modified-Since": {lm}}, 200},
	} {
		status, body, hdr := f.send(t, tc.method, msg, tc.header)
		if status != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, status, tc.status)
		}
		if status == 304 && (len(body) != 0 || hdr.Get("ETag") == "" || !strings.Contains(hdr.Get("Vary"), "Accept")) {
			t.Errorf("%s: 304 with body %q, ETag %q, Vary %q", tc.name, body, hdr.Get("ETag"), hdr.Get("Vary"))
		}
	}
	// HEAD is GET without the body.
	status, body, hdr := f.send(t, "HEAD", msg, nil)
	if status != 200 || len(body) != 0 || hdr.Get("ETag") != etag || hdr.Get("Content-Length") != strconv.Itoa(len(jsonBody)) {
		t.Fatalf("HEAD: %d %q ETag %q Content-Length %q (GET had %d bytes)", status, body, hdr.Get("ETag"), hdr.Get("Content-Length"), len(jsonBody))
	}
	// A conversation has an ETag and no Last-Modified: a message of another
	// realm may join it later than a newer one.
	_, _, conv := f.send(t, "GET", "/conversations/"+f.conv, nil)
	if conv.Get("ETag") == "" || conv.Get("Last-Modified") != "" {
		t.Errorf("a conversation's validators: ETag %q, Last-Modified %q", conv.Get("ETag"), conv.Get("Last-Modified"))
	}
	if st, _, _ := f.send(t, "GET", "/conversations/"+f.conv, http.Header{"If-Modified-Since": {time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}}); st != 200 {
		t.Errorf("a conversation, If-Modified-Since alone: %d", st)
	}
	// A collection's ETag changes with it.
	_, _, before := f.send(t, "GET", "/conversations", nil)
	if st, _, _ := f.send(t, "GET", "/conversations", http.Header{"If-None-Match": {before.Get("ETag")}}); st != 304 {
		t.Fatalf("unchanged collection: %d", st)
	}
	if before.Get("Cache-Control") != defaultCacheControl || before.Get("Last-Modified") != "" {
		t.Errorf("collection: Cache-Control %q, Last-Modified %q", before.Get("Cache-Control"), before.Get("Last-Modified"))
	}
	if st, _, _ := f.write(t, f.agent, "/createConversation", "rep-3", map[string]any{"subject": "Another", "content": "x"}); st != 201 {
		t.Fatal(st)
	}
	if st, _, _ := f.send(t, "GET", "/conversations", http.Header{"If-None-Match": {before.Get("ETag")}}); st != 200 {
		t.Fatalf("changed collection: %d", st)
	}
}

func TestCorpusMethodsAndCORS(t *testing.T) {
	f := newCorpusFixture(t)
	// OPTIONS: Allow and the CORS grant.
	for path, allow := range map[string]string{
		"/messages":            "GET, HEAD, OPTIONS",
		"/messages/" + f.first: "GET, HEAD, OPTIONS",
		"/" + f.agent.endpoint + "/createConversation": "POST, OPTIONS",
		"/register": "POST, OPTIONS",
		"/llms.txt": "GET, HEAD, OPTIONS",
	} {
		status, body, hdr := f.send(t, "OPTIONS", path, http.Header{"Origin": {"https://example.org"}, "Access-Control-Request-Method": {"POST"},
			"Access-Control-Request-Headers": {"authorization, operation-token, content-type"}})
		if status != 204 || len(body) != 0 || hdr.Get("Allow") != allow || hdr.Get("Access-Control-Allow-Origin") != "*" ||
			hdr.Get("Access-Control-Allow-Methods") != allow {
			t.Errorf("OPTIONS %s: %d %q %v", path, status, body, hdr)
		}
		for _, h := range []string{"Authorization", "Operation-Token", "Content-Type"} {
			if !strings.Contains(hdr.Get("Access-Control-Allow-Headers"), h) {
				t.Errorf("OPTIONS %s: Allow-Headers %q lacks %s", path, hdr.Get("Access-Control-Allow-Headers"), h)
			}
		}
	}
	if status, _, _ := f.send(t, "OPTIONS", "/no/such/path/here", nil); status != 404 {
		t.Errorf("OPTIONS on nothing: %d", status)
	}
	// Parley's routes answer OPTIONS without opening CORS.
	if status, _, hdr := f.send(t, "OPTIONS", "/api/v1/manifest", nil); status != 204 || hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("OPTIONS /api/v1/manifest: %d %v", status, hdr)
	}
	// Reads expose the headers a script needs.
	_, _, hdr := f.send(t, "GET", "/messages?limit=1", nil)
	for _, h := range []string{"X-Next-Cursor", "Link", "ETag"} {
		if !strings.Contains(hdr.Get("Access-Control-Expose-Headers"), h) {
			t.Errorf("Expose-Headers %q lacks %s", hdr.Get("Access-Control-Expose-Headers"), h)
		}
	}
	if hdr.Get("X-Next-Cursor") == "" {
		t.Error("a page with more has no X-Next-Cursor")
	}
	// 405 with Allow, in the corpus's shape.
	for path, allow := range map[string]string{
		"/messages": "GET, HEAD, OPTIONS",
		"/" + f.agent.endpoint + "/createConversation": "POST, OPTIONS",
	} {
		for _, method := range []string{"DELETE", "PUT", "PATCH"} {
			status, body, hdr := f.send(t, method, path, nil)
			var out map[string]any
			json.Unmarshal(body, &out)
			if status != 405 || hdr.Get("Allow") != allow || corpusCode(out) != "method_not_allowed" || hdr.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("%s %s: %d %s Allow %q", method, path, status, body, hdr.Get("Allow"))
			}
		}
	}
	if status, _, _ := f.send(t, "POST", "/messages", nil); status != 405 {
		t.Errorf("POST /messages: %d", status)
	}
	// 415: writes are application/json.
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/xml"} {
		req, _ := http.NewRequest("POST", f.srv.URL+"/"+f.agent.endpoint+"/createConversation", strings.NewReader(`{"subject":"s","content":"c"}`))
		req.Header.Set("Authorization", "Bearer "+f.agent.id)
		req.Header.Set("Operation-Token", "rep-415-"+ct)
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != 415 || corpusCode(out) != "unsupported_media_type" {
			t.Errorf("Content-Type %s: %d %v", ct, resp.StatusCode, out)
		}
	}
	// A write's answer is JSON whatever Accept says.
	req, _ := http.NewRequest("POST", f.srv.URL+"/"+f.agent.endpoint+"/createConversation", strings.NewReader(`{"subject":"s","content":"c"}`))
	req.Header.Set("Authorization", "Bearer "+f.agent.id)
	req.Header.Set("Operation-Token", "rep-md-write")
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Accept", "text/markdown")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 || mediaOf(resp.Header) != mediaJSON {
		t.Errorf("a write with Accept: text/markdown: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestCorpusReadErrorsInMarkdown(t *testing.T) {
	f := newCorpusFixture(t)
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/messages/no-such-message", 404, "not_found"},
		{"/conversations/no-such-conversation", 404, "not_found"},
		{"/agents/ainotes:nobody", 404, "not_found"},
		{"/messages?limit=0", 400, "invalid_request"},
		{"/search?q=", 400, "invalid_request"},
	} {
		status, body, hdr := f.send(t, "GET", tc.path, acceptHeader(mediaMarkdown))
		if status != tc.status || mediaOf(hdr) != mediaMarkdown || !bytes.HasPrefix(body, []byte("# Error: ")) || !bytes.Contains(body, []byte("`"+tc.code+"`")) {
			t.Errorf("%s as Markdown: %d %s %q", tc.path, status, hdr.Get("Content-Type"), body)
		}
		if hdr.Get("Content-Signal") != "" || hdr.Get("ETag") != "" {
			t.Errorf("%s: an error carries Content-Signal %q, ETag %q", tc.path, hdr.Get("Content-Signal"), hdr.Get("ETag"))
		}
		status, body, hdr = f.send(t, "GET", tc.path, acceptHeader(mediaJSONLD+", "+mediaJSON))
		var out map[string]any
		if status != tc.status || mediaOf(hdr) != mediaJSON || json.Unmarshal(body, &out) != nil || corpusCode(out) != tc.code {
			t.Errorf("%s as JSON: %d %s %s", tc.path, status, hdr.Get("Content-Type"), body)
		}
	}
	// Parley's reads keep their JSON contract: no negotiation, no CORS.
	status, _, hdr := f.send(t, "GET", "/api/v1/manifest", acceptHeader(mediaMarkdown))
	if status != 200 || mediaOf(hdr) != mediaJSON || hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("/api/v1/manifest with Accept: text/markdown: %d %v", status, hdr)
	}
}

func TestCorpusMarkdownQuotesContent(t *testing.T) {
	f := newCorpusFixture(t)
	st, out, _ := f.write(t, f.agent, "/appendToConversation/"+f.conv, "rep-inject", map[string]any{
		"content": "ignore this\r# Injected\n\n## Also injected\r\n- item", "tags": []string{"*bold*"}})
	if st != 201 {
		t.Fatalf("append: %d %v", st, out)
	}
	for _, path := range []string{"/messages/" + out["message_id"].(string), "/messages?conversation_id=" + f.conv, "/search?q=injected",
		"/corpus/snapshot.json"} {
		_, body, _ := f.send(t, "GET", path, acceptHeader(mediaMarkdown))
		for _, line := range strings.FieldsFunc(string(body), func(r rune) bool { return r == '\n' || r == '\r' }) {
			if strings.Contains(line, "njected") && !strings.HasPrefix(line, "> ") {
				t.Errorf("%s: content outside its quote: %q", path, line)
			}
		}
		if !bytes.Contains(body, []byte(`\*bold\*`)) {
			t.Errorf("%s: the tag is not escaped:\n%s", path, body)
		}
	}
}

// TestCorpusJSONLD expands every JSON-LD representation with a JSON-LD 1.1
// processor that fetches the node's context, and turns it into RDF.
func TestCorpusJSONLD(t *testing.T) {
	f := newCorpusFixture(t)
	proc := ld.NewJsonLdProcessor()
	opts := ld.NewJsonLdOptions("")
	opts.DocumentLoader = ld.NewDefaultDocumentLoader(http.DefaultClient)
	opts.Format = "application/n-quads"
	base := f.srv.URL
	for path, want := range map[string][]string{
		"/messages/" + f.second: {
			"<" + base + "/messages/" + f.second + "> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <https://schema.org/Message>",
			"<https://schema.org/text> \"Does it account for warm caches?\"",
			"<https://schema.org/author> <" + base + "/agents/" + f.agent.author + ">",
			"<https://schema.org/isPartOf> <" + base + "/conversations/" + f.conv + ">",
			"<" + base + "/vocab#payload> \"{\\\"runs\\\":3}\"^^<http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON>",
			"<" + base + "/vocab#kind> \"challenge\"",
			"<https://schema.org/dateCreated> \"",
		},
		"/conversations/" + f.conv: {
			"<https://schema.org/Conversation>", "<https://schema.org/name> \"Latency *and* caching\"",
			"<" + base + "/vocab#root_message> <" + base + "/messages/" + f.first + ">",
		},
		"/agents/" + f.agent.author: {"<http://www.w3.org/ns/prov#SoftwareAgent>", "<" + base + "/vocab#message_count> \"2\"^^<http://www.w3.org/2001/XMLSchema#integer>"},
		"/messages":                 {"<" + base + "/vocab#MessagePage>", "<https://schema.org/Message>"},
		"/search?q=latency":         {"<" + base + "/vocab#SearchResults>", "<" + base + "/vocab#score>"},
	} {
		status, body, hdr := f.send(t, "GET", path, acceptHeader(mediaJSONLD))
		if status != 200 || mediaOf(hdr) != mediaJSONLD {
			t.Fatalf("%s: %d %s", path, status, hdr.Get("Content-Type"))
		}
		var doc any
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		rdf, err := proc.ToRDF(doc, opts)
		if err != nil {
			t.Fatalf("%s: to RDF: %v", path, err)
		}
		nq := rdf.(string)
		for _, w := range want {
			if !strings.Contains(nq, w) {
				t.Errorf("%s: no %s in\n%s", path, w, nq)
			}
		}
	}
	// The vocabulary and the service description are JSON-LD documents too.
	for _, path := range []string{"/vocab.jsonld", "/service.jsonld"} {
		_, body, _ := f.send(t, "GET", path, nil)
		var doc any
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		expanded, err := proc.Expand(doc, opts)
		if err != nil || len(expanded) == 0 {
			t.Fatalf("%s: expand: %v %v", path, err, expanded)
		}
	}
}

// TestCreatedLocation: a 201 names what it created in Location (RFC 9110,
// section 15.3.2: without it, the created resource would be the target
// URI, the write's endpoint), and that URL reads it.
func TestCreatedLocation(t *testing.T) {
	tn := startNode(t, "ainotes")
	st, reg := tn.do(t, "POST", "/register", "", nil)
	_, _, regHdr := tn.send(t, "POST", "/register", nil)
	if st != 201 || !strings.HasPrefix(regHdr.Get("Location"), "/agents/ainotes:") {
		t.Errorf("register: %d, Location %q", st, regHdr.Get("Location"))
	}
	a := tn.onboard(t, corpusAgent{reg["agent_id"].(string), reg["endpoint_id"].(string), reg["author_id"].(string)})
	_, c, ch := tn.write(t, a, "/createConversation", "loc-1", map[string]any{"subject": "s", "content": "first"})
	_, m, mh := tn.write(t, a, "/appendToConversation/"+c["conversation_id"].(string), "loc-2", map[string]any{"content": "second"})
	_, r, rh := tn.write(t, a, "/createRelationship", "loc-3", map[string]any{"source_message_id": m["message_id"], "target_message_id": c["message_id"], "relationship_type": "extends"})
	rel := field(r, "relationship", "relationship_id").(string)
	_, x, xh := tn.write(t, a, "/retractRelationship/"+rel, "loc-4", map[string]any{})
	_, _, again := tn.write(t, a, "/createConversation", "loc-1", map[string]any{"subject": "s", "content": "first"}) // a replay
	for _, tc := range []struct {
		name string
		hdr  http.Header
		want string
	}{
		{"create", ch, "/conversations/" + c["conversation_id"].(string)},
		{"replayed create", again, "/conversations/" + c["conversation_id"].(string)},
		{"append", mh, "/messages/" + m["message_id"].(string)},
		{"relationship", rh, "/relationship-assertions/" + rel},
		{"retraction", xh, "/relationship-retractions/" + field(x, "retraction", "retraction_id").(string)},
	} {
		if got := tc.hdr.Get("Location"); got != tc.want {
			t.Errorf("%s: Location %q, want %q", tc.name, got, tc.want)
			continue
		}
		if st, _, _ := tn.send(t, "GET", tc.want, nil); st != 200 {
			t.Errorf("%s: GET %s: %d", tc.name, tc.want, st)
		}
	}
}
