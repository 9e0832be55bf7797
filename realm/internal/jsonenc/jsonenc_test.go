package jsonenc

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

var strs = []string{"", "plain", `"quoted" \ back`, "<a href='x'>&amp;</a>", "tab\tnl\ncr\rbs\bff\f",
	"\x00\x01\x1f\x7f", "\u2028\u2029", "bad \xff utf-8 \xc3", "émoji 🙂 ü"}

func encode(v any, html bool) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

func check(t *testing.T, s string) {
	t.Helper()
	if got, want := string(AppendHTMLString(nil, s)), encode(s, true); got != want {
		t.Errorf("AppendHTMLString(%q) = %s, want %s", s, got, want)
	}
	if got, want := string(AppendString(nil, s)), encode(s, false); got != want {
		t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
	}
}

func TestStrings(t *testing.T) {
	for _, s := range strs {
		check(t, s)
	}
}

func TestTimes(t *testing.T) {
	for _, tm := range []time.Time{time.Unix(1700000000, 123456789).UTC(), time.Unix(0, 0).UTC(),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))} {
		got, err := AppendTime(nil, tm)
		want, werr := json.Marshal(tm)
		if (err != nil) != (werr != nil) || string(got) != string(want) {
			t.Errorf("AppendTime(%v) = %s, %v; want %s, %v", tm, got, err, want, werr)
		}
	}
}

func FuzzStrings(f *testing.F) {
	for _, s := range strs {
		f.Add(s)
	}
	f.Fuzz(check)
}

// checkUnescape: UnescapeHTML of what encoding/json writes with HTML
// escaping is what it writes without, for a string alone and inside an
// object whose key is the string too.
func checkUnescape(t *testing.T, s string) {
	t.Helper()
	for _, v := range []any{s, map[string]any{s: []any{s, 1}}} {
		if got, want := string(UnescapeHTML([]byte(encode(v, true)))), encode(v, false); got != want {
			t.Errorf("UnescapeHTML(%s) = %s, want %s", encode(v, true), got, want)
		}
	}
}

func TestUnescapeHTML(t *testing.T) {
	for _, s := range append(strs, `\u003c`, `\\u003c`, `\`, `a\u0026b&`, "\\\\\\u003e") {
		checkUnescape(t, s)
	}
	// Escapes written by others: upper-case hex too; an escaped
	// backslash before "u003c" is no escape of '<'.
	for in, want := range map[string]string{`"\u003C\u003E"`: `"<>"`, `"\\u003c"`: `"\\u003c"`, `"\\\u003c"`: `"\\<"`, `"\u0041"`: `"\u0041"`} {
		if got := string(UnescapeHTML([]byte(in))); got != want {
			t.Errorf("UnescapeHTML(%s) = %s, want %s", in, got, want)
		}
	}
}

func FuzzUnescapeHTML(f *testing.F) {
	for _, s := range strs {
		f.Add(s)
	}
	f.Fuzz(checkUnescape)
}
