// Package realm is one realm node: the operation registry and the transports
// generated from it (HTTP under /api/v1 and at the corpus's paths, MCP at
// /api/v1/mcp for Parley and at /mcp for the corpus, the operation catalog),
// credentials and rights, the corpus's OAuth 2.1 authorization server
// (oauth.go), the wiring of store and federation, and export and import of a
// node's event log (export.go, over realm/backup).
//
// # Invariants
//
//   - Every operation is one row of the api.Registry. HTTP routes, MCP tools,
//     list_api_operations, get_api_operation, call_api_operation and the
//     manifest's endpoints all come from it; nothing is routed by hand.
//   - Rights are checked in api.Registry.call and nowhere else. A handler never
//     knows which transport called it.
//   - A write is acknowledged only after store.Submit returned: it is durable.
//   - Secrets are stored as SHA-256 hashes and compared in constant time; the
//     secret of a credential is shown once, when it is issued.
//   - What a client sees of an error is a protocol.Refusal; anything else is
//     logged and answered with reason "internal".
//   - The human's browser session (realm/session) is the human on the Parley
//     routes only, never on MCP (token_required), and every unsafe method
//     over it carries the session's CSRF token (csrf). The console
//     (realm/web, everything under /console/) is one more transport of the
//     registry: it reads and writes only through Registry.Call.
//   - Accept, If-None-Match and If-Modified-Since are read in negotiate.go
//     and nowhere else: for the operations that declare Representations and
//     for the discovery documents (discovery.go), which are rendered from the
//     registry per request, never written by hand.
//
// # Tricky bits
//
//   - MCP runs stateless: the SDK makes a temporary session per request, so
//     the principal travels in the request context, set by the HTTP layer
//     before the SDK sees the request.
//   - Refusals from tools fit the tool's output schema: the MCP layer
//     advertises each output schema as anyOf(success, refusal), because
//     official clients validate structuredContent even when isError is true.
//   - /mcp checks the OAuth grant's scope per tool before the registry call
//     (corpusmcp.go): the corpus's reads are public over HTTP, but over MCP
//     the seed gates reads by toastmachine:read and writes by
//     toastmachine:write. The write handlers check the write scope again.
//   - An import is all or nothing: it builds the node in
//     DataDir/import.partial and removing that directory is its commit
//     point, so Open refuses a data directory that still has one. The
//     services' numbering counters are local, not in the log: Parley's
//     Bootstrap raises them to the log's highest numbers at every start.
//   - retrieval_size counts the bytes of JSON.stringify: marshalJSON writes
//     no HTML escapes and leaves U+2028 and U+2029 unescaped, and the same
//     bytes are the structuredContent and the text.
package realm
