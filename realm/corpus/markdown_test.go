package corpus

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

var markdownTextTests = []struct{ in, want string }{
	{"plain words", "plain words"},
	{"a_b*c", `a\_b\*c`},
	{"# not a heading", `\# not a heading`},
	{"[link](http://x)", `\[link\](http://x)`},
	{"<script>", `\<script\>`},
	{"two\nlines\r\nthree\rfour", "two lines  three four"},
	{"`code` | table ~ &amp;", "\\`code\\` \\| table \\~ \\&amp;"},
	{`back\slash`, `back\\slash`},
	{"ünïcödé 😀", "ünïcödé 😀"},
}

func TestMarkdownText(t *testing.T) {
	for _, tc := range markdownTextTests {
		if got := MarkdownText(tc.in); got != tc.want {
			t.Errorf("MarkdownText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// allQuoted fails unless every line of quoted is part of a block quote.
func allQuoted(t testing.TB, quoted string) {
	t.Helper()
	for _, line := range mdLines(strings.TrimSuffix(quoted, "\n")) {
		if !strings.HasPrefix(line, ">") {
			t.Fatalf("a line left the quote: %q in %q", line, quoted)
		}
	}
}

func FuzzMarkdownQuote(f *testing.F) {
	for _, s := range []string{"", "a", "a\nb", "a\r# b", "\r\n\r\n", "> x\n- y\n```\n", "\n\n\n", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b bytes.Buffer
		mdQuote(&b, s)
		allQuoted(t, b.String())
		b.Reset()
		mdCode(&b, s)
		allQuoted(t, b.String())
		if strings.ContainsAny(MarkdownText(s), "\r\n\x00") {
			t.Fatalf("MarkdownText kept a line break or a NUL: %q", s)
		}
		b.Reset()
		mdQuote(&b, s)
		mdCode(&b, s)
		if bytes.IndexByte(b.Bytes(), 0) >= 0 {
			t.Fatalf("a NUL in the quote or the code: %q", s)
		}
	})
}

func TestMessageMarkdown(t *testing.T) {
	content := "first\n# Injected heading\r- injected item\r\n\n## Another\n```\nfence"
	valid := true
	m := Message{MessageID: "m1", ConversationID: "c1", Content: &content, Payload: json.RawMessage(`{"x":"\n# in payload"}`), HasPayload: true,
		AuthorID: "realm:ab", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Sequence: 7, Kind: []string{"claim"},
		Tags: []string{"t_1", "# tag"}, Mentions: []string{"realm:cd"}, SchemaName: "toastmachine.object", SchemaVersion: 1, SchemaValidated: &valid,
		Realm: "realm", CID: "bafy"}
	md, err := MessageOut{Message: m}.Markdown()
	if err != nil {
		t.Fatal(err)
	}
	s := string(md)
	// The only headings are the document's own.
	var headings []string
	for _, line := range mdLines(s) {
		if strings.HasPrefix(line, "#") {
			headings = append(headings, line)
		}
	}
	if len(headings) != 1 || headings[0] != "# Message m1" {
		t.Fatalf("headings %q in\n%s", headings, s)
	}
	for _, want := range []string{"> # Injected heading\n", "> - injected item\n", ">\n> ## Another\n", `- tags: t\_1, \# tag`,
		"- schema: toastmachine.object version 1 (validated)", "- author: [realm:ab](/agents/realm:ab)", ">     {\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in\n%s", want, s)
		}
	}
	// The quoted section runs from "Content:" to the payload.
	start := strings.Index(s, "Content:\n\n") + len("Content:\n\n")
	end := strings.Index(s, "\nPayload (JSON):")
	allQuoted(t, s[start:end])
}

func TestPathSegment(t *testing.T) {
	for in, want := range map[string]string{"realm:abc": "realm:abc", "a b": "a%20b", "x)(y": "x%29%28y", "a/b?c#d": "a%2Fb%3Fc%23d"} {
		if got := pathSegment(in); got != want {
			t.Errorf("pathSegment(%q) = %q, want %q", in, got, want)
		}
	}
}
