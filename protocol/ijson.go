package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// ErrDuplicateMember is the refusal of an object that names a member twice,
// which I-JSON (RFC 7493) forbids and JCS takes for granted: a decode would
// keep the last value and drop the others unseen.
var ErrDuplicateMember = errors.New("jcs: an object names a member twice")

// DecodeIJSON decodes one JSON text into an any, as encoding/json does with
// UseNumber, but refuses an object that names a member twice
// (ErrDuplicateMember).
func DecodeIJSON(raw []byte) (any, error) {
	// The decode first: it bounds the nesting the scan then reads.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("jcs: trailing data")
	}
	if k, _, dup := DuplicateMember(raw); dup {
		return nil, fmt.Errorf("%w: %q", ErrDuplicateMember, k)
	}
	return v, nil
}

// smallObject is how many names an object's names are kept in a list
// for, before a map.
const smallObject = 16

// maxMemberDepth bounds the nesting DuplicateMember reads, as
// encoding/json bounds what it decodes: deeper text is no JSON to it.
const maxMemberDepth = 10000

// DuplicateMember reports the first member name an object of the JSON text b
// holds twice, and the depth of that object (0 for the outermost); names are
// compared as they decode, escapes and all. It reads b once and skips
// values; on text that is not JSON, or nested deeper than encoding/json
// decodes, its answer means nothing (a decode refuses such text anyway).
func DuplicateMember(b []byte) (name string, depth int, found bool) {
	type level struct {
		object, expectName bool
		names              [][]byte
		many               map[string]bool
	}
	var stack []level
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			if len(stack) == maxMemberDepth {
				return "", 0, false
			}
			stack = append(stack, level{object: b[i] == '{', expectName: b[i] == '{'})
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ',':
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].expectName = true
			}
		case '"':
			j, escaped := i+1, false
			for j < len(b) && b[j] != '"' {
				if b[j] == '\\' {
					escaped = true
					j++
				}
				j++
			}
			if j >= len(b) {
				return "", 0, false
			}
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectName {
				l := &stack[n-1]
				k := b[i+1 : j]
				if escaped || !utf8.Valid(k) { // decoded, a byte that is not UTF-8 is U+FFFD
					var s string
					if json.Unmarshal(b[i:j+1], &s) != nil {
						return "", 0, false
					}
					k = []byte(s)
				}
				if l.many == nil {
					for _, o := range l.names {
						if bytes.Equal(o, k) {
							return string(k), n - 1, true
						}
					}
					l.names = append(l.names, k)
					if len(l.names) > smallObject {
						l.many = make(map[string]bool, 2*smallObject)
						for _, o := range l.names {
							l.many[string(o)] = true
						}
					}
				} else {
					if l.many[string(k)] {
						return string(k), n - 1, true
					}
					l.many[string(k)] = true
				}
				l.expectName = false
			}
			i = j
		}
	}
	return "", 0, false
}
