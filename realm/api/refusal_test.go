package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"relay/protocol"
)

// refusalTest is arguments an input refuses, and the field and rule the
// refusal must name.
type refusalTest struct {
	name, schema, args string
	field, rule        string
}

// oddNames requires, and so declares, fields whose names a parse of the
// validator's text does not recover: a space, quotes, ']', text beyond
// ASCII.
const oddNames = `{"type":"object","properties":{"a b":{},"say \"hi\"":{},"x]y":{},"ключ":{}},"required":["a b","say \"hi\"","x]y","ключ"],"additionalProperties":false}`

var refusalTests = []refusalTest{
	// Several unknown fields: the lexically smallest, whatever the order
	// of the body (HTTP sorts it) or of a map.
	{"several unknown", `{"type":"object","properties":{"a":{}},"additionalProperties":false}`, `{"zeta":1,"alpha":2,"mid":3,"a":1}`, "alpha", "unknown_field"},
	{"several unknown, odd", `{"type":"object","additionalProperties":false}`, `{"b":1,"é":1,"]":1,"\"":1," ":1}`, " ", "unknown_field"},
	{"unknown with a space", oddNames, `{"a b":1,"say \"hi\"":1,"x]y":1,"ключ":1,"my field":1}`, "my field", "unknown_field"},
	{"unknown with quotes", oddNames, `{"a b":1,"say \"hi\"":1,"x]y":1,"ключ":1,"\"q\"":1}`, `"q"`, "unknown_field"},
	{"unknown with ]", oddNames, `{"a b":1,"say \"hi\"":1,"x]y":1,"ключ":1,"[x] y":1}`, "[x] y", "unknown_field"},
	{"unknown beyond ASCII", oddNames, `{"a b":1,"say \"hi\"":1,"x]y":1,"ключ":1,"naïve":1}`, "naïve", "unknown_field"},
	{"unknown with a no-break space", oddNames, `{"a b":1,"say \"hi\"":1,"x]y":1,"ключ":1,"a\u00a0b":1}`, "a\u00a0b", "unknown_field"},
	{"unknown with an escape", oddNames, `{"a b":1,"say \"hi\"":1,"x]y":1,"ключ":1,"tab\there\\":1}`, "tab\there\\", "unknown_field"},
	// Missing fields: the first the schema requires.
	{"missing all", oddNames, `{}`, "a b", "required"},
	{"missing with quotes", oddNames, `{"a b":null}`, `say "hi"`, "required"},
	{"missing with ]", oddNames, `{"a b":1,"say \"hi\"":1,"ключ":1}`, "x]y", "required"},
	{"missing beyond ASCII", oddNames, `{"a b":1,"say \"hi\"":1,"x]y":1}`, "ключ", "required"},
	// Values before unknown fields before missing ones, as the validator
	// checks them.
	{"wrong type and unknown", `{"type":"object","properties":{"n":{"type":"integer"}},"required":["m"],"additionalProperties":false}`, `{"a":1,"n":"x"}`, "n", "type"},
	{"unknown and missing", `{"type":"object","properties":{"m":{}},"required":["m"],"additionalProperties":false}`, `{"a":1}`, "a", "unknown_field"},
	{"two wrong types", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}}`, `{"b":"x","a":"y"}`, "a", "type"},
	{"wrong type, odd name", `{"type":"object","properties":{"x]y \"z\"":{"type":["integer","null"]}}}`, `{"x]y \"z\"":"s"}`, `x]y "z"`, "type"},
	{"not an integer", `{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"n":1.5}`, "n", "type"},
	{"below the minimum", `{"type":"object","properties":{"n":{"type":"integer","minimum":0}}}`, `{"n":-1}`, "n", "minimum"},
	{"above the maximum", `{"type":"object","properties":{"n":{"exclusiveMaximum":1}}}`, `{"n":1}`, "n", "maximum"},
	{"too long", `{"type":"object","properties":{"s":{"type":"string","maxLength":3}}}`, `{"s":"four"}`, "s", "max_length"},
	{"too long in code points", `{"type":"object","properties":{"s":{"type":"string","maxLength":3}}}`, `{"s":"ééé😀"}`, "s", "max_length"},
	{"too short", `{"type":"object","properties":{"s":{"type":"string","minLength":1}}}`, `{"s":""}`, "s", "min_length"},
	// Nested: the field is the path to it, as the envelope's checks write it.
	{"nested unknown", `{"type":"object","properties":{"o":{"type":"object","properties":{"x":{}},"additionalProperties":false}}}`, `{"o":{"x":1,"z z":2,"y]":3}}`, "o.y]", "unknown_field"},
	{"unknown in an item", `{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","additionalProperties":false}}}}`, `{"l":[{},{"b":1,"a":2}]}`, "l[1].a", "unknown_field"},
	{"extra of the wrong type", `{"type":"object","additionalProperties":{"type":"string"}}`, `{"b":1,"a":2}`, "a", "type"},
	{"item of the wrong type", `{"type":"object","properties":{"l":{"type":"array","items":{"type":"string"}}}}`, `{"l":["a",1,true]}`, "l[1]", "type"},
}

// refusalOp is an operation with the given input schema that does nothing.
func refusalOp(t testing.TB, schema string) *Operation {
	t.Helper()
	s, _ := resolveSchema(t, schema)
	op := &Operation{Key: "post_x", Method: http.MethodPost, Path: "/x", Input: s,
		Handle: func(context.Context, *Call) (any, error) { return struct{}{}, nil }}
	NewRegistry().Add(op)
	return op
}

// withoutShape is op as an operation whose schema compiles to no shape
// runs: the validator alone.
func withoutShape(op *Operation) *Operation {
	c := *op
	c.shape = nil
	return &c
}

// refusalOf runs op on args, as many times as a map's order takes to
// change, and returns its one refusal; it fails if two runs differ.
func refusalOf(t *testing.T, op *Operation, args string) *protocol.Refusal {
	t.Helper()
	var first *protocol.Refusal
	for range 20 {
		_, err := NewRegistry().Invoke(context.Background(), nil, op, json.RawMessage(args))
		var ref *protocol.Refusal
		if !errors.As(err, &ref) {
			t.Fatalf("%s: not refused: %v", args, err)
		}
		if first == nil {
			first = ref
		} else if ref.Message != first.Message || !equalDetails(ref.Details, first.Details) {
			t.Fatalf("%s: refused as %q %v, then as %q %v", args, first.Message, first.Details, ref.Message, ref.Details)
		}
	}
	return first
}

func TestRefusalNamesField(t *testing.T) {
	for _, tc := range refusalTests {
		t.Run(tc.name, func(t *testing.T) {
			op := refusalOp(t, tc.schema)
			ref := refusalOf(t, op, tc.args)
			if ref.Reason != protocol.ReasonInvalidBody || ref.Details["field"] != tc.field || ref.Details["rule"] != tc.rule {
				t.Fatalf("refused %s %q %v, want field %q, rule %s", ref.Reason, ref.Message, ref.Details, tc.field, tc.rule)
			}
			if !strings.Contains(ref.Message, strconv.Quote(tc.field)) {
				t.Errorf("message %q does not name %q", ref.Message, tc.field)
			}
			if op.shape != nil {
				if alone := refusalOf(t, withoutShape(op), tc.args); alone.Message != ref.Message || !equalDetails(alone.Details, ref.Details) {
					t.Errorf("the validator alone refuses %q %v, with the shape %q %v", alone.Message, alone.Details, ref.Message, ref.Details)
				}
			}
		})
	}
}

// parleyIn is a Parley write's input: an envelope, flat, beside the
// thread's id, as post_threads_id_messages takes it.
type parleyIn struct {
	ID protocol.KeyRef `json:"id"`
	protocol.Envelope
}

// parleyOp checks the envelope as the forum does, after the registry's
// check of the arguments.
func parleyOp() *Operation {
	op := Define("post_threads_id_messages", http.MethodPost, "/api/v1/threads/{id}/messages", "test", Public,
		func(_ context.Context, _ *Call, in parleyIn) (struct{}, error) {
			if ref := in.Validate(protocol.DefaultParleyLimits); ref != nil {
				return struct{}{}, ref
			}
			return struct{}{}, nil
		})
	for _, name := range []string{"id", "thread", "parent"} {
		op.Input.Properties[name].Type, op.Input.Properties[name].Types = "", []string{"string", "integer"}
	}
	for _, name := range []string{"author_kind", "created_at", "awaiting"} {
		op.Input.Properties[name] = &jsonschema.Schema{}
	}
	return op
}

var parleyRefusalTests = []refusalTest{
	{"unknown", "", `{"id":"th_1","kind":"note","body":"b","colour":1,"Body":2}`, "Body", "unknown_field"},
	{"missing", "", `{"id":"th_1","body":"b"}`, "kind", "required"},
	{"wrong type", "", `{"id":"th_1","kind":"note","body":7}`, "body", "type"},
	{"too long", "", `{"id":"th_1","kind":"note","body":"` + strings.Repeat("é", 501) + `"}`, "body", "max_length"},
	{"unknown in from", "", `{"id":"th_1","kind":"note","body":"b","from":{"extension":"w","x y":1,"wé":2}}`, "from.wé", "unknown_field"},
	{"wrong type in from", "", `{"id":"th_1","kind":"note","body":"b","from":{"extension":["w"]}}`, "from.extension", "type"},
	{"too long in from", "", `{"id":"th_1","kind":"note","body":"b","from":{"extension":"` + strings.Repeat("w", 41) + `"}}`, "from.extension", "max_length"},
	{"unknown in a claim", "", `{"id":"th_1","kind":"note","body":"b","claims":[{"statement":"s","z":1,"\"":2}]}`, `claims[0]."`, "unknown_field"},
	{"missing in a claim", "", `{"id":"th_1","kind":"note","body":"b","claims":[{"evidence":null}]}`, "claims[0].statement", "required"},
	{"wrong type in a claim", "", `{"id":"th_1","kind":"note","body":"b","claims":[{"statement":"s"},{"statement":{}}]}`, "claims[1].statement", "type"},
	{"too long in a claim", "", `{"id":"th_1","kind":"note","body":"b","claims":[{"statement":"` + strings.Repeat("s", 1001) + `"}]}`, "claims[0].statement", "max_length"},
	{"missing in evidence", "", `{"id":"th_1","kind":"note","body":"b","claims":[{"statement":"s","evidence":[{"kind":"log"}]}]}`, "claims[0].evidence[0].value", "required"},
}

// The registry's own check and the validator alone refuse the same bad
// arguments alike, whether the schema, the registry or the envelope's own
// check catches them: the same field, rule and message.
func TestFastPathRefusesAsValidator(t *testing.T) {
	op := parleyOp()
	NewRegistry().Add(op)
	if op.shape == nil {
		t.Fatal("the Parley input compiles to no shape")
	}
	// The same input with its limit of body in the schema: the validator
	// alone checks it, and must name it as the envelope's check does.
	bounded := parleyOp()
	bounded.Input.Properties["body"].MaxLength = jsonschema.Ptr(protocol.DefaultParleyLimits.Body)
	NewRegistry().Add(bounded)
	for _, tc := range parleyRefusalTests {
		t.Run(tc.name, func(t *testing.T) {
			ref := refusalOf(t, op, tc.args)
			if ref.Details["field"] != tc.field || ref.Details["rule"] != tc.rule {
				t.Fatalf("refused %q %v, want field %q, rule %s", ref.Message, ref.Details, tc.field, tc.rule)
			}
			for name, other := range map[string]*Operation{"the validator alone": withoutShape(op), "the bounded schema": bounded} {
				if got := refusalOf(t, other, tc.args); got.Details["field"] != tc.field || got.Details["rule"] != tc.rule {
					t.Errorf("%s refuses %q %v, the shape %q %v", name, got.Message, got.Details, ref.Message, ref.Details)
				}
			}
		})
	}
}

// A value the schema admits but the input's Go type cannot hold is refused
// naming its field and rule, never the Go types.
func TestBindRefusal(t *testing.T) {
	type item struct {
		K int8 `json:"k"`
	}
	type in struct {
		N uint64 `json:"n,omitempty"`
		I int8   `json:"i,omitempty"`
		L []item `json:"l,omitempty"`
	}
	op := Define("post_bind", http.MethodPost, "/bind", "test", Public, func(context.Context, *Call, in) (struct{}, error) { return struct{}{}, nil })
	NewRegistry().Add(op)
	for _, tc := range []struct{ args, field, rule string }{
		{`{"n":-1}`, "n", "minimum"},
		{`{"n":-2e3}`, "n", "minimum"},
		{`{"n":1e300}`, "n", "maximum"},
		{`{"i":300}`, "i", "maximum"},
		{`{"n":1e20}`, "n", "maximum"}, // whole, but beyond 64 bits
		{`{"n":-2.0}`, "n", "minimum"},
		{`{"l":[{"k":2.0}]}`, "l.k", "type"},                // whole numbers are read as integers at the top level only
		{`{"l":[{"k":1},{"k":-200}]}`, "l[1].k", "minimum"}, // the schema bounds an int8
	} {
		_, err := NewRegistry().Invoke(context.Background(), nil, op, json.RawMessage(tc.args))
		var ref *protocol.Refusal
		if !errors.As(err, &ref) || ref.Reason != protocol.ReasonInvalidBody || ref.Details["field"] != tc.field || ref.Details["rule"] != tc.rule {
			t.Errorf("%s: %v, want field %q, rule %s", tc.args, err, tc.field, tc.rule)
			continue
		}
		if strings.Contains(ref.Message, "Go ") || strings.Contains(ref.Message, "int8") || strings.Contains(ref.Message, "uint64") {
			t.Errorf("%s: the message %q names Go types", tc.args, ref.Message)
		}
	}
}
