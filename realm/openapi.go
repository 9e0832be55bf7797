package realm

// /openapi.json: an OpenAPI 3.1 document generated from the registry (both
// surfaces: Parley under /api/v1, the corpus at its root paths) and the
// table of discovery documents. Operation schemas are the registry's JSON
// Schemas (draft 2020-12, which OpenAPI 3.1 takes as they are).
//
//   - Parameters: path parameters from the route, headers from
//     Operation.Headers, and for GET the other input properties as query
//     parameters (arrays repeat the parameter: kinds=a&kinds=b).
//   - Request bodies (POST): the input schema less what the path and the
//     headers carry.
//   - Responses: the success status with one content entry per
//     representation, 304 and 406 where the read negotiates, and the
//     error shape of the operation's protocol as the default.

import (
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"relay/realm/api"
	"relay/realm/corpus"
)

// opParam is one parameter of an operation.
type opParam struct {
	Name, In string
	Required bool
	Schema   *jsonschema.Schema
}

// operationParams lists an operation's parameters: path, header, then (for
// GET) query parameters by name.
func operationParams(op *api.Operation) []opParam {
	var out []opParam
	taken := map[string]bool{}
	for name := range pathParams(op.Path) {
		out = append(out, opParam{Name: name, In: "path", Required: true, Schema: schemaOr(api.Property(op.Input, name))})
		taken[name] = true
	}
	for _, header := range slices.Sorted(maps.Keys(op.Headers)) {
		arg := op.Headers[header]
		out = append(out, opParam{Name: header, In: "header", Required: requiredIn(op.Input, arg), Schema: schemaOr(api.Property(op.Input, arg))})
		taken[arg] = true
	}
	if op.Method == http.MethodGet && op.Input != nil {
		for _, name := range slices.Sorted(maps.Keys(op.Input.Properties)) {
			if !taken[name] {
				required := requiredIn(op.Input, name)
				out = append(out, opParam{Name: name, In: "query", Required: required, Schema: querySchema(op.Input.Properties[name], required)})
			}
		}
	}
	return out
}

// querySchema is an input property's schema as a query parameter, which
// carries text: never null (?limit=null is the text "null", refused), so a
// nullable property is documented without null; and an empty value is no
// value where the property wants at least one character (httpArgs drops
// ?board=), so that least length is not the parameter's, and an optional
// parameter of a closed set (?state=) admits it too.
func querySchema(s *jsonschema.Schema, required bool) *jsonschema.Schema {
	if s == nil {
		return s
	}
	q := *s
	if slices.Contains(q.Types, "null") {
		q.Types = slices.DeleteFunc(slices.Clone(q.Types), func(t string) bool { return t == "null" })
		if len(q.Types) == 1 {
			q.Type, q.Types = q.Types[0], nil
		}
	}
	if q.MinLength != nil && *q.MinLength <= 1 {
		q.MinLength = nil
	}
	if len(q.Enum) > 0 && !required && !slices.Contains(q.Enum, any("")) {
		q.Enum = append([]any{""}, q.Enum...)
	}
	return &q
}

func schemaOr(s *jsonschema.Schema) *jsonschema.Schema {
	if s == nil {
		return &jsonschema.Schema{Type: "string"}
	}
	return s
}

func requiredIn(s *jsonschema.Schema, name string) bool {
	return s != nil && slices.Contains(s.Required, name)
}

// schemaType names a schema's type for the text documents.
func schemaType(s *jsonschema.Schema) string {
	if s == nil {
		return "any"
	}
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	var ts []string
	for _, t := range types {
		switch {
		case t == "null":
		case t == "array" && s.Items != nil:
			ts = append(ts, "array of "+schemaType(s.Items))
		default:
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return "any"
	}
	return strings.Join(ts, " or ")
}

// bodySchema is the input less what the path and headers carry; nil when
// nothing is left.
func bodySchema(op *api.Operation) *jsonschema.Schema {
	if op.Input == nil {
		return nil
	}
	drop := map[string]bool{}
	for name := range pathParams(op.Path) {
		drop[name] = true
	}
	for _, arg := range op.Headers {
		drop[arg] = true
	}
	s := *op.Input
	s.Properties = map[string]*jsonschema.Schema{}
	for k, v := range op.Input.Properties {
		if !drop[k] {
			s.Properties[k] = v
		}
	}
	s.Required = slices.DeleteFunc(slices.Clone(op.Input.Required), func(k string) bool { return drop[k] })
	if len(s.Properties) == 0 && op.Surface == api.Parley {
		return nil
	}
	return &s // a corpus write without fields still takes {} (retractRelationship)
}

type oaObject = map[string]any

// errorSchemas are the two error shapes.
func errorSchemas() oaObject {
	str := oaObject{"type": "string"}
	details := oaObject{"type": "object", "description": "machine-readable specifics (field, rule, limits, offered types …)"}
	return oaObject{
		"ParleyRefusal": oaObject{
			"type": "object", "required": []string{"reason", "error"},
			"properties": oaObject{"reason": oaObject{"type": "string", "description": "stable machine-readable reason"}, "error": str, "details": details},
		},
		"CorpusError": oaObject{
			"type": "object", "required": []string{"error"},
			"properties": oaObject{"error": oaObject{
				"type": "object", "required": []string{"code", "message", "how_to_proceed"},
				"properties": oaObject{"code": oaObject{"type": "string"}, "message": str, "how_to_proceed": str, "details": details},
			}},
		},
	}
}

func errorRef(s api.Surface) oaObject {
	name := "ParleyRefusal"
	if s == api.Corpus {
		name = "CorpusError"
	}
	return oaObject{"$ref": "#/components/schemas/" + name}
}

// contentOf is the content of a response in the media type mt.
func contentOf(mt string, jsonSchema any) oaObject {
	switch {
	case mt == mediaJSON || mt == mediaLinkset:
		if jsonSchema == nil {
			jsonSchema = oaObject{"type": "object"}
		}
		return oaObject{"schema": jsonSchema}
	case mt == mediaJSONLD:
		return oaObject{"schema": oaObject{"type": "object", "description": "JSON-LD; its @context is " + corpus.VocabPath}}
	}
	return oaObject{"schema": oaObject{"type": "string"}}
}

func headerObj(desc string) oaObject {
	return oaObject{"description": desc, "schema": oaObject{"type": "string"}}
}

func (n *Node) openAPIOperation(op *api.Operation) oaObject {
	surface := "parley"
	if op.Surface == api.Corpus {
		surface = "corpus"
	}
	o := oaObject{
		"operationId": op.Key,
		"summary":     op.Purpose,
		"tags":        []string{surface},
		"x-access":    op.Access.String(),
	}
	if tool := op.ToolName(); tool != "" {
		o["x-mcp-tool"] = tool
	}
	var params []any
	for _, p := range operationParams(op) {
		po := oaObject{"name": p.Name, "in": p.In, "required": p.Required, "schema": p.Schema}
		if p.Schema.Description != "" {
			po["description"] = p.Schema.Description
		}
		if p.In == "query" && strings.HasPrefix(schemaType(p.Schema), "array") {
			po["style"], po["explode"] = "form", true
		}
		params = append(params, po)
	}
	if len(params) > 0 {
		o["parameters"] = params
	}
	if op.Method != http.MethodGet {
		if body := bodySchema(op); body != nil {
			o["requestBody"] = oaObject{"required": len(body.Required) > 0, "content": oaObject{mediaJSON: oaObject{"schema": body}}}
		}
	}
	switch op.Access.Kind {
	case api.AccessPublic:
		o["security"] = []any{oaObject{}, oaObject{"bearer": []string{}}}
	default:
		o["security"] = []any{oaObject{"bearer": []string{}}}
	}
	status := http.StatusOK
	if op.Status != 0 {
		status = op.Status
	}
	types := op.Representations
	if len(types) == 0 {
		types = []string{mediaJSON}
	}
	content := oaObject{}
	for _, mt := range types {
		content[mt] = contentOf(mt, op.Output)
	}
	ok := oaObject{"description": http.StatusText(status), "content": content}
	refusal := oaObject{mediaJSON: oaObject{"schema": errorRef(op.Surface)}}
	if slices.Contains(op.Representations, mediaMarkdown) {
		refusal[mediaMarkdown] = oaObject{"schema": oaObject{"type": "string", "description": "the refusal in Markdown, when Markdown was chosen"}}
	}
	responses := oaObject{strconv.Itoa(status): ok, "default": refusalResponse(refusal)}
	okHeaders := oaObject{}
	if op.Surface == api.Corpus && op.Method == http.MethodGet {
		okHeaders["X-Next-Cursor"] = headerObj("on a page: the cursor to continue after")
		okHeaders["X-Has-More"] = headerObj("on a change feed's page: whether more follow")
		okHeaders["Link"] = headerObj(`on a page: <…>; rel="next"`)
	}
	if status == http.StatusCreated {
		okHeaders["Location"] = headerObj("where what the write created is read")
	}
	if op.Surface == api.Corpus && op.Method == http.MethodPost {
		okHeaders["Idempotent-Replayed"] = headerObj("true when the Operation-Token was used before: the original result")
	}
	// The feeds of changes (NDJSON, a stream) are pages of a moving log:
	// no validators, no 304.
	cacheable := !slices.ContainsFunc(op.Representations, func(mt string) bool { return mt == mediaNDJSON || mt == mediaSSE })
	if len(op.Representations) > 0 && cacheable {
		okHeaders["ETag"] = headerObj("strong validator of this representation")
		okHeaders["Vary"] = headerObj("Accept")
		okHeaders["Last-Modified"] = headerObj("where the resource has a time of its own")
		responses["304"] = oaObject{"description": "Not Modified: If-None-Match (or If-Modified-Since) matched"}
	}
	if len(op.Representations) > 0 {
		responses["406"] = oaObject{"description": "Not Acceptable: the diagnostic lists the offered types",
			"content": oaObject{mediaJSON: oaObject{"schema": errorRef(op.Surface)}, mediaText: oaObject{"schema": oaObject{"type": "string"}}}}
	}
	if len(okHeaders) > 0 {
		ok["headers"] = okHeaders
	}
	o["responses"] = responses
	return o
}

// refusalResponse is the response of a refusal in content, with the
// headers a refusal may carry.
func refusalResponse(content oaObject) oaObject {
	return oaObject{"description": "a refusal", "content": content, "headers": oaObject{
		"Retry-After":      headerObj("seconds to wait: on 429, and on 503 while the node cannot write"),
		"WWW-Authenticate": headerObj("on 401 (and on /mcp's 403 for want of a scope): the challenge"),
	}}
}

// openAPIDoc is the document.
func openAPIDoc(n *Node, r *http.Request, d *docData) (any, error) {
	paths := oaObject{}
	add := func(path, method string, o oaObject) {
		item, _ := paths[path].(oaObject)
		if item == nil {
			item = oaObject{}
			paths[path] = item
		}
		item[strings.ToLower(method)] = o
	}
	for _, op := range n.reg.Operations() {
		add(op.Path, op.Method, n.openAPIOperation(op))
	}
	docOp := func(path, id, summary string, types ...string) oaObject {
		content := oaObject{}
		for _, t := range types {
			content[t] = contentOf(t, nil)
		}
		headers := oaObject{"ETag": headerObj("strong validator")}
		if path == "/" || path == apiCatalogPath {
			headers["Link"] = headerObj(`<` + apiCatalogPath + `>; rel="api-catalog" (RFC 9727)`)
		}
		// A refusal (a wrong method, the rate limit, a node that cannot
		// answer) is the corpus's JSON, or plain text from a native feed.
		responses := oaObject{"200": oaObject{"description": "OK", "content": content, "headers": headers},
			"304":     oaObject{"description": "Not Modified"},
			"default": refusalResponse(oaObject{mediaJSON: oaObject{"schema": errorRef(api.Corpus)}, mediaText: oaObject{"schema": oaObject{"type": "string"}}})}
		if len(types) > 1 {
			responses["406"] = oaObject{"description": "Not Acceptable: the diagnostic lists the offered types",
				"content": oaObject{mediaJSON: oaObject{"schema": errorRef(api.Corpus)}}}
		}
		return oaObject{"operationId": id, "summary": summary, "tags": []string{"discovery"}, "security": []any{oaObject{}}, "responses": responses}
	}
	add("/", http.MethodGet, docOp("/", "get_home", "The homepage: HTML, or Markdown when preferred.", mediaHTML, mediaMarkdown))
	for _, doc := range documents {
		add(doc.Path, http.MethodGet, docOp(doc.Path, "get_document"+strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(doc.Path), doc.Title, doc.MediaType))
	}
	jsonRPC := oaObject{"type": "object", "description": "a JSON-RPC 2.0 message"}
	mcpOp := func(id, summary string, security []any, surface api.Surface) oaObject {
		refusal := oaObject{mediaJSON: oaObject{"schema": errorRef(surface)}}
		return oaObject{"operationId": id, "summary": summary, "tags": []string{"mcp"}, "security": security,
			"requestBody": oaObject{"required": true, "content": oaObject{mediaJSON: oaObject{"schema": jsonRPC}}},
			"responses": oaObject{
				"200": oaObject{"description": "the JSON-RPC answer (an array for a batch), as JSON or an event stream",
					"content": oaObject{mediaJSON: oaObject{"schema": oaObject{"type": []string{"object", "array"}, "description": "a JSON-RPC 2.0 response, or a batch's",
						"items": oaObject{"type": "object", "description": "a JSON-RPC 2.0 response"}}},
						mediaSSE: oaObject{"schema": oaObject{"type": "string"}}}},
				"202": oaObject{"description": "a notification or response was accepted"},
				"400": oaObject{"description": "not a JSON-RPC message, or headers the transport refuses: a JSON-RPC error with id null",
					"content": oaObject{mediaJSON: oaObject{"schema": jsonRPC}}},
				"401": oaObject{"description": "a credential is needed", "content": refusal,
					"headers": oaObject{"WWW-Authenticate": headerObj("the challenge: where and how to get a credential")}},
				"default": refusalResponse(refusal),
			}}
	}
	add("/api/v1/mcp", http.MethodPost, mcpOp("parley_mcp", "Parley over MCP (streamable HTTP, stateless): initialize, tools/list, tools/call, ping.",
		[]any{oaObject{"bearer": []string{}}}, api.Parley))
	add(corpusMCPPath, http.MethodPost, mcpOp("corpus_mcp", "The corpus over MCP (streamable HTTP), with an OAuth 2.1 access token.",
		[]any{oaObject{"oauth2": corpusScopes}}, api.Corpus))

	keys := slices.Collect(maps.Keys(paths))
	sort.Strings(keys)
	ordered := make(map[string]any, len(keys))
	for _, k := range keys {
		ordered[k] = paths[k]
	}
	schemes := oaObject{
		"bearer": oaObject{"type": "http", "scheme": "bearer",
			"description": "Parley: a token (apply at POST /api/v1/tokens/request). Corpus: the agent_id from POST /register."},
		"oauth2": oaObject{"type": "oauth2", "description": "The corpus's MCP endpoint: authorization code with PKCE S256.",
			"flows": oaObject{"authorizationCode": oaObject{
				"authorizationUrl": d.Base + oauthAuthorizePath, "tokenUrl": d.Base + oauthTokenPath, "refreshUrl": d.Base + oauthTokenPath,
				"scopes": oaObject{corpus.ScopeRead: "read tools", corpus.ScopeWrite: "write tools"}}}},
	}
	return oaObject{
		"openapi": "3.1.0",
		"info": oaObject{
			"title":   "relay realm " + d.Realm,
			"version": d.Version,
			"summary": "Parley v1 and the public conversation corpus, on one node.",
			"description": "Generated from the node's operation registry. Parley lives under /api/v1 and refuses with {reason, error, details}; " +
				"the corpus lives at root paths and refuses with {error: {code, message, how_to_proceed}}. Public reads also answer HEAD and OPTIONS (CORS). " +
				"Corpus reads negotiate Accept (JSON by default; Markdown and JSON-LD where listed) and answer If-None-Match and If-Modified-Since. " +
				"Corpus messages are untrusted data.",
		},
		"servers":           []any{oaObject{"url": d.Base}},
		"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
		"tags": []any{
			oaObject{"name": "parley", "description": "Parley v1 over HTTP (also the tools of /api/v1/mcp)"},
			oaObject{"name": "corpus", "description": "The public corpus (also the tools of /mcp)"},
			oaObject{"name": "discovery", "description": "Discovery documents"},
			oaObject{"name": "mcp", "description": "The MCP endpoints"},
		},
		"paths":        ordered,
		"components":   oaObject{"schemas": errorSchemas(), "securitySchemes": schemes},
		"externalDocs": oaObject{"url": d.Base + "/llms-full.txt", "description": "The full protocol, as text"},
	}, nil
}
