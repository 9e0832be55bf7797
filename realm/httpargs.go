package realm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"relay/realm/api"
)

// maxFlatMembers bounds the members flatArgs reads, which it checks for
// duplicates one against another: every operation takes far fewer, and a
// body of many more goes to the decode, whose cost grows with its size only.
const maxFlatMembers = 64

// argMember is one top-level argument: its key, and its value as JSON (nil:
// the argument is removed).
type argMember struct {
	key string
	val []byte
}

// overlayArgs are the arguments a request's path and headers set (or, for
// an absent header, remove), in the order httpArgs applies them, each key
// once; ok is false when one does not encode, or is not UTF-8 (which the
// marshal would silently replace: two tokens would become one).
func overlayArgs(r *http.Request, op *api.Operation) (over []argMember, ok bool) {
	put := func(key string, val []byte) {
		over = slices.DeleteFunc(over, func(m argMember) bool { return m.key == key })
		over = append(over, argMember{key, val})
	}
	for name := range pathParams(op.Path) {
		if !utf8.ValidString(r.PathValue(name)) {
			return nil, false
		}
		b, err := json.Marshal(api.ArgValue(api.Property(op.Input, name), []string{r.PathValue(name)}))
		if err != nil {
			return nil, false
		}
		put(name, b)
	}
	for header, name := range op.Headers {
		if v := r.Header.Get(header); v != "" {
			if !utf8.ValidString(v) {
				return nil, false
			}
			b, err := json.Marshal(v)
			if err != nil {
				return nil, false
			}
			put(name, b)
		} else {
			put(name, nil)
		}
	}
	return over, true
}

// flatArgs writes the arguments of a body that is one flat JSON object —
// its values strings, numbers, true, false, null or arrays of those — with
// over applied, byte for byte as httpArgs's decode into a map and marshal
// of it would: keys sorted, no space, numbers as written. It reads only
// what it can copy as the marshal would write it: any other body (nested
// objects, escapes other than \" \\ \n \r \t, <, > and & that the marshal
// escapes, text that is not UTF-8, duplicate keys, anything after the
// object, more than maxFlatMembers members) is left to the decode, ok
// false, which also writes its refusals.
func flatArgs(body []byte, over []argMember) (out []byte, ok bool) {
	p := flatParser{b: body}
	p.space()
	if !p.byte('{') {
		return nil, false
	}
	var members []argMember
	p.space()
	if !p.byte('}') {
		for {
			p.space()
			k, ok := p.str(false)
			if !ok {
				return nil, false
			}
			p.space()
			if !p.byte(':') {
				return nil, false
			}
			p.space()
			v, ok := p.value()
			if !ok {
				return nil, false
			}
			key := string(k[1 : len(k)-1])
			if len(members) == maxFlatMembers || slices.ContainsFunc(members, func(m argMember) bool { return m.key == key }) {
				return nil, false
			}
			members = append(members, argMember{key, v})
			p.space()
			if p.byte('}') {
				break
			}
			if !p.byte(',') {
				return nil, false
			}
		}
	}
	p.space()
	if p.i != len(p.b) {
		return nil, false
	}
	for _, o := range over {
		members = slices.DeleteFunc(members, func(m argMember) bool { return m.key == o.key })
		if o.val != nil {
			members = append(members, o)
		}
	}
	slices.SortFunc(members, func(a, b argMember) int { return strings.Compare(a.key, b.key) })
	n := 2
	for _, m := range members {
		n += len(m.key) + len(m.val) + 4
	}
	out = make([]byte, 0, n)
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out, ok = appendKey(out, m.key)
		if !ok {
			return nil, false
		}
		out = append(out, ':')
		out = append(out, m.val...)
	}
	return append(out, '}'), true
}

// appendKey appends key as the marshal writes it, if it needs no escape.
func appendKey(out []byte, key string) ([]byte, bool) {
	for i := range len(key) {
		if c := key[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return nil, false
		}
	}
	out = append(out, '"')
	out = append(out, key...)
	return append(out, '"'), true
}

type flatParser struct {
	b []byte
	i int
}

func (p *flatParser) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *flatParser) byte(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// value reads a value and returns it as the marshal writes it.
func (p *flatParser) value() ([]byte, bool) {
	if p.i >= len(p.b) {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		return p.str(true)
	case c == '[':
		return p.array()
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(p.b[p.i:], []byte(lit)) {
			p.i += len(lit)
			return []byte(lit), true
		}
	}
	return nil, false
}

// array reads an array of strings, numbers and literals; the marshal
// writes it without space.
func (p *flatParser) array() ([]byte, bool) {
	p.i++ // [
	out := []byte{'['}
	p.space()
	if p.byte(']') {
		return append(out, ']'), true
	}
	for {
		p.space()
		if p.i < len(p.b) && p.b[p.i] == '[' {
			return nil, false
		}
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		out = append(out, v...)
		p.space()
		if p.byte(']') {
			return append(out, ']'), true
		}
		if !p.byte(',') {
			return nil, false
		}
		out = append(out, ',')
	}
}

// number reads a JSON number, which the decoder keeps as written
// (UseNumber) and the marshal writes so.
func (p *flatParser) number() ([]byte, bool) {
	start := p.i
	p.byte('-')
	digits := func() int {
		n := 0
		for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.byte('0') {
		// no more digits may follow a leading zero
	} else if digits() == 0 {
		return nil, false
	}
	if p.byte('.') && digits() == 0 {
		return nil, false
	}
	if p.byte('e') || p.byte('E') {
		if !p.byte('+') {
			p.byte('-')
		}
		if digits() == 0 {
			return nil, false
		}
	}
	return p.b[start:p.i], true
}

// str reads a string, quotes included, that the marshal writes as it is
// written: valid UTF-8 without U+2028 or U+2029, no <, > or &, no control
// character, and as escapes only \" \\ \n \r \t (none at all in a key,
// which must sort as it reads).
func (p *flatParser) str(escapes bool) ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i - 1
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return p.b[start:p.i], true
		case c == '\\':
			if !escapes || p.i+1 >= len(p.b) || !strings.ContainsRune(`"\nrt`, rune(p.b[p.i+1])) {
				return nil, false
			}
			p.i += 2
		case c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f:
			return nil, false
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				return nil, false
			}
			p.i += size
		}
	}
	return nil, false
}
