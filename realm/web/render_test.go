package web

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// decoded is a result as the console holds it: JSON decoded with numbers.
func decoded(t *testing.T, s string) map[string]any {
	t.Helper()
	m, err := asMap(json.RawMessage(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func renderPage(t *testing.T, name string, v view) string {
	t.Helper()
	v.Realm, v.LoggedIn, v.CSRF, v.Path = "r1", true, "tok", "/console/"+name
	var b bytes.Buffer
	if err := pages[name].ExecuteTemplate(&b, "layout.html", &v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// hostile is text another realm chose: it must render as text.
const hostile = `<script>alert(1)</script><img src=x onerror=alert(2)>`

func checkInert(t *testing.T, page string) {
	t.Helper()
	if strings.Contains(page, "<script>alert") || strings.Contains(page, "<img src=x") {
		t.Fatal("text from another realm rendered as markup")
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatal("text from another realm is not shown")
	}
}

// TestFederationAttention: key conflicts, equivocations and quarantines
// (which a test net does not produce on demand) are flagged, and the
// reasons other realms' misbehaviour wrote are escaped.
func TestFederationAttention(t *testing.T) {
	d := &fedData{
		Status: decoded(t, `{"realm":"r1","peer_id":"12D3KooWA","addrs":["/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWA"],
			"counters":{"published":3,"received":{"gossip":2},"refused":{"bad_signature":1}}}`),
		Realms: []map[string]any{
			decoded(t, `{"realm":"r1","local":true,"seq":3,"highest_seen":3,"lag":0}`),
			decoded(t, `{"realm":"evil","seq":2,"highest_seen":9,"lag":7,"blocked":false,"quarantined":"equivocation at seq 3: `+strings.ReplaceAll(hostile, `"`, `\"`)+`"}`),
		},
		Conflicts: []map[string]any{decoded(t, `{"realm":"r2","pinned_peer_id":"12D3KooWB","claimed_peer_id":"12D3KooWC","at":"2026-01-02T03:04:05Z"}`)},
		Equivocs:  []map[string]any{decoded(t, `{"realm":"evil","seq":3,"cid":"bafyone"}`)},
	}
	d.Quarantined = d.Realms[1:]
	page := renderPage(t, "federation", view{Data: d, Live: true, Poll: fedPoll})
	for _, want := range []string{
		`id="attention"`, "Needs your attention", "Key conflicts", "12D3KooWC", "Equivocations", "bafyone",
		"Quarantined realms", `data-badge="quarantined"`, "Lift quarantine", `class="stat alarm"`, `class="num lag"`,
		"bad_signature", `data-poll="5"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	checkInert(t, page)
	// A quarantined realm is unblocked, not blocked again.
	if strings.Contains(page, `name="realm" value="evil"><input type="text" name="reason"`) {
		t.Error("a quarantined realm offers a block")
	}
}

// TestReplyStatus: a reply into another realm's thread shows where it
// stands, with the refusal's reason; agents' text stays text.
func TestReplyStatus(t *testing.T) {
	thread := decoded(t, `{"id":"r2:th_4","realm":"r2","title":"t","state":"closed","locked":true}`)
	msg := func(status, extra string) map[string]any {
		return decoded(t, `{"id":"msg_9","realm":"r1","thread":"r2:th_4","kind":"answer","author_kind":"llm","from":{"identity":"r1:scout"},
			"body":`+jsonString(hostile)+`,"status":"`+status+`"`+extra+`}`)
	}
	d := map[string]any{"thread": thread, "messages": []any{msg("accepted", "")},
		"pending": []any{msg("pending", "")}}
	page := renderPage(t, "thread", view{Data: d})
	for _, want := range []string{`data-status="accepted"`, "accepted by r2", `id="pending"`, "pending · r2 decides", "belongs to realm"} {
		if !strings.Contains(page, want) {
			t.Errorf("the thread lacks %q", want)
		}
	}
	if strings.Contains(page, "post_threads_id_close") || strings.Contains(page, "post_threads_id_llm_replies") {
		t.Error("another realm's thread offers moderation")
	}
	checkInert(t, page)

	d = map[string]any{"thread": thread, "messages": []any{msg("refused", `,"refusal":{"reason":"thread_closed","error":`+jsonString(hostile)+`}`)}}
	page = renderPage(t, "thread", view{Data: d})
	if !strings.Contains(page, "refused by r2: thread_closed") || !strings.Contains(page, `<div class="refusal"><code>thread_closed</code>`) {
		t.Errorf("a refused reply:\n%s", page)
	}
	checkInert(t, page)

	// A reply from another realm into this realm's thread.
	local := decoded(t, `{"id":"th_1","realm":"r1","title":"t","state":"open"}`)
	in := decoded(t, `{"id":"r2:msg_3","realm":"r2","thread":"th_1","kind":"answer","author_kind":"llm","from":{"identity":"r2:scout"},"body":"b","status":"accepted"}`)
	page = renderPage(t, "thread", view{Data: map[string]any{"thread": local, "messages": []any{in}}})
	if !strings.Contains(page, "accepted by this realm") || !strings.Contains(page, "post_threads_id_close") {
		t.Error("this realm's thread with an accepted reply from another realm")
	}
}

// TestQueuePendingReplies: a proposal whose thread has replies from other
// realms pending says so: confirming a close would refuse them.
func TestQueuePendingReplies(t *testing.T) {
	p := decoded(t, `{"id":"th_2","realm":"r1","title":"t","state":"closed","proposal":true,"state_origin":"llm","message_count":3,
		"pending_replies":[{"id":"r2:msg_5","thread":"th_2","status":"pending"}]}`)
	page := renderPage(t, "queue", view{Data: &queueData{Proposals: []map[string]any{p}}})
	if !strings.Contains(page, "1 reply from other realms pending") || !strings.Contains(page, "confirming the close refuses them") {
		t.Errorf("the queue:\n%s", page)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// scrollRegion is what every table of the console sits in: a region that
// scrolls it sideways, which a keyboard can focus and a screen reader
// names.
var (
	scrollRegion = regexp.MustCompile(`<div class="scroll" tabindex="0" role="region" aria-label="[^"{}]+">$`)
	tableTag     = regexp.MustCompile(`<table\b`)
)

// TestTablesScrollInRegions: every table of every template is the first
// thing in a focusable, named scroll region.
func TestTablesScrollInRegions(t *testing.T) {
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		t.Fatal(err)
	}
	tables := 0
	for _, name := range names {
		b, _ := files.ReadFile(name)
		src := string(b)
		for _, at := range tableTag.FindAllStringIndex(src, -1) {
			tables++
			if i := at[0]; !scrollRegion.MatchString(src[:i]) {
				t.Errorf("%s: a table not in a focusable, named region: %.80s", name, src[max(0, i-80):i+6])
			}
		}
	}
	if tables < 15 {
		t.Fatalf("only %d tables found", tables)
	}
}

// TestAsidesNamed: every aside is named, each with a name of its own, so
// that the sidebar and a page's side panel are told apart among the
// landmarks.
func TestAsidesNamed(t *testing.T) {
	aside := regexp.MustCompile(`<aside\b[^>]*>`)
	label := regexp.MustCompile(`\baria-label="([^"{}]+)"`)
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, name := range names {
		b, _ := files.ReadFile(name)
		for _, tag := range aside.FindAllString(string(b), -1) {
			m := label.FindStringSubmatch(tag)
			if m == nil {
				t.Errorf("%s: %s has no aria-label", name, tag)
				continue
			}
			if other, ok := seen[m[1]]; ok {
				t.Errorf("%s: an aside named %q, as one in %s", name, m[1], other)
			}
			seen[m[1]] = name
		}
	}
	if len(seen) < 5 {
		t.Fatalf("only %d named asides found", len(seen))
	}
}

// TestPrettyJSON: a payload reads as it was written: indented, with <, >
// and & as themselves, not as \u003c escapes; the page escapes them.
func TestPrettyJSON(t *testing.T) {
	v := decoded(t, `{"html":"<b>a & b</b>","n":1,"list":[1,"x"]}`)
	want := "{\n  \"html\": \"<b>a & b</b>\",\n  \"list\": [\n    1,\n    \"x\"\n  ],\n  \"n\": 1\n}"
	if got := prettyJSON(v); got != want {
		t.Errorf("prettyJSON:\n%s\nwant\n%s", got, want)
	}
	conv := decoded(t, `{"conversation_id":"c1","subject":"s","author_id":"a","realm":"r1","message_count":1,"cid":"bafy"}`)
	msg := decoded(t, `{"message_id":"m1","sequence":1,"author_id":"a","content":"c","has_payload":true,"payload":{"html":`+jsonString(hostile)+`}}`)
	page := renderPage(t, "conversation", view{Data: map[string]any{"conversation": conv, "messages": []any{msg}}})
	if strings.Contains(page, `\u003c`) || !strings.Contains(page, `&#34;html&#34;: &#34;&lt;script&gt;alert(1)&lt;/script&gt;`) {
		t.Errorf("the payload on the page:\n%s", page)
	}
	checkInert(t, page)
}

// TestProvenanceValues: a provenance's nested values read as JSON, not as
// Go's formatting of maps and slices; strings as themselves.
func TestProvenanceValues(t *testing.T) {
	thread := decoded(t, `{"id":"th_1","realm":"r1","title":"t","state":"open"}`)
	msg := decoded(t, `{"id":"msg_1","thread":"th_1","kind":"note","author_kind":"llm","from":{"identity":"r1:scout"},"body":"b",
		"provenance":{"model":"m <1>","tools":{"search":2},"ids":[1,"x"],"cached":true,"seed":null}}`)
	page := renderPage(t, "thread", view{Data: map[string]any{"thread": thread, "messages": []any{msg}}})
	for _, want := range []string{`<b>model</b> m &lt;1&gt;</span>`, `<b>tools</b> {&#34;search&#34;:2}</span>`, `<b>ids</b> [1,&#34;x&#34;]</span>`,
		`<b>cached</b> true</span>`, `<b>seed</b> null</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the provenance lacks %q", want)
		}
	}
	if strings.Contains(page, "map[") {
		t.Error("a provenance value in Go's formatting")
	}
}

// TestChipsSeparated: rights, tags and kinds shown as chips are words
// apart, so that the text reads "read write", not "readwrite".
func TestChipsSeparated(t *testing.T) {
	req := decoded(t, `{"id":1,"identity":"r1:scout","status":"approved","rights":["read","write"]}`)
	page := renderPage(t, "tokens", view{Data: map[string]any{"tokens": []any{}, "requests": []any{req}}})
	if !strings.Contains(page, `<span class="right">read</span> <span class="right">write</span>`) {
		t.Errorf("the rights of an application:\n%s", page)
	}
	conv := decoded(t, `{"conversation_id":"c1","subject":"s","author_id":"a","realm":"r1","message_count":1,"cid":"bafy"}`)
	msg := decoded(t, `{"message_id":"m1","sequence":1,"author_id":"a","content":"c","kind":["question","proposal"],"tags":["search","performance"]}`)
	page = renderPage(t, "conversation", view{Data: map[string]any{"conversation": conv, "messages": []any{msg}}})
	for _, want := range []string{`<span class="kindtag">question</span> <span class="kindtag">proposal</span>`, `<span class="tagtag">search</span> <span class="tagtag">performance</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the conversation lacks %q", want)
		}
	}
}

// TestHeaderCellsNamed: no column header of any template is empty; a
// column of buttons is named for a screen reader.
func TestHeaderCellsNamed(t *testing.T) {
	empty := regexp.MustCompile(`<th\b[^>]*>\s*</th>`)
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		b, _ := files.ReadFile(name)
		for _, th := range empty.FindAllString(string(b), -1) {
			t.Errorf("%s: an empty header cell %s", name, th)
		}
	}
}

// TestImageLink: a message's image is linked by what the link opens, not
// by "link" or a bare media type.
func TestImageLink(t *testing.T) {
	thread := decoded(t, `{"id":"th_1","realm":"r1","title":"t","state":"open"}`)
	msg := func(id, image string) map[string]any {
		return decoded(t, `{"id":"`+id+`","thread":"th_1","kind":"note","author_kind":"llm","from":{"identity":"r1:scout"},"body":"b","image":`+image+`}`)
	}
	page := renderPage(t, "thread", view{Data: map[string]any{"thread": thread, "messages": []any{
		msg("msg_1", `{"url":"/api/v1/images/bafy","cid":"bafy","media_type":"image/png"}`),
		msg("msg_2", `{"url":"https://example.org/a"}`),
	}}})
	for _, want := range []string{`href="/api/v1/images/bafy" rel="noopener noreferrer nofollow">Open the image (image/png)</a>`,
		`href="https://example.org/a" rel="noopener noreferrer nofollow">Open the image</a>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the thread lacks %q", want)
		}
	}
}

// TestAttesterRealm: every realm's human is human:operator, so an
// attestation from another realm names that realm; one of this realm's
// does not.
func TestAttesterRealm(t *testing.T) {
	thread := decoded(t, `{"id":"th_1","realm":"r1","title":"t","state":"open"}`)
	claim := decoded(t, `{"id":"cl_1","state":"supported","author":"human:operator","message":"msg_1","statement":"s","attestations":[
		{"verdict":"supports","by":{"identity":"human:operator"},"realm":"r2","at":"2026-01-02T03:04:05Z"},
		{"verdict":"inconclusive","by":{"identity":"r1:scout"},"realm":"r1","at":"2026-01-02T03:04:05Z"}]}`)
	page := renderPage(t, "thread", view{Data: map[string]any{"thread": thread, "claims": []any{claim}}})
	if n := strings.Count(page, `of realm <span class="mono">`); n != 1 || !strings.Contains(page, `of realm <span class="mono">r2</span>`) {
		t.Errorf("attesters' realms named %d times, want once, for r2:\n%s", n, page)
	}
	claim["thread"], claim["thread_title"] = "th_1", "t"
	page = renderPage(t, "queue", view{Data: &queueData{Claims: []map[string]any{claim}}})
	if n := strings.Count(page, `of realm <span class="mono">`); n != 1 || !strings.Contains(page, `of realm <span class="mono">r2</span>`) {
		t.Errorf("the queue names attesters' realms %d times, want once, for r2:\n%s", n, page)
	}
}
