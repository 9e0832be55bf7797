// Package jsonenc appends JSON strings and times exactly as encoding/json
// writes them, for the hand-written record encoders of the forum and the
// corpus, whose tests hold every record to encoding/json byte for byte.
package jsonenc

import (
	"bytes"
	"time"
	"unicode/utf8"
)

// AppendTime writes t as time.Time.MarshalJSON does: a UTC time of years
// 0–9999 by hand, any other through MarshalJSON itself.
func AppendTime(b []byte, t time.Time) ([]byte, error) {
	if t.Location() == time.UTC {
		if y := t.Year(); y >= 0 && y <= 9999 {
			b = append(b, '"')
			b = t.AppendFormat(b, time.RFC3339Nano)
			return append(b, '"'), nil
		}
	}
	j, err := t.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

// AppendHTMLString writes s as encoding/json does by default: HTML
// characters, U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD.
func AppendHTMLString(b []byte, s string) []byte { return appendString(b, s, &htmlSafe) }

// AppendString writes s as an encoding/json Encoder with SetEscapeHTML(false)
// does: as AppendHTMLString, but <, > and & as they are.
func AppendString(b []byte, s string) []byte { return appendString(b, s, &plainSafe) }

const hexDigits = "0123456789abcdef"

// htmlSafe and plainSafe hold the ASCII bytes a JSON string carries as they
// are, with and without HTML characters escaped.
var htmlSafe, plainSafe = func() (html, plain [utf8.RuneSelf]bool) {
	for c := range plain {
		plain[c] = c >= 0x20 && c != '"' && c != '\\'
		html[c] = plain[c] && c != '<' && c != '>' && c != '&'
	}
	return html, plain
}()

func appendString(b []byte, s string, safe *[utf8.RuneSelf]bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// UnescapeHTML returns the JSON text b with the escapes encoding/json
// writes for HTML's sake (\u003c, \u003e and \u0026) written as the
// characters they stand for: the same JSON values, up to five bytes fewer
// for each. A backslash that is itself escaped is left as it is. b is
// returned as it is when it holds no such escape.
func UnescapeHTML(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u00`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '\\' || i+1 >= len(b) {
			out = append(out, c)
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch string(b[i+2 : i+6]) {
			case "003c", "003C":
				out, i = append(out, '<'), i+5
				continue
			case "003e", "003E":
				out, i = append(out, '>'), i+5
				continue
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			}
		}
		out = append(out, c, b[i+1]) // an escape: its next byte is not the start of one
		i++
	}
	return out
}
