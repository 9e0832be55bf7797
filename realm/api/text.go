package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"relay/protocol"
)

// CheckText refuses JSON text that is not text: bytes that are not UTF-8
// (RFC 8259 §8.1), and \u escapes of UTF-16 surrogates that do not pair
// (I-JSON, RFC 7493 §2.1; JCS rests on it). Go's decoder takes both for
// U+FFFD, so what a client sent would be stored changed; it is refused as
// invalid_json instead, over every transport.
func CheckText(b []byte) *protocol.Refusal {
	if !utf8.Valid(b) {
		return protocol.Refusef(protocol.ReasonInvalidJSON, "The request is not valid JSON: it is not UTF-8 text.")
	}
	if i := loneSurrogate(b); i >= 0 {
		return protocol.Refusef(protocol.ReasonInvalidJSON, "The request is not valid JSON: the escape %s is half of a UTF-16 surrogate pair, which encodes no character.", b[i:i+6])
	}
	return nil
}

// loneSurrogate returns the offset of the first \u escape in b of a
// surrogate that is not part of a pair, or -1. A backslash outside a
// string is not JSON at all, so every one is taken for an escape; a
// malformed escape is left to the decoder.
func loneSurrogate(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 || i+j+1 >= len(b) {
			return -1
		}
		i += j
		if b[i+1] != 'u' {
			i += 2 // \" \\ \/ \b \f \n \r \t: the escaped byte is not a backslash
			continue
		}
		r, ok := hex4(b, i+2)
		if !ok {
			return -1
		}
		switch {
		case !utf16.IsSurrogate(r):
			i += 6
		case r >= 0xdc00: // a low half first
			return i
		default: // a high half: a low half must follow at once
			if i+12 > len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
				return i
			}
			lo, ok := hex4(b, i+8)
			if !ok || lo < 0xdc00 || lo > 0xdfff {
				return i
			}
			i += 12
		}
	}
}

// hex4 reads the four hex digits of a \u escape at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// NotJSON is the refusal of arguments encoding/json does not decode, told
// in the request's terms rather than in Go's.
func NotJSON(err error) *protocol.Refusal {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	why := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "json: "), "jcs: ")
	switch {
	case errors.As(err, &syn):
		why = fmt.Sprintf("%s, at byte %d", why, syn.Offset)
	case errors.As(err, &typ) && strings.HasPrefix(typ.Value, "number"):
		why = "the number " + strings.TrimSpace(strings.TrimPrefix(typ.Value, "number")) + " is out of range"
	case errors.Is(err, io.ErrUnexpectedEOF):
		why = "it ends before the value does"
	}
	return protocol.Refusef(protocol.ReasonInvalidJSON, "The request is not valid JSON: %s.", why)
}
