package realm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"relay/protocol"
	"relay/realm/api"
)

// refusalSchema is the shape of a refusal in a tool result.
var refusalSchema = &jsonschema.Schema{
	Type: "object",
	Properties: map[string]*jsonschema.Schema{
		"reason":  {Type: "string", Description: "Stable machine-readable reason."},
		"error":   {Type: "string", Description: "A human sentence; may change."},
		"details": {Type: "object"},
	},
	Required: []string{"reason", "error"},
}

// newMCPServer builds the MCP server of /api/v1/mcp: one tool per operation.
func (n *Node) newMCPServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "relay", Title: "relay realm " + string(n.realm), Version: Version}, &mcp.ServerOptions{
		Instructions: "Parley v1 on realm " + string(n.realm) + ". Start with get_manifest; list_api_operations lists every operation.",
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{},
			Prompts:   &mcp.PromptCapabilities{},
			Resources: &mcp.ResourceCapabilities{},
			Logging:   &mcp.LoggingCapabilities{},
		},
	})
	tools := map[string]bool{}
	for _, op := range n.reg.Operations() {
		if op.Surface == api.Parley && op.ToolName() != "" {
			srv.AddTool(toolOf(op), n.toolHandler(op))
			tools[op.ToolName()] = true
		}
	}
	srv.AddReceivingMiddleware(unknownTool(tools))
	return srv
}

func toolOf(op *api.Operation) *mcp.Tool {
	t := &mcp.Tool{
		Name:        op.ToolName(),
		Description: op.Purpose,
		InputSchema: op.Input,
		Annotations: &mcp.ToolAnnotations{
			Title:          op.Purpose,
			ReadOnlyHint:   op.Method == http.MethodGet,
			IdempotentHint: op.Method == http.MethodGet,
		},
	}
	if op.Output != nil {
		t.OutputSchema = &jsonschema.Schema{Type: "object", AnyOf: []*jsonschema.Schema{op.Output, refusalSchema}}
	}
	return t
}

func (n *Node) toolHandler(op *api.Operation) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		out, err := n.reg.Invoke(ctx, api.PrincipalFrom(ctx), op, req.Params.Arguments)
		if err != nil {
			ref := n.safe(err, op.Key)
			n.metrics.observe(op.Key, "mcp", ref.Status(), time.Since(start))
			return refusalResult(ref), nil
		}
		n.metrics.observe(op.Key, "mcp", http.StatusOK, time.Since(start))
		return structuredResult(out)
	}
}

// unknownTool answers a call of a tool the server does not have as a
// refusal, like any other, instead of the SDK's JSON-RPC error.
func unknownTool(tools map[string]bool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil && !tools[call.Params.Name] {
					return refusalResult(protocol.Refusef(protocol.ReasonUnknownTool, "No tool %q; see tools/list.", call.Params.Name)), nil
				}
			}
			return next(ctx, method, req)
		}
	}
}

// structuredResult carries out as structuredContent and as the JSON text
// fallback of clients that read only content.
func structuredResult(out any) (*mcp.CallToolResult, error) {
	b, err := marshalJSON(out)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
	}, nil
}

func refusalResult(ref *protocol.Refusal) *mcp.CallToolResult {
	b, _ := marshalJSON(ref)
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
	}
}

func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// mcpHandler serves POST /api/v1/mcp: stateless streamable HTTP behind a
// bearer token. The SDK's DNS-rebinding protection stays on; Host names the
// operator lists in AllowedHosts (a reverse proxy on loopback) pass it.
func (n *Node) mcpHandler() http.Handler {
	srv := n.newMCPServer()
	get := func(*http.Request) *mcp.Server { return srv }
	opts := &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: n.cfg.MaxBodyBytes}
	protected := mcp.NewStreamableHTTPHandler(get, opts)
	proxied := *opts
	proxied.DisableLocalhostProtection = true
	behindProxy := mcp.NewStreamableHTTPHandler(get, &proxied)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r)
		if !ok {
			// A browser session (cookie) is not enough: MCP needs a token.
			writeRefusal(w, protocol.Refuse(protocol.ReasonTokenRequired))
			return
		}
		p, err := n.auth.Authenticate(tok)
		if err != nil {
			writeRefusal(w, err)
			return
		}
		if ref := n.limiter.allow(p, r); ref != nil {
			writeRefusal(w, ref)
			return
		}
		// Read the body here, so a request over the limit gets the same
		// refusal as over HTTP, before any of it reaches the SDK.
		if r.ContentLength > n.cfg.MaxBodyBytes {
			writeRefusal(w, protocol.Refuse(protocol.ReasonPayloadTooLarge).With("limit_bytes", n.cfg.MaxBodyBytes))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, n.cfg.MaxBodyBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeRefusal(w, protocol.Refuse(protocol.ReasonPayloadTooLarge).With("limit_bytes", n.cfg.MaxBodyBytes))
				return
			}
			writeRefusal(w, protocol.Refusef(protocol.ReasonInvalidBody, "The body could not be read."))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r = r.WithContext(api.WithPrincipal(r.Context(), p))
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if slices.Contains(n.cfg.AllowedHosts, host) {
			behindProxy.ServeHTTP(w, r)
			return
		}
		protected.ServeHTTP(w, r)
	})
}
