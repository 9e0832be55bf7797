package api

import (
	"errors"
	"slices"
	"strconv"

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
	types := prop.Types
	if prop.Type != "" {
		types = []string{prop.Type}
	}
	has := func(t string) bool { return slices.Contains(types, t) }
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
		i, err := strconv.ParseInt(v, 10, 64)
		if err == nil || errors.Is(err, strconv.ErrRange) && !has("string") {
			return i
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
