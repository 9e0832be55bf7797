// Package accept reads HTTP Accept headers (RFC 9110, section 12.5.1): the
// media ranges a client asks for and the quality each gives a media type.
package accept

import (
	"strconv"
	"strings"
)

// Range is one media range of an Accept header.
type Range struct {
	Type, Sub string  // lower case; "*" for a wildcard
	Q         float64 // 0..1
}

// Parse returns the media ranges of an Accept header. Elements that are
// not media ranges, and ranges whose q is not a number in 0..1, are
// dropped; a lone "*" is taken as */*, as some clients send it.
func Parse(h string) []Range {
	var out []Range
	for _, part := range strings.Split(h, ",") {
		params := strings.Split(part, ";")
		full := strings.ToLower(strings.TrimSpace(params[0]))
		if full == "*" {
			full = "*/*"
		}
		typ, sub, ok := strings.Cut(full, "/")
		if !ok || typ == "" || sub == "" || (typ == "*" && sub != "*") {
			continue
		}
		r := Range{Type: typ, Sub: sub, Q: 1}
		for _, p := range params[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil || !(q >= 0 && q <= 1) {
					r.Q = -1
				} else {
					r.Q = q
				}
				break // what follows q is accept-ext
			}
		}
		if r.Q >= 0 {
			out = append(out, r)
		}
	}
	return out
}

// Specificity of the range that matched a media type, as Quality reports
// it.
const (
	None   = -1 // no range matches
	Any    = 0  // */*
	AnySub = 1  // type/*
	Exact  = 2  // type/subtype
)

// Quality is the q that ranges give the media type mt (lower case
// type/subtype), from the most specific range that matches it, and that
// range's specificity; of two ranges as specific, the kinder one counts.
func Quality(ranges []Range, mt string) (q float64, spec int) {
	typ, sub, _ := strings.Cut(mt, "/")
	spec = None
	for _, r := range ranges {
		s := None
		switch {
		case r.Type == typ && r.Sub == sub:
			s = Exact
		case r.Type == typ && r.Sub == "*":
			s = AnySub
		case r.Type == "*":
			s = Any
		}
		switch {
		case s < 0 || s < spec:
		case s > spec:
			spec, q = s, r.Q
		default:
			q = max(q, r.Q)
		}
	}
	return q, spec
}
