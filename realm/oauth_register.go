package realm

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"relay/protocol"
	secretpkg "relay/realm/secret"
	"relay/store"
)

// Dynamic client registration (RFC 7591) of the corpus's authorization
// server: rate-limited per address, redirect URIs https or loopback http.

type clientMetadata struct {
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	ClientName              string   `json:"client_name,omitempty"`
	Scope                   string   `json:"scope,omitempty"`
}

type clientInformation struct {
	clientMetadata
	ClientID              string `json:"client_id"`
	ClientSecret          string `json:"client_secret,omitempty"`
	ClientIDIssuedAt      int64  `json:"client_id_issued_at"`
	ClientSecretExpiresAt *int64 `json:"client_secret_expires_at,omitempty"`
}

// orClientRegistration serves POST /register, which names two endpoints:
// the seed's MCP host registers clients at /register, and this node serves
// that host's paths beside the corpus's, whose POST /register registers an
// agent from an empty body. A body of client metadata (a JSON object with
// redirect_uris, which every client of the authorization-code flow sends)
// is a client registration; anything else is an agent's, as before.
func (o *oauthServer) orClientRegistration(agents http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 {
			agents.ServeHTTP(w, r)
			return
		}
		head, err := io.ReadAll(io.LimitReader(r.Body, oauthFormLimit))
		if err == nil && isClientMetadata(head) {
			r.Body = io.NopCloser(bytes.NewReader(head))
			o.registerClient(w, r)
			return
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
		agents.ServeHTTP(w, r)
	})
}

// isClientMetadata reports whether body is an object naming redirect_uris.
func isClientMetadata(body []byte) bool {
	var md map[string]json.RawMessage
	if json.Unmarshal(body, &md) != nil {
		return false
	}
	_, ok := md["redirect_uris"]
	return ok
}

func (o *oauthServer) registerClient(w http.ResponseWriter, r *http.Request) {
	setCORS(w.Header()) // as the token endpoint: a browser's client registers itself
	if _, ref := o.registrar.allow(nil, r); ref != nil {
		rateLimited(w, ref)
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		oauthErr(http.StatusBadRequest, "invalid_client_metadata", "Send the client metadata as application/json.").write(w)
		return
	}
	md, e := decodeClientMetadata(http.MaxBytesReader(w, r.Body, oauthFormLimit))
	if e != nil {
		e.write(w)
		return
	}
	if e := checkClientMetadata(md); e != nil {
		e.write(w)
		return
	}
	c := oauthClient{AuthMethod: md.TokenEndpointAuthMethod, RedirectURIs: md.RedirectURIs, GrantTypes: md.GrantTypes, Name: md.ClientName, CreatedAt: o.now().UTC()}
	var idb [8]byte
	rand.Read(idb[:])
	c.ID = prefixClient + hex.EncodeToString(idb[:])
	info := clientInformation{clientMetadata: *md, ClientID: c.ID, ClientIDIssuedAt: c.CreatedAt.Unix()}
	if c.AuthMethod != "none" {
		secret, _, _ := newSecret(prefixSecret)
		c.SecretHash = secretpkg.Hash(secret)
		never := int64(0)
		info.ClientSecret, info.ClientSecretExpiresAt = secret, &never
	}
	if _, err := o.n.store.Submit(r.Context(), func(tx *store.Tx) (*protocol.Draft, error) {
		return nil, putRecord(tx, oauthKey(pfxOAuthClient, c.ID), c)
	}); err != nil {
		o.internal(w, "register client", err)
		return
	}
	noStore(w)
	writeJSON(w, http.StatusCreated, info)
}

// decodeClientMetadata reads one JSON object of client metadata. Its
// refusals name the member at fault in the words of RFC 7591, never the
// decoder's account of Go types.
func decodeClientMetadata(body io.Reader) (*clientMetadata, *oauthError) {
	var md clientMetadata
	dec := json.NewDecoder(body)
	err := dec.Decode(&md)
	if err == nil && dec.More() {
		err = errors.New("trailing data")
	}
	var tooBig *http.MaxBytesError
	var wrongType *json.UnmarshalTypeError
	switch {
	case err == nil:
		return &md, nil
	case errors.As(err, &tooBig):
		return nil, oauthErr(http.StatusRequestEntityTooLarge, "invalid_client_metadata", "The client metadata is over %d bytes.", oauthFormLimit)
	case errors.As(err, &wrongType) && wrongType.Field != "":
		return nil, oauthErr(http.StatusBadRequest, "invalid_client_metadata", "%s has the wrong type; see RFC 7591, section 2.", wrongType.Field)
	}
	return nil, oauthErr(http.StatusBadRequest, "invalid_client_metadata", "The body is not one JSON object of client metadata (RFC 7591).")
}

// checkClientMetadata validates and completes a registration request.
func checkClientMetadata(md *clientMetadata) *oauthError {
	if len(md.RedirectURIs) == 0 || len(md.RedirectURIs) > 10 {
		return oauthErr(http.StatusBadRequest, "invalid_redirect_uri", "Register 1 to 10 redirect_uris.")
	}
	for _, u := range md.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return oauthErr(http.StatusBadRequest, "invalid_redirect_uri", "redirect_uri %q: %v.", u, err)
		}
	}
	switch md.TokenEndpointAuthMethod {
	case "":
		md.TokenEndpointAuthMethod = "client_secret_basic" // RFC 7591's default
	case "none", "client_secret_basic", "client_secret_post":
	default:
		return oauthErr(http.StatusBadRequest, "invalid_client_metadata", "token_endpoint_auth_method is none, client_secret_basic or client_secret_post.")
	}
	if len(md.GrantTypes) == 0 {
		md.GrantTypes = []string{"authorization_code"}
	}
	for _, g := range md.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return oauthErr(http.StatusBadRequest, "invalid_client_metadata", "grant_types are authorization_code and refresh_token; not %q.", g)
		}
	}
	if !slices.Contains(md.GrantTypes, "authorization_code") {
		return oauthErr(http.StatusBadRequest, "invalid_client_metadata", "grant_types must include authorization_code.")
	}
	if len(md.ResponseTypes) == 0 {
		md.ResponseTypes = []string{"code"}
	}
	for _, t := range md.ResponseTypes {
		if t != "code" {
			return oauthErr(http.StatusBadRequest, "invalid_client_metadata", "response_types is [\"code\"]; not %q.", t)
		}
	}
	if len([]rune(md.ClientName)) > 200 {
		return oauthErr(http.StatusBadRequest, "invalid_client_metadata", "client_name holds at most 200 characters.")
	}
	return nil
}

// checkRedirectURI accepts an absolute https URL, or http on a loopback
// host (a native client's listener), without fragment or user info.
func checkRedirectURI(raw string) error {
	if len(raw) > 2000 {
		return errors.New("longer than 2000 bytes")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return errors.New("not an absolute URL")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return errors.New("a redirect URI has no fragment")
	}
	if u.User != nil {
		return errors.New("a redirect URI has no user info")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopback(u.Hostname()) {
			return nil
		}
		return errors.New("http is allowed only on a loopback host (127.0.0.1, [::1], localhost); use https")
	}
	return errors.New("only https, or http on a loopback host, is allowed")
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
