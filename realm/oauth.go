package realm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/corpus"
	secretpkg "relay/realm/secret"
	"relay/store"
)

// The authorization server of the corpus's MCP endpoint (/mcp): OAuth 2.1
// authorization code with PKCE, small and strict.
//
//   - S256 only; a request without a challenge, or with plain, is refused.
//   - Redirect URIs are compared exactly with the registered ones, and only
//     https or http on a loopback host may be registered.
//   - /oauth/authorize redirects at once, without consent, so anyone who
//     knows a client's id and redirect URI can start an authorization and
//     read its code off the redirect. A public client (auth method none)
//     proves nothing more at the token endpoint, so each of its
//     authorizations is a grant with a corpus identity of its own, made
//     when its code is exchanged and kept by its refresh tokens: such an
//     authorization gains nobody another's identity. A confidential client
//     proves its secret: its grants share the client's identity, created
//     on its first authorization.
//   - Codes are single use and live 60 s; presenting one consumes it, and
//     presenting a consumed one revokes every token of its grant: those
//     issued with it and those refreshed from them.
//   - The RFC 8707 resource is the node's /mcp URL, bound to every code and
//     token; /mcp accepts a token only for its own URL (audience), and only
//     its own tokens: an agent_id or a Parley token is refused there, and
//     these tokens open nothing else. Nothing is passed through.
//   - Access tokens live an hour; refresh tokens rotate on use, and one
//     presented again after its rotation (the client and someone else
//     both hold it) revokes every token of its grant.
//   - Clients, codes and tokens are local tables of the store, secrets as
//     SHA-256 hashes compared in constant time:
//
//	l/oauth/client/<client_id>   oauthClient
//	l/oauth/code/<id>            oauthCode
//	l/oauth/access/<id>          oauthToken
//	l/oauth/refresh/<id>         oauthToken
//
// The endpoints live under /oauth/ so they do not clash with the corpus's
// POST /register; the authorization-server metadata advertises them.
// /register takes client metadata too, as the seed's MCP host's does.
// /authorize and /token, the paths the seed names, answer as well. The
// node's URL is taken from the request (Host, and X-Forwarded-Proto from a
// proxy listed in AllowedHosts), as the discovery documents do.
//
// Error codes here are OAuth's (RFC 6749, 7591, 8707): a vocabulary fixed by
// those RFCs and read by OAuth client libraries, not the node's catalog.

const (
	corpusMCPPath        = "/mcp"
	oauthAuthorizePath   = "/oauth/authorize"
	oauthTokenPath       = "/oauth/token"
	oauthRegisterPath    = "/oauth/register"
	corpusRegisterPath   = "/register" // the corpus's agent registration, and the seed's client registration
	oauthASMetadataPath  = "/.well-known/oauth-authorization-server"
	oauthPRMetadataPath  = "/.well-known/oauth-protected-resource"
	oauthFormLimit       = 64 << 10 // token and registration request bodies
	oauthRegistrationsPM = 10       // client registrations per minute per address
	oauthSweepEvery      = 10 * time.Minute

	prefixClient  = "rlc_"
	prefixSecret  = "rls_"
	prefixCode    = "rlk_"
	prefixAccess  = "rlo_"
	prefixRefresh = "rlr_"
)

var (
	pfxOAuthClient  = []byte("l/oauth/client/")
	pfxOAuthCode    = []byte("l/oauth/code/")
	pfxOAuthAccess  = []byte("l/oauth/access/")
	pfxOAuthRefresh = []byte("l/oauth/refresh/")
	pfxOAuthGrant   = []byte("l/oauth/grant/")
)

// standardScopes are tolerated in a request but grant nothing here.
var standardScopes = []string{"openid", "profile", "email", "address", "phone", "offline_access"}

// corpusScopes are the scopes this server grants, in canonical order.
var corpusScopes = []string{corpus.ScopeRead, corpus.ScopeWrite}

// oauthServer is the authorization server; one per node.
type oauthServer struct {
	n          *Node
	codeTTL    time.Duration
	accessTTL  time.Duration
	refreshTTL time.Duration
	now        func() time.Time
	registrar  *limiter     // client registrations, per address
	lastSweep  atomic.Int64 // unix nanoseconds
}

func (n *Node) newOAuthServer() *oauthServer {
	return &oauthServer{n: n, codeTTL: time.Minute, accessTTL: time.Hour, refreshTTL: 30 * 24 * time.Hour,
		now: time.Now, registrar: newLimiter(oauthRegistrationsPM)}
}

// mount adds the authorization server's routes and the metadata documents.
func (o *oauthServer) mount(mux *http.ServeMux) {
	mux.Handle("GET "+oauthASMetadataPath, http.HandlerFunc(o.serverMetadata))
	// The SDK's handler answers CORS preflights itself; the document at the
	// root and the one for the /mcp path are the same (one resource).
	mux.Handle(oauthPRMetadataPath, http.HandlerFunc(o.resourceMetadata))
	mux.Handle(oauthPRMetadataPath+corpusMCPPath, http.HandlerFunc(o.resourceMetadata))
	mux.Handle("GET "+oauthAuthorizePath, http.HandlerFunc(o.authorize))
	mux.Handle("POST "+oauthTokenPath, http.HandlerFunc(o.token))
	mux.Handle("POST "+oauthRegisterPath, http.HandlerFunc(o.registerClient))
	// The seed's MCP host names /authorize and /token: the same endpoints
	// answer there too. Its /register is also the corpus's agent
	// registration here: a body of client metadata there is taken to this
	// endpoint (orClientRegistration).
	mux.Handle("GET /authorize", http.HandlerFunc(o.authorize))
	mux.Handle("POST /token", http.HandlerFunc(o.token))
}

// issuer is the node's URL as the request reached it.
func (o *oauthServer) issuer(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || (o.proxied(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")) {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// proxied reports whether the request names a host of the operator's
// reverse proxy (Config.AllowedHosts), the one whose X-Forwarded-Proto is
// believed.
func (o *oauthServer) proxied(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	return slices.Contains(o.n.cfg.AllowedHosts, host)
}

// resource is the canonical URL of /mcp: the audience of every token.
func (o *oauthServer) resource(r *http.Request) string { return o.issuer(r) + corpusMCPPath }

func (o *oauthServer) resourceMetadataURL(r *http.Request) string {
	return o.issuer(r) + oauthPRMetadataPath + corpusMCPPath
}

// asMetadata is RFC 8414 authorization-server metadata (the SDK's type
// would also write an empty jwks_uri; these tokens are opaque).
type asMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint"`
	ScopesSupported                   []string `json:"scopes_supported"`
	ResponseTypesSupported            []string `json:"response_types_supported"`
	ResponseModesSupported            []string `json:"response_modes_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	AuthorizationResponseIssSupported bool     `json:"authorization_response_iss_parameter_supported"`
	ServiceDocumentation              string   `json:"service_documentation"`
}

func (o *oauthServer) serverMetadata(w http.ResponseWriter, r *http.Request) {
	iss := o.issuer(r)
	w.Header().Set("Access-Control-Allow-Origin", "*")
	writeJSON(w, http.StatusOK, asMetadata{
		Issuer:                            iss,
		AuthorizationEndpoint:             iss + oauthAuthorizePath,
		TokenEndpoint:                     iss + oauthTokenPath,
		RegistrationEndpoint:              iss + oauthRegisterPath,
		ScopesSupported:                   corpusScopes,
		ResponseTypesSupported:            []string{"code"},
		ResponseModesSupported:            []string{"query"},
		GrantTypesSupported:               []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethodsSupported: []string{"none", "client_secret_basic", "client_secret_post"},
		CodeChallengeMethodsSupported:     []string{"S256"},
		AuthorizationResponseIssSupported: true,
		ServiceDocumentation:              iss + corpus.GuidePath,
	})
}

func (o *oauthServer) resourceMetadata(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions: // the SDK's handler answers preflights
	default:
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
		writeRefusalAs(w, protocol.Refusef(protocol.ReasonMethodNotAllowed, "The protected-resource metadata is read with GET."), api.Corpus)
		return
	}
	iss := o.issuer(r)
	md := &oauthex.ProtectedResourceMetadata{
		Resource:               iss + corpusMCPPath,
		AuthorizationServers:   []string{iss},
		ScopesSupported:        corpusScopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "relay corpus of realm " + string(o.n.realm),
		ResourceDocumentation:  iss + corpus.GuidePath,
	}
	if r.Method == http.MethodOptions {
		auth.ProtectedResourceMetadataHandler(md).ServeHTTP(w, r)
		return
	}
	// GET and HEAD are written here: the SDK's handler refuses HEAD and
	// writes its JSON without nosniff or a length.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	writeJSON(w, http.StatusOK, md)
}

// oauthError is an OAuth error response.
type oauthError struct {
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
	status      int
}

func oauthErr(status int, code, format string, args ...any) *oauthError {
	return &oauthError{Code: code, Description: fmt.Sprintf(format, args...), status: status}
}

func (e *oauthError) write(w http.ResponseWriter) {
	noStore(w)
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="relay"`)
	}
	writeJSON(w, e.status, e)
}

func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
}

// rateLimited answers a refusal of the node's limiter in OAuth's shape.
func rateLimited(w http.ResponseWriter, ref *protocol.Refusal) {
	w.Header().Set("Cache-Control", "no-store") // as every answer of these endpoints (RFC 6749, section 5.1)
	if secs, ok := ref.Details["retry_after_seconds"].(int); ok {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	writeJSON(w, http.StatusTooManyRequests, oauthError{Code: "too_many_requests", Description: ref.Message})
}

// Stored records.

type oauthClient struct {
	ID           string    `json:"client_id"`
	SecretHash   []byte    `json:"secret_hash,omitempty"`
	AuthMethod   string    `json:"token_endpoint_auth_method"`
	RedirectURIs []string  `json:"redirect_uris"`
	GrantTypes   []string  `json:"grant_types"`
	Name         string    `json:"client_name,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	// Agent is the corpus registration a confidential client's grants act
	// as: made on its first authorization, 0 until then (and for a public
	// client, whose grants each have their own).
	Agent uint64 `json:"agent,omitempty"`
	// UsedAt is when the client was first given a code; a client never
	// given one is swept unusedClientTTL after its registration.
	UsedAt *time.Time `json:"used_at,omitempty"`
}

// unusedClientTTL is how long a registered client that was never given a
// code is kept: registration is open, so otherwise anyone could fill the
// store with clients.
const unusedClientTTL = 24 * time.Hour

type oauthCode struct {
	Hash        []byte    `json:"hash"`
	ClientID    string    `json:"client_id"`
	RedirectURI string    `json:"redirect_uri"`
	Challenge   string    `json:"code_challenge"`
	Resource    string    `json:"resource"`
	Scopes      []string  `json:"scopes"`
	Agent       uint64    `json:"agent"`
	Expires     time.Time `json:"expires"`
	Used        bool      `json:"used,omitempty"`
	// Issued are the keys of the tokens issued with a code made before
	// tokens recorded their grant, revoked if it is presented again; a
	// later code's tokens are its grant's (revokeGrant).
	Issued []string `json:"issued,omitempty"`
}

// oauthToken is an access or a refresh token.
type oauthToken struct {
	Hash     []byte    `json:"hash"`
	ClientID string    `json:"client_id"`
	Agent    uint64    `json:"agent"`
	Scopes   []string  `json:"scopes"`
	Resource string    `json:"resource"`
	Expires  time.Time `json:"expires"`
	// Grant is the authorization the token descends from (its code's id):
	// the family a replayed code or a reused refresh token revokes.
	Grant string `json:"grant,omitempty"`
	// RotatedAt marks a refresh token already exchanged, and when: kept
	// until it expires, so that its reuse is seen.
	RotatedAt *time.Time `json:"rotated_at,omitempty"`
}

// oauthGrant is the family of tokens one authorization led to: the keys of
// those that may still be live, its newest access tokens (at most
// grantAccessTokens) and its refresh token.
type oauthGrant struct {
	Access  []string  `json:"access"`
	Refresh string    `json:"refresh,omitempty"`
	Expires time.Time `json:"expires"`
}

// grantAccessTokens is how many access tokens of one grant stay live: a
// refresh beyond them revokes the oldest, so that a grant refreshed again
// and again keeps a record of bounded size.
const grantAccessTokens = 4

// refreshGrace is how long after its rotation a refresh token presented
// again is only refused: a client that sent two refreshes at once (the
// MCP SDK does when two calls meet a 401 together), or retried one whose
// answer was lost, keeps what the first one got. Later, someone else
// holds it too, and the grant is revoked.
const refreshGrace = time.Minute

func getRecord(tx *store.Tx, key []byte, v any) (bool, error) {
	b, err := tx.Get(key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, json.Unmarshal(b, v)
}

func putRecord(tx *store.Tx, key []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Set(key, b)
}

func oauthKey(pfx []byte, id string) []byte { return append(append([]byte(nil), pfx...), id...) }

// newSecret is <prefix><id>_<secret>: the id finds the record, the secret
// is checked against its hash.
func newSecret(prefix string) (full, id string, hash []byte) {
	var idb [8]byte
	rand.Read(idb[:])
	id = hex.EncodeToString(idb[:])
	raw, hash := secretpkg.New()
	return prefix + id + "_" + raw, id, hash
}

// splitSecret parses what newSecret made and hashes its secret part.
func splitSecret(s, prefix string) (id string, sum []byte, ok bool) {
	id, raw, ok := secretpkg.Split(s, prefix)
	if !ok || len(id) != 16 {
		return "", nil, false
	}
	if _, err := hex.DecodeString(id); err != nil {
		return "", nil, false
	}
	return id, secretpkg.Hash(raw), true
}

// grantScopes applies the seed's rules: omitted grants read; supported
// scopes are granted and unsupported ones ignored; the standard OAuth scopes
// are tolerated but grant nothing; a request of unrecognized scopes only is
// invalid_scope.
func grantScopes(raw string) ([]string, *oauthError) {
	fields := strings.Fields(raw)
	if len(fields) == 0 {
		return []string{corpus.ScopeRead}, nil
	}
	granted := []string{}
	recognized := false
	for _, s := range corpusScopes {
		if slices.Contains(fields, s) {
			granted = append(granted, s)
			recognized = true
		}
	}
	for _, f := range fields {
		if slices.Contains(standardScopes, f) {
			recognized = true
		}
	}
	if !recognized {
		return nil, oauthErr(http.StatusBadRequest, "invalid_scope", "None of the requested scopes is recognized; request %s.", strings.Join(corpusScopes, " and/or "))
	}
	return granted, nil
}

// Authorization.

func (o *oauthServer) authorize(w http.ResponseWriter, r *http.Request) {
	if _, ref := o.n.limiter.allow(nil, r); ref != nil {
		rateLimited(w, ref)
		return
	}
	q := r.URL.Query()
	for k, v := range q {
		if len(v) > 1 && k != "resource" {
			oauthErr(http.StatusBadRequest, "invalid_request", "Parameter %s is repeated.", k).write(w)
			return
		}
	}
	// Until the client and its redirect URI are known, nothing is redirected.
	c, err := o.client(q.Get("client_id"))
	if err != nil {
		o.internal(w, "authorize", err)
		return
	}
	if c == nil {
		oauthErr(http.StatusBadRequest, "invalid_request", "Unknown client_id; register at %s.", oauthRegisterPath).write(w)
		return
	}
	redirect := q.Get("redirect_uri")
	if redirect == "" || !slices.Contains(c.RedirectURIs, redirect) {
		oauthErr(http.StatusBadRequest, "invalid_request", "redirect_uri must be one of the client's registered redirect URIs, exactly.").write(w)
		return
	}
	iss := o.issuer(r)
	back := func(params url.Values) {
		u, _ := url.Parse(redirect)
		v := u.Query()
		for k, vals := range params {
			v[k] = vals
		}
		if s := q.Get("state"); s != "" {
			v.Set("state", s)
		}
		v.Set("iss", iss)
		u.RawQuery = v.Encode()
		noStore(w)
		http.Redirect(w, r, u.String(), http.StatusFound)
	}
	fail := func(e *oauthError) { back(url.Values{"error": {e.Code}, "error_description": {e.Description}}) }
	if q.Get("response_type") != "code" {
		fail(oauthErr(0, "unsupported_response_type", "response_type must be code."))
		return
	}
	if m := q.Get("response_mode"); m != "" && m != "query" {
		fail(oauthErr(0, "invalid_request", "response_mode must be query."))
		return
	}
	challenge := q.Get("code_challenge")
	switch method := q.Get("code_challenge_method"); {
	case challenge == "" || method == "":
		fail(oauthErr(0, "invalid_request", "PKCE is required: send code_challenge with code_challenge_method=S256."))
		return
	case method != "S256":
		fail(oauthErr(0, "invalid_request", "code_challenge_method must be S256; %q is not supported.", method))
		return
	case !isS256Challenge(challenge):
		fail(oauthErr(0, "invalid_request", "code_challenge must be the 43-character base64url SHA-256 of the code verifier."))
		return
	}
	resource := o.resource(r)
	if rs := q["resource"]; len(rs) > 1 || (len(rs) == 1 && !sameResource(rs[0], resource)) {
		fail(oauthErr(0, "invalid_target", "The only resource here is %s.", resource))
		return
	}
	scopes, e := grantScopes(q.Get("scope"))
	if e != nil {
		fail(e)
		return
	}
	agent, err := o.grantAgent(r.Context(), c)
	if err != nil {
		o.n.log.Error("oauth: grant agent", "client_id", c.ID, "err", err)
		fail(oauthErr(0, "server_error", "The grant could not be recorded; retry."))
		return
	}
	code, id, hash := newSecret(prefixCode)
	rec := oauthCode{Hash: hash, ClientID: c.ID, RedirectURI: redirect, Challenge: challenge, Resource: resource, Scopes: scopes,
		Agent: agent, Expires: o.now().Add(o.codeTTL)}
	if _, err := o.n.store.Submit(r.Context(), func(tx *store.Tx) (*protocol.Draft, error) {
		if c.UsedAt == nil { // kept from now on (sweep)
			var cur oauthClient
			ck := oauthKey(pfxOAuthClient, c.ID)
			if ok, err := getRecord(tx, ck, &cur); err != nil || !ok {
				return nil, err
			}
			if cur.UsedAt == nil {
				at := o.now().UTC()
				cur.UsedAt = &at
				if err := putRecord(tx, ck, cur); err != nil {
					return nil, err
				}
			}
		}
		return nil, putRecord(tx, oauthKey(pfxOAuthCode, id), rec)
	}); err != nil {
		o.n.log.Error("oauth: store code", "err", err)
		fail(oauthErr(0, "server_error", "The code could not be recorded; retry."))
		return
	}
	back(url.Values{"code": {code}})
}

func isS256Challenge(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(s) == 43 && len(b) == sha256.Size
}

// sameResource compares resource URLs, tolerating one trailing slash.
func sameResource(a, b string) bool { return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/") }

func (o *oauthServer) client(id string) (*oauthClient, error) {
	if !strings.HasPrefix(id, prefixClient) {
		return nil, nil
	}
	var c oauthClient
	var ok bool
	err := o.n.store.View(func(tx *store.Tx) (err error) {
		ok, err = getRecord(tx, oauthKey(pfxOAuthClient, id), &c)
		return err
	})
	if err != nil || !ok {
		return nil, err
	}
	return &c, nil
}

var errGrantBound = errors.New("oauth: client already has its agent")

// grantAgent is the corpus registration an authorization of c acts as: for
// a confidential client the client's own, created with its first
// authorization in one transaction; 0 for a public client, whose grants
// each get one of their own when their code is exchanged (so that an
// authorization never exchanged leaves none behind).
func (o *oauthServer) grantAgent(ctx context.Context, c *oauthClient) (uint64, error) {
	if c.AuthMethod == "none" {
		return 0, nil
	}
	if c.Agent != 0 {
		return c.Agent, nil
	}
	n, err := o.n.corpus.RegisterGrant(ctx, func(tx *store.Tx, n uint64) error {
		var cur oauthClient
		if _, err := getRecord(tx, oauthKey(pfxOAuthClient, c.ID), &cur); err != nil {
			return err
		}
		if cur.Agent != 0 { // a concurrent first authorization won
			return errGrantBound
		}
		cur.Agent = n
		return putRecord(tx, oauthKey(pfxOAuthClient, c.ID), cur)
	})
	if errors.Is(err, errGrantBound) {
		cur, err := o.client(c.ID)
		if err != nil || cur == nil {
			return 0, fmt.Errorf("oauth: reread client: %v", err)
		}
		return cur.Agent, nil
	}
	return n, err
}

// Tokens.

type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	Scope        string `json:"scope"`
	RefreshToken string `json:"refresh_token,omitempty"`
}

func (o *oauthServer) token(w http.ResponseWriter, r *http.Request) {
	// A client in a browser (a public client, PKCE) reads the answer: the
	// preflight lets it send, this lets it read, refusals included. No
	// cookie is ever taken here, so any origin may.
	setCORS(w.Header())
	if _, ref := o.n.limiter.allow(nil, r); ref != nil {
		rateLimited(w, ref)
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		oauthErr(http.StatusBadRequest, "invalid_request", "Send the token request as application/x-www-form-urlencoded.").write(w)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, oauthFormLimit)
	if err := r.ParseForm(); err != nil {
		oauthErr(http.StatusBadRequest, "invalid_request", "The form could not be read.").write(w)
		return
	}
	form := r.PostForm
	for k, v := range form {
		if len(v) > 1 && k != "resource" {
			oauthErr(http.StatusBadRequest, "invalid_request", "Parameter %s is repeated.", k).write(w)
			return
		}
	}
	c, e := o.authenticateClient(r, form)
	if e != nil {
		e.write(w)
		return
	}
	if rs := form["resource"]; len(rs) > 1 {
		oauthErr(http.StatusBadRequest, "invalid_target", "One resource only: %s.", o.resource(r)).write(w)
		return
	}
	var resp *tokenResponse
	switch form.Get("grant_type") {
	case "authorization_code":
		resp, e = o.exchangeCode(r, c, form)
	case "refresh_token":
		if !slices.Contains(c.GrantTypes, "refresh_token") {
			e = oauthErr(http.StatusBadRequest, "unauthorized_client", "This client did not register the refresh_token grant.")
			break
		}
		resp, e = o.refresh(r, c, form)
	case "":
		e = oauthErr(http.StatusBadRequest, "invalid_request", "grant_type is required.")
	default:
		e = oauthErr(http.StatusBadRequest, "unsupported_grant_type", "grant_type is authorization_code or refresh_token.")
	}
	if e != nil {
		e.write(w)
		return
	}
	o.sweep(r.Context())
	noStore(w)
	writeJSON(w, http.StatusOK, resp)
}

// authenticateClient finds the client of a token request: HTTP Basic or
// client_id (and client_secret) in the form, as the client registered.
func (o *oauthServer) authenticateClient(r *http.Request, form url.Values) (*oauthClient, *oauthError) {
	id, secret := form.Get("client_id"), form.Get("client_secret")
	if bid, bsecret, ok := r.BasicAuth(); ok {
		if secret != "" {
			return nil, oauthErr(http.StatusBadRequest, "invalid_request", "Authenticate the client one way: Basic or client_secret, not both.")
		}
		bid, err1 := url.QueryUnescape(bid)
		bsecret, err2 := url.QueryUnescape(bsecret)
		if err1 != nil || err2 != nil || (id != "" && id != bid) {
			return nil, oauthErr(http.StatusUnauthorized, "invalid_client", "Client authentication failed.")
		}
		id, secret = bid, bsecret
	}
	if id == "" {
		return nil, oauthErr(http.StatusUnauthorized, "invalid_client", "client_id is required.")
	}
	c, err := o.client(id)
	if err != nil {
		o.n.log.Error("oauth: load client", "err", err)
		return nil, oauthErr(http.StatusInternalServerError, "server_error", "Retry later.")
	}
	if c == nil {
		return nil, oauthErr(http.StatusUnauthorized, "invalid_client", "Unknown client_id.")
	}
	if c.AuthMethod == "none" {
		if secret != "" {
			return nil, oauthErr(http.StatusUnauthorized, "invalid_client", "This public client authenticates with client_id alone.")
		}
		return c, nil
	}
	if secret == "" || !secretpkg.Equal(secretpkg.Hash(secret), c.SecretHash) {
		return nil, oauthErr(http.StatusUnauthorized, "invalid_client", "Client authentication failed.")
	}
	return c, nil
}

// exchangeCode redeems an authorization code, in one transaction: the code
// is consumed whatever the outcome, once its secret matched.
func (o *oauthServer) exchangeCode(r *http.Request, c *oauthClient, form url.Values) (*tokenResponse, *oauthError) {
	id, sum, ok := splitSecret(form.Get("code"), prefixCode)
	if !ok {
		return nil, oauthErr(http.StatusBadRequest, "invalid_grant", "The code is not valid.")
	}
	verifier := form.Get("code_verifier")
	var resp *tokenResponse
	var e *oauthError
	var registered func()
	now := o.now()
	_, err := o.n.store.Submit(r.Context(), func(tx *store.Tx) (*protocol.Draft, error) {
		resp, e, registered = nil, nil, nil
		key := oauthKey(pfxOAuthCode, id)
		var code oauthCode
		found, err := getRecord(tx, key, &code)
		if err != nil {
			return nil, err
		}
		if !secretpkg.Equal(sum, code.Hash) || !found {
			e = oauthErr(http.StatusBadRequest, "invalid_grant", "The code is not valid.")
			return nil, nil
		}
		if code.Used {
			for _, k := range code.Issued {
				if err := tx.Delete([]byte(k)); err != nil {
					return nil, err
				}
			}
			code.Issued = nil
			if err := revokeGrant(tx, id); err != nil {
				return nil, err
			}
			e = oauthErr(http.StatusBadRequest, "invalid_grant", "The code was presented before: a code is good for one exchange, whether it succeeded or failed, and any tokens issued with it (and refreshed from them) are now revoked. Authorize again.")
			return nil, putRecord(tx, key, code)
		}
		code.Used = true
		if err := putRecord(tx, key, code); err != nil {
			return nil, err
		}
		switch {
		case now.After(code.Expires):
			e = oauthErr(http.StatusBadRequest, "invalid_grant", "The code expired; authorize again.")
		case code.ClientID != c.ID:
			e = oauthErr(http.StatusBadRequest, "invalid_grant", "The code was issued to another client.")
		case form.Get("redirect_uri") != code.RedirectURI:
			e = oauthErr(http.StatusBadRequest, "invalid_grant", "redirect_uri must be the one of the authorization request.")
		case !checkVerifier(verifier, code.Challenge):
			e = oauthErr(http.StatusBadRequest, "invalid_grant", "code_verifier does not match the code_challenge (S256).")
		case form.Get("resource") != "" && !sameResource(form.Get("resource"), code.Resource):
			e = oauthErr(http.StatusBadRequest, "invalid_target", "The code is bound to resource %s.", code.Resource)
		}
		if e != nil {
			return nil, nil
		}
		agent := code.Agent
		if agent == 0 { // a public client's grant: an author of its own
			if agent, registered, err = o.n.corpus.RegisterGrantIn(tx); err != nil {
				return nil, err
			}
		}
		resp, err = o.issue(tx, c, id, agent, code.Scopes, code.Resource, now)
		if err != nil {
			return nil, err
		}
		return nil, putRecord(tx, key, code)
	})
	if err != nil {
		o.n.log.Error("oauth: exchange code", "err", err)
		return nil, oauthErr(http.StatusInternalServerError, "server_error", "Retry later.")
	}
	if registered != nil {
		registered()
	}
	return resp, e
}

// checkVerifier checks a PKCE code_verifier (RFC 7636: 43 to 128
// unreserved characters) against its S256 challenge.
func checkVerifier(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	for _, ch := range verifier {
		if !(ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || strings.ContainsRune("-._~", ch)) {
			return false
		}
	}
	sum := sha256.Sum256([]byte(verifier))
	want := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(want), []byte(challenge)) == 1
}

// refresh rotates a refresh token: the old one is gone, a new pair issued.
func (o *oauthServer) refresh(r *http.Request, c *oauthClient, form url.Values) (*tokenResponse, *oauthError) {
	id, sum, ok := splitSecret(form.Get("refresh_token"), prefixRefresh)
	if !ok {
		return nil, oauthErr(http.StatusBadRequest, "invalid_grant", "The refresh token is not valid.")
	}
	var resp *tokenResponse
	var e *oauthError
	now := o.now()
	_, err := o.n.store.Submit(r.Context(), func(tx *store.Tx) (*protocol.Draft, error) {
		resp, e = nil, nil
		key := oauthKey(pfxOAuthRefresh, id)
		var rt oauthToken
		found, err := getRecord(tx, key, &rt)
		if err != nil {
			return nil, err
		}
		if !secretpkg.Equal(sum, rt.Hash) || !found || rt.ClientID != c.ID {
			e = oauthErr(http.StatusBadRequest, "invalid_grant", "The refresh token is not valid.")
			return nil, nil
		}
		if rt.Grant == "" {
			rt.Grant = id // issued before grants were recorded: a family of its own
		}
		if rt.RotatedAt != nil {
			if now.Sub(*rt.RotatedAt) < refreshGrace {
				e = oauthErr(http.StatusBadRequest, "invalid_grant", "The refresh token was just used; use the tokens that refresh answered.")
				return nil, nil
			}
			// Exchanged long before: the client and someone else both
			// hold it.
			e = oauthErr(http.StatusBadRequest, "invalid_grant", "The refresh token was already used; every token of its grant is revoked. Authorize again.")
			return nil, revokeGrant(tx, rt.Grant)
		}
		if now.After(rt.Expires) {
			e = oauthErr(http.StatusBadRequest, "invalid_grant", "The refresh token expired; authorize again.")
			return nil, tx.Delete(key)
		}
		scopes := rt.Scopes
		if raw := form.Get("scope"); raw != "" {
			asked, se := grantScopes(raw)
			if se != nil {
				e = se
				return nil, nil
			}
			for _, s := range asked {
				if !slices.Contains(rt.Scopes, s) {
					e = oauthErr(http.StatusBadRequest, "invalid_scope", "Scope %s was not granted; authorize again to get it.", s)
					return nil, nil
				}
			}
			scopes = asked
		}
		if res := form.Get("resource"); res != "" && !sameResource(res, rt.Resource) {
			e = oauthErr(http.StatusBadRequest, "invalid_target", "The grant is bound to resource %s.", rt.Resource)
			return nil, nil
		}
		rt.RotatedAt = &now
		if err := putRecord(tx, key, rt); err != nil {
			return nil, err
		}
		resp, err = o.issue(tx, c, rt.Grant, rt.Agent, scopes, rt.Resource, now)
		return nil, err
	})
	if err != nil {
		o.n.log.Error("oauth: refresh", "err", err)
		return nil, oauthErr(http.StatusInternalServerError, "server_error", "Retry later.")
	}
	return resp, e
}

// issue stores an access token, and a refresh token when the client
// registered that grant, as tokens of grant, and adds them to its family.
func (o *oauthServer) issue(tx *store.Tx, c *oauthClient, grant string, agent uint64, scopes []string, resource string, now time.Time) (*tokenResponse, error) {
	access, aid, ahash := newSecret(prefixAccess)
	akey := oauthKey(pfxOAuthAccess, aid)
	rec := oauthToken{Hash: ahash, ClientID: c.ID, Agent: agent, Scopes: scopes, Resource: resource, Expires: now.Add(o.accessTTL), Grant: grant}
	if err := putRecord(tx, akey, rec); err != nil {
		return nil, err
	}
	resp := &tokenResponse{AccessToken: access, TokenType: "Bearer", ExpiresIn: int64(o.accessTTL / time.Second), Scope: strings.Join(scopes, " ")}
	rkey := ""
	if slices.Contains(c.GrantTypes, "refresh_token") {
		refresh, rid, rhash := newSecret(prefixRefresh)
		rkey = string(oauthKey(pfxOAuthRefresh, rid))
		rec.Hash, rec.Expires = rhash, now.Add(o.refreshTTL)
		if err := putRecord(tx, []byte(rkey), rec); err != nil {
			return nil, err
		}
		resp.RefreshToken = refresh
	}
	return resp, addToGrant(tx, grant, string(akey), rkey, rec.Expires)
}

// addToGrant records in grant's family the access token under akey and the
// refresh token under rkey ("" when none), which live until expires. The
// refresh token it replaces, rotated, keeps its own record; the oldest
// access tokens beyond grantAccessTokens are revoked.
func addToGrant(tx *store.Tx, grant, akey, rkey string, expires time.Time) error {
	gkey := oauthKey(pfxOAuthGrant, grant)
	var g oauthGrant
	if _, err := getRecord(tx, gkey, &g); err != nil {
		return err
	}
	g.Access = append(g.Access, akey)
	if n := len(g.Access) - grantAccessTokens; n > 0 {
		for _, k := range g.Access[:n] {
			if err := tx.Delete([]byte(k)); err != nil {
				return err
			}
		}
		g.Access = slices.Clone(g.Access[n:])
	}
	g.Refresh = rkey
	if expires.After(g.Expires) {
		g.Expires = expires
	}
	return putRecord(tx, gkey, g)
}

// revokeGrant deletes every live token of grant's family, and the family.
func revokeGrant(tx *store.Tx, grant string) error {
	gkey := oauthKey(pfxOAuthGrant, grant)
	var g oauthGrant
	if _, err := getRecord(tx, gkey, &g); err != nil {
		return err
	}
	for _, k := range append(g.Access, g.Refresh) {
		if k == "" {
			continue
		}
		if err := tx.Delete([]byte(k)); err != nil {
			return err
		}
	}
	return tx.Delete(gkey)
}

// sweep deletes expired codes and tokens, at most every oauthSweepEvery.
// Used codes stay until well after they expire, so a replay still finds
// what to revoke.
func (o *oauthServer) sweep(ctx context.Context) {
	now := o.now()
	last := o.lastSweep.Load()
	if now.Sub(time.Unix(0, last)) < oauthSweepEvery || !o.lastSweep.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	_, err := o.n.store.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		var dead [][]byte
		inUse := map[string]bool{} // clients with a live code or token
		expired := func(grace time.Duration) func(k, v []byte) error {
			return func(k, v []byte) error {
				var rec struct {
					ClientID string    `json:"client_id"`
					Expires  time.Time `json:"expires"`
				}
				switch {
				case json.Unmarshal(v, &rec) != nil:
				case now.After(rec.Expires.Add(grace)):
					dead = append(dead, append([]byte(nil), k...))
				case rec.ClientID != "":
					inUse[rec.ClientID] = true
				}
				return nil
			}
		}
		if err := tx.Iterate(pfxOAuthCode, false, expired(o.accessTTL)); err != nil {
			return nil, err
		}
		for _, pfx := range [][]byte{pfxOAuthAccess, pfxOAuthRefresh, pfxOAuthGrant} {
			if err := tx.Iterate(pfx, false, expired(0)); err != nil {
				return nil, err
			}
		}
		err := tx.Iterate(pfxOAuthClient, false, func(k, v []byte) error {
			var c oauthClient
			if json.Unmarshal(v, &c) == nil && c.UsedAt == nil && c.Agent == 0 && !inUse[c.ID] && now.After(c.CreatedAt.Add(unusedClientTTL)) {
				dead = append(dead, append([]byte(nil), k...))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for _, k := range dead {
			if err := tx.Delete(k); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if err != nil {
		o.n.log.Warn("oauth: sweep", "err", err)
	}
}

func (o *oauthServer) internal(w http.ResponseWriter, what string, err error) {
	o.n.log.Error("oauth: "+what, "err", err)
	oauthErr(http.StatusInternalServerError, "server_error", "Retry later.").write(w)
}

// The resource server: /mcp.

// verify is the TokenVerifier of /mcp: one of this server's access tokens,
// unexpired, for this very resource.
func (o *oauthServer) verify(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
	id, sum, ok := splitSecret(token, prefixAccess)
	if !ok {
		if strings.HasPrefix(token, "rla_") {
			return nil, fmt.Errorf("%w: an agent_id is the HTTP API's credential; /mcp takes the OAuth access token of its own flow", auth.ErrInvalidToken)
		}
		return nil, fmt.Errorf("%w: not an access token of this server", auth.ErrInvalidToken)
	}
	var rec oauthToken
	var found bool
	if err := o.n.store.View(func(tx *store.Tx) (err error) {
		found, err = getRecord(tx, oauthKey(pfxOAuthAccess, id), &rec)
		return err
	}); err != nil {
		o.n.log.Error("oauth: load token", "err", err)
		return nil, errors.New("internal error")
	}
	if !secretpkg.Equal(sum, rec.Hash) || !found {
		return nil, fmt.Errorf("%w: unknown or revoked token", auth.ErrInvalidToken)
	}
	if o.now().After(rec.Expires) {
		return nil, fmt.Errorf("%w: token expired", auth.ErrInvalidToken)
	}
	if rec.Resource != o.resource(r) {
		return nil, fmt.Errorf("%w: the token's audience is another resource", auth.ErrInvalidToken)
	}
	p, err := o.n.corpus.GrantPrincipal(rec.Agent, rec.Scopes)
	if err != nil {
		return nil, fmt.Errorf("%w: the grant's agent is gone", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{Scopes: rec.Scopes, Expiration: rec.Expires, UserID: p.Agent.AuthorID,
		Extra: map[string]any{"principal": p}}, nil
}
