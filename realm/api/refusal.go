package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"relay/protocol"
)

// schemaRefusal turns the validator's refusal of args, decoded as
// encoding/json decodes into an any, into invalid_body naming the field
// and the rule broken.
//
// It finds them by its own walk of s and args, not in the validator's
// text: that text lists unknown fields in map order, so two identical
// requests could name different fields, and quotes names in a way no parse
// recovers exactly. The walk knows the keywords a shape knows, and the
// bounds of a string's length; a violation of any other keyword keeps the
// validator's text, rule schema.
func schemaRefusal(s *jsonschema.Schema, args any, err error) *protocol.Refusal {
	if ref := violation(s, args, ""); ref != nil {
		return ref
	}
	return protocol.Refusef(protocol.ReasonInvalidBody, "%s", err.Error()).With("rule", "schema")
}

// jsonText is v written as JSON, for a refusal.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// enumText lists an enum's values for a refusal: a, b or c.
func enumText(values []any) string {
	words := make([]string, len(values))
	for i, v := range values {
		words[i] = fmt.Sprint(v)
	}
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// violation is the first rule of s that v, at path, breaks; nil if none the
// walk knows. Its order is fixed, whatever the order of a map: as the
// validator, a value's type first, then its bounds, then its items in
// order or its members — the values of the properties it declares, then
// the others, then the properties it requires — and members by their
// names, lexically, the order in which HTTP hands arguments over.
func violation(s *jsonschema.Schema, v any, path string) *protocol.Refusal {
	if s == nil {
		return nil
	}
	if typed, types := typesOf(s); typed && typeOf(v)&types == 0 {
		want := s.Type
		if want == "" {
			want = strings.Join(s.Types, " or ")
		}
		return invalidField(path, "type", "Field %q must be of type %s, not %s.", path, want, TypeName(v))
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return reflect.DeepEqual(e, v) }) {
		return invalidField(path, "enum", "Field %q is one of %s; %s is none of them.", path, enumText(s.Enum), jsonText(v))
	}
	switch x := v.(type) {
	case float64:
		switch {
		case s.Minimum != nil && x < *s.Minimum:
			return invalidField(path, "minimum", "Field %q must be at least %v.", path, *s.Minimum)
		case s.Maximum != nil && x > *s.Maximum:
			return invalidField(path, "maximum", "Field %q must be at most %v.", path, *s.Maximum)
		case s.ExclusiveMinimum != nil && x <= *s.ExclusiveMinimum:
			return invalidField(path, "minimum", "Field %q must be greater than %v.", path, *s.ExclusiveMinimum)
		case s.ExclusiveMaximum != nil && x >= *s.ExclusiveMaximum:
			return invalidField(path, "maximum", "Field %q must be less than %v.", path, *s.ExclusiveMaximum)
		}
	case string:
		n := utf8.RuneCountInString(x)
		switch {
		case s.MinLength != nil && n < *s.MinLength:
			return invalidField(path, "min_length", "Field %q holds at least %s (Unicode code points); it has %d.", path, characters(*s.MinLength), n)
		case s.MaxLength != nil && n > *s.MaxLength:
			return invalidField(path, "max_length", "Field %q holds at most %d characters (Unicode code points); it has %d.", path, *s.MaxLength, n)
		}
	case []any:
		for i, e := range x {
			if ref := violation(s.Items, e, path+"["+strconv.Itoa(i)+"]"); ref != nil {
				return ref
			}
		}
	case map[string]any:
		names := slices.Sorted(maps.Keys(x))
		for _, name := range names {
			if p, ok := s.Properties[name]; ok {
				if ref := violation(p, x[name], member(path, name)); ref != nil {
					return ref
				}
			}
		}
		if ap := s.AdditionalProperties; ap != nil {
			closed := isFalse(ap)
			for _, name := range names {
				if _, ok := s.Properties[name]; ok {
					continue
				}
				if closed {
					return invalidField(member(path, name), "unknown_field", "Unknown field %q.", member(path, name))
				}
				if ref := violation(ap, x[name], member(path, name)); ref != nil {
					return ref
				}
			}
		}
		for _, name := range s.Required {
			if _, ok := x[name]; !ok {
				return invalidField(member(path, name), "required", "Missing required field %q.", member(path, name))
			}
		}
	}
	return nil
}

// member is the path of a member of the object at path, written as the
// envelope's checks write theirs: from.extension, claims[0].statement.
func member(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func invalidField(field, rule, format string, args ...any) *protocol.Refusal {
	return protocol.Refusef(protocol.ReasonInvalidBody, format, args...).With("field", field).With("rule", rule)
}

// TypeName is v's JSON type as the validator names it.
func TypeName(v any) string {
	switch typeOf(v) {
	case typeNull:
		return "null"
	case typeBoolean:
		return "boolean"
	case typeInteger:
		return "integer"
	case typeNumber:
		return "number"
	case typeString:
		return "string"
	case typeArray:
		return "array"
	case typeObject:
		return "object"
	}
	return "unknown"
}

// bindRefusal turns an error of decoding the arguments into an input's Go
// type into invalid_body. The schema admitted them, so what is left is a
// value the Go type cannot hold: a negative or too large number for an
// unsigned or sized integer, a fraction for an integer. It names the field
// as encoding/json knows it, members joined by dots (its path has no array
// indexes), and never the Go types.
func bindRefusal(err error) error {
	if err == nil {
		return nil
	}
	var ute *json.UnmarshalTypeError
	if !errors.As(err, &ute) || ute.Field == "" {
		return protocol.Refusef(protocol.ReasonInvalidBody, "The arguments do not fit the operation's input: %s.", jsonErrorText(err)).With("rule", "type")
	}
	ute.Field = wireField(ute.Field)
	if ute.Type == reflect.TypeFor[protocol.KeyRef]() {
		return invalidField(ute.Field, "type", "Field %q must be a key such as th_12, or a positive integer, not %s.", ute.Field, ute.Value)
	}
	want, value := goJSONType(ute.Type), ute.Value
	if num, ok := strings.CutPrefix(ute.Value, "number "); ok && want == "integer" {
		switch rule, whole := intRange(ute.Type, num); {
		case rule != "":
			return invalidField(ute.Field, rule, "Field %q cannot hold %s: it is out of range.", ute.Field, num)
		case whole:
			return invalidField(ute.Field, "type", "Field %q must be an integer written without a fraction or an exponent, not %s.", ute.Field, num)
		}
		value = num
	}
	return invalidField(ute.Field, "type", "Field %q must be of type %s, not %s.", ute.Field, want, value)
}

// wireField is the path of a field as a client writes it: encoding/json
// names a field of an embedded struct after the struct's Go type too
// ("Envelope.parent"), which no client sends; every name on the wire is
// lower case.
func wireField(path string) string {
	parts := strings.Split(path, ".")
	kept := parts[:0]
	for _, p := range parts {
		if p != "" && !unicode.IsUpper([]rune(p)[0]) {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		return path
	}
	return strings.Join(kept, ".")
}

// intRange reports whether num, a JSON number, is whole, and if it is,
// rule is minimum or maximum when it lies beyond what integer type t
// holds, "" when within.
func intRange(t reflect.Type, num string) (rule string, whole bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f != math.Trunc(f) {
		return "", false
	}
	if t == nil {
		return "", true
	}
	var lo, hi float64
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		lo, hi = -math.Ldexp(1, t.Bits()-1), math.Ldexp(1, t.Bits()-1)-1
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		lo, hi = 0, math.Ldexp(1, t.Bits())-1
	default:
		return "", true
	}
	switch {
	case f < lo:
		return "minimum", true
	case f > hi:
		return "maximum", true
	}
	return "", true
}

// jsonErrorText is err's text without encoding/json's prefix.
func jsonErrorText(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

// goJSONType is the JSON type a Go type decodes from.
func goJSONType(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a value of another type"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return "object"
}

// characters is n characters, in words.
func characters(n int) string {
	if n == 1 {
		return "1 character"
	}
	return strconv.Itoa(n) + " characters"
}
