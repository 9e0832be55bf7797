package api

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Property is the schema of one property of s, nil when s has none.
func Property(s *jsonschema.Schema, name string) *jsonschema.Schema {
	if s == nil || s.Properties == nil {
		return nil
	}
	return s.Properties[name]
}

// ArgValue converts text from a URL to the JSON type the schema wants, so
// that HTTP, the console and MCP hand handlers the same arguments.
func ArgValue(prop *jsonschema.Schema, vals []string) any {
	if prop == nil {
		return vals[0]
	}
	has := schemaHas(prop)
	if has("array") {
		out := make([]any, 0, len(vals))
		for _, v := range vals {
			out = append(out, ArgValue(prop.Items, []string{v}))
		}
		return out
	}
	v := vals[0]
	switch {
	case has("integer"):
		// An integer beyond 64 bits is the nearest one within: a limit
		// or offset is clamped as the seed says, a range refused by its
		// bounds, rather than the number refused as not one. Where text
		// is taken too (a key or its number), such digits stay text, as
		// MCP hands them over, and name what the client sent.
		// Where text is taken too, only the digits a JSON integer is
		// written with are one: "01" or "+1" stays the text MCP would
		// send for it, not the number 1 (th_01 names no thread).
		if !startsInteger(v) {
			break // a key, say: ParseInt would refuse it, and build its error
		}
		i, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err == nil && (!has("string") || strconv.FormatInt(i, 10) == v):
			return i
		case errors.Is(err, strconv.ErrRange) && !has("string"):
			return i
		case !has("string"):
			// 2.0 or 1e2 is an integer to JSON Schema, and MCP's
			// arguments read it as one (wholeIntegers): so does a URL.
			// Any other JSON number is the number it is, for the schema
			// to refuse as MCP's would: an integer, not a number.
			if !json.Valid([]byte(v)) {
				break
			}
			if text, ok := wholeLiteral(v); ok {
				if n, err := strconv.ParseInt(text, 10, 64); err == nil {
					return n
				}
			}
			return json.Number(v) // as written, as MCP's refusal quotes it
		}
	case has("number"):
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	case has("boolean"):
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	}
	return v
}

// clampWide gives an integer argument beyond 64 bits, written in JSON, the
// value ArgValue gives the same digits in a URL: the nearest integer
// within, for a handler to clamp (a limit, an offset) or refuse by its
// bounds. So an argument is the same argument whatever the transport, not
// clamped from a query string and refused as out of range from MCP. As
// ArgValue, it reads only top-level arguments whose schema is an integer
// and not text (a key or its number keeps its digits). ok reports whether
// one changed.
func clampWide(s *jsonschema.Schema, args json.RawMessage) (out json.RawMessage, ok bool) {
	if !hasLongDigits(args) {
		return nil, false
	}
	return rewriteMembers(s, args, wantsInteger, func(text string) (string, bool) {
		if !isIntegerLiteral(text) {
			return "", false
		}
		if _, err := strconv.ParseInt(text, 10, 64); !errors.Is(err, strconv.ErrRange) {
			return "", false
		}
		if text[0] == '-' {
			return strconv.FormatInt(math.MinInt64, 10), true
		}
		return strconv.FormatInt(math.MaxInt64, 10), true
	})
}

// wholeIntegers writes a whole number given with a fraction or an
// exponent (2.0, 1e2, 0.5e1) as the integer it is, in top-level arguments
// whose schema takes an integer, as clampWide reads them: JSON Schema
// counts such a number an integer, encoding/json does not. A number beyond
// 64 bits stays as written, for the bind to refuse by its bounds. ok
// reports whether one changed.
func wholeIntegers(s *jsonschema.Schema, args json.RawMessage) (out json.RawMessage, ok bool) {
	return rewriteMembers(s, args, func(prop *jsonschema.Schema) bool { return schemaHas(prop)("integer") }, wholeLiteral)
}

// rewriteMembers rewrites the top-level arguments whose property in s
// takes (takes(prop)) with rewrite, which is given each one's JSON text
// and says whether it changed it. ok reports whether one changed.
func rewriteMembers(s *jsonschema.Schema, args json.RawMessage, takes func(*jsonschema.Schema) bool, rewrite func(text string) (string, bool)) (out json.RawMessage, ok bool) {
	var members map[string]json.RawMessage
	if json.Unmarshal(args, &members) != nil {
		return nil, false
	}
	changed := false
	for name, raw := range members {
		prop := Property(s, name)
		if prop == nil || !takes(prop) {
			continue
		}
		if text, did := rewrite(string(raw)); did {
			members[name] = json.RawMessage(text)
			changed = true
		}
	}
	if !changed {
		return nil, false
	}
	b, err := json.Marshal(members)
	if err != nil {
		return nil, false
	}
	return b, true
}

// wholeLiteral is the integer literal of text, a JSON number with a
// fraction or an exponent, when its value is a whole number within 64
// bits, read from its decimal digits exactly (no float rounding).
func wholeLiteral(text string) (string, bool) {
	if isIntegerLiteral(text) {
		return "", false
	}
	neg := strings.HasPrefix(text, "-")
	mant, expText := strings.TrimPrefix(text, "-"), ""
	if i := strings.IndexAny(mant, "eE"); i >= 0 {
		mant, expText = mant[:i], mant[i+1:]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	all := intPart + frac
	digits := strings.TrimLeft(all, "0")
	if digits == "" {
		return "0", true // zero, whatever its exponent
	}
	exp := 0
	if expText != "" {
		// Beyond these bounds a nonzero number is out of 64 bits, or
		// a fraction; within them the zeros written stay few.
		e, err := strconv.Atoi(expText)
		if err != nil || e > len(mant)+20 || e < -len(mant)-1 {
			return "", false
		}
		exp = e
	}
	point := len(intPart) + exp - (len(all) - len(digits)) // the decimal point's place in digits
	if point <= 0 || strings.TrimRight(digits[min(point, len(digits)):], "0") != "" {
		return "", false // a fraction
	}
	out := digits[:min(point, len(digits))] + strings.Repeat("0", max(point-len(digits), 0))
	if neg {
		out = "-" + out
		if _, err := strconv.ParseInt(out, 10, 64); err != nil {
			return "", false
		}
	} else if _, err := strconv.ParseUint(out, 10, 64); err != nil {
		return "", false
	}
	return out, true
}

// wantsInteger reports whether prop takes an integer and not text, as
// ArgValue converts digits for.
func wantsInteger(prop *jsonschema.Schema) bool {
	has := schemaHas(prop)
	return has("integer") && !has("string")
}

// schemaHas reports, for a JSON type's name, whether prop admits it: its
// type, or else one of its types.
func schemaHas(prop *jsonschema.Schema) func(string) bool {
	types := prop.Types
	if prop.Type != "" {
		types = []string{prop.Type}
	}
	return func(t string) bool { return slices.Contains(types, t) }
}

// startsInteger reports whether text starts as strconv.ParseInt reads a
// base 10 integer: with a digit, after at most one sign. Any other text it
// refuses as no integer at its first byte (a range error comes only from a
// run of digits).
func startsInteger(text string) bool {
	if len(text) > 0 && (text[0] == '-' || text[0] == '+') {
		text = text[1:]
	}
	return text != "" && '0' <= text[0] && text[0] <= '9'
}

// isIntegerLiteral reports whether text is a JSON number without a
// fraction or an exponent.
func isIntegerLiteral(text string) bool {
	digits := text
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if digits == "" || len(digits) > 1 && digits[0] == '0' {
		return false
	}
	for i := range len(digits) {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}

// hasLongDigits reports whether b holds a run of 19 digits or more, the
// least an integer beyond 64 bits takes: the rest need no look.
func hasLongDigits(b []byte) bool {
	run := 0
	for _, c := range b {
		if '0' <= c && c <= '9' {
			run++
			if run >= 19 {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}
