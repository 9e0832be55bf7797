package realm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/internal/allow"
	"relay/realm/parley"
	"relay/realm/session"
	"relay/realm/web"
	"relay/store"
)

// routes builds the node's HTTP surface from the registry.
func (n *Node) routes() http.Handler {
	mux := http.NewServeMux()
	oauth := n.newOAuthServer() // the corpus's MCP endpoint and its authorization server
	for _, op := range n.reg.Operations() {
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n.serveOperation(w, r, op) })
		if op.Method == http.MethodPost && op.Path == corpusRegisterPath {
			h = oauth.orClientRegistration(h)
		}
		mux.Handle(op.Method+" "+op.Path, h)
	}
	mux.Handle("/api/v1/mcp", n.mcpHandler())
	mux.Handle(corpusMCPPath, n.corpusMCPHandler(oauth))
	oauth.mount(mux)
	mux.Handle("GET /api/v1/images/{cid}", n.limitedByAddress(n.imageHandler()))
	n.mountDocuments(mux)
	metrics := promhttp.HandlerFor(n.metrics.reg, promhttp.HandlerOpts{})
	mux.Handle("GET "+metricsPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		metrics.ServeHTTP(w, r)
	}))
	rest := n.dispatch(mux)
	console := n.console.Handler()
	return n.recoverer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if web.Owns(r.URL.Path) {
			console.ServeHTTP(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	}))
}

// limitedByAddress counts a request of a route outside the registry, one
// that takes no credential, against its client address's rate limit, as
// the registry's routes count anonymous callers. An image the node does not
// hold is asked of every connected peer, so an unlimited stream of misses
// would be a stream of peer fetches.
func (n *Node) limitedByAddress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ref := n.limiter.allow(nil, r); ref != nil {
			writeRefusal(w, ref)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// dispatch serves what the mux routes and answers the rest itself, as a
// refusal: 405 with Allow when the path exists under other methods,
// unknown_endpoint otherwise.
func (n *Node) dispatch(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		methods := allow.Of(mux, r, "")
		surface := api.Corpus
		if strings.HasPrefix(r.URL.Path, "/api/") {
			surface = api.Parley
		}
		if hasCORS(r.URL.Path) {
			setCORS(w.Header())
		}
		if len(methods) > 0 {
			methods = append(methods, http.MethodOptions)
			if r.Method == http.MethodOptions {
				writePreflight(w, r, methods)
				return
			}
			w.Header().Set("Allow", strings.Join(methods, ", "))
			writeRefusalAs(w, protocol.Refusef(protocol.ReasonMethodNotAllowed, "%s is not allowed on %s; allowed: %s.", r.Method, r.URL.Path, strings.Join(methods, ", ")), surface)
			return
		}
		if surface == api.Corpus {
			writeRefusalAs(w, protocol.Refusef(protocol.ReasonNotFound, "No resource %s %s; see /llms.txt.", r.Method, r.URL.Path), surface)
			return
		}
		writeRefusal(w, protocol.Refusef(protocol.ReasonUnknownEndpoint, "No endpoint %s %s; see GET /api/v1/operations.", r.Method, r.URL.Path))
	})
}

func (n *Node) serveOperation(w http.ResponseWriter, r *http.Request, op *api.Operation) {
	start := time.Now()
	status := http.StatusOK
	defer func() { n.metrics.observe(op.Key, "http", status, time.Since(start)) }()

	if op.Surface == api.Corpus {
		setCORS(w.Header())
	}
	if op.Method != http.MethodGet || op.Access.Kind != api.AccessPublic {
		// A write's answer, or a read for one caller (tokens, an inbox,
		// over a session cookie too), is never kept by a cache.
		w.Header().Set("Cache-Control", "no-store")
	}
	// A read that declares its representations picks one first, so that
	// even its errors come in it.
	var mt string
	if len(op.Representations) > 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		w.Header().Add("Vary", "Accept")
		var ok bool
		if mt, ok = negotiate(r.Header.Get("Accept"), op.Representations); !ok {
			if _, ok = negotiate(r.Header.Get("Accept"), op.AcceptAlso); !ok {
				status = writeNotAcceptable(w, op.Representations, op.Surface)
				return
			}
			mt = op.Representations[0]
		}
	}
	refuse := func(err error) {
		if mt == mediaMarkdown {
			status = writeRefusalMarkdown(w, api.InSurface(op, err))
			return
		}
		status = writeRefusalAs(w, api.InSurface(op, err), op.Surface)
	}
	p, err := n.authenticate(r, op.Surface)
	if err != nil {
		refuse(n.refusedCredential(r, err))
		return
	}
	adm, ref := n.limiter.allow(p, r)
	if ref != nil {
		refuse(ref)
		return
	}
	if op.Surface == api.Parley {
		// Who may call is said before what is wrong with the body, as
		// it is before the body's schema (Registry.Invoke): a broken
		// body without a token is unauthenticated, not invalid_json.
		if err := api.Authorize(p, op.Access); err != nil {
			refundRejected(adm, op, err)
			refuse(err)
			return
		}
	}
	args, err := n.httpArgs(w, r, op)
	if err != nil {
		refundRejected(adm, op, err)
		refuse(err)
		return
	}
	out, err := n.reg.Invoke(r.Context(), p, op, args)
	if err != nil {
		ref := n.safe(err, op.Key)
		refundRejected(adm, op, ref)
		refuse(ref)
		return
	}
	status = http.StatusOK
	if op.Status != 0 {
		status = op.Status
	}
	if h, ok := out.(interface{ HTTPHeaders() http.Header }); ok {
		for k, v := range h.HTTPHeaders() {
			w.Header()[k] = v
		}
	}
	if l, ok := out.(interface{ Location() string }); ok && status == http.StatusCreated {
		// What a 201 created (RFC 9110, section 15.3.2); without it a
		// client would take the write's endpoint for it.
		if loc := l.Location(); loc != "" {
			w.Header().Set("Location", loc)
		}
	}
	if mt != "" {
		rep, ok, err := render(r, n.baseURL(r), out, mt)
		if err != nil {
			refuse(n.safe(err, op.Key))
			return
		}
		if ok {
			status = rep.write(w, r, status)
			return
		}
		w.Header().Set("Content-Signal", contentSignal) // the result writes its own body
	}
	if b, ok := out.(httpBody); ok {
		if err := b.WriteHTTP(w, r); err != nil {
			w.Header().Del("Content-Signal")
			refuse(n.safe(err, op.Key))
		}
		return
	}
	writeJSON(w, status, out)
}

// httpBody is a result that writes its own response (NDJSON, Server-Sent
// Events) while the registry still routes, authorizes, rate-limits and
// catalogs its operation. An error means nothing was written: it is
// rendered as the operation's refusal.
type httpBody interface {
	WriteHTTP(w http.ResponseWriter, r *http.Request) error
}

// authenticate resolves the request's bearer credential: a Parley token,
// or on the corpus's routes also a corpus agent_id. No credential is an
// anonymous caller; a bad one is refused.
func (n *Node) authenticate(r *http.Request, surface api.Surface) (*api.Principal, error) {
	bad := protocol.ReasonUnauthenticated
	if surface == api.Corpus {
		bad = protocol.ReasonUnauthorized
	}
	tok, ok := bearer(r)
	if !ok {
		if r.Header.Get("Authorization") != "" {
			return nil, protocol.Refusef(bad, "Authorization must be: Bearer <credential>.")
		}
		if surface == api.Parley {
			return n.sessionPrincipal(r)
		}
		return nil, nil
	}
	if surface == api.Corpus && n.corpus != nil {
		if p, handled, err := n.corpus.Authenticate(tok); handled {
			return p, err
		}
	}
	p, err := n.auth.Authenticate(tok)
	if err != nil && surface == api.Corpus {
		return nil, protocol.Refuse(bad)
	}
	return p, err
}

// sessionPrincipal resolves the human's browser session on a Parley route:
// the human, as with the operator secret, but every unsafe method must
// carry the session's CSRF token in x-csrf-token (the seed's csrf). A
// request without a live session is anonymous.
func (n *Node) sessionPrincipal(r *http.Request) (*api.Principal, error) {
	c, err := r.Cookie(session.CookieName)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	if _, err := n.sessions.Resolve(r.Context(), c.Value); err != nil {
		if errors.Is(err, session.ErrNoSession) {
			return nil, nil
		}
		return nil, err
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if !session.CheckCSRF(c.Value, r.Header.Get(session.CSRFHeader)) {
			return nil, protocol.Refuse(protocol.ReasonCSRF)
		}
	}
	p := n.auth.human()
	if p == nil {
		return nil, protocol.Refuse(protocol.ReasonUnauthenticated)
	}
	return p, nil
}

// httpArgs gathers an operation's arguments: path parameters, then the query
// string (GET) or the JSON body (other methods). Path parameters win.
func (n *Node) httpArgs(w http.ResponseWriter, r *http.Request, op *api.Operation) (json.RawMessage, error) {
	args := map[string]any{}
	// What the path and the headers set or remove, over the body or query.
	over, overOK := overlayArgs(r, op)
	if !overOK {
		return nil, protocol.Refusef(protocol.ReasonInvalidBody, "A path parameter or a header is not UTF-8 text.")
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		for name, vals := range r.URL.Query() {
			prop := api.Property(op.Input, name)
			if prop == nil {
				continue // unknown query parameters are ignored, as caches and proxies add them
			}
			if !slices.ContainsFunc(vals, func(v string) bool { return v != "" }) && (prop.MinLength != nil || len(prop.Enum) > 0) {
				continue // ?board= is no board, not an empty one; ?state= no state
			}
			if slices.ContainsFunc(vals, func(v string) bool { return !utf8.ValidString(v) }) {
				return nil, protocol.Refusef(protocol.ReasonInvalidBody, "The query parameter %q is not UTF-8 text.", name).With("field", name)
			}
			args[name] = api.ArgValue(prop, vals)
		}
	} else {
		if op.Surface == api.Corpus && r.ContentLength != 0 {
			switch mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); {
			case r.Header.Get("Content-Type") == "":
				return nil, protocol.Refusef(protocol.ReasonUnsupportedMediaType, "Write requests are application/json: send Content-Type: application/json with the body.")
			case mt != "application/json":
				return nil, protocol.Refusef(protocol.ReasonUnsupportedMediaType, "Write requests are application/json, not %q.", mt)
			}
		}
		if ref := contentCoded(r); ref != nil {
			return nil, ref
		}
		if r.ContentLength > n.cfg.MaxBodyBytes {
			return nil, n.bodyTooLarge(op.Surface)
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, n.cfg.MaxBodyBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return nil, n.bodyTooLarge(op.Surface)
			}
			return nil, protocol.Refusef(protocol.ReasonInvalidBody, "The body could not be read.")
		}
		if ref := api.CheckText(body); ref != nil {
			return nil, ref
		}
		if len(bytes.TrimSpace(body)) > 0 {
			// Most bodies are flat objects: written as the decode and
			// marshal below would write them, without either.
			if b, ok := flatArgs(body, over); ok {
				return b, nil
			}
			obj, err := protocol.DecodeIJSON(body)
			switch {
			case errors.Is(err, protocol.ErrDuplicateMember):
				return nil, api.NotJSON(err)
			case err != nil:
				return nil, protocol.Refuse(protocol.ReasonInvalidJSON)
			}
			m, ok := obj.(map[string]any)
			if !ok {
				return nil, protocol.Refusef(protocol.ReasonInvalidBody, "The body must be a JSON object.").With("rule", "type")
			}
			args = m
		}
	}
	for _, o := range over {
		if o.val == nil {
			delete(args, o.key)
		} else {
			args[o.key] = json.RawMessage(o.val) // marshalled as it is: compact, escaped
		}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, protocol.Refuse(protocol.ReasonInvalidBody)
	}
	return b, nil
}

// contentCoded refuses a request body sent with a content coding: the node
// decodes none, and reading the coded bytes as the JSON they encode would
// refuse them as text they are not (or take them when they happen to be
// JSON, the label aside). identity is no coding.
func contentCoded(r *http.Request) *protocol.Refusal {
	for _, v := range r.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				ref := protocol.Refusef(protocol.ReasonUnsupportedMediaType, "Content-Encoding %q is not taken: send the JSON body uncompressed, without Content-Encoding.", c).With("header", "Content-Encoding")
				ref.HowTo = "Send the body uncompressed, without Content-Encoding."
				return ref
			}
		}
	}
	return nil
}

// pathParams yields the names of a ServeMux pattern path's wildcards, in
// order; it allocates nothing, as every request with a path argument
// reads them.
func pathParams(path string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for seg := range strings.SplitSeq(path, "/") {
			if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
				if !yield(strings.TrimSuffix(strings.TrimSuffix(seg[1:len(seg)-1], "..."), "$")) {
					return
				}
			}
		}
	}
}

// safe turns any error into what a client may see, logging what it may not.
func (n *Node) safe(err error, op string) *protocol.Refusal {
	var ref *protocol.Refusal
	if errors.As(err, &ref) {
		return ref
	}
	if errors.Is(err, store.ErrClosed) {
		return protocol.Refuse(protocol.ReasonUnavailable)
	}
	if errors.Is(err, store.ErrDiskFull) {
		ref := protocol.Refusef(protocol.ReasonUnavailable, "The node's disk is nearly full: writes are refused until the operator frees space; reads still work.").
			With("retry_after_seconds", 60)
		ref.HowTo = "Retry later; reads still work."
		return ref
	}
	if errors.Is(err, store.ErrAuthoringHeld) {
		return protocol.Refusef(protocol.ReasonUnavailable, "This realm's new events wait until its chain was compared with its peers' (after a restore, or a start on an older copy of its store). Retry shortly.").
			With("retry_after_seconds", 5)
	}
	if errors.Is(err, session.ErrBusy) {
		return protocol.Refusef(protocol.ReasonUnavailable, "Too many passwords are being checked at once; try again in a few seconds.").
			With("retry_after_seconds", 5)
	}
	if errors.Is(err, store.ErrFailed) {
		// Once a minute at most: every write is refused the same way
		// until the restart, and a busy node would log each one.
		if now := time.Now().UnixNano(); now-n.failLogged.Load() > int64(time.Minute) {
			n.failLogged.Store(now)
			n.log.Error("store failed: writes refused until the node is restarted", "op", op, "err", err)
		}
		ref := protocol.Refusef(protocol.ReasonUnavailable, "The node's store failed a write and refuses writes until the operator restarts the node; reads still work.")
		ref.HowTo = "Do not retry until the node has been restarted; reads still work."
		return ref
	}
	n.log.Error("operation failed", "op", op, "err", err)
	return protocol.Refuse(protocol.ReasonInternal)
}

// writeRefusal renders a refusal as Parley does.
func writeRefusal(w http.ResponseWriter, err error) int { return writeRefusalAs(w, err, api.Parley) }

// corpusError is the corpus's error body.
type corpusError struct {
	Error corpusErrorBody `json:"error"`
}

type corpusErrorBody struct {
	Code         protocol.Reason `json:"code"`
	Message      string          `json:"message"`
	HowToProceed string          `json:"how_to_proceed"`
	Details      map[string]any  `json:"details,omitempty"`
}

// corpusBody is a refusal in the corpus's shape.
func corpusBody(ref *protocol.Refusal) corpusError {
	return corpusError{Error: corpusErrorBody{Code: ref.Reason, Message: ref.Message, HowToProceed: ref.HowToProceed(), Details: ref.Details}}
}

// writeRefusalAs renders a refusal (or any error, as internal) in the shape
// of the operation's protocol, and returns the status written.
func writeRefusalAs(w http.ResponseWriter, err error, surface api.Surface) int {
	ref := asRefusal(err)
	status := ref.Status()
	refusalHeaders(w, ref)
	if surface == api.Corpus {
		writeJSON(w, status, corpusBody(ref))
	} else {
		writeJSON(w, status, ref)
	}
	return status
}

// asRefusal is err as a refusal; any other error is internal.
func asRefusal(err error) *protocol.Refusal {
	var ref *protocol.Refusal
	if !errors.As(err, &ref) {
		ref = protocol.Refuse(protocol.ReasonInternal)
	}
	return ref
}

// refusalHeaders sets the headers a refusal carries in every rendering.
func refusalHeaders(w http.ResponseWriter, ref *protocol.Refusal) {
	switch ref.Reason {
	case protocol.ReasonUnauthenticated, protocol.ReasonTokenRequired, protocol.ReasonUnauthorized:
		// Every 401 names its scheme (RFC 9110, section 11.6.1); /mcp
		// sets a challenge of its own first.
		if w.Header().Get("WWW-Authenticate") == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="relay"`)
		}
	case protocol.ReasonRateLimited, protocol.ReasonUnavailable:
		if secs, ok := ref.Details["retry_after_seconds"].(int); ok {
			w.Header().Set("Retry-After", strconv.Itoa(secs))
		}
	}
}

// writeJSON writes v without HTML escaping: clients count bytes of what
// JSON.stringify would give.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := jsonBuffers.Get().(*bytes.Buffer)
	defer putJSONBuffer(buf)
	buf.Reset()
	if a, ok := v.(jsonAppender); ok {
		if b, ok := a.AppendJSON(buf.AvailableBuffer()); ok {
			buf.Write(append(b, '\n'))
		}
	}
	if buf.Len() == 0 {
		enc := json.NewEncoder(buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			status = http.StatusInternalServerError
			buf.Reset()
			buf.WriteString(`{"reason":"internal","error":"Internal error; the operator's log has the details."}` + "\n")
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// jsonAppender is a result that appends its own JSON, byte for byte what
// writeJSON's encoder writes but its newline, when ok: a post's answer
// (parley.PostOut), which every post pays for.
type jsonAppender interface {
	AppendJSON(b []byte) (_ []byte, ok bool)
}

// jsonBuffers are writeJSON's buffers: the response writer copies what it
// is given.
var jsonBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func putJSONBuffer(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 { // a big answer does not pin a big buffer
		jsonBuffers.Put(b)
	}
}

// recoverer keeps a panic in one request from taking down the node.
func (n *Node) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				n.log.Error("panic in handler", "path", r.URL.Path, "panic", v)
				writeRefusal(w, protocol.Refuse(protocol.ReasonInternal))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// errBodyLimit is the cause of every refusal of a request body over
// Config.MaxBodyBytes: such a write is not refunded (refundRejected).
var errBodyLimit = errors.New("request body over the limit")

// bodyTooLarge refuses a request body over the node's limit, in the
// words of the surface: Parley's payload_too_large ("body too big"); the
// corpus's message_too_large, since its payload_too_large names the
// 65,536-byte limit of a message's payload, and a body this large is far
// over the 102,400 bytes of a whole event.
func (n *Node) bodyTooLarge(surface api.Surface) *protocol.Refusal {
	reason := protocol.ReasonPayloadTooLarge
	if surface == api.Corpus {
		reason = protocol.ReasonMessageTooLarge
	}
	ref := protocol.Refusef(reason, "The request body is over %d bytes.", n.cfg.MaxBodyBytes).With("limit_bytes", n.cfg.MaxBodyBytes)
	ref.Cause = errBodyLimit
	return ref
}

// imageHandler serves uploaded images, answering a conditional GET for one
// held here with 304: content-addressed, a client that holds its tag
// holds its bytes.
func (n *Node) imageHandler() http.Handler {
	images := n.parley.ImageHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if inm := r.Header.Values("If-None-Match"); len(inm) > 0 {
			c, err := protocol.ParseBlobCID(r.PathValue("cid"))
			if etag := parley.ImageETag(c); err == nil && etagListMatches(strings.Join(inm, ","), etag) && n.parley.HasImage(c) {
				h := w.Header()
				h.Set("Cache-Control", "public, max-age=31536000, immutable")
				h.Set("ETag", etag)
				h.Set("X-Content-Type-Options", "nosniff")
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		images.ServeHTTP(w, r)
	})
}
