package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"relay/protocol"
)

// validateBefore is validate as it was written with two decodes, UseNumber
// then plain (and, since, the checks that the arguments are text and name
// no member twice): the refusals of the one-decode validate must be its
// refusals.
func validateBefore(op *Operation, args json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(args)) == 0 || bytes.Equal(bytes.TrimSpace(args), []byte("null")) {
		args = json.RawMessage("{}")
	}
	if ref := CheckText(args); ref != nil {
		return nil, ref
	}
	var inst any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if err := dec.Decode(&inst); err != nil {
		return nil, NotJSON(err)
	}
	if _, ok := inst.(map[string]any); !ok {
		return nil, protocol.Refusef(protocol.ReasonInvalidBody, "The arguments must be a JSON object.").With("rule", "type")
	}
	var plain any
	if err := json.Unmarshal(args, &plain); err != nil {
		return nil, NotJSON(err)
	}
	if _, err := protocol.DecodeIJSON(args); errors.Is(err, protocol.ErrDuplicateMember) {
		return nil, NotJSON(err) // the same refusal, made another way
	}
	if err := op.input.Validate(plain); err != nil {
		return nil, schemaRefusal(op.Input, plain, err)
	}
	return args, nil
}

var validateInputs = []string{
	``, `  `, `null`, ` null `, `{}`, ` {} `, `[]`, `[1]`, `1`, `"s"`, `true`, `{`, `}`, `{"id":`, `nul`,
	`{} x`, `{} {}`, `[1] x`, `1 2`, `{"id":"th_1"} ]`,
	`{"id":"th_1"}`, `{"id":12}`, `{"id":12.5}`, `{"id":1e400}`, `{"id":-1e400}`, `{"id":"th_1","n":1e400}`,
	`{"id":null}`, `{"id":true}`, `{"id":"th_1","extra":1}`, `{"n":3}`, `{"id":"x","n":"3"}`, `{"id":"x","n":3}`,
	`{"id":"a","id":"b"}`, `{"id":"\ud800"}`, "{\"id\":\"\xff\"}", `{"id":"th_1","tags":["a",1]}`,
	// Numbers: integers as the validator counts them (no fraction), and
	// beyond what an int holds.
	`{"id":"x","n":3.0}`, `{"id":"x","n":3e2}`, `{"id":"x","n":-0}`, `{"id":"x","n":1e300}`, `{"id":"x","n":0.5e1}`,
	`{"id":"x","ratio":1}`, `{"id":"x","ratio":1.5}`, `{"id":"x","ratio":"1"}`,
	// Duplicate keys: refused (I-JSON), at any depth.
	`{"id":"a","n":"x","n":1}`, `{"id":"a","n":1,"n":"x"}`, `{"id":1,"id":null}`, `{"id":"a","extra":1,"extra":2}`,
	// Keys that are escaped, or not UTF-8.
	`{"\u0069d":"a"}`, `{"id":"a","\u006e":1}`, "{\"id\":\"a\",\"\xff\":1}", `{"id":"a","":1}`,
	// Nested objects and arrays: required, closed, null, wrong types.
	`{"id":"a","env":{"kind":"note","body":"b"}}`, `{"id":"a","env":{"kind":"note"}}`, `{"id":"a","env":null}`,
	`{"id":"a","env":{"kind":"note","body":"b","bogus":1}}`, `{"id":"a","env":{"kind":"note","body":"b","provenance":{"k":[1,{"x":null}]}}}`,
	`{"id":"a","env":{"kind":"note","body":"b","provenance":[]}}`, `{"id":"a","env":{"kind":"note","body":"b","provenance":null}}`,
	`{"id":"a","env":{"kind":"note","body":"b","evidence":[{"kind":"url","value":"v"}]}}`,
	`{"id":"a","env":{"kind":"note","body":"b","evidence":[{"kind":"url"}]}}`,
	`{"id":"a","env":{"kind":"note","body":"b","evidence":[{"kind":"url","value":"v","x":1}]}}`,
	`{"id":"a","env":{"kind":"note","body":"b","evidence":[null]}}`, `{"id":"a","env":{"kind":"note","body":"b","evidence":{}}}`,
	`{"id":"a","env":{"kind":"note","body":"b","claims":[{"statement":"s","evidence":[{"kind":"k","value":"v"}]}]}}`,
	`{"id":"a","env":{"kind":"note","body":"b","claims":[{"statement":"s","evidence":[{"kind":"k","value":2}]}]}}`,
	`{"id":"a","env":{"kind":"note","body":"b","from":{"extension":"w","identity":{"any":"thing"}}}}`,
	`{"id":"a","env":{"kind":"note","body":"b","from":{"extension":1}}}`,
	`{"id":"a","env":{"kind":"note","body":"b","author_kind":[1,2,{}],"created_at":null}}`,
	`{"id":"a","raw":{"deep":[[[[]]]]}}`, `{"id":"a","raw":null}`, `{"id":"a","labels":{"x":"y"}}`, `{"id":"a","labels":{"x":1}}`,
	`{"id":"a","labels":null}`, `{"id":"a","labels":[]}`, `{"id":"a","tags":null}`, `{"id":"a","tags":{}}`,
	// Deep nesting, under a field that takes any value and under one that
	// does not.
	`{"id":"a","raw":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`,
	`{"id":"a","raw":` + strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat("}", 5000) + `}`,
	`{"id":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`,
	`{"id":"a","raw":` + strings.Repeat("[", 20000) + strings.Repeat("]", 19999) + `}`,
}

type validateIn struct {
	ID     protocol.KeyRef    `json:"id"`
	N      int                `json:"n,omitempty"`
	Ratio  float64            `json:"ratio,omitempty"`
	Tags   []string           `json:"tags,omitempty"`
	Env    *protocol.Envelope `json:"env,omitempty"`
	Raw    json.RawMessage    `json:"raw,omitempty"`
	Labels map[string]string  `json:"labels,omitempty"`
}

// validateOp is an operation whose input uses every keyword the shapes
// know: loosened and any-value properties as the forum's operations have,
// a nested envelope with required fields and closed objects, a map, arrays.
func validateOp() *Operation {
	op := Define("post_things", http.MethodPost, "/api/v1/things", "test", Public,
		func(context.Context, *Call, validateIn) (struct{}, error) { return struct{}{}, nil })
	op.Input.Properties["id"].Type, op.Input.Properties["id"].Types = "", []string{"string", "integer"}
	op.Input.Properties["env"].Properties["author_kind"] = &jsonschema.Schema{Description: "ignored"}
	return op
}

// The one-decode validate, with the registry's own check before the
// validator, refuses exactly what, and as, the two-decode one did, and
// passes the same arguments on.
func TestValidateRefusesAsBefore(t *testing.T) {
	r, op := validateRegistry(t)
	for _, in := range validateInputs {
		sameAsBefore(t, r, op, in)
	}
}

// FuzzValidate holds validate to the two-decode one on any arguments.
func FuzzValidate(f *testing.F) {
	for _, in := range append(shapeInstances, validateInputs...) {
		if len(in) < 1000 {
			f.Add([]byte(in))
		}
	}
	r, op := validateRegistry(f)
	f.Fuzz(func(t *testing.T, in []byte) { sameAsBefore(t, r, op, string(in)) })
}

func validateRegistry(t testing.TB) (*Registry, *Operation) {
	op := validateOp()
	r := NewRegistry()
	r.Add(op)
	if op.shape == nil {
		t.Fatal("the test operation's input compiles to no shape: the registry's own check is not exercised")
	}
	return r, op
}

func sameAsBefore(t testing.TB, r *Registry, op *Operation, in string) {
	t.Helper()
	got, numberless, gerr := r.validate(op, json.RawMessage(in))
	want, werr := validateBefore(op, json.RawMessage(in))
	var gref, wref *protocol.Refusal
	errors.As(gerr, &gref)
	errors.As(werr, &wref)
	switch {
	case (gerr == nil) != (werr == nil):
		t.Errorf("%.200q: error %v, before %v", in, gerr, werr)
	case gerr != nil && (gref == nil || wref == nil || gref.Reason != wref.Reason ||
		gref.Message != wref.Message || !equalDetails(gref.Details, wref.Details)):
		t.Errorf("%.200q: refused %+v, before %+v", in, gref, wref)
	case !bytes.Equal(got, want):
		t.Errorf("%.200q: passes %s on, before %s", in, got, want)
	case numberless && holdsNumber(t, got):
		t.Errorf("%.200q: numberless, but it holds a number", in)
	}
}

// holdsNumber reports whether the JSON value b holds a number.
func holdsNumber(t testing.TB, b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case json.Number:
			return true
		case []any:
			return slices.ContainsFunc(v, walk)
		case map[string]any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

func equalDetails(a, b map[string]any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
