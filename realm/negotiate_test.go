package realm

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

type negotiateTest struct {
	accept string
	want   string // "" means 406
}

var corpusOffers = []string{mediaJSON, mediaMarkdown, mediaJSONLD}

var negotiateTests = []negotiateTest{
	{"", mediaJSON},
	{"   ", mediaJSON},
	{"*/*", mediaJSON},
	{"*", mediaJSON},
	{"application/json", mediaJSON},
	{"text/markdown", mediaMarkdown},
	{"TEXT/Markdown; charset=utf-8", mediaMarkdown},
	{"application/ld+json", mediaJSONLD},
	{`application/ld+json; profile="http://www.w3.org/ns/json-ld#expanded"`, mediaJSONLD},
	{"text/*", mediaMarkdown},
	{"application/*", mediaJSON},
	{"text/markdown, application/json", mediaJSON},        // equal quality prefers JSON
	{"application/ld+json, text/markdown", mediaMarkdown}, // equal quality: the earlier offer
	{"text/markdown;q=0.9, application/json;q=0.8", mediaMarkdown},
	{"application/json;q=0.5, text/markdown", mediaMarkdown},
	{"application/json;q=0, */*", mediaMarkdown}, // q=0 excludes
	{"application/json;q=0, text/markdown;q=0, */*", mediaJSONLD},
	{"*/*;q=0", ""},
	{"application/json;q=0", ""},
	{"text/html", ""},
	{"image/png, text/html;q=0.9", ""},
	{"text/html, */*;q=0.1", mediaJSON},
	{"application/*;q=0, text/markdown", mediaMarkdown},
	{"application/*;q=0.2, application/json;q=0", mediaJSONLD}, // the most specific range wins
	{"application/json;q=2", mediaJSON},                        // an invalid q drops the range: no valid range left
	{"application/json;q=abc, text/markdown", mediaMarkdown},   // the invalid range is dropped
	{"garbage", mediaJSON},                                     // no valid range: as if absent
	{"text/markdown;q=0.5;level=1, application/json;q=0.4", mediaMarkdown},
}

func TestNegotiate(t *testing.T) {
	for _, tc := range negotiateTests {
		got, ok := negotiate(tc.accept, corpusOffers)
		if !ok {
			got = ""
		}
		if got != tc.want {
			t.Errorf("negotiate(%q) = %q, want %q", tc.accept, got, tc.want)
		}
	}
	// The homepage's default is HTML.
	for accept, want := range map[string]string{"": mediaHTML, "*/*": mediaHTML, "text/*": mediaHTML, "text/markdown": mediaMarkdown,
		"text/html;q=0.5, text/markdown": mediaMarkdown, "application/json": ""} {
		got, ok := negotiate(accept, []string{mediaHTML, mediaMarkdown})
		if !ok {
			got = ""
		}
		if got != want {
			t.Errorf("homepage: negotiate(%q) = %q, want %q", accept, got, want)
		}
	}
}

var etagListTests = []struct {
	list string
	want bool
}{
	{`"abc"`, true},
	{`W/"abc"`, true},
	{`"x", "abc"`, true},
	{`"x",W/"abc"`, true},
	{`*`, true},
	{`"abcd"`, false},
	{`"ab,c", "abc"`, true},
	{`abc`, false},
	{`"x"`, false},
	{``, false},
	{`"unterminated`, false},
}

func TestETagListMatches(t *testing.T) {
	for _, tc := range etagListTests {
		if got := etagListMatches(tc.list, `"abc"`); got != tc.want {
			t.Errorf("etagListMatches(%q) = %v, want %v", tc.list, got, tc.want)
		}
	}
}

func TestRepresentationConditional(t *testing.T) {
	lm := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	rep := representation{mediaType: mediaJSON, body: []byte(`{"a":1}`), lastModified: lm}
	etag := rep.etag()
	md := representation{mediaType: mediaMarkdown, body: []byte(`{"a":1}`)}
	if md.etag() == etag {
		t.Fatal("the same bytes in two media types share an ETag")
	}
	for _, tc := range []struct {
		method string
		header http.Header
		status int
		body   bool
	}{
		{"GET", nil, 200, true},
		{"HEAD", nil, 200, false},
		{"GET", http.Header{"If-None-Match": {etag}}, 304, false},
		{"HEAD", http.Header{"If-None-Match": {etag}}, 304, false},
		{"GET", http.Header{"If-None-Match": {`"other"`}}, 200, true},
		{"GET", http.Header{"If-Modified-Since": {lm.Format(http.TimeFormat)}}, 304, false},
		{"GET", http.Header{"If-Modified-Since": {lm.Add(-time.Second).Format(http.TimeFormat)}}, 200, true},
		{"GET", http.Header{"If-Modified-Since": {"yesterday"}}, 200, true},
		// If-None-Match wins over If-Modified-Since.
		{"GET", http.Header{"If-None-Match": {`"other"`}, "If-Modified-Since": {lm.Format(http.TimeFormat)}}, 200, true},
	} {
		r := httptest.NewRequest(tc.method, "/x", nil)
		for k, v := range tc.header {
			r.Header[k] = v
		}
		w := httptest.NewRecorder()
		if got := rep.write(w, r, 200); got != tc.status || w.Code != tc.status {
			t.Errorf("%s %v: %d (recorded %d), want %d", tc.method, tc.header, got, w.Code, tc.status)
		}
		if (w.Body.Len() > 0) != tc.body {
			t.Errorf("%s %v: body %q", tc.method, tc.header, w.Body.String())
		}
		if w.Header().Get("ETag") != etag || w.Header().Get("Last-Modified") != lm.Format(http.TimeFormat) {
			t.Errorf("%s %v: validators %v", tc.method, tc.header, w.Header())
		}
		if tc.method == "HEAD" && tc.status == 200 && w.Header().Get("Content-Length") != "7" {
			t.Errorf("HEAD: Content-Length %q", w.Header().Get("Content-Length"))
		}
	}
}
