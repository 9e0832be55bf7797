// Package api is the operation registry every transport is generated from:
// one row per operation (key, method, path, purpose, access, schemas,
// handler), the caller's Principal, and the one rights check.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"sync/atomic"

	"github.com/google/jsonschema-go/jsonschema"

	"relay/protocol"
)

// AccessKind says who may call an operation.
type AccessKind int

const (
	// AccessPublic needs no credential; a credential, if sent, must be valid.
	AccessPublic AccessKind = iota
	// AccessRight needs a valid credential holding Access.Right (read: any
	// valid credential). The human holds every right.
	AccessRight
	// AccessHuman needs the realm's human: the operator secret or a session.
	AccessHuman
	// AccessAgent needs a registered corpus agent: its agent_id over HTTP,
	// an OAuth grant acting as one over MCP (the corpus's writes).
	AccessAgent
)

// Access is an operation's rule of who may call it.
type Access struct {
	Kind  AccessKind
	Right protocol.Right
}

// Public, NeedRight, HumanOnly and AgentOnly build the kinds of access.
var Public = Access{Kind: AccessPublic}

// NeedRight is access for holders of r.
func NeedRight(r protocol.Right) Access { return Access{Kind: AccessRight, Right: r} }

// HumanOnly is access for the realm's human alone.
var HumanOnly = Access{Kind: AccessHuman}

// AgentOnly is access for registered corpus agents.
var AgentOnly = Access{Kind: AccessAgent}

// String is the access as the catalog shows it.
func (a Access) String() string {
	switch a.Kind {
	case AccessPublic:
		return "public"
	case AccessHuman:
		return "human"
	case AccessAgent:
		return "agent"
	default:
		return "right:" + string(a.Right)
	}
}

// Surface is the protocol family an operation belongs to: it decides how
// refusals are written and which MCP endpoint lists the operation.
type Surface int

const (
	// Parley operations live under /api/v1, refuse with {reason, error,
	// details} and are tools of /api/v1/mcp.
	Parley Surface = iota
	// Corpus operations live at the corpus's root paths, refuse with
	// {"error": {code, message, how_to_proceed}} and are tools of /mcp.
	Corpus
)

// Operation is one row of the registry: everything HTTP, MCP, the catalog,
// the OpenAPI document and the manifest are generated from.
type Operation struct {
	Key     string // the operation key; for Parley also the MCP tool name
	Method  string
	Path    string // ServeMux pattern path, e.g. /api/v1/boards/{id}
	Purpose string
	Access  Access
	Surface Surface
	// Tool is the MCP tool name when it differs from Key; "-" keeps the
	// operation off MCP (HTTP only).
	Tool string
	// Headers maps request headers to arguments (Operation-Token →
	// operation_token), so HTTP and MCP hand handlers the same input.
	Headers map[string]string
	// Status is the HTTP status of a success; 0 means 200.
	Status int
	// Representations are the media types a read offers over HTTP, the
	// default first. Set, the HTTP transport negotiates Accept (406 when
	// none is acceptable) and answers conditional requests; empty, the
	// result is JSON as it is.
	Representations []string
	// AcceptAlso are media types a client may ask for that the read
	// answers with its default representation (Representations[0]) rather
	// than 406: a feed reader asking for one feed format takes the other.
	// They are not representations of their own (the OpenAPI document and
	// the manifest do not list them).
	AcceptAlso []string

	// Input is fixed once the operation is added: the registry resolves and
	// compiles it then.
	Input  *jsonschema.Schema
	Output *jsonschema.Schema
	// Handle runs the operation. It never knows which transport called it.
	Handle func(ctx context.Context, c *Call) (any, error)

	input *jsonschema.Resolved
	shape *shape // Input compiled for the registry's own check; nil: the validator alone
}

// Shaped reports whether the registry checks the operation's arguments
// with its own compiled shape first (check.go): once it is added, and only
// when its input schema uses no keyword a shape does not know.
func (op *Operation) Shaped() bool { return op.shape != nil }

// ToolName is the operation's MCP tool name, "" when it has none.
func (op *Operation) ToolName() string {
	switch op.Tool {
	case "-":
		return ""
	case "":
		return op.Key
	}
	return op.Tool
}

// Call is one invocation of an operation.
type Call struct {
	Op        *Operation
	Principal *Principal
	Args      json.RawMessage // a JSON object, already validated against Op.Input

	// numberless: the registry's scan read all of Args and found no
	// number in it.
	numberless bool
}

// Bind decodes the call's arguments into v. Arguments without a number
// decode as bindPlain's do: UseNumber, the one setting of its decoder,
// changes only how a number is decoded into an interface.
func (c *Call) Bind(v any) error {
	if c.numberless {
		return c.bindPlain(v)
	}
	return c.bind(v, decodeNumbers)
}

// decodeNumbers is json.Unmarshal with UseNumber.
func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// bindPlain is Bind for a v that reaches no interface, over arguments that
// are one JSON value, as Invoke hands them over. UseNumber, the one setting
// of Bind's decoder, changes only what is decoded into an interface, and a
// decoder reads the one value as Unmarshal does, with the same errors: so
// Unmarshal decodes the same, without the decoder and its copy of the
// arguments.
func (c *Call) bindPlain(v any) error { return c.bind(v, json.Unmarshal) }

// bind decodes the arguments into v. encoding/json reads an integer only
// from digits alone, where the input schema (JSON Schema: a number with a
// zero fraction is an integer) and so the validator admit 2.0 or 1e2 too,
// as clients that keep every number a float send them: after a failed
// decode, such arguments are written as the integers they are and decoded
// again, the handler given them so.
func (c *Call) bind(v any, decode func([]byte, any) error) error {
	err := decode(c.Args, v)
	if err == nil || c.Op == nil {
		return bindRefusal(err)
	}
	whole, ok := wholeIntegers(c.Op.Input, c.Args)
	if !ok {
		return bindRefusal(err)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return bindRefusal(err)
	}
	rv.Elem().SetZero()
	if err := decode(whole, v); err != nil {
		return bindRefusal(err)
	}
	c.Args = whole
	return nil
}

// reachesInterface reports whether a value of type t can hold an interface
// value that encoding/json fills: in a field, an element, a map's key or
// value, at any depth.
func reachesInterface(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false // already being looked at, further up
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return reachesInterface(t.Elem(), seen)
	case reflect.Map:
		return reachesInterface(t.Key(), seen) || reachesInterface(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if reachesInterface(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

// NoInput is the input of an operation that takes no arguments.
type NoInput struct{}

// Handler adapts a typed function to Operation.Handle and derives the input
// and output schemas from In and Out.
func Handler[In, Out any](f func(ctx context.Context, c *Call, in In) (Out, error)) (func(context.Context, *Call) (any, error), *jsonschema.Schema, *jsonschema.Schema) {
	in := mustSchema[In](inputSchemaOptions)
	out := mustSchema[Out](schemaOptions)
	bind := (*Call).Bind
	if !reachesInterface(reflect.TypeFor[In](), map[reflect.Type]bool{}) {
		bind = (*Call).bindPlain
	}
	return func(ctx context.Context, c *Call) (any, error) {
		var v In
		if err := bind(c, &v); err != nil {
			return nil, err
		}
		return f(ctx, c, v)
	}, in, out
}

// Define builds an operation from a typed handler.
func Define[In, Out any](key, method, path, purpose string, access Access, f func(ctx context.Context, c *Call, in In) (Out, error)) *Operation {
	h, in, out := Handler(f)
	return &Operation{Key: key, Method: method, Path: path, Purpose: purpose, Access: access, Input: in, Output: out, Handle: h}
}

// schemaOptions maps json.RawMessage, which would otherwise be described as
// an array of bytes, to any JSON value: a raw field carries JSON as it is.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[json.RawMessage](): {}}}

// inputSchemaOptions are schemaOptions for an operation's input, which
// also name the values the protocol's closed sets of words take there: a
// speech act, a thread state, a verdict, an evidence kind (and those
// other packages add with InputEnum). So HTTP clients (the OpenAPI
// document) and MCP clients (tools/list) see them; the handlers refuse any
// other. An output's schema does not list them: a record is what the node
// stored, and a later revision of a set must not make it invalid.
var inputSchemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage]():       {},
	reflect.TypeFor[protocol.Act]():          enumOf(protocol.Acts),
	reflect.TypeFor[protocol.State]():        enumOf(protocol.States),
	reflect.TypeFor[protocol.Verdict]():      enumOf(protocol.Verdicts),
	reflect.TypeFor[protocol.EvidenceKind](): enumOf(protocol.EvidenceKinds),
}}

// InputEnum makes T, a named string type of another package, a closed set
// of words in input schemas: a field of type T is one of values. It is
// meant for a package-level variable's initialization (var _ =
// api.InputEnum(...)), which runs before any operation is defined and
// before any goroutine reads the options.
func InputEnum[T ~string](values []T) struct{} {
	t := reflect.TypeFor[T]()
	if _, ok := inputSchemaOptions.TypeSchemas[t]; ok {
		panic(fmt.Sprintf("api: %v is already an enum", t))
	}
	inputSchemaOptions.TypeSchemas[t] = enumOf(values)
	return struct{}{}
}

// enumOf is the schema of a string that is one of values.
func enumOf[T ~string](values []T) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "string"}
	for _, v := range values {
		s.Enum = append(s.Enum, string(v))
	}
	return s
}

func mustSchema[T any](opts *jsonschema.ForOptions) *jsonschema.Schema {
	s, err := jsonschema.For[T](opts)
	if err != nil {
		panic(fmt.Sprintf("schema of %v: %v", reflect.TypeFor[T](), err))
	}
	return s
}

// Registry holds every operation of the node.
type Registry struct {
	ops   []*Operation
	byKey map[string]*Operation
	// changed is closed, and replaced, after every write that succeeds.
	changed atomic.Pointer[chan struct{}]
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	r := &Registry{byKey: map[string]*Operation{}}
	ch := make(chan struct{})
	r.changed.Store(&ch)
	return r
}

// Changed returns a channel that is closed once an operation that is not a
// read succeeds, whatever its transport: live views wait on it. Take the
// channel before reading what it guards, so no change is missed.
func (r *Registry) Changed() <-chan struct{} { return *r.changed.Load() }

func (r *Registry) notify() {
	ch := make(chan struct{})
	close(*r.changed.Swap(&ch))
}

// Add registers operations. The key must be the method plus the path's
// segments (DESIGN.md, "Tool name ↔ route") unless the seed names the tool
// itself; a duplicate key or route, or a schema that does not resolve,
// panics: it is a programming error caught by every test.
func (r *Registry) Add(ops ...*Operation) {
	for _, op := range ops {
		if _, dup := r.byKey[op.Key]; dup {
			panic("registry: duplicate operation " + op.Key)
		}
		for _, o := range r.ops {
			if o.Method == op.Method && o.Path == op.Path {
				panic("registry: duplicate route " + op.Method + " " + op.Path)
			}
		}
		if op.Input == nil || op.Input.Type != "object" {
			panic("registry: " + op.Key + ": input schema must be an object")
		}
		res, err := op.Input.Resolve(nil)
		if err != nil {
			panic("registry: " + op.Key + ": " + err.Error())
		}
		op.input = res
		op.shape = compileShape(op.Input)
		r.ops = append(r.ops, op)
		r.byKey[op.Key] = op
	}
}

// Operations returns every operation, sorted by path then method.
func (r *Registry) Operations() []*Operation {
	out := append([]*Operation(nil), r.ops...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}

// Lookup finds an operation by key.
func (r *Registry) Lookup(key string) (*Operation, bool) {
	op, ok := r.byKey[key]
	return op, ok
}

// Call runs an operation for a principal: the one place rights are checked
// and input is validated, whatever the transport.
func (r *Registry) Call(ctx context.Context, p *Principal, key string, args json.RawMessage) (any, error) {
	op, ok := r.byKey[key]
	if !ok {
		return nil, protocol.Refusef(protocol.ReasonOperationNotFound, "No operation %q; see list_api_operations.", key)
	}
	return r.Invoke(ctx, p, op, args)
}

// Invoke runs op for a principal: the one place rights are checked and input
// is validated, whatever the transport.
func (r *Registry) Invoke(ctx context.Context, p *Principal, op *Operation, args json.RawMessage) (any, error) {
	if err := Authorize(p, op.Access); err != nil {
		return nil, InSurface(op, err)
	}
	args, numberless, err := r.validate(op, args)
	if err != nil {
		return nil, InSurface(op, err)
	}
	out, err := op.Handle(ctx, &Call{Op: op, Principal: p, Args: args, numberless: numberless})
	if err != nil {
		// The handler's refusals too (a value its input cannot hold is
		// the bind's invalid_body): every transport, not HTTP alone,
		// answers in the operation's vocabulary.
		return out, InSurface(op, err)
	}
	if op.Method != http.MethodGet && op.Method != http.MethodHead {
		r.notify()
	}
	return out, nil
}

// validate checks arguments against the operation's input schema and
// returns them as one JSON object; numberless says that they hold no
// number, when the shape's scan read them all.
func (r *Registry) validate(op *Operation, args json.RawMessage) (_ json.RawMessage, numberless bool, err error) {
	if len(bytes.TrimSpace(args)) == 0 || bytes.Equal(bytes.TrimSpace(args), []byte("null")) {
		args = json.RawMessage("{}")
	}
	if ref := CheckText(args); ref != nil {
		return nil, false, ref
	}
	// Nearly all arguments are read once, by the shape, and not decoded.
	if op.shape != nil {
		if ok, numbers := op.shape.scanJSON(args); ok {
			return args, !numbers, nil
		}
	}
	// The validator wants float64 numbers, as encoding/json gives without
	// UseNumber. Arguments that decode so into an object need no other
	// decode; the rest take the checks below, in their order, so that each
	// refusal stays what it was.
	var plain any
	if perr := json.Unmarshal(args, &plain); perr != nil || !isObject(plain) {
		var inst any
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.UseNumber()
		if err := dec.Decode(&inst); err != nil {
			return nil, false, NotJSON(err)
		}
		if !isObject(inst) {
			return nil, false, protocol.Refusef(protocol.ReasonInvalidBody, "The arguments must be a JSON object.").With("rule", "type")
		}
		// An object first, but not as a whole (trailing data, a number
		// beyond float64).
		return nil, false, NotJSON(perr)
	}
	// I-JSON: a member named twice would be taken with its last value, the
	// others dropped unseen (the scan above answers no to it).
	if name, _, dup := protocol.DuplicateMember(args); dup {
		return nil, false, NotJSON(fmt.Errorf("%w: %q", protocol.ErrDuplicateMember, name))
	}
	// An integer beyond 64 bits is the nearest within, as in a URL (it
	// has too many digits for the shape's scan above).
	if wide, ok := clampWide(op.Input, args); ok {
		args = wide
		plain = nil
		if err := json.Unmarshal(args, &plain); err != nil {
			return nil, false, NotJSON(err)
		}
	}
	if op.shape != nil && op.shape.admits(plain) {
		return args, false, nil
	}
	if err := op.input.Validate(plain); err != nil {
		return nil, false, headerRefusal(op, schemaRefusal(op.Input, plain, err))
	}
	return args, false, nil
}

func isObject(v any) bool { _, ok := v.(map[string]any); return ok }

// Authorize is the rights check of every transport.
func Authorize(p *Principal, a Access) error {
	switch a.Kind {
	case AccessPublic:
		return nil
	case AccessHuman:
		if p == nil {
			return protocol.Refuse(protocol.ReasonUnauthenticated)
		}
		if !p.Human {
			return protocol.Refuse(protocol.ReasonUserSessionRequired)
		}
		return nil
	case AccessAgent:
		if p == nil || p.Agent == nil {
			return protocol.Refusef(protocol.ReasonUnauthorized, "Writes need a registered agent: POST /register, then Authorization: Bearer <agent_id>.")
		}
		return nil
	}
	if p == nil {
		return protocol.Refuse(protocol.ReasonUnauthenticated)
	}
	if p.Rights.Has(a.Right) {
		return nil
	}
	switch a.Right {
	case protocol.RightWrite:
		return protocol.Refuse(protocol.ReasonTokenReadOnly)
	case protocol.RightVerify:
		return protocol.Refuse(protocol.ReasonVerifyRightMissing)
	default:
		return protocol.Refusef(protocol.ReasonTokenRightMissing, "The token lacks the %s right.", a.Right).With("right", string(a.Right))
	}
}

// InSurface renames the shared refusals into the corpus's codes for corpus
// operations: each protocol keeps its own vocabulary. Invoke applies it to
// every refusal it returns; a transport applies it to its own.
func InSurface(op *Operation, err error) error {
	var ref *protocol.Refusal
	if op.Surface != Corpus || !errors.As(err, &ref) {
		return err
	}
	c := *ref
	switch ref.Reason {
	case protocol.ReasonUnauthenticated:
		c.Reason = protocol.ReasonUnauthorized
	case protocol.ReasonInvalidBody, protocol.ReasonInvalidJSON:
		c.Reason = protocol.ReasonInvalidRequest
	case protocol.ReasonTokenReadOnly, protocol.ReasonTokenRightMissing, protocol.ReasonUserSessionRequired:
		c.Reason = protocol.ReasonForbidden
	}
	return &c
}

// headerRefusal says of a missing argument that HTTP sends as a header
// (Operation.Headers) how each transport sends it.
func headerRefusal(op *Operation, ref *protocol.Refusal) *protocol.Refusal {
	field, _ := ref.Details["field"].(string)
	if ref.Details["rule"] != "required" {
		return ref
	}
	for header, name := range op.Headers {
		if name == field {
			return protocol.Refusef(ref.Reason, "Missing %s: the %s header over HTTP, the %s argument over MCP.", field, header, field).
				With("field", field).With("rule", "required")
		}
	}
	return ref
}
