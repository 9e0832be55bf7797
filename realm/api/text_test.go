package api

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

var checkTextTests = []struct {
	name, in string
	refused  bool
}{
	{"ASCII", `{"body":"x"}`, false},
	{"beyond ASCII", `{"body":"é 😀"}`, false},
	{"escapes", `{"body":"\" \\ \/ \b \f \n \r \t \u00e9 \uFFFD"}`, false},
	{"a pair", `{"body":"\ud83d\ude00"}`, false},
	{"a pair in capitals", `{"body":"\uD83D\uDE00"}`, false},
	{"two pairs", `{"body":"\ud83d\ude00\ud83d\ude01"}`, false},
	{"an escaped backslash before u", `{"body":"\\ud800"}`, false},
	{"three backslashes", `{"body":"\\\ud83d\ude00"}`, false},
	{"a malformed escape is the decoder's", `{"body":"\uZZZZ"}`, false},
	{"not UTF-8", "{\"body\":\"\xff\xfe\"}", true},
	{"a truncated sequence", "{\"body\":\"\xc3\"}", true},
	{"an encoded surrogate", "{\"body\":\"\xed\xa0\x80\"}", true},
	{"a lone high half", `{"body":"a\ud800b"}`, true},
	{"a lone high half at the end", `{"body":"\ud800"}`, true},
	{"a lone low half", `{"body":"\udc00"}`, true},
	{"two high halves", `{"body":"\ud800\ud800"}`, true},
	{"a high half then another escape", `{"body":"\ud800\n"}`, true},
	{"a low half after a pair", `{"body":"\ud83d\ude00\ude00"}`, true},
	{"after an escaped backslash", `{"body":"\\\ud800"}`, true},
	{"in a key", `{"\udfff":1}`, true},
}

func TestCheckText(t *testing.T) {
	for _, tc := range checkTextTests {
		ref := CheckText([]byte(tc.in))
		if (ref != nil) != tc.refused {
			t.Errorf("%s: %s: refused %v, want %v", tc.name, tc.in, ref, tc.refused)
		}
		if ref != nil && ref.Reason != "invalid_json" {
			t.Errorf("%s: reason %s", tc.name, ref.Reason)
		}
	}
}

// FuzzCheckText holds CheckText to what it promises: what it passes decodes
// (when it is JSON at all) to the very text it holds, with no character
// replaced, and a string whose decode holds U+FFFD that was not sent as
// such is refused.
func FuzzCheckText(f *testing.F) {
	for _, tc := range checkTextTests {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if CheckText(b) != nil {
			return
		}
		if !utf8.Valid(b) {
			t.Fatalf("%q: passed, not UTF-8", b)
		}
		var s string
		if json.Unmarshal(b, &s) != nil {
			return
		}
		// A decoded U+FFFD is sent as itself or as \ufffd; count both.
		sent := 0
		for i := 0; i < len(b); {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError {
				sent++
			}
			if b[i] == '\\' && i+5 < len(b) && b[i+1] == 'u' {
				if v, ok := hex4(b, i+2); ok && v == 0xfffd {
					sent++
				}
				i += 2
				continue
			}
			i += n
		}
		got := 0
		for _, r := range s {
			if r == utf8.RuneError {
				got++
			}
		}
		if got > sent {
			t.Fatalf("%q passed, decodes to %q with %d U+FFFD, %d sent", b, s, got, sent)
		}
	})
}
