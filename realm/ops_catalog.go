package realm

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/google/jsonschema-go/jsonschema"

	"relay/protocol"
	"relay/realm/api"
)

func (n *Node) registerCatalog() {
	n.reg.Add(
		api.Define("list_api_operations", http.MethodGet, "/api/v1/operations", "Every operation with key, method, path, purpose and who may call it.", api.Public, n.listOperations),
		api.Define("get_api_operation", http.MethodGet, "/api/v1/operations/{key}", "The full contract of one operation: access, input and output schemas.", api.Public, n.getOperation),
		api.Define("call_api_operation", http.MethodPost, "/api/v1/operations/{key}", "Run any operation by key, through the same rights check as HTTP.", api.NeedRight(protocol.RightRead), n.callOperation),
	)
}

// OperationsOut is the answer of list_api_operations.
type OperationsOut struct {
	Operations []CatalogEntry `json:"operations"`
}

// CatalogEntry is an operation in the catalog, with whether the caller may
// call it.
type CatalogEntry struct {
	Endpoint
	Allowed bool `json:"allowed" jsonschema:"whether the caller's credential may call it"`
}

func (n *Node) listOperations(ctx context.Context, c *api.Call, _ api.NoInput) (OperationsOut, error) {
	var out OperationsOut
	for _, op := range n.reg.Operations() {
		out.Operations = append(out.Operations, CatalogEntry{Endpoint: endpointOf(op), Allowed: api.Authorize(c.Principal, op.Access) == nil})
	}
	return out, nil
}

type operationKeyIn struct {
	Key string `json:"key" jsonschema:"the operation key, e.g. get_manifest"`
}

// OperationOut is the full contract of one operation.
type OperationOut struct {
	Endpoint
	Tool         string         `json:"tool,omitempty" jsonschema:"the MCP tool name, absent when the operation is no tool"`
	MCP          string         `json:"mcp,omitempty" jsonschema:"the MCP endpoint that has the tool: /api/v1/mcp (the forum and the node) or /mcp (the corpus, behind OAuth)"`
	InputSchema  map[string]any `json:"input_schema"`
	OutputSchema map[string]any `json:"output_schema,omitempty"`
	Allowed      bool           `json:"allowed"`
}

func (n *Node) getOperation(ctx context.Context, c *api.Call, in operationKeyIn) (OperationOut, error) {
	op, ok := n.reg.Lookup(in.Key)
	if !ok {
		return OperationOut{}, protocol.Refusef(protocol.ReasonOperationNotFound, "No operation %q; see list_api_operations.", in.Key)
	}
	return OperationOut{
		Endpoint:     endpointOf(op),
		Tool:         op.ToolName(),
		MCP:          mcpEndpointOf(op),
		InputSchema:  schemaMap(op.Input),
		OutputSchema: schemaMap(op.Output),
		Allowed:      api.Authorize(c.Principal, op.Access) == nil,
	}, nil
}

// mcpEndpointOf is the path of the MCP endpoint where op is a tool, or "".
func mcpEndpointOf(op *api.Operation) string {
	switch {
	case op.ToolName() == "":
		return ""
	case op.Surface == api.Corpus:
		return corpusMCPPath
	}
	return "/api/v1/mcp"
}

type callOperationIn struct {
	Key       string         `json:"key" jsonschema:"the operation key"`
	Arguments map[string]any `json:"arguments,omitempty" jsonschema:"the operation's arguments, as its input schema says"`
}

// CallOut wraps the result of call_api_operation.
type CallOut struct {
	Key    string `json:"key"`
	Result any    `json:"result"`
}

func (n *Node) callOperation(ctx context.Context, c *api.Call, in callOperationIn) (CallOut, error) {
	if in.Key == c.Op.Key {
		return CallOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "call_api_operation cannot call itself.").With("field", "key")
	}
	args, err := json.Marshal(in.Arguments)
	if err != nil {
		return CallOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "arguments: %v", err).With("field", "arguments")
	}
	out, err := n.reg.Call(ctx, c.Principal, in.Key, args)
	if err != nil {
		return CallOut{}, err
	}
	return CallOut{Key: in.Key, Result: out}, nil
}

// schemaMap turns a schema into plain JSON values for a response.
func schemaMap(s *jsonschema.Schema) map[string]any {
	if s == nil {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}
