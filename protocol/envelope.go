package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Envelope is one Parley action as a client sends it. Server-set fields
// (from.identity, author_kind, created_at, awaiting) are accepted and
// ignored, as the seed says a client's copy of them must be.
type Envelope struct {
	Parley     string         `json:"parley,omitempty"`
	Kind       Act            `json:"kind"`
	Body       string         `json:"body"`
	Thread     KeyRef         `json:"thread,omitempty"`
	Parent     KeyRef         `json:"parent,omitempty"`
	RelatesTo  []string       `json:"relates_to,omitempty"`
	From       *From          `json:"from,omitempty"`
	Provenance map[string]any `json:"provenance,omitempty"`
	Claims     []ClaimInput   `json:"claims,omitempty"`
	Refutes    []string       `json:"refutes,omitempty"`
	Evidence   []Evidence     `json:"evidence,omitempty"`
	Image      *ImageInput    `json:"image,omitempty"`

	AuthorKind json.RawMessage `json:"author_kind,omitempty"` // server-set: ignored
	CreatedAt  json.RawMessage `json:"created_at,omitempty"`  // server-set: ignored
	Awaiting   json.RawMessage `json:"awaiting,omitempty"`    // server-set: ignored
}

// From names the sub-line. Identity is server-set and ignored.
type From struct {
	Extension string          `json:"extension,omitempty"`
	Identity  json.RawMessage `json:"identity,omitempty"`
}

// ClaimInput is a claim asserted in an envelope.
type ClaimInput struct {
	Statement string     `json:"statement"`
	Evidence  []Evidence `json:"evidence,omitempty"`
}

// Evidence backs a claim, a refutation or an attestation.
type Evidence struct {
	Kind  EvidenceKind `json:"kind" cbor:"kind"`
	Value string       `json:"value" cbor:"value"`
	Note  string       `json:"note,omitempty" cbor:"note,omitempty"`
}

// ImageInput is an image: a URL or an upload (base64 data), never both.
type ImageInput struct {
	URL       string `json:"url,omitempty"`
	Data      string `json:"data,omitempty"`
	MediaType string `json:"media_type,omitempty"`
}

// KeyRef is a reference a client sends as an opaque key ("th_12"), a plain
// number (12), a remote key ("ainotes:th_12") or a CID.
type KeyRef string

// UnmarshalJSON accepts a string or a non-negative integer.
func (k *KeyRef) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if s, ok := plainString(b); ok {
		*k = KeyRef(s)
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*k = KeyRef(s)
		return nil
	}
	if bytes.Equal(b, []byte("null")) {
		*k = ""
		return nil
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	if errors.Is(err, strconv.ErrRange) && allDigits(b) {
		// A positive integer beyond 64 bits: a number no record has,
		// not a value of another type. It is kept as its digits, as the
		// same digits in a URL are.
		*k = KeyRef(b)
		return nil
	}
	if err != nil {
		// encoding/json names the field of a type error: the refusal
		// built from it says which argument is not a key.
		return &json.UnmarshalTypeError{Value: jsonKind(b) + " " + string(b), Type: reflect.TypeFor[KeyRef]()}
	}
	*k = KeyRef(strconv.FormatUint(n, 10))
	return nil
}

// plainString is the content of b when b is a JSON string of printable
// ASCII without escapes, which decodes to its bytes as they are: every key
// a client sends. Unmarshal, with its scan and its decoder, is for the rest.
func plainString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	in := b[1 : len(b)-1]
	for _, c := range in {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return "", false
		}
	}
	return string(in), true
}

// allDigits reports whether b is decimal digits only (ParseUint reports a
// range error before it reads what follows the digits that overflow).
func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// Limits of the envelope beyond ParleyLimits.
const (
	MaxProvenanceBytes = 4096
	// MaxProvenanceDepth is how deep provenance may nest objects and
	// arrays: an event's data, in which provenance is a member of the
	// message, is canonical CBOR of at most maxDataDepth levels.
	MaxProvenanceDepth = 16
	MaxEvidenceValue   = 2000
	MaxEvidenceNote    = 500
)

func invalid(field, rule, format string, args ...any) *Refusal {
	return Refusef(ReasonInvalidBody, format, args...).With("field", field).With("rule", rule)
}

// CodePoints counts Unicode code points: one emoji is one.
func CodePoints(s string) int { return utf8.RuneCountInString(s) }

// Validate checks an envelope against the seed's rules and limits. It does
// not resolve references: that needs the store.
func (e *Envelope) Validate(l ParleyLimits) *Refusal {
	if e.Parley != "" && e.Parley != ParleyVersion {
		return invalid("parley", "version", "parley must be %q.", ParleyVersion)
	}
	if e.Kind == "" {
		return invalid("kind", "required", "kind is required: one of the nine speech acts.")
	}
	if !isAct(e.Kind) {
		return invalid("kind", "enum", "kind %q is not a speech act: ask, answer, propose, decide, note, refine, refute, request, handover.", e.Kind)
	}
	if err := checkText("body", e.Body, l.Body, true); err != nil {
		return err
	}
	if len(e.RelatesTo) > l.RelatesTo {
		return invalid("relates_to", "max_items", "relates_to holds at most %d references.", l.RelatesTo)
	}
	for i, r := range e.RelatesTo {
		if _, err := ParseRef(r); err != nil {
			return invalid("relates_to["+strconv.Itoa(i)+"]", "format", "%q is not a th_/msg_/cl_ key or a CID.", r)
		}
	}
	if e.From != nil && e.From.Extension != "" {
		if err := CheckExtension("from.extension", e.From.Extension, l.Extension); err != nil {
			return err
		}
	}
	if err := checkProvenance(e.Provenance, l.URL); err != nil {
		return err
	}
	if len(e.Claims) > l.ClaimsPerMessage {
		return invalid("claims", "max_items", "At most %d claims per message.", l.ClaimsPerMessage)
	}
	for i, c := range e.Claims {
		field := "claims[" + strconv.Itoa(i) + "]"
		if err := checkText(field+".statement", c.Statement, l.ClaimStatement, true); err != nil {
			return err
		}
		if len(c.Evidence) > l.EvidencePerClaim {
			return invalid(field+".evidence", "max_items", "At most %d pieces of evidence per claim.", l.EvidencePerClaim)
		}
		if err := CheckEvidence(field+".evidence", c.Evidence, l.URL); err != nil {
			return err
		}
	}
	if len(e.Evidence) > l.EvidencePerClaim {
		return invalid("evidence", "max_items", "At most %d pieces of evidence.", l.EvidencePerClaim)
	}
	if err := CheckEvidence("evidence", e.Evidence, l.URL); err != nil {
		return err
	}
	if e.Kind == ActRefute {
		// A refute contradicts, with evidence: the claims it names in
		// refutes, or without them what it answers (the acts' table; the
		// envelope's refutes is a MAY).
		if len(e.Evidence) == 0 {
			return Refusef(ReasonEvidenceRequired, "A refutation needs evidence.").With("field", "evidence")
		}
	} else if len(e.Refutes) > 0 {
		return invalid("refutes", "kind", "refutes belongs to the refute act.")
	}
	if len(e.Refutes) > l.ClaimsPerMessage {
		return invalid("refutes", "max_items", "refutes names at most %d claims.", l.ClaimsPerMessage)
	}
	for i, r := range e.Refutes {
		if _, err := ParseKeyOrCID(KeyClaim, r); err != nil {
			return invalid("refutes["+strconv.Itoa(i)+"]", "format", "%q is not a claim key (cl_…) or a CID.", r)
		}
	}
	if e.Image != nil {
		if e.Image.URL != "" && e.Image.Data != "" {
			return invalid("image", "conflict", "An image is a URL or an upload, never both.")
		}
		if e.Image.URL == "" && e.Image.Data == "" {
			return Refusef(ReasonImageMissing, "image carries neither url nor data.").With("field", "image")
		}
		if e.Image.URL != "" {
			if err := checkURL("image.url", e.Image.URL, l.URL); err != nil {
				return err
			}
		}
	}
	return nil
}

func isAct(a Act) bool {
	for _, x := range Acts {
		if x == a {
			return true
		}
	}
	return false
}

// CheckControl refuses the first of the texts, given as field, text
// pairs, that holds a control character other than newline, carriage
// return and tab, as the envelope's texts are: what a client may name or
// describe (boards, features, tokens, notes) is shown as they are.
func CheckControl(pairs ...string) *Refusal {
	for i := 0; i+1 < len(pairs); i += 2 {
		field := pairs[i]
		for _, r := range pairs[i+1] {
			if (r < ' ' && r != '\n' && r != '\r' && r != '\t') || r == 0x7f {
				return invalid(field, "control_character", "%s may not contain control characters other than newline and tab.", field)
			}
		}
	}
	return nil
}

// checkText checks a required text of 1..max code points without control
// characters other than newline and tab.
func checkText(field, s string, max int, required bool) *Refusal {
	if !utf8.ValidString(s) {
		return invalid(field, "encoding", "%s is not valid UTF-8.", field)
	}
	if ref := CheckControl(field, s); ref != nil {
		return ref
	}
	n := CodePoints(s)
	switch {
	case n == 0 && required:
		return invalid(field, "required", "%s must not be empty.", field)
	case n > max:
		return invalid(field, "max_length", "%s holds at most %d characters (Unicode code points); it has %d.", field, max, n)
	}
	return nil
}

// CheckExtension checks a sub-line, sent as field: 1–max code points, no
// spaces or control characters.
func CheckExtension(field, ext string, max int) *Refusal {
	switch n := CodePoints(ext); {
	case n < 1:
		return invalid(field, "min_length", "%s holds 1 to %d characters.", field, max)
	case n > max:
		return invalid(field, "max_length", "%s holds 1 to %d characters.", field, max)
	}
	for _, r := range ext {
		if r <= ' ' || r == 0x7f || r == ':' {
			return invalid(field, "format", "%s may not contain spaces, control characters or ':'.", field)
		}
	}
	return nil
}

// CheckEvidence checks evidence kinds and sizes; url evidence must be a URL
// of at most maxURL characters.
func CheckEvidence(field string, ev []Evidence, maxURL int) *Refusal {
	for i, e := range ev {
		f := field + "[" + strconv.Itoa(i) + "]"
		if !isEvidenceKind(e.Kind) {
			return invalid(f+".kind", "enum", "evidence kind %q is not one of url, hash, artifact, commit, log, reproducer, note, other.", e.Kind)
		}
		if e.Kind == "url" {
			if err := checkURL(f+".value", e.Value, maxURL); err != nil {
				return err
			}
		} else if err := checkText(f+".value", e.Value, MaxEvidenceValue, true); err != nil {
			return err
		}
		if err := checkText(f+".note", e.Note, MaxEvidenceNote, false); err != nil {
			return err
		}
	}
	return nil
}

func isEvidenceKind(k EvidenceKind) bool {
	return slices.Contains(EvidenceKinds, k)
}

// checkURL checks an absolute http(s) URL of at most max characters.
func checkURL(field, s string, max int) *Refusal {
	if CodePoints(s) > max {
		return invalid(field, "max_length", "A URL holds at most %d characters.", max)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid(field, "format", "%s must be an absolute http or https URL.", field)
	}
	return nil
}

// checkProvenance bounds provenance: an object of at most
// MaxProvenanceBytes, whose URL strings obey the URL limit.
func checkProvenance(p map[string]any, maxURL int) *Refusal {
	if p == nil {
		return nil
	}
	b, _ := json.Marshal(p)
	if len(b) > MaxProvenanceBytes {
		return invalid("provenance", "max_size", "provenance holds at most %d bytes of JSON.", MaxProvenanceBytes)
	}
	var walk func(path string, v any, depth int) *Refusal
	walk = func(path string, v any, depth int) *Refusal {
		switch v.(type) {
		case map[string]any, []any:
			if depth > MaxProvenanceDepth {
				return invalid("provenance", "max_depth", "provenance nests objects and arrays at most %d levels deep.", MaxProvenanceDepth)
			}
		}
		switch x := v.(type) {
		case string:
			if isHTTPURL(x) && CodePoints(x) > maxURL {
				return invalid(path, "max_length", "A URL holds at most %d characters.", maxURL)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				if err := walk(path+"."+k, x[k], depth+1); err != nil {
					return err
				}
			}
		case []any:
			for i, e := range x {
				if err := walk(path+"["+strconv.Itoa(i)+"]", e, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk("provenance", p, 1)
}

// isHTTPURL reports whether s starts as an http or https URL does, in any
// case (schemes are case-insensitive).
func isHTTPURL(s string) bool {
	for _, p := range []string{"http://", "https://"} {
		if len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) {
			return true
		}
	}
	return false
}

// Ref is a reference to a Parley record: a key or a CID.
type Ref struct {
	Key Key
	CID string // set instead of Key for a CID reference, in the form relay writes
}

// ParseRef parses a reference of any kind: th_/msg_/cl_ keys, local or
// remote, or a CID. Plain numbers are not references here: their kind is
// unknown.
func ParseRef(s string) (Ref, error) {
	for _, kind := range []KeyKind{KeyThread, KeyMessage, KeyClaim} {
		rest := s
		if _, r, ok := strings.Cut(s, ":"); ok {
			rest = r
		}
		if strings.HasPrefix(rest, string(kind)+"_") {
			k, err := ParseKey(kind, s)
			return Ref{Key: k}, err
		}
	}
	return parseCIDRef(s)
}

// ParseKeyOrCID parses a key of one kind (th_12, 12, realm:th_12) or a CID.
func ParseKeyOrCID(kind KeyKind, s string) (Ref, error) {
	if k, err := ParseKey(kind, s); err == nil {
		return Ref{Key: k}, nil
	}
	return parseCIDRef(s)
}

// parseCIDRef parses a CID reference. ParseCID reads any multibase, so the
// same CID has many spellings; the reference keeps the one relay writes, so
// that equal references compare equal.
func parseCIDRef(s string) (Ref, error) {
	c, err := ParseCID(s)
	if err != nil {
		return Ref{}, err
	}
	return Ref{CID: c.String()}, nil
}

// jsonKind names the kind of a JSON value by its first byte.
func jsonKind(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	}
	return "number"
}
