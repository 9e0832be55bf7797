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
