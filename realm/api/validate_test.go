package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"relay/protocol"
)

// validateBefore is validate as it was written with two decodes, UseNumber
// then plain: the refusals of the one-decode validate must be its refusals.
func validateBefore(op *Operation, args json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(args)) == 0 || bytes.Equal(bytes.TrimSpace(args), []byte("null")) {
		args = json.RawMessage("{}")
	}
	var inst any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if err := dec.Decode(&inst); err != nil {
		return nil, protocol.Refusef(protocol.ReasonInvalidJSON, "The arguments are not valid JSON: %v", err)
	}
	if _, ok := inst.(map[string]any); !ok {
		return nil, protocol.Refusef(protocol.ReasonInvalidBody, "The arguments must be a JSON object.").With("rule", "type")
	}
	var plain any
	if err := json.Unmarshal(args, &plain); err != nil {
		return nil, protocol.Refusef(protocol.ReasonInvalidJSON, "The arguments are not valid JSON: %v", err)
	}
	if err := op.input.Validate(plain); err != nil {
		return nil, schemaRefusal(err)
	}
	return args, nil
}

var validateInputs = []string{
	``, `  `, `null`, ` null `, `{}`, ` {} `, `[]`, `[1]`, `1`, `"s"`, `true`, `{`, `}`, `{"id":`, `nul`,
	`{} x`, `{} {}`, `[1] x`, `1 2`, `{"id":"th_1"} ]`,
	`{"id":"th_1"}`, `{"id":12}`, `{"id":12.5}`, `{"id":1e400}`, `{"id":-1e400}`, `{"id":"th_1","n":1e400}`,
	`{"id":null}`, `{"id":true}`, `{"id":"th_1","extra":1}`, `{"n":3}`, `{"id":"x","n":"3"}`, `{"id":"x","n":3}`,
	`{"id":"a","id":"b"}`, `{"id":"\ud800"}`, "{\"id\":\"\xff\"}", `{"id":"th_1","tags":["a",1]}`,
}

type validateIn struct {
	ID   protocol.KeyRef `json:"id"`
	N    int             `json:"n,omitempty"`
	Tags []string        `json:"tags,omitempty"`
}

// The one-decode validate refuses exactly what, and as, the two-decode one
// did, and passes the same arguments on.
func TestValidateRefusesAsBefore(t *testing.T) {
	op := Define("post_things", http.MethodPost, "/api/v1/things", "test", Public,
		func(context.Context, *Call, validateIn) (struct{}, error) { return struct{}{}, nil })
	r := NewRegistry()
	r.Add(op)
	for _, in := range validateInputs {
		got, gerr := r.validate(op, json.RawMessage(in))
		want, werr := validateBefore(op, json.RawMessage(in))
		var gref, wref *protocol.Refusal
		errors.As(gerr, &gref)
		errors.As(werr, &wref)
		switch {
		case (gerr == nil) != (werr == nil):
			t.Errorf("%q: error %v, before %v", in, gerr, werr)
		case gerr != nil && (gref == nil || wref == nil || gref.Reason != wref.Reason || gref.Message != wref.Message ||
			!equalDetails(gref.Details, wref.Details)):
			t.Errorf("%q: refused %+v, before %+v", in, gref, wref)
		case !bytes.Equal(got, want):
			t.Errorf("%q: passes %s on, before %s", in, got, want)
		}
	}
}

func equalDetails(a, b map[string]any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
