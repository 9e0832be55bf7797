package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// shapeSchemas are schemas, as JSON, that compile to a shape: the edges of
// the keywords a shape knows.
var shapeSchemas = []string{
	`{}`, `true`,
	`{"type":"object"}`,
	`{"type":"object","properties":{"a":{"type":"integer"}}}`,
	`{"type":"object","properties":{"a":{"type":"number"}}}`,
	`{"type":"object","properties":{"a":{"type":["integer","null"]}}}`,
	`{"type":"object","properties":{"a":{"type":["number","string"]}}}`,
	`{"type":"object","properties":{"a":{"type":[]}}}`,
	`{"type":"object","properties":{"a":{"type":"nonsense"}}}`,
	`{"type":"object","properties":{"a":{"type":["nonsense","boolean"]}}}`,
	`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}}}`,
	`{"type":"object","properties":{"a":{"type":"array","items":true}}}`,
	`{"type":"object","properties":{"a":true,"b":{}},"required":["a","b"]}`,
	`{"type":"object","properties":{"a":{"type":"string","enum":["s","ab","é"]}}}`,
	`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","enum":["s","st"]}}}}`,
	`{"type":"object","properties":{"a":{"type":["string","null"],"enum":["s"]}}}`,
	`{"type":"object","properties":{"a":{}},"additionalProperties":false}`,
	`{"type":"object","properties":{"a":{}},"additionalProperties":{"type":"boolean"}}`,
	`{"type":"object","additionalProperties":{"not":{},"type":"string"}}`,
	`{"type":"object","additionalProperties":true}`,
	`{"type":"object","properties":{"o":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}}}`,
	`{"type":"object","properties":{"a":{"type":"integer","minimum":0,"maximum":255}}}`,
	`{"type":"object","properties":{"a":{"minimum":-1.5}}}`,
	`{"type":"object","properties":{"a":{"exclusiveMinimum":0,"exclusiveMaximum":1}}}`,
	`{"type":"object","properties":{"a":{"type":"array","items":{"maximum":0}}}}`,
	`{"type":"object","title":"t","description":"d","$comment":"c","default":{},"examples":[{}],"deprecated":true,"readOnly":true}`,
	`{"type":"object","properties":{"a":{"type":"string","minLength":1}}}`,
	`{"type":"object","properties":{"a":{"type":["string","integer"],"minLength":1}}}`,
	`{"type":"object","properties":{"a":{"type":"array","items":{"minLength":2}}}}`,
	`{"type":"object","properties":{"a":{"minLength":0}}}`,
}

// noShapeSchemas use a keyword validation reads that a shape does not
// know: their operations keep the validator alone.
var noShapeSchemas = []string{
	`{"type":"object","properties":{"a":{"enum":[1]}}}`,
	`{"type":"object","properties":{"a":{"type":"string","maxLength":3}}}`,
	`{"type":"object","properties":{"a":{"type":"string","pattern":"x"}}}`,
	`{"type":"object","properties":{"a":false}}`,
	`{"type":"object","properties":{"a":{"not":{"type":"string"}}}}`,
	`{"type":"object","additionalProperties":{"not":{"type":"string"}}}`,
	`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"}]}}}`,
	`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{}}}`,
	`{"type":"object","patternProperties":{"^a":{"type":"string"}}}`,
	`{"type":"object","minProperties":1}`,
	`{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`,
	`{"type":"object","properties":{"a":{"type":"array","prefixItems":[{"type":"string"}]}}}`,
	`{"type":"object","properties":{"a":{"const":1}}}`,
	`{"type":"object","properties":{"a":{"multipleOf":2}}}`,
	`{"type":"object","properties":{"a":{"format":"date-time"}}}`,
	`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`,
}

// shapeInstances are arguments the shapes and the validator are held to
// agree on, beside validateInputs.
var shapeInstances = []string{
	`{}`, `{"a":null}`, `{"a":1}`, `{"a":1.0}`, `{"a":1.5}`, `{"a":-0}`, `{"a":1e300}`, `{"a":-1e300}`, `{"a":0}`,
	`{"a":-1}`, `{"a":-1.5}`, `{"a":-1.50000000000000001}`, `{"a":-1.4999999999999999}`, `{"a":255}`, `{"a":256}`, `{"a":255.5}`,
	`{"a":0.9999999999999999}`, `{"a":0.99999999999999999}`, `{"a":5e-324}`, `{"a":-5e-324}`, `{"a":[0,-1,1]}`, `{"a":"s"}`, `{"a":true}`,
	`{"a":[]}`, `{"a":["s"]}`, `{"a":["s",1]}`, `{"a":[null]}`, `{"a":{}}`, `{"a":{"x":"s"}}`, `{"a":{"x":1}}`,
	`{"b":1}`, `{"a":1,"b":null}`, `{"b":true}`, `{"o":{}}`, `{"o":{"x":"s"}}`, `{"o":{"x":"s","y":1}}`, `{"o":null}`,
	`{"a":1,"a":"s"}`, `{"a":"s","a":1}`, `{"o":{"x":1},"o":{"x":"s"}}`,
	`{"a":""}`, `{"a":"é"}`, `{"a":"\u00e9"}`, `{"a":"\n"}`, `{"a":"ab"}`, `{"a":["", "s", "st"]}`, `{"a":["st","\u0000x"]}`, `{"a":"","a":"s"}`,
	`{"a":"\u0073"}`, `{"a":["s","st"]}`, `{"a":["s","x"]}`, `{"a":"S"}`, `{"a":"s "}`,
}

func resolveSchema(t testing.TB, src string) (*jsonschema.Schema, *jsonschema.Resolved) {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(src), &s); err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	res, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return &s, res
}

// agree checks that sh admits v exactly when the validator finds v valid,
// and the refusal's own walk finds a violation exactly when the validator
// does (a shape's keywords are all known to it); and that the scan of the
// raw arguments admits them only if they decode into an object the
// validator finds valid.
func agree(t testing.TB, sh *shape, res *jsonschema.Resolved, schema, instance string) {
	t.Helper()
	var v any
	derr := json.Unmarshal([]byte(instance), &v)
	decoded := derr == nil && isObject(v)
	var verr error
	if decoded {
		verr = res.Validate(v)
		if got := sh.admits(v); got != (verr == nil) {
			t.Errorf("schema %s, arguments %.200q: shape admits %v, validator says %v", schema, instance, got, verr)
		}
		if ref := violation(res.Schema(), v, ""); (ref == nil) != (verr == nil) {
			t.Errorf("schema %s, arguments %.200q: the walk finds %v, validator says %v", schema, instance, ref, verr)
		}
	}
	if sh.admitsJSON([]byte(instance)) && (!decoded || verr != nil) {
		t.Errorf("schema %s, arguments %.200q: the scan admits them, the decode says %v, the validator %v", schema, instance, derr, verr)
	}
}

func TestShapeAgreesWithValidator(t *testing.T) {
	for _, src := range shapeSchemas {
		s, res := resolveSchema(t, src)
		sh := compileShape(s)
		if sh == nil {
			t.Errorf("%s: no shape", src)
			continue
		}
		for _, in := range append(shapeInstances, validateInputs...) {
			agree(t, sh, res, src, in)
		}
	}
	op := validateOp()
	NewRegistry().Add(op)
	for _, in := range append(shapeInstances, validateInputs...) {
		agree(t, op.shape, op.input, "validateOp", in)
	}
}

func TestNoShape(t *testing.T) {
	for _, src := range noShapeSchemas {
		if s, _ := resolveSchema(t, src); compileShape(s) != nil {
			t.Errorf("%s: compiles to a shape", src)
		}
	}
}

// The operations' schemas as Define makes them compile to shapes: the
// registry's own check runs for them.
func TestDefinedInputsHaveShapes(t *testing.T) {
	type leaf struct {
		K string `json:"k"`
	}
	type nested struct {
		A string         `json:"a"`
		B *int           `json:"b,omitempty"`
		C []leaf         `json:"c,omitempty"`
		D map[string]any `json:"d,omitempty"`
	}
	type in struct {
		X  nested          `json:"x"`
		Y  *[]string       `json:"y,omitempty"`
		Z  json.RawMessage `json:"z,omitempty"`
		W  bool            `json:"w"`
		F  float64         `json:"f"`
		U  uint8           `json:"u"`
		NI NoInput         `json:"ni"`
	}
	for _, op := range []*Operation{
		validateOp(),
		Define("post_in", http.MethodPost, "/in", "test", Public, func(context.Context, *Call, in) (NoInput, error) { return NoInput{}, nil }),
		Define("get_none", http.MethodGet, "/none", "test", Public, func(context.Context, *Call, NoInput) (NoInput, error) { return NoInput{}, nil }),
	} {
		NewRegistry().Add(op)
		if op.shape == nil {
			b, _ := json.Marshal(op.Input)
			t.Errorf("%s: no shape for %s", op.Key, b)
		}
	}
}

// scannedInputs are arguments the scan reads to the end and admits: the
// common ones, which skip the decode.
var scannedInputs = []string{
	`{"id":"th_1"}`, ` {"id" : 12 } `, "{\n\t\"id\":\"a\"\r\n}", `{"id":-7,"n":0,"tags":[],"labels":{}}`,
	`{"id":"th_0c9f7qz3k1m2","env":{"body":"bench note from agent 3, number 1742","kind":"note"}}`,
	`{"id":"a","n":999999999999999,"ratio":-999999999999999}`,
	`{"id":"caf\u00e9 \"quoted\" \\ \/ \b\f\n\r\t","tags":["\ud800","x"]}`, "{\"id\":\"\xff\xfe not UTF-8\"}",
	`{"id":"a","raw":{"deep":[[[[]]]],"n":[1,-2,true,false,null,"s",{}]}}`,
	`{"id":"a","env":{"kind":"note","body":"b","from":{"extension":"w","identity":{"any":"thing"}},"provenance":{"k":[1,{"x":null}]}}}`,
	`{"id":"a","env":{"kind":"note","body":"b","claims":[{"statement":"s","evidence":[{"kind":"log","value":"v","note":"n"}]}]}}`,
	`{"id":"a","tags":null,"raw":null}`,
}

// unscannedInputs are valid arguments the scan leaves to the decode.
var unscannedInputs = []string{
	`{"id":"a","n":1.0}`, `{"id":"a","n":1e2}`, `{"id":"a","n":1234567890123456}`, `{"id":"a","ratio":0.5}`,
	`{"\u0069d":"a"}`, "{\"id\":\"a\",\"raw\":{\"\xc3\xa9\":1}}", `{"id":"a","raw":{"\n":1}}`,
	`{"id":"a","raw":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`,
}

func TestScan(t *testing.T) {
	op := validateOp()
	NewRegistry().Add(op)
	for _, in := range scannedInputs {
		if !op.shape.admitsJSON([]byte(in)) {
			t.Errorf("%.200q: not admitted by the scan", in)
		}
		agree(t, op.shape, op.input, "validateOp", in)
	}
	// A member named twice is left to the decode, which refuses it.
	for _, in := range []string{`{"id":"a","id":"b"}`, `{"id":"a","raw":{"x":1,"y":2,"x":1}}`, `{"id":"a","raw":[{"k":1,"k":1}]}`} {
		if op.shape.admitsJSON([]byte(in)) {
			t.Errorf("%s: admitted by the scan", in)
		}
	}
	for _, in := range unscannedInputs {
		var v any
		if err := json.Unmarshal([]byte(in), &v); err != nil || op.input.Validate(v) != nil {
			t.Errorf("%.200q: not valid arguments: %v", in, err)
		}
		if op.shape.admitsJSON([]byte(in)) {
			t.Errorf("%.200q: admitted by the scan", in)
		}
	}
}

// FuzzShape holds the shapes to the validator, and the scan to the decode
// and the validator, on any arguments.
func FuzzShape(f *testing.F) {
	for _, in := range append(append(append(shapeInstances, scannedInputs...), unscannedInputs...), validateInputs...) {
		if len(in) < 1000 {
			f.Add(uint8(0), []byte(in))
		}
	}
	op := validateOp()
	NewRegistry().Add(op)
	shapes := []*shape{op.shape}
	resolved := []*jsonschema.Resolved{op.input}
	for _, src := range shapeSchemas {
		s, res := resolveSchema(f, src)
		shapes, resolved = append(shapes, compileShape(s)), append(resolved, res)
	}
	f.Fuzz(func(t *testing.T, i uint8, in []byte) {
		n := int(i) % len(shapes)
		agree(t, shapes[n], resolved[n], fmt.Sprint("schema ", n), string(in))
	})
}
