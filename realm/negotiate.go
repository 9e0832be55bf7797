package realm

// Content negotiation and conditional requests: the one place Accept,
// If-None-Match and If-Modified-Since are read, for the operations that
// declare their representations (api.Operation.Representations) and for the
// discovery documents.
//
// # Rules (the corpus seed, "HTTP representations")
//
//   - No Accept (or one with no valid range) takes the first offer: JSON for
//     corpus reads, HTML for the homepage.
//   - A type's quality comes from the most specific range that matches it
//     (type/sub over type/* over */*); q=0 excludes it. The highest quality
//     wins and ties go to the earlier offer, so equal-quality corpus
//     choices prefer JSON.
//   - Nothing acceptable is 406 with a diagnostic listing the offers: JSON,
//     or plain text for the XML feeds and the sitemap.
//   - Every negotiated answer says Vary: Accept. Its ETag is strong and
//     hashes the media type with the bytes, so the JSON and Markdown of one
//     resource never share a validator.
//   - If-None-Match (weak comparison, RFC 9110 §13.1.2) wins over
//     If-Modified-Since, which is read only when the representation has a
//     time; a match is 304 with the validators and no body. HEAD is GET
//     without the body.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/corpus"
	"relay/realm/internal/accept"
)

// Media types the node negotiates.
const (
	mediaJSON     = corpus.MediaJSON
	mediaMarkdown = corpus.MediaMarkdown
	mediaJSONLD   = corpus.MediaJSONLD
	mediaHTML     = "text/html"
	mediaText     = "text/plain"
	mediaLinkset  = "application/linkset+json"
	mediaNDJSON   = "application/x-ndjson"
	mediaSSE      = "text/event-stream"
)

// contentSignal is what canonical corpus resources declare (the corpus
// seed, "Content Signals"): a discovery declaration, not corpus data.
const contentSignal = "search=yes, ai-input=yes, ai-train=yes"

// negotiate picks the offered media type the Accept header prefers; ok is
// false when none is acceptable.
func negotiate(header string, offered []string) (mt string, ok bool) {
	if len(offered) == 0 {
		return "", false
	}
	ranges := accept.Parse(header)
	if len(ranges) == 0 {
		return offered[0], true
	}
	bestQ := 0.0
	for _, o := range offered {
		if q, spec := accept.Quality(ranges, o); spec != accept.None && q > bestQ {
			mt, bestQ = o, q
		}
	}
	return mt, mt != ""
}

// xmlOnly reports whether every offer is XML: those resources are native
// feeds, whose 406 diagnostic is plain text.
func xmlOnly(offered []string) bool {
	for _, o := range offered {
		if !strings.HasSuffix(o, "/xml") && !strings.HasSuffix(o, "+xml") {
			return false
		}
	}
	return len(offered) > 0
}

// writeNotAcceptable answers 406, listing what the resource offers.
func writeNotAcceptable(w http.ResponseWriter, offered []string, surface api.Surface) int {
	ref := protocol.Refusef(protocol.ReasonNotAcceptable, "No representation of this resource matches the Accept header; it offers %s.",
		strings.Join(offered, ", ")).With("offered", offered)
	if xmlOnly(offered) {
		body := "406 Not Acceptable: " + ref.Message + "\nSend Accept: " + offered[0] + " (or */*).\n"
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusNotAcceptable)
		w.Write([]byte(body))
		return http.StatusNotAcceptable
	}
	return writeRefusalAs(w, ref, surface)
}

// contentType is the Content-Type of a media type: UTF-8 text for every
// type the node writes.
func contentType(mt string) string { return mt + "; charset=utf-8" }

// representation is one rendered body of a resource.
type representation struct {
	mediaType    string
	body         []byte
	lastModified time.Time // zero: no Last-Modified
	cacheControl string    // empty: leave the header as it is
	profile      string    // the Content-Type's profile parameter; empty: none
	signal       bool      // a canonical corpus resource: Content-Signal
}

// etag is the strong validator of a representation: the media type and
// the bytes, hashed together.
func (rep *representation) etag() string {
	h := sha256.New()
	h.Write([]byte(rep.mediaType))
	h.Write([]byte{0})
	h.Write(rep.body)
	return `"` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`
}

// write answers with rep: 304 when the request's validators match, the
// headers alone for HEAD, else status and the body. It returns the status
// written.
func (rep *representation) write(w http.ResponseWriter, r *http.Request, status int) int {
	h := w.Header()
	etag := rep.etag()
	h.Set("ETag", etag)
	if !rep.lastModified.IsZero() {
		h.Set("Last-Modified", rep.lastModified.UTC().Format(http.TimeFormat))
	}
	if rep.cacheControl != "" && h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", rep.cacheControl)
	}
	if rep.signal {
		h.Set("Content-Signal", contentSignal)
	}
	if status == http.StatusOK && (r.Method == http.MethodGet || r.Method == http.MethodHead) && notModified(r, etag, rep.lastModified) {
		w.WriteHeader(http.StatusNotModified)
		return http.StatusNotModified
	}
	ct := contentType(rep.mediaType)
	if rep.profile != "" {
		ct += `; profile="` + rep.profile + `"`
	}
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.Itoa(len(rep.body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(rep.body)
	}
	return status
}

// notModified evaluates If-None-Match, or without it If-Modified-Since.
func notModified(r *http.Request, etag string, lastModified time.Time) bool {
	if inm := r.Header.Values("If-None-Match"); len(inm) > 0 {
		return etagListMatches(strings.Join(inm, ","), etag)
	}
	if ims := r.Header.Get("If-Modified-Since"); ims != "" && !lastModified.IsZero() {
		t, err := http.ParseTime(ims)
		return err == nil && !lastModified.Truncate(time.Second).After(t)
	}
	return false
}

// etagListMatches is the weak comparison of If-None-Match: "*" matches any
// current representation, and W/ is ignored on both sides.
func etagListMatches(list, etag string) bool {
	etag = strings.TrimPrefix(etag, "W/")
	s := strings.TrimSpace(list)
	if s == "*" {
		return true
	}
	for s != "" {
		s = strings.TrimLeft(s, " \t,")
		s = strings.TrimPrefix(s, "W/")
		if !strings.HasPrefix(s, `"`) {
			// Not an entity tag: skip to the next element.
			i := strings.IndexByte(s, ',')
			if i < 0 {
				return false
			}
			s = s[i+1:]
			continue
		}
		end := strings.IndexByte(s[1:], '"')
		if end < 0 {
			return false
		}
		if s[:end+2] == etag {
			return true
		}
		s = s[end+2:]
	}
	return false
}

// encodeJSON encodes v as writeJSON does: without HTML escaping.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ---------------------------------------------------------------------------
// What results may implement

// markdownResult is a result with a Markdown representation.
type markdownResult interface {
	Markdown() ([]byte, error)
}

// jsonLDResult is a result with a JSON-LD representation; base is the
// node's URL, self the resource's.
type jsonLDResult interface {
	JSONLD(base, self string) (any, error)
}

// xmlResult is a result whose body is XML (a feed, the sitemap), the same
// bytes whichever XML type was chosen.
type xmlResult interface {
	XML(base string) ([]byte, error)
}

// lastModifiedResult is a result whose data has a time.
type lastModifiedResult interface {
	LastModified() time.Time
}

// cacheControlResult is a result with a cache policy of its own.
type cacheControlResult interface {
	CacheControl() string
}

// defaultCacheControl lets shared caches keep a corpus read but makes them
// revalidate it (cheaply, with its ETag) before reuse.
const defaultCacheControl = "public, no-cache"

// render builds the representation of out in the media type mt, for a
// node at base. ok is
// false when out writes its own body (NDJSON, Server-Sent Events).
func render(r *http.Request, base string, out any, mt string) (rep *representation, ok bool, err error) {
	rep = &representation{mediaType: mt, cacheControl: defaultCacheControl, signal: true}
	if l, is := out.(lastModifiedResult); is {
		rep.lastModified = l.LastModified()
	}
	if c, is := out.(cacheControlResult); is {
		rep.cacheControl = c.CacheControl()
	}
	switch {
	case mt == mediaJSON:
		rep.body, err = encodeJSON(out)
	case mt == mediaMarkdown:
		m, is := out.(markdownResult)
		if !is {
			return nil, false, errNoRepresentation(mt)
		}
		rep.body, err = m.Markdown()
	case mt == mediaJSONLD:
		l, is := out.(jsonLDResult)
		if !is {
			return nil, false, errNoRepresentation(mt)
		}
		var doc any
		if doc, err = l.JSONLD(base, base+r.URL.RequestURI()); err == nil {
			rep.body, err = encodeJSON(doc)
		}
	default:
		x, is := out.(xmlResult)
		if !is {
			if _, own := out.(httpBody); own {
				return nil, false, nil
			}
			return nil, false, errNoRepresentation(mt)
		}
		rep.body, err = x.XML(base)
	}
	if err != nil {
		return nil, false, err
	}
	return rep, true, nil
}

type errNoRepresentation string

func (e errNoRepresentation) Error() string {
	return "realm: the result declares " + string(e) + " but cannot render it"
}

// ---------------------------------------------------------------------------
// Read errors in Markdown

// writeRefusalMarkdown renders a refusal as Markdown, for a read whose
// Markdown representation was selected.
func writeRefusalMarkdown(w http.ResponseWriter, err error) int {
	ref := asRefusal(err)
	status := ref.Status()
	refusalHeaders(w, ref)
	var b bytes.Buffer
	b.WriteString("# Error: " + corpus.MarkdownText(string(ref.Reason)) + "\n\n")
	b.WriteString("- status: " + strconv.Itoa(status) + " " + http.StatusText(status) + "\n")
	b.WriteString("- code: `" + string(ref.Reason) + "`\n\n")
	b.WriteString(corpus.MarkdownText(ref.Message) + "\n\n")
	if how := ref.HowToProceed(); how != "" {
		b.WriteString("How to proceed: " + corpus.MarkdownText(how) + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", contentType(mediaMarkdown))
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(b.Bytes())
	return status
}

// ---------------------------------------------------------------------------
// CORS

// corsAllowHeaders are the request headers a browser may send.
const corsAllowHeaders = "Authorization, Operation-Token, Content-Type, Accept, If-None-Match, If-Modified-Since, Last-Event-ID"

// corsExposeHeaders are the response headers a browser script may read.
const corsExposeHeaders = "X-Next-Cursor, X-Has-More, Link, ETag, Last-Modified, Content-Signal, Retry-After, Idempotent-Replayed, Allow"

// setCORS opens a public response to scripts of any origin. Credentials
// are bearer headers, never cookies, so a wildcard origin is safe.
func setCORS(h http.Header) {
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
}

// hasCORS says which paths are open to scripts: the corpus and the
// discovery documents, not Parley's /api/ (nor the MCP and OAuth
// endpoints, whose handlers answer for themselves).
func hasCORS(path string) bool { return !strings.HasPrefix(path, "/api/") && path != metricsPath }

// metricsPath is Prometheus's, for the operator's scraper: no page reads it.
const metricsPath = "/metrics"

// writePreflight answers OPTIONS on a path that exists: 204 with Allow and,
// where scripts may call, the CORS grant.
func writePreflight(w http.ResponseWriter, r *http.Request, allow []string) {
	h := w.Header()
	h.Set("Allow", strings.Join(allow, ", "))
	if hasCORS(r.URL.Path) {
		setCORS(h)
		h.Set("Access-Control-Allow-Methods", strings.Join(allow, ", "))
		h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
		h.Set("Access-Control-Max-Age", "86400")
	}
	w.WriteHeader(http.StatusNoContent)
}
