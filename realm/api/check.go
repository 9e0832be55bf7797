package api

import (
	"math"
	"reflect"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// A shape is an input schema compiled for the registry's own check of
// decoded arguments. It knows the keywords the operations' schemas use —
// type, properties, required, additionalProperties, items, the bounds of
// a number, a string's least length, an enum of strings — and nothing
// else: a schema with any other keyword that validation reads compiles to
// no shape, and its operation keeps the validator alone.
//
// The shape only says yes or no. Arguments it admits are valid; arguments
// it does not admit go to the validator, which writes the refusal, so every
// refusal is the validator's. The validator walks the schema by reflection
// and wraps an error at every level whether or not one occurs, which is
// most of the input check's cost on a write.
type shape struct {
	typed  bool     // type or types is set: the value's JSON type must be in types
	types  jsonType // the JSON types admitted, when typed
	props  map[string]*shape
	extra  *shape // additionalProperties when it is a schema; nil: any value
	closed bool   // additionalProperties: false
	items  *shape // nil: any items
	// Bounds of a number; nil: none.
	min, max, exclusiveMin, exclusiveMax *float64
	// minLength is a string's least length in code points; 0: none.
	minLength int
	// enum, when set, holds the only strings admitted (and no other value).
	enum map[string]bool
	// required are the properties an object must have (null counts);
	// requiredBit numbers them for the scan of raw arguments, up to 64.
	required    []string
	requiredBit map[string]uint64
	requiredAll uint64 // every bit of requiredBit
}

// jsonType is a set of JSON types as JSON Schema names them.
type jsonType uint8

const (
	typeNull jsonType = 1 << iota
	typeBoolean
	typeInteger
	typeNumber
	typeString
	typeArray
	typeObject
)

var typeNames = map[string]jsonType{
	"null": typeNull, "boolean": typeBoolean, "integer": typeInteger, "number": typeNumber,
	"string": typeString, "array": typeArray, "object": typeObject,
}

// compileShape compiles s, or returns nil when s uses a keyword a shape does
// not know.
func compileShape(s *jsonschema.Schema) *shape {
	if s == nil || s.Schema != "" {
		return nil
	}
	// Every keyword a shape checks, and every annotation validation never
	// reads, is cleared from a copy: what remains must be nothing.
	rest := *s
	rest.Title, rest.Description, rest.Comment = "", "", ""
	rest.Default, rest.Examples = nil, nil
	rest.Deprecated, rest.ReadOnly, rest.WriteOnly = false, false, false
	rest.PropertyOrder = nil
	rest.Type, rest.Types = "", nil
	rest.Properties, rest.Required, rest.AdditionalProperties, rest.Items = nil, nil, nil, nil
	rest.Minimum, rest.Maximum, rest.ExclusiveMinimum, rest.ExclusiveMaximum = nil, nil, nil, nil
	rest.MinLength = nil
	rest.Enum = nil
	if !reflect.ValueOf(rest).IsZero() {
		return nil
	}
	for _, b := range []*float64{s.Minimum, s.Maximum, s.ExclusiveMinimum, s.ExclusiveMaximum} {
		if b != nil && (math.IsNaN(*b) || math.IsInf(*b, 0)) {
			return nil
		}
	}
	sh := &shape{required: s.Required, min: s.Minimum, max: s.Maximum, exclusiveMin: s.ExclusiveMinimum, exclusiveMax: s.ExclusiveMaximum}
	if s.MinLength != nil {
		sh.minLength = max(*s.MinLength, 0)
	}
	if len(s.Enum) > 0 {
		sh.enum = make(map[string]bool, len(s.Enum))
		for _, e := range s.Enum {
			str, ok := e.(string)
			if !ok {
				return nil // an enum of other values: the validator's
			}
			sh.enum[str] = true
		}
	}
	if len(s.Required) > 64 {
		return nil
	}
	for i, name := range s.Required {
		if sh.requiredBit == nil {
			sh.requiredBit = make(map[string]uint64, len(s.Required))
		}
		sh.requiredBit[name] |= 1 << i
		sh.requiredAll |= 1 << i
	}
	sh.typed, sh.types = typesOf(s)
	if len(s.Properties) > 0 {
		sh.props = make(map[string]*shape, len(s.Properties))
		for name, p := range s.Properties {
			if sh.props[name] = compileShape(p); sh.props[name] == nil {
				return nil
			}
		}
	}
	if ap := s.AdditionalProperties; ap != nil {
		if isFalse(ap) {
			sh.closed = true
		} else if sh.extra = compileShape(ap); sh.extra == nil {
			return nil
		}
	}
	if s.Items != nil {
		if sh.items = compileShape(s.Items); sh.items == nil {
			return nil
		}
	}
	return sh
}

// typesOf is the JSON types s admits, when typed. As the validator: type
// wins over types, and a set but empty types admits nothing.
func typesOf(s *jsonschema.Schema) (typed bool, types jsonType) {
	switch {
	case s.Type != "":
		typed, types = true, typeNames[s.Type]
	case s.Types != nil:
		typed = true
		for _, t := range s.Types {
			types |= typeNames[t]
		}
	}
	if types&typeNumber != 0 {
		types |= typeInteger // number subsumes integer
	}
	return typed, types
}

// isFalse reports whether the validator takes s, as additionalProperties,
// for false: any schema with an empty not, whatever else it holds.
func isFalse(s *jsonschema.Schema) bool { return s.Not != nil && reflect.ValueOf(*s.Not).IsZero() }

// admits reports whether v, as encoding/json decodes a JSON value into an
// any (float64 numbers), satisfies the shape.
func (sh *shape) admits(v any) bool {
	if sh.typed && typeOf(v)&sh.types == 0 {
		return false
	}
	if sh.enum != nil {
		if x, ok := v.(string); !ok || !sh.enum[x] {
			return false
		}
	}
	switch x := v.(type) {
	case float64:
		// The validator compares exactly, as rationals; so do float64
		// comparisons of finite values.
		if sh.min != nil && x < *sh.min || sh.max != nil && x > *sh.max ||
			sh.exclusiveMin != nil && x <= *sh.exclusiveMin || sh.exclusiveMax != nil && x >= *sh.exclusiveMax {
			return false
		}
	case string:
		if sh.minLength > 0 && utf8.RuneCountInString(x) < sh.minLength {
			return false
		}
	case map[string]any:
		for name, e := range x {
			if p, ok := sh.props[name]; ok {
				if !p.admits(e) {
					return false
				}
			} else if sh.closed || sh.extra != nil && !sh.extra.admits(e) {
				return false
			}
		}
		for _, name := range sh.required {
			if _, ok := x[name]; !ok {
				return false
			}
		}
	case []any:
		if sh.items != nil {
			for _, e := range x {
				if !sh.items.admits(e) {
					return false
				}
			}
		}
	}
	return true
}

// typeOf is v's JSON type as the validator names it: a number with no
// fraction is an integer.
func typeOf(v any) jsonType {
	switch x := v.(type) {
	case nil:
		return typeNull
	case bool:
		return typeBoolean
	case float64:
		if _, f := math.Modf(x); f == 0 {
			return typeInteger
		}
		return typeNumber
	case string:
		return typeString
	case []any:
		return typeArray
	case map[string]any:
		return typeObject
	}
	return 0 // not a value encoding/json makes: the validator decides
}
