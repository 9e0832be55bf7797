package realm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/internal/jsonenc"
	"relay/realm/session"
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
			//lint:ignore SA1019 generic clients of 2025-06-18 still call logging/setLevel; it answers until the feature is gone.
			Logging: &mcp.LoggingCapabilities{},
		},
	})
	tools := map[string]bool{}
	for _, op := range n.reg.Operations() {
		if op.Surface == api.Parley && op.ToolName() != "" {
			result := structuredResult
			if op.ToolName() == "call_api_operation" {
				result = n.calledResult
			}
			srv.AddTool(toolOf(op, op.Output), n.toolHandler(op, result))
			tools[op.ToolName()] = true
		}
	}
	srv.AddReceivingMiddleware(unknownTool(tools), resourceNotFound())
	return srv
}

// calledResult is the result of call_api_operation: marked untrusted, as
// the corpus's tools mark theirs, when the operation it ran reads corpus
// content.
func (n *Node) calledResult(out any) (*mcp.CallToolResult, error) {
	res, err := structuredResult(out)
	if err != nil {
		return nil, err
	}
	if c, ok := out.(CallOut); ok {
		if op, ok := n.reg.Lookup(c.Key); ok && op.Surface == api.Corpus && !contentFree[op.ToolName()] {
			markUntrusted(res)
		}
	}
	return res, nil
}

// refusalSchemaOf is the shape of a refusal in a tool result of surface.
func refusalSchemaOf(surface api.Surface) *jsonschema.Schema {
	if surface == api.Corpus {
		return corpusRefusalSchema
	}
	return refusalSchema
}

// toolOf is an operation's tool, its output schema anyOf(output, the
// surface's refusal).
func toolOf(op *api.Operation, output *jsonschema.Schema) *mcp.Tool {
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
	if output != nil {
		t.OutputSchema = &jsonschema.Schema{Type: "object", AnyOf: []*jsonschema.Schema{output, refusalSchemaOf(op.Surface)}}
	}
	return t
}

// toolHandler runs op for the request's principal through the registry and
// renders its output with result, a refusal in op's surface.
func (n *Node) toolHandler(op *api.Operation, result func(out any) (*mcp.CallToolResult, error)) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		start := time.Now()
		// The SDK runs a call on a goroutine of its own, which nothing
		// recovers: a panic there would end the process.
		defer func() {
			if v := recover(); v != nil {
				n.log.Error("tool call panicked", "tool", op.Key, "panic", v, "stack", string(debug.Stack()))
				res, err = refusalResult(protocol.Refuse(protocol.ReasonInternal), op.Surface), nil
			}
		}()
		out, err := n.reg.Invoke(ctx, api.PrincipalFrom(ctx), op, req.Params.Arguments)
		if err != nil {
			ref := n.safe(err, op.Key)
			refundRejected(admissionFrom(ctx), op, ref)
			n.metrics.observe(op.Key, "mcp", ref.Status(), time.Since(start))
			return refusalResult(ref, op.Surface), nil
		}
		n.metrics.observe(op.Key, "mcp", http.StatusOK, time.Since(start))
		return result(out)
	}
}

// unknownTool answers a call of a tool the server does not have as the
// forum's seed says, a refusal (unknown_tool) like any other, instead of
// the SDK's JSON-RPC error.
func unknownTool(tools map[string]bool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil && !tools[call.Params.Name] {
					return refusalResult(protocol.Refusef(protocol.ReasonUnknownTool, "No tool %q; see tools/list.", call.Params.Name), api.Parley), nil
				}
			}
			return next(ctx, method, req)
		}
	}
}

// codeResourceNotFound is MCP's error of a resources/read whose URI names
// no resource (2025-06-18, server/resources, "Error Handling").
const codeResourceNotFound = -32002

// resourceNotFoundFrom is the first protocol version whose resources/read
// of nothing is invalid params (-32602), the code the SDK gives for all.
const resourceNotFoundFrom = "2026-07-28"

// resourceNotFound gives a resources/read the SDK (or a resource handler,
// through mcp.ResourceNotFoundError) answered "not found" the code of the
// protocol version the client speaks: -32002 before resourceNotFoundFrom,
// and for a client that names none (2025-03-26).
func resourceNotFound() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			var rpcErr *jsonrpc.Error
			if method != "resources/read" || !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || rpcErr.Message != "Resource not found" {
				return res, err
			}
			if extra := req.GetExtra(); extra != nil && extra.Header.Get("Mcp-Protocol-Version") >= resourceNotFoundFrom {
				return res, err
			}
			legacy := *rpcErr
			legacy.Code = codeResourceNotFound
			return nil, &legacy
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
	return jsonResult(b), nil
}

// jsonResult carries one JSON object as structuredContent and, the same
// bytes, as the text fallback.
func jsonResult(b []byte) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
	}
}

// refusalResult is a refusal as an isError result, in the surface's shape.
func refusalResult(ref *protocol.Refusal, surface api.Surface) *mcp.CallToolResult {
	var body any = ref
	if surface == api.Corpus {
		body = corpusBody(ref)
	}
	b, _ := marshalJSON(body)
	res := jsonResult(b)
	res.IsError = true
	return res
}

// marshalJSON is compact JSON as JavaScript's JSON.stringify writes it, so
// that byte counts agree with what clients measure: no HTML escaping, and
// U+2028 and U+2029 written as themselves (encoding/json always escapes
// them in strings).
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return unescapeLineSeparators(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// unescapeLineSeparators turns the escapes \u2028 and \u2029 back into the
// characters; escaped backslashes are skipped whole, so text that merely
// reads \\u2028 stays.
func unescapeLineSeparators(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u202`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if rest := b[i:]; len(rest) >= 6 && (string(rest[:6]) == `\u2028` || string(rest[:6]) == `\u2029`) {
			if rest[5] == '8' {
				out = append(out, "\u2028"...)
			} else {
				out = append(out, "\u2029"...)
			}
			i += 5
			continue
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}

// mcpEndpoint is the stateless streamable HTTP transport of one MCP server.
// The SDK's DNS-rebinding protection stays on; Host names the operator
// lists in AllowedHosts (a reverse proxy on loopback) pass it.
type mcpEndpoint struct {
	protected, behindProxy http.Handler
	surface                api.Surface
	// refuse, when set, sees each single message before the SDK does and
	// reports whether it answered it (the corpus's scope challenge).
	refuse func(w http.ResponseWriter, r *http.Request, p *api.Principal, msg []byte) bool
}

func (n *Node) newMCPEndpoint(srv *mcp.Server, surface api.Surface) *mcpEndpoint {
	get := func(*http.Request) *mcp.Server { return srv }
	opts := &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: n.cfg.MaxBodyBytes}
	proxied := *opts
	proxied.DisableLocalhostProtection = true
	return &mcpEndpoint{protected: mcp.NewStreamableHTTPHandler(get, opts), behindProxy: mcp.NewStreamableHTTPHandler(get, &proxied), surface: surface}
}

// serveMCP hands an authenticated request to the SDK: the caller's rate
// limit first, then the body limit, refusals in the endpoint's shape.
func (n *Node) serveMCP(w http.ResponseWriter, r *http.Request, p *api.Principal, e *mcpEndpoint) {
	adm, ref := n.limiter.allow(p, r)
	if ref != nil {
		writeRefusalAs(w, ref, e.surface)
		return
	}
	if ref := contentCoded(r); ref != nil {
		writeRefusalAs(w, ref, e.surface)
		return
	}
	// Read the body here, so a request over the limit gets the same
	// refusal as over HTTP, before any of it reaches the SDK.
	if r.ContentLength > n.cfg.MaxBodyBytes {
		writeRefusalAs(w, n.bodyTooLarge(e.surface), e.surface)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, n.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeRefusalAs(w, n.bodyTooLarge(e.surface), e.surface)
			return
		}
		unreadable := protocol.ReasonInvalidBody
		if e.surface == api.Corpus {
			unreadable = protocol.ReasonInvalidRequest
		}
		writeRefusalAs(w, protocol.Refusef(unreadable, "The body could not be read."), e.surface)
		return
	}
	// The SDK takes application/json only, and says so in plain text.
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeRefusalAs(w, protocol.Refusef(protocol.ReasonUnsupportedMediaType, "MCP messages are application/json: send Content-Type: application/json."), e.surface)
		return
	}
	// Text that is not one JSON value is refused here: the SDK's decoder
	// would read the first value and ignore what follows, so a batch
	// counted below would not be the batch it runs.
	if !json.Valid(body) {
		writeRPCError(w, http.StatusBadRequest, nil, rpcParseError, "Parse error: the body is not one JSON value.")
		return
	}
	// MCP's transport: a protocol version the server does not support is
	// 400. The SDK refuses only the versions that sort before its newest,
	// and takes any later text ("2099-01-01", "x") for that draft's, whose
	// requests it refuses for a _meta field and whose notifications it
	// accepts: refused here, whatever the text.
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !slices.Contains(mcp.SupportedProtocolVersions(), v) {
		writeRPCError(w, http.StatusBadRequest, nil, rpcInvalidRequest, fmt.Sprintf("Invalid Request: MCP-Protocol-Version %q is not supported; supported versions: %s.",
			v, strings.Join(mcp.SupportedProtocolVersions(), ", ")))
		return
	}
	// A batch (protocol versions before 2025-06-18) is as many requests
	// as it holds messages; a refusal in it gives nothing back.
	batch := bytes.TrimLeft(body, " \t\r\n")[0] == '[' // one JSON value: not empty
	if batch {
		var msgs []json.RawMessage
		if json.Unmarshal(body, &msgs) == nil {
			for range max(len(msgs)-1, 0) {
				if _, ref := n.limiter.allow(p, r); ref != nil {
					writeRefusalAs(w, ref, e.surface)
					return
				}
			}
		}
		adm = nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r = r.WithContext(withOrigin(withAdmission(api.WithPrincipal(r.Context(), p), adm), r))
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	h := e.protected
	if slices.Contains(n.cfg.AllowedHosts, host) {
		h = e.behindProxy
	} else if reboundHost(r) {
		// The SDK refuses it too, in plain text; here it is a refusal.
		writeRefusalAs(w, protocol.Refusef(protocol.ReasonForbidden, "Host %q is not a name of this node: it answers on loopback to loopback names only, a guard against DNS rebinding; a reverse proxy's name is given with --allowed-host.", r.Host), e.surface)
		return
	}
	switch {
	case batch:
		serveBatch(h, w, r, body)
	case e.refuse == nil || !e.refuse(w, r, p, body):
		serveJSONRPC(h, w, r, body)
	}
}

// reboundHost reports what the SDK's DNS-rebinding protection refuses: a
// request on a loopback connection whose Host is not a loopback name, by
// the SDK's own test (isLoopbackAddr), so that neither lets through what
// the other refuses.
func reboundHost(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil {
		return false
	}
	return isLoopbackAddr(local.String()) && !isLoopbackAddr(r.Host)
}

// isLoopbackAddr reports whether addr, a host with or without a port, is
// "localhost" or a loopback address, as go-sdk's internal util.IsLoopback
// (v1.8.0) decides it.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// JSON-RPC 2.0's error codes for messages the server cannot take.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
	rpcInvalidParams  = -32602
	rpcInternalError  = -32603
)

// paramsNeeded are the methods whose params MCP requires.
var paramsNeeded = map[string]bool{"initialize": true, "tools/call": true, "logging/setLevel": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true, "prompts/get": true, "completion/complete": true}

// logLevels are the levels of logging/setLevel (RFC 5424's, as MCP names them).
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// paramsProblem says what is wrong with a request's params for the members
// the SDK reads, or "": the SDK would answer such a request with an error
// of code 0, or an invalid request, naming its own Go types, or not at
// all (an unknown log level), where JSON-RPC has "invalid params".
func paramsProblem(method string, raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		if paramsNeeded[method] {
			return method + " takes params, an object."
		}
		return ""
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(raw, &params) != nil || params == nil {
		return "params is an object."
	}
	isString := func(name string, required bool) bool {
		v, ok := params[name]
		if !ok {
			return !required
		}
		var s string
		return json.Unmarshal(v, &s) == nil && v[0] == '"' && (s != "" || !required)
	}
	isObject := func(name string) bool {
		v, ok := params[name]
		if !ok || string(v) == "null" {
			return true
		}
		var m map[string]json.RawMessage
		return json.Unmarshal(v, &m) == nil
	}
	switch method {
	case "initialize":
		if !isString("protocolVersion", true) {
			return "protocolVersion is a string, such as \"2025-06-18\"."
		}
		if !isObject("capabilities") || !isObject("clientInfo") {
			return "capabilities and clientInfo are objects."
		}
	case "tools/call":
		if !isString("name", true) {
			return "name, the tool's, is a string; see tools/list."
		}
		if !isObject("arguments") {
			return "arguments is an object."
		}
	case "logging/setLevel":
		var level string
		if v, ok := params["level"]; !ok || json.Unmarshal(v, &level) != nil || !slices.Contains(logLevels, level) {
			return "level is one of " + strings.Join(logLevels, ", ") + "."
		}
	case "tools/list", "resources/list", "resources/templates/list", "prompts/list":
		if !isString("cursor", false) {
			return "cursor is a string, a list's nextCursor."
		}
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		if !isString("uri", true) {
			return "uri is a string."
		}
		// The SDK parses it and answers nothing at all for one that does
		// not parse (a control character).
		var uri string
		json.Unmarshal(params["uri"], &uri)
		if _, err := url.Parse(uri); err != nil {
			return "uri is a URI, such as corpus://auth.md; see resources/list."
		}
	case "prompts/get":
		if !isString("name", true) {
			return "name is a string; see prompts/list."
		}
	}
	return ""
}

// serveJSONRPC hands one JSON-RPC message, one JSON value, to
// the SDK's handler h, and turns the SDK's plain-text refusals into JSON-RPC
// 2.0 error objects: a body that is not a JSON-RPC message is an invalid
// request (with the id null and the SDK's status), a request
// for a method the server does not have gets "method not found" as its
// response, and a notification of one is accepted and ignored, as JSON-RPC
// answers no notification. A message with an id but neither a method nor a
// result is no message at all: the SDK would take it for a response.
func serveJSONRPC(h http.Handler, w http.ResponseWriter, r *http.Request, body []byte) {
	// The members by their exact names, as the SDK reads them (encoding/json
	// would match a struct's fields whatever their case).
	var msg map[string]json.RawMessage
	isObject := json.Unmarshal(body, &msg) == nil && msg != nil
	var method *string
	if m, ok := msg["method"]; ok {
		var s string
		if json.Unmarshal(m, &s) == nil {
			method = &s
		}
	}
	id := msg["id"]
	_, hasResult := msg["result"]
	_, hasError := msg["error"]
	if name, depth, dup := protocol.DuplicateMember(body); dup && depth <= 1 {
		// In the message or its params: the SDK would take the last one.
		// Deeper, in a tool's arguments, the registry refuses it.
		writeRPCError(w, http.StatusBadRequest, nil, rpcInvalidRequest, fmt.Sprintf("Invalid Request: the message names %q twice.", name))
		return
	}
	if !rpcIDValid(id) {
		writeRPCError(w, http.StatusBadRequest, nil, rpcInvalidRequest, "Invalid Request: an id is a string of text (UTF-8, no lone surrogate escape) or an integer of at most 2^53-1 in magnitude, which is echoed exactly.")
		return
	}
	if r.Method == http.MethodPost && isObject && id != nil && method == nil && !hasResult && !hasError {
		writeRPCError(w, http.StatusBadRequest, nil, rpcInvalidRequest, "Invalid Request: a message with an id and no method is neither a request nor a response.")
		return
	}
	if isObject && method != nil && id != nil {
		if why := paramsProblem(*method, msg["params"]); why != "" {
			writeRPCError(w, http.StatusOK, id, rpcInvalidParams, "Invalid params: "+why)
			return
		}
	}
	rec := &rpcRecorder{ResponseWriter: w}
	h.ServeHTTP(rec, r)
	if rec.unescape {
		rec.finishJSON()
		return
	}
	if !rec.held {
		return
	}
	text := strings.TrimSpace(rec.body.String())
	switch {
	case strings.HasPrefix(text, "JSON RPC not handled") && isObject && method != nil && id == nil:
		w.Header().Del("Content-Type")
		w.Header().Del("X-Content-Type-Options")
		w.WriteHeader(http.StatusAccepted)
	case strings.HasPrefix(text, "JSON RPC not handled") && isObject && method != nil:
		writeRPCError(w, http.StatusOK, id, rpcMethodNotFound, "Method not found: "+*method)
	case strings.HasPrefix(text, "malformed payload"):
		// The SDK's account of a message it could not read names its own
		// Go types: not for the client.
		writeRPCError(w, rec.status, nil, rpcInvalidRequest, `Invalid Request: not a JSON-RPC 2.0 message (an object with "jsonrpc": "2.0" and a method, or a result or an error).`)
	default: // headers, protocol version, batching: the SDK says what is wrong
		writeRPCError(w, rec.status, nil, rpcInvalidRequest, "Invalid Request: "+text)
	}
}

// maxRPCID is the largest integer id taken: the SDK reads ids as numbers
// of float64 precision, and JavaScript clients write no larger.
const maxRPCID = 1<<53 - 1

// rpcIDValid reports whether id is one the SDK echoes exactly: MCP allows
// strings and integers, and a fraction, an integer beyond float64's
// precision or a string that is not text would come back changed, so the
// client could not match the response to its request. Other kinds of id
// are the SDK's to refuse.
func rpcIDValid(id json.RawMessage) bool {
	if len(id) > 0 && id[0] == '"' {
		// The SDK decodes bytes that are not UTF-8, and the escape of
		// half a surrogate pair, to U+FFFD.
		return api.CheckText(id) == nil
	}
	if len(id) == 0 || (id[0] != '-' && (id[0] < '0' || id[0] > '9')) {
		return true // absent, or not a number
	}
	n, err := strconv.ParseInt(string(id), 10, 64)
	return err == nil && n >= -maxRPCID && n <= maxRPCID
}

// batchesEnd is the first protocol version without JSON-RPC batches.
const batchesEnd = "2025-06-18"

// serveBatch answers a JSON-RPC batch (protocol versions before 2025-06-18;
// a request without a version is 2025-03-26) as JSON-RPC 2.0 says: each
// message is served as if alone, and the responses to its requests come
// back in one array, or 202 and nothing when it held only notifications.
// An initialize, which MCP keeps out of batches, is refused in its place.
// The SDK, given a batch, ran none of it when one message was refused.
func serveBatch(h http.Handler, w http.ResponseWriter, r *http.Request, body []byte) {
	if v := r.Header.Get("Mcp-Protocol-Version"); v >= batchesEnd {
		writeRPCError(w, http.StatusBadRequest, nil, rpcInvalidRequest, "Invalid Request: protocol version "+v+" takes one JSON-RPC message per request; batches ended with "+batchesEnd+".")
		return
	}
	var msgs []json.RawMessage
	if json.Unmarshal(body, &msgs) != nil || len(msgs) == 0 {
		writeRPCError(w, http.StatusBadRequest, nil, rpcInvalidRequest, "Invalid Request: a batch is an array of one or more JSON-RPC messages.")
		return
	}
	var out bytes.Buffer
	for _, m := range msgs {
		rec := httptest.NewRecorder()
		var head struct {
			Method string          `json:"method"`
			ID     json.RawMessage `json:"id"`
		}
		if json.Unmarshal(m, &head) == nil && head.Method == "initialize" {
			writeRPCError(rec, http.StatusOK, head.ID, rpcInvalidRequest, "Invalid Request: initialize is never part of a batch.")
		} else {
			one := r.Clone(r.Context())
			one.Body, one.ContentLength = io.NopCloser(bytes.NewReader(m)), int64(len(m))
			serveJSONRPC(h, rec, one, m)
		}
		b := bytes.TrimSpace(rec.Body.Bytes())
		if rec.Code == http.StatusAccepted || len(b) == 0 {
			continue // a notification, answered by nothing
		}
		if !json.Valid(b) || b[0] != '{' {
			rec = httptest.NewRecorder()
			writeRPCError(rec, http.StatusOK, head.ID, rpcInternalError, "Internal error: the message got no JSON-RPC answer.")
			b = bytes.TrimSpace(rec.Body.Bytes())
		}
		if out.Len() == 0 {
			out.WriteByte('[')
		} else {
			out.WriteByte(',')
		}
		out.Write(b)
	}
	if out.Len() == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	out.WriteByte(']')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	w.Write(out.Bytes())
}

// writeRPCError writes a JSON-RPC 2.0 error response.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, message string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, message}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	w.Write(b)
}

// rpcRecorder holds the SDK's response for serveJSONRPC: a 400 in plain
// text, the SDK's refusal of a message, to be rewritten as a JSON-RPC
// error; a JSON response, to be written without the escapes of <, > and &
// that encoding/json adds for HTML's sake (a message of code would
// otherwise travel at up to six times its size). Anything else, a stream,
// passes through.
type rpcRecorder struct {
	http.ResponseWriter
	status         int
	wroteHeader    bool
	held, unescape bool // a refusal to rewrite; a JSON response to write unescaped
	body           bytes.Buffer
}

func (rec *rpcRecorder) WriteHeader(status int) {
	if rec.wroteHeader {
		return
	}
	rec.wroteHeader, rec.status = true, status
	switch ct := rec.Header().Get("Content-Type"); {
	case status == http.StatusBadRequest && strings.HasPrefix(ct, "text/plain"):
		rec.held = true
	case strings.HasPrefix(ct, "application/json"):
		rec.unescape = true
	default:
		rec.ResponseWriter.WriteHeader(status)
	}
}

func (rec *rpcRecorder) Write(b []byte) (int, error) {
	if !rec.wroteHeader {
		rec.WriteHeader(http.StatusOK)
	}
	if rec.held || rec.unescape {
		return rec.body.Write(b)
	}
	return rec.ResponseWriter.Write(b)
}

// Flush lets a stream through.
func (rec *rpcRecorder) Flush() {
	if f, ok := rec.ResponseWriter.(http.Flusher); ok && !rec.held && !rec.unescape {
		f.Flush()
	}
}

// finishJSON writes a held JSON response, unescaped.
func (rec *rpcRecorder) finishJSON() {
	b := jsonenc.UnescapeHTML(rec.body.Bytes())
	rec.Header().Set("Content-Length", strconv.Itoa(len(b)))
	rec.ResponseWriter.WriteHeader(rec.status)
	rec.ResponseWriter.Write(b)
}

// mcpHandler serves POST /api/v1/mcp: stateless streamable HTTP behind a
// Parley bearer token.
func (n *Node) mcpHandler() http.Handler {
	e := n.newMCPEndpoint(n.newMCPServer(), api.Parley)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
		case http.MethodOptions:
			w.Header().Set("Allow", "POST, OPTIONS")
			w.WriteHeader(http.StatusNoContent)
			return
		default: // stateless: no stream to GET, no session to DELETE
			w.Header().Set("Allow", "POST, OPTIONS")
			writeRefusal(w, protocol.Refusef(protocol.ReasonMethodNotAllowed, "/api/v1/mcp takes POST: one JSON-RPC message per request."))
			return
		}
		if !n.originAllowed(r) {
			// MCP's transport: "Servers MUST validate the Origin header".
			writeRefusal(w, protocol.Refusef(protocol.ReasonForbidden, "Requests from the web origin %q are not taken here: only this node's own pages, local tools and the hosts the operator allows.", r.Header.Get("Origin")))
			return
		}
		tok, ok := bearer(r)
		if !ok {
			// A browser session (cookie) is not enough: MCP needs a token.
			ref := protocol.Refuse(protocol.ReasonTokenRequired)
			if _, err := r.Cookie(session.CookieName); err != nil {
				ref = protocol.Refusef(protocol.ReasonTokenRequired, "MCP needs a token: send Authorization: Bearer <token>.")
			}
			writeRefusal(w, ref)
			return
		}
		p, err := n.auth.Authenticate(tok)
		if err != nil {
			writeRefusal(w, n.refusedCredential(r, err))
			return
		}
		n.serveMCP(w, r, p, e)
	})
}

// originAllowed reports whether a request to an MCP endpoint comes from an
// origin the node takes: none (not a browser), the node's own pages, a
// page of a loopback host (local tools), or a host the operator lists in
// AllowedHosts. The Host check of the SDK stops DNS rebinding; this stops
// other sites' pages from driving the endpoint.
func (n *Node) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null" among them: a sandboxed or opaque origin
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") || slices.Contains(n.cfg.AllowedHosts, host) {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
