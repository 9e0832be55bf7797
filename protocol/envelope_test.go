package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"
)

// refCID is a CID as relay writes them; refCIDText its text.
var (
	refCID       = CIDOf([]byte("x"))
	refCIDText   = refCID.String()
	refCIDv0Text = cid.NewCidV0(refCID.Hash()).String() // a CID, but not one relay makes
	refCIDBase58 = func() string {
		s, err := refCID.StringOfBase('z')
		if err != nil {
			panic(err)
		}
		return s
	}()
)

// baseEnvelope is the smallest valid envelope; validateTests edit it.
func baseEnvelope() Envelope {
	return Envelope{Parley: ParleyVersion, Kind: ActAnswer, Body: "Use a mutex."}
}

// urlOf returns an http URL of exactly n characters.
func urlOf(n int) string {
	const p = "https://example.org/"
	return p + strings.Repeat("a", n-len(p))
}

// setRelatesTo returns an edit that sets relates_to.
func setRelatesTo(refs ...string) func(*Envelope) {
	return func(e *Envelope) { e.RelatesTo = refs }
}

// setEvidence returns an edit that sets the envelope's evidence.
func setEvidence(ev ...Evidence) func(*Envelope) {
	return func(e *Envelope) { e.Evidence = ev }
}

func fieldRule(field, rule string) map[string]any {
	return map[string]any{"field": field, "rule": rule}
}

func repeatEvidence(n int) []Evidence {
	ev := make([]Evidence, n)
	for i := range ev {
		ev[i] = Evidence{Kind: "hash", Value: "sha256:ab"}
	}
	return ev
}

func repeatClaims(n int) []ClaimInput {
	cs := make([]ClaimInput, n)
	for i := range cs {
		cs[i] = ClaimInput{Statement: "The race is in the cache."}
	}
	return cs
}

var (
	urlEvidence = []Evidence{{Kind: "url", Value: "https://example.org/run/1"}}
	emoji500    = strings.Repeat("😀", 500)
)

type validateTest struct {
	name    string
	edit    func(*Envelope)
	reason  Reason         // "" for accepted
	details map[string]any // exactly, when refused
}

var validateTests = []validateTest{
	{"minimal", func(e *Envelope) {}, "", nil},

	// parley
	{"no parley version", func(e *Envelope) { e.Parley = "" }, "", nil},
	{"parley 2", func(e *Envelope) { e.Parley = "2" }, ReasonInvalidBody, fieldRule("parley", "version")},
	{"parley 1.0", func(e *Envelope) { e.Parley = "1.0" }, ReasonInvalidBody, fieldRule("parley", "version")},

	// kind
	{"no kind", func(e *Envelope) { e.Kind = "" }, ReasonInvalidBody, fieldRule("kind", "required")},
	{"kind vote", func(e *Envelope) { e.Kind = "vote" }, ReasonInvalidBody, fieldRule("kind", "enum")},
	{"kind in capitals", func(e *Envelope) { e.Kind = "Answer" }, ReasonInvalidBody, fieldRule("kind", "enum")},

	// body: 1–500 Unicode code points; one emoji is one.
	{"empty body", func(e *Envelope) { e.Body = "" }, ReasonInvalidBody, fieldRule("body", "required")},
	{"body of 500", func(e *Envelope) { e.Body = strings.Repeat("a", 500) }, "", nil},
	{"body of 501", func(e *Envelope) { e.Body = strings.Repeat("a", 501) }, ReasonInvalidBody, fieldRule("body", "max_length")},
	{"body of 500 emoji", func(e *Envelope) { e.Body = emoji500 }, "", nil},
	{"body of 501 emoji", func(e *Envelope) { e.Body = emoji500 + "😀" }, ReasonInvalidBody, fieldRule("body", "max_length")},
	{"body of 500 umlauts", func(e *Envelope) { e.Body = strings.Repeat("ü", 500) }, "", nil},
	{"body not UTF-8", func(e *Envelope) { e.Body = "a\xffb" }, ReasonInvalidBody, fieldRule("body", "encoding")},

	// relates_to: ≤ 8 th_/msg_/cl_ keys, local or remote, or CIDs.
	{"relates_to of 8", func(e *Envelope) {
		e.RelatesTo = []string{"th_1", "msg_2", "cl_3", "ainotes:th_12", "other-realm:msg_4", "x:cl_5", refCIDText, "th_18446744073709551615"}
	}, "", nil},
	{"relates_to of 9", func(e *Envelope) { e.RelatesTo = strings.Split("th_1 th_2 th_3 th_4 th_5 th_6 th_7 th_8 th_9", " ") },
		ReasonInvalidBody, fieldRule("relates_to", "max_items")},
	{"relates_to garbage", setRelatesTo("garbage"), ReasonInvalidBody, fieldRule("relates_to[0]", "format")},
	{"relates_to garbage second", setRelatesTo("th_1", "nope"), ReasonInvalidBody, fieldRule("relates_to[1]", "format")},
	{"relates_to a plain number", setRelatesTo("12"), ReasonInvalidBody, fieldRule("relates_to[0]", "format")},
	{"relates_to empty", setRelatesTo(""), ReasonInvalidBody, fieldRule("relates_to[0]", "format")},
	{"relates_to th_0", setRelatesTo("th_0"), ReasonInvalidBody, fieldRule("relates_to[0]", "format")},
	{"relates_to unknown prefix", setRelatesTo("bd_1"), ReasonInvalidBody, fieldRule("relates_to[0]", "format")},
	{"relates_to bad realm", setRelatesTo("Ainotes:th_1"), ReasonInvalidBody, fieldRule("relates_to[0]", "format")},
	{"relates_to remote number", setRelatesTo("ainotes:12"), ReasonInvalidBody, fieldRule("relates_to[0]", "format")},
	{"relates_to remote CID", setRelatesTo("ainotes:" + refCIDText), ReasonInvalidBody, fieldRule("relates_to[0]", "format")},
	{"relates_to truncated CID", setRelatesTo(refCIDText[:20]), ReasonInvalidBody, fieldRule("relates_to[0]", "format")},
	{"relates_to CIDv0", setRelatesTo(refCIDv0Text), ReasonInvalidBody, fieldRule("relates_to[0]", "format")},

	// from.extension: 1–40 code points, no spaces, controls or ':'.
	{"extension", func(e *Envelope) { e.From = &From{Extension: "worker-2"} }, "", nil},
	{"no extension", func(e *Envelope) { e.From = &From{} }, "", nil},
	{"extension of 40", func(e *Envelope) { e.From = &From{Extension: strings.Repeat("x", 40)} }, "", nil},
	{"extension of 40 umlauts", func(e *Envelope) { e.From = &From{Extension: strings.Repeat("ü", 40)} }, "", nil},
	{"extension of 41", func(e *Envelope) { e.From = &From{Extension: strings.Repeat("x", 41)} }, ReasonInvalidBody, fieldRule("from.extension", "max_length")},
	{"extension with a space", func(e *Envelope) { e.From = &From{Extension: "worker 2"} }, ReasonInvalidBody, fieldRule("from.extension", "format")},
	{"extension with a colon", func(e *Envelope) { e.From = &From{Extension: "ainotes:x"} }, ReasonInvalidBody, fieldRule("from.extension", "format")},
	{"extension with a control", func(e *Envelope) { e.From = &From{Extension: "a\x7f"} }, ReasonInvalidBody, fieldRule("from.extension", "format")},

	// provenance: bounded JSON; URLs in it obey the URL limit.
	{"provenance", func(e *Envelope) { e.Provenance = map[string]any{"model": "m", "client": "c"} }, "", nil},
	{"provenance at its size", func(e *Envelope) {
		e.Provenance = map[string]any{"model": strings.Repeat("m", MaxProvenanceBytes-len(`{"model":""}`))}
	}, "", nil},
	{"provenance over its size", func(e *Envelope) {
		e.Provenance = map[string]any{"model": strings.Repeat("m", MaxProvenanceBytes-len(`{"model":""}`)+1)}
	}, ReasonInvalidBody, fieldRule("provenance", "max_size")},
	{"provenance URL of 2000", func(e *Envelope) { e.Provenance = map[string]any{"source": urlOf(2000)} }, "", nil},
	{"provenance URL of 2001", func(e *Envelope) { e.Provenance = map[string]any{"source": urlOf(2001)} },
		ReasonInvalidBody, fieldRule("provenance.source", "max_length")},
	{"provenance nested URL of 2001", func(e *Envelope) {
		e.Provenance = map[string]any{"client": map[string]any{"links": []any{"x", urlOf(2001)}}}
	}, ReasonInvalidBody, fieldRule("provenance.client.links[1]", "max_length")},
	{"provenance nested 16 deep", func(e *Envelope) { e.Provenance = map[string]any{"x": nestedArrays(15)} }, "", nil},
	{"provenance nested 17 deep", func(e *Envelope) { e.Provenance = map[string]any{"x": nestedArrays(16)} }, ReasonInvalidBody, fieldRule("provenance", "max_depth")},
	{"provenance nested 31 deep", func(e *Envelope) { e.Provenance = map[string]any{"x": nestedArrays(30)} }, ReasonInvalidBody, fieldRule("provenance", "max_depth")},
	{"provenance URL of 2001 in capitals", func(e *Envelope) { e.Provenance = map[string]any{"source": "HTTPS://" + urlOf(2001)[len("https://"):]} },
		ReasonInvalidBody, fieldRule("provenance.source", "max_length")},
	{"provenance long text that is no URL", func(e *Envelope) { e.Provenance = map[string]any{"note": strings.Repeat("a", 3000)} }, "", nil},

	// claims: ≤ 10, statement 1–500, evidence ≤ 16 of the eight kinds.
	{"10 claims", func(e *Envelope) { e.Claims = repeatClaims(10) }, "", nil},
	{"11 claims", func(e *Envelope) { e.Claims = repeatClaims(11) }, ReasonInvalidBody, fieldRule("claims", "max_items")},
	{"empty statement", func(e *Envelope) { e.Claims = []ClaimInput{{}} }, ReasonInvalidBody, fieldRule("claims[0].statement", "required")},
	{"statement of 500 emoji", func(e *Envelope) { e.Claims = []ClaimInput{{Statement: emoji500}} }, "", nil},
	{"statement of 501", func(e *Envelope) { e.Claims = []ClaimInput{{Statement: strings.Repeat("s", 501)}} },
		ReasonInvalidBody, fieldRule("claims[0].statement", "max_length")},
	{"claim with 16 pieces of evidence", func(e *Envelope) { e.Claims = []ClaimInput{{Statement: "s", Evidence: repeatEvidence(16)}} }, "", nil},
	{"claim with 17 pieces of evidence", func(e *Envelope) { e.Claims = []ClaimInput{{Statement: "s", Evidence: repeatEvidence(17)}} },
		ReasonInvalidBody, fieldRule("claims[0].evidence", "max_items")},
	{"claim with every evidence kind", func(e *Envelope) {
		ev := []Evidence{{Kind: "url", Value: "http://example.org/x"}}
		for _, k := range EvidenceKinds[1:] {
			ev = append(ev, Evidence{Kind: k, Value: "v", Note: "why"})
		}
		e.Claims = []ClaimInput{{Statement: "s", Evidence: ev}}
	}, "", nil},
	{"second claim with an unknown evidence kind", func(e *Envelope) {
		e.Claims = []ClaimInput{{Statement: "s"}, {Statement: "t", Evidence: []Evidence{{Kind: "video", Value: "v"}}}}
	}, ReasonInvalidBody, fieldRule("claims[1].evidence[0].kind", "enum")},

	// evidence
	{"16 pieces of evidence", func(e *Envelope) { e.Evidence = repeatEvidence(16) }, "", nil},
	{"17 pieces of evidence", func(e *Envelope) { e.Evidence = repeatEvidence(17) }, ReasonInvalidBody, fieldRule("evidence", "max_items")},
	{"evidence without kind", setEvidence(Evidence{Value: "v"}), ReasonInvalidBody, fieldRule("evidence[0].kind", "enum")},
	{"evidence of kind URL", setEvidence(Evidence{Kind: "URL", Value: "https://example.org"}),
		ReasonInvalidBody, fieldRule("evidence[0].kind", "enum")},
	{"evidence without value", setEvidence(Evidence{Kind: "log"}), ReasonInvalidBody, fieldRule("evidence[0].value", "required")},
	{"evidence value of 2000", setEvidence(Evidence{Kind: "log", Value: strings.Repeat("l", MaxEvidenceValue)}), "", nil},
	{"evidence value of 2001", setEvidence(Evidence{Kind: "log", Value: strings.Repeat("l", MaxEvidenceValue+1)}),
		ReasonInvalidBody, fieldRule("evidence[0].value", "max_length")},
	{"evidence note of 500", setEvidence(Evidence{Kind: "note", Value: "v", Note: strings.Repeat("n", MaxEvidenceNote)}), "", nil},
	{"evidence note of 501", setEvidence(Evidence{Kind: "note", Value: "v", Note: strings.Repeat("n", MaxEvidenceNote+1)}),
		ReasonInvalidBody, fieldRule("evidence[0].note", "max_length")},
	// url evidence: an absolute http(s) URL of at most 2000 characters.
	{"url evidence https", func(e *Envelope) { e.Evidence = urlEvidence }, "", nil},
	{"url evidence of 2000", setEvidence(Evidence{Kind: "url", Value: urlOf(2000)}), "", nil},
	{"url evidence of 2001", setEvidence(Evidence{Kind: "url", Value: urlOf(2001)}),
		ReasonInvalidBody, fieldRule("evidence[0].value", "max_length")},
	{"url evidence ftp", setEvidence(Evidence{Kind: "url", Value: "ftp://example.org/x"}),
		ReasonInvalidBody, fieldRule("evidence[0].value", "format")},
	{"url evidence javascript", setEvidence(Evidence{Kind: "url", Value: "javascript:alert(1)"}),
		ReasonInvalidBody, fieldRule("evidence[0].value", "format")},
	{"url evidence relative", setEvidence(Evidence{Kind: "url", Value: "/run/1"}),
		ReasonInvalidBody, fieldRule("evidence[0].value", "format")},
	{"url evidence without host", setEvidence(Evidence{Kind: "url", Value: "https:///run/1"}),
		ReasonInvalidBody, fieldRule("evidence[0].value", "format")},
	{"url evidence not a URL", setEvidence(Evidence{Kind: "url", Value: "see the log"}),
		ReasonInvalidBody, fieldRule("evidence[0].value", "format")},
	{"url evidence empty", setEvidence(Evidence{Kind: "url"}),
		ReasonInvalidBody, fieldRule("evidence[0].value", "format")},

	// refute: evidence required, refutes optional (a refute of what it
	// answers names no claim); refutes only on refute.
	{"refute", func(e *Envelope) {
		e.Kind, e.Refutes, e.Evidence = ActRefute, []string{"cl_1", "2", "ainotes:cl_3", refCIDText}, urlEvidence
	}, "", nil},
	{"refute without refutes", func(e *Envelope) { e.Kind, e.Evidence = ActRefute, urlEvidence }, "", nil},
	{"refute with neither refutes nor evidence", func(e *Envelope) { e.Kind = ActRefute },
		ReasonEvidenceRequired, map[string]any{"field": "evidence"}},
	{"refute without evidence", func(e *Envelope) { e.Kind, e.Refutes = ActRefute, []string{"cl_1"} },
		ReasonEvidenceRequired, map[string]any{"field": "evidence"}},
	{"refute with evidence only in a claim", func(e *Envelope) {
		e.Kind, e.Refutes = ActRefute, []string{"cl_1"}
		e.Claims = []ClaimInput{{Statement: "s", Evidence: urlEvidence}}
	}, ReasonEvidenceRequired, map[string]any{"field": "evidence"}},
	{"refutes on an answer", func(e *Envelope) { e.Refutes, e.Evidence = []string{"cl_1"}, urlEvidence },
		ReasonInvalidBody, fieldRule("refutes", "kind")},
	{"refutes on a note", func(e *Envelope) { e.Kind, e.Refutes = ActNote, []string{"cl_1"} },
		ReasonInvalidBody, fieldRule("refutes", "kind")},
	{"refutes of 10", func(e *Envelope) {
		e.Kind, e.Refutes, e.Evidence = ActRefute, strings.Split("1 2 3 4 5 6 7 8 9 10", " "), urlEvidence
	}, "", nil},
	{"refutes of 11", func(e *Envelope) {
		e.Kind, e.Refutes, e.Evidence = ActRefute, strings.Split("1 2 3 4 5 6 7 8 9 10 11", " "), urlEvidence
	}, ReasonInvalidBody, fieldRule("refutes", "max_items")},
	{"refutes a thread", func(e *Envelope) { e.Kind, e.Refutes, e.Evidence = ActRefute, []string{"th_1"}, urlEvidence },
		ReasonInvalidBody, fieldRule("refutes[0]", "format")},
	{"refutes garbage second", func(e *Envelope) {
		e.Kind, e.Refutes, e.Evidence = ActRefute, []string{"cl_1", "claim one"}, urlEvidence
	}, ReasonInvalidBody, fieldRule("refutes[1]", "format")},

	// image: a URL or an upload, never both.
	{"image URL", func(e *Envelope) { e.Image = &ImageInput{URL: "https://example.org/a.png"} }, "", nil},
	{"image upload", func(e *Envelope) { e.Image = &ImageInput{Data: "iVBORw0KGgo=", MediaType: "image/png"} }, "", nil},
	{"image URL and upload", func(e *Envelope) { e.Image = &ImageInput{URL: "https://example.org/a.png", Data: "iVBORw0KGgo="} },
		ReasonInvalidBody, fieldRule("image", "conflict")},
	{"image with neither", func(e *Envelope) { e.Image = &ImageInput{} }, ReasonImageMissing, map[string]any{"field": "image"}},
	{"image with a media type only", func(e *Envelope) { e.Image = &ImageInput{MediaType: "image/png"} },
		ReasonImageMissing, map[string]any{"field": "image"}},
	{"image URL of 2000", func(e *Envelope) { e.Image = &ImageInput{URL: urlOf(2000)} }, "", nil},
	{"image URL of 2001", func(e *Envelope) { e.Image = &ImageInput{URL: urlOf(2001)} },
		ReasonInvalidBody, fieldRule("image.url", "max_length")},
	{"image data URL", func(e *Envelope) { e.Image = &ImageInput{URL: "data:image/png;base64,iVBORw0KGgo="} },
		ReasonInvalidBody, fieldRule("image.url", "format")},
}

func TestValidate(t *testing.T) {
	for _, tc := range validateTests {
		e := baseEnvelope()
		tc.edit(&e)
		ref := e.Validate(DefaultParleyLimits)
		if tc.reason == "" {
			if ref != nil {
				t.Errorf("%s: refused %v %v", tc.name, ref, ref.Details)
			}
			continue
		}
		checkRefusal(t, tc.name, ref, tc.reason, tc.details)
	}
}

// Every act but refute needs only kind and body.
func TestValidateActs(t *testing.T) {
	for _, act := range Acts {
		e := baseEnvelope()
		e.Kind = act
		if act == ActRefute {
			e.Refutes, e.Evidence = []string{"cl_1"}, urlEvidence
		}
		if ref := e.Validate(DefaultParleyLimits); ref != nil {
			t.Errorf("%s: %v", act, ref)
		}
	}
}

// Validate reads its limits from its argument, not from the seed's values.
func TestValidateLimits(t *testing.T) {
	l := DefaultParleyLimits
	l.Body, l.RelatesTo, l.URL = 10, 1, 30
	tests := []struct {
		name string
		edit func(*Envelope)
		want map[string]any
	}{
		{"body", func(e *Envelope) { e.Body = strings.Repeat("b", 11) }, fieldRule("body", "max_length")},
		{"relates_to", setRelatesTo("th_1", "th_2"), fieldRule("relates_to", "max_items")},
		{"url", func(e *Envelope) { e.Image = &ImageInput{URL: urlOf(31)} }, fieldRule("image.url", "max_length")},
	}
	for _, tc := range tests {
		e := baseEnvelope()
		e.Body = "short"
		tc.edit(&e)
		checkRefusal(t, tc.name, e.Validate(l), ReasonInvalidBody, tc.want)
	}
}

var checkExtensionTests = []struct {
	ext  string
	rule string // "" for accepted
}{
	{"worker-2", ""},
	{"reviewer", ""},
	{"a", ""},
	{strings.Repeat("x", 40), ""},
	{strings.Repeat("é", 40), ""},
	{"Worker_2.b", ""},
	{"", "min_length"},
	{strings.Repeat("x", 41), "max_length"},
	{strings.Repeat("é", 41), "max_length"},
	{"worker 2", "format"},
	{" worker", "format"},
	{"a\tb", "format"},
	{"a\nb", "format"},
	{"a\x00b", "format"},
	{"a\x7fb", "format"},
	{"realm:line", "format"},
}

func TestCheckExtension(t *testing.T) {
	for _, tc := range checkExtensionTests {
		ref := CheckExtension("from.extension", tc.ext, DefaultParleyLimits.Extension)
		if tc.rule == "" {
			if ref != nil {
				t.Errorf("CheckExtension(%q): %v", tc.ext, ref)
			}
			continue
		}
		checkRefusal(t, "CheckExtension("+tc.ext+")", ref, ReasonInvalidBody, fieldRule("from.extension", tc.rule))
	}
}

var codePointsTests = []struct {
	s    string
	want int
}{
	{"", 0},
	{"abc", 3},
	{"ü", 1},
	{"😀", 1},
	{emoji500, 500},
	{"e\u0301", 2}, // a combining accent is a code point of its own
}

func TestCodePoints(t *testing.T) {
	for _, tc := range codePointsTests {
		if got := CodePoints(tc.s); got != tc.want {
			t.Errorf("CodePoints(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

type keyRefTest struct {
	json string
	want KeyRef
	ok   bool
}

var keyRefTests = []keyRefTest{
	{`"th_12"`, "th_12", true},
	{`12`, "12", true},
	{`"12"`, "12", true},
	{`"ainotes:th_12"`, "ainotes:th_12", true},
	{`"msg_88"`, "msg_88", true},
	// Escapes and what is not plain ASCII go through Unmarshal.
	{`"th_\u0031"`, "th_1", true},
	{`"th_\"1"`, `th_"1`, true},
	{`"th_\\"`, `th_\`, true},
	{`"thé"`, "thé", true},
	{`""`, "", true},
	{` "th_12" `, "th_12", true},
	{`18446744073709551615`, "18446744073709551615", true},
	{`null`, "", true},
	{`-1`, "", false},
	{`1.5`, "", false},
	{`1e3`, "", false},
	{`true`, "", false},
	{`false`, "", false},
	{`{}`, "", false},
	{`[12]`, "", false},
	// Beyond 64 bits a positive integer is still one, naming no record,
	// as the same digits in a URL do.
	{`18446744073709551616`, "18446744073709551616", true},
	{`-18446744073709551616`, "", false},
	{`18446744073709551616.0`, "", false},
}

func TestKeyRefJSON(t *testing.T) {
	for _, tc := range keyRefTests {
		var v struct {
			K KeyRef `json:"k"`
		}
		err := json.Unmarshal([]byte(`{"k":`+tc.json+`}`), &v)
		if tc.ok {
			if err != nil || v.K != tc.want {
				t.Errorf("KeyRef %s = %q, %v; want %q", tc.json, v.K, err, tc.want)
			}
			continue
		}
		// A type error naming the field, which the registry turns into
		// invalid_body with details.field.
		var ute *json.UnmarshalTypeError
		if !errors.As(err, &ute) || ute.Field != "k" || ute.Type != reflect.TypeFor[KeyRef]() {
			t.Errorf("KeyRef %s = %q, %v; want a type error of field k", tc.json, v.K, err)
		}
	}
}

// FuzzKeyRefString holds KeyRef's reading of a string to Unmarshal's, on
// any bytes handed to UnmarshalJSON that start with a quote once trimmed.
func FuzzKeyRefString(f *testing.F) {
	for _, tc := range keyRefTests {
		f.Add([]byte(tc.json))
	}
	f.Add([]byte(`"a\u00e9\ud83d"`))
	f.Add([]byte("\"a\x7f\x00\xff\""))
	f.Fuzz(func(t *testing.T, b []byte) {
		trimmed := bytes.TrimSpace(b)
		if !bytes.HasPrefix(trimmed, []byte(`"`)) {
			return
		}
		var want string
		wantErr := json.Unmarshal(trimmed, &want)
		var k KeyRef
		err := k.UnmarshalJSON(b)
		if (err != nil) != (wantErr != nil) || string(k) != want {
			t.Errorf("%q: %q, %v; want %q, %v", b, k, err, want, wantErr)
		}
	})
}

type parseRefTest struct {
	in   string
	want Ref
	ok   bool
}

var parseRefTests = []parseRefTest{
	{"th_12", Ref{Key: Key{Kind: KeyThread, N: 12}}, true},
	{"msg_88", Ref{Key: Key{Kind: KeyMessage, N: 88}}, true},
	{"cl_3", Ref{Key: Key{Kind: KeyClaim, N: 3}}, true},
	{"ainotes:th_12", Ref{Key: Key{Realm: "ainotes", Kind: KeyThread, N: 12}}, true},
	{"other-realm:cl_7", Ref{Key: Key{Realm: "other-realm", Kind: KeyClaim, N: 7}}, true},
	{refCIDText, Ref{CID: refCIDText}, true},
	// Another spelling of the same CID is the same reference.
	{strings.ToUpper(refCIDText), Ref{CID: refCIDText}, true},
	{refCIDBase58, Ref{CID: refCIDText}, true},

	{"", Ref{}, false},
	{"12", Ref{}, false}, // a plain number has no kind here
	{"th_0", Ref{}, false},
	{"th_012", Ref{}, false},
	{"th_+1", Ref{}, false},
	{"th_-1", Ref{}, false},
	{"th_", Ref{}, false},
	{"th_12 ", Ref{}, false},
	{"TH_12", Ref{}, false},
	{"bd_1", Ref{}, false},
	{"th12", Ref{}, false},
	{":th_1", Ref{}, false},
	{"Ainotes:th_1", Ref{}, false},
	{"human:th_1", Ref{}, false},
	{"ainotes:12", Ref{}, false},
	{"ainotes:", Ref{}, false},
	{"ainotes:th_1:x", Ref{}, false},
	{"th_1:ainotes", Ref{}, false},
	{"ainotes:" + refCIDText, Ref{}, false},
	{refCIDText[:20], Ref{}, false},
	{refCIDText[1:], Ref{}, false},
	{cid.NewCidV0(refCID.Hash()).String(), Ref{}, false},
	{"garbage", Ref{}, false},
}

func TestParseRef(t *testing.T) {
	for _, tc := range parseRefTests {
		got, err := ParseRef(tc.in)
		checkRef(t, "ParseRef("+tc.in+")", got, err, tc.want, tc.ok)
	}
}

type parseKeyOrCIDTest struct {
	kind KeyKind
	in   string
	want Ref
	ok   bool
}

var parseKeyOrCIDTests = []parseKeyOrCIDTest{
	{KeyThread, "th_12", Ref{Key: Key{Kind: KeyThread, N: 12}}, true},
	{KeyThread, "12", Ref{Key: Key{Kind: KeyThread, N: 12}}, true},
	{KeyThread, "ainotes:th_12", Ref{Key: Key{Realm: "ainotes", Kind: KeyThread, N: 12}}, true},
	{KeyMessage, "msg_88", Ref{Key: Key{Kind: KeyMessage, N: 88}}, true},
	{KeyClaim, "cl_1", Ref{Key: Key{Kind: KeyClaim, N: 1}}, true},
	{KeyClaim, refCIDText, Ref{CID: refCIDText}, true},
	{KeyClaim, strings.ToUpper(refCIDText), Ref{CID: refCIDText}, true},
	{KeyClaim, refCIDBase58, Ref{CID: refCIDText}, true},

	{KeyThread, "msg_12", Ref{}, false},
	{KeyClaim, "th_1", Ref{}, false},
	{KeyThread, "ainotes:12", Ref{}, false},
	{KeyThread, "0", Ref{}, false},
	{KeyThread, "-1", Ref{}, false},
	{KeyThread, "", Ref{}, false},
	{KeyClaim, "garbage", Ref{}, false},
	{KeyClaim, "ainotes:" + refCIDText, Ref{}, false},
}

func TestParseKeyOrCID(t *testing.T) {
	for _, tc := range parseKeyOrCIDTests {
		got, err := ParseKeyOrCID(tc.kind, tc.in)
		checkRef(t, "ParseKeyOrCID("+string(tc.kind)+", "+tc.in+")", got, err, tc.want, tc.ok)
	}
}

func checkRef(t *testing.T, name string, got Ref, err error, want Ref, ok bool) {
	t.Helper()
	switch {
	case ok && err != nil:
		t.Errorf("%s: %v", name, err)
	case ok && got != want:
		t.Errorf("%s = %+v, want %+v", name, got, want)
	case !ok && !errors.Is(err, ErrInvalidName):
		t.Errorf("%s = %+v, %v; want ErrInvalidName", name, got, err)
	case !ok && got != (Ref{}):
		t.Errorf("%s = %+v next to an error", name, got)
	}
}

// decodeStrict decodes an envelope as a transport should: unknown fields
// refused.
func decodeStrict(b []byte) (Envelope, error) {
	var e Envelope
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	err := d.Decode(&e)
	return e, err
}

// The seed's example envelope, word for word.
const seedEnvelope = `{ "parley": "1", "kind": "answer", "thread": "th_1042", "parent": "msg_88",
  "from": { "extension": "worker-2" }, "body": "Answer in at most 500 characters …",
  "provenance": { "model": "…", "client": "…" } }`

// fullEnvelope carries every field, the server-set ones included.
var fullEnvelope = `{
  "parley": "1",
  "kind": "refute",
  "thread": 1042,
  "parent": "ainotes:msg_88",
  "relates_to": ["th_7", "cl_3", "` + refCIDText + `"],
  "from": {"extension": "reviewer", "identity": "ainotes:mallory"},
  "body": "The cache is not the culprit 😀",
  "provenance": {"model": "m-1", "client": "c/2", "source": "https://example.org/p"},
  "claims": [{"statement": "The lock is held across the call.", "evidence": [{"kind": "commit", "value": "abc123", "note": "see the diff"}]}],
  "refutes": ["cl_3"],
  "evidence": [{"kind": "url", "value": "https://example.org/run/1"}],
  "image": {"url": "https://example.org/trace.png"},
  "author_kind": "human",
  "created_at": "2025-01-01T00:00:00Z",
  "awaiting": true
}`

func TestDecodeEnvelope(t *testing.T) {
	e, err := decodeStrict([]byte(seedEnvelope))
	if err != nil {
		t.Fatalf("the seed's envelope: %v", err)
	}
	if ref := e.Validate(DefaultParleyLimits); ref != nil {
		t.Errorf("the seed's envelope: %v", ref)
	}
	if e.Thread != "th_1042" || e.Parent != "msg_88" || e.From == nil || e.From.Extension != "worker-2" {
		t.Errorf("the seed's envelope decoded as %+v", e)
	}

	e, err = decodeStrict([]byte(fullEnvelope))
	if err != nil {
		t.Fatalf("the full envelope: %v", err)
	}
	if ref := e.Validate(DefaultParleyLimits); ref != nil {
		t.Fatalf("the full envelope: %v %v", ref, ref.Details)
	}
	if e.Kind != ActRefute || e.Thread != "1042" || e.Parent != "ainotes:msg_88" || len(e.RelatesTo) != 3 ||
		len(e.Claims) != 1 || len(e.Claims[0].Evidence) != 1 || len(e.Refutes) != 1 || len(e.Evidence) != 1 ||
		e.Image == nil || e.Image.URL == "" || e.Provenance["model"] != "m-1" {
		t.Errorf("the full envelope decoded as %+v", e)
	}
}

// Server-set fields are accepted whatever they hold, and Validate does not
// look at them.
var serverSetTests = []struct {
	name string
	json string // the fields, spliced into an envelope
}{
	{"as the server writes them", `"author_kind":"llm","created_at":"2025-01-01T00:00:00Z","awaiting":false,"from":{"identity":"ainotes:x"}`},
	{"forged", `"author_kind":"human","awaiting":true,"from":{"identity":"human:operator","extension":"w"}`},
	{"odd types", `"author_kind":{"x":[1]},"created_at":0,"awaiting":"yes","from":{"identity":42}`},
	{"nulls", `"author_kind":null,"created_at":null,"awaiting":null,"from":{"identity":null}`},
}

func TestDecodeServerSetFields(t *testing.T) {
	for _, tc := range serverSetTests {
		e, err := decodeStrict([]byte(`{"kind":"ask","body":"Why?",` + tc.json + `}`))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if ref := e.Validate(DefaultParleyLimits); ref != nil {
			t.Errorf("%s: %v", tc.name, ref)
		}
	}
	// Server-set fields do not rescue a bad envelope either.
	e, err := decodeStrict([]byte(`{"kind":"ask","body":"","author_kind":"human","awaiting":true}`))
	if err != nil {
		t.Fatal(err)
	}
	checkRefusal(t, "empty body with server-set fields", e.Validate(DefaultParleyLimits), ReasonInvalidBody, fieldRule("body", "required"))
}

var unknownFieldTests = []struct {
	name string
	json string
}{
	{"top level", `{"kind":"ask","body":"b","colour":"red"}`},
	{"in from", `{"kind":"ask","body":"b","from":{"extension":"w","name":"x"}}`},
	{"in a claim", `{"kind":"ask","body":"b","claims":[{"statement":"s","weight":3}]}`},
	{"in evidence", `{"kind":"ask","body":"b","evidence":[{"kind":"url","value":"https://example.org","url":"x"}]}`},
	{"in image", `{"kind":"ask","body":"b","image":{"url":"https://example.org/a.png","size":3}}`},
}

func TestDecodeUnknownField(t *testing.T) {
	for _, tc := range unknownFieldTests {
		if _, err := decodeStrict([]byte(tc.json)); err == nil {
			t.Errorf("%s: an unknown field accepted", tc.name)
		}
	}
}

// FuzzEnvelopeValidate: decoding any bytes into an envelope and validating
// it never panics; a refusal names the field; the verdict survives
// re-encoding.
func FuzzEnvelopeValidate(f *testing.F) {
	f.Add([]byte(seedEnvelope))
	f.Add([]byte(fullEnvelope))
	for _, tc := range serverSetTests {
		f.Add([]byte(`{"kind":"ask","body":"Why?",` + tc.json + `}`))
	}
	for _, tc := range validateTests {
		e := baseEnvelope()
		tc.edit(&e)
		b, err := json.Marshal(&e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Envelope
		if err := json.Unmarshal(b, &e); err != nil {
			_ = e.Validate(DefaultParleyLimits) // a half-decoded envelope too
			return
		}
		ref := e.Validate(DefaultParleyLimits)
		if ref == nil {
			if !isAct(e.Kind) || CodePoints(e.Body) < 1 || CodePoints(e.Body) > 500 ||
				len(e.RelatesTo) > 8 || len(e.Claims) > 10 || len(e.Evidence) > 16 {
				t.Fatalf("accepted %+v", e)
			}
		} else {
			switch ref.Reason {
			case ReasonInvalidBody:
				if r, _ := ref.Details["rule"].(string); r == "" {
					t.Fatalf("invalid_body without a rule: %v %v", ref, ref.Details)
				}
			case ReasonEvidenceRequired, ReasonImageMissing:
			default:
				t.Fatalf("reason %s from Validate", ref.Reason)
			}
			if f, _ := ref.Details["field"].(string); f == "" {
				t.Fatalf("a refusal without a field: %v %v", ref, ref.Details)
			}
		}

		again, err := json.Marshal(&e)
		if err != nil {
			t.Fatalf("re-encoding a decoded envelope: %v", err)
		}
		var e2 Envelope
		if err := json.Unmarshal(again, &e2); err != nil {
			t.Fatalf("decoding a re-encoded envelope: %v\n%s", err, again)
		}
		ref2 := e2.Validate(DefaultParleyLimits)
		if (ref == nil) != (ref2 == nil) || ref != nil && (ref.Reason != ref2.Reason || ref.Details["rule"] != ref2.Details["rule"]) {
			t.Fatalf("verdict changed on re-encoding: %v %v, then %v %v\n%s", ref, detailsOf(ref), ref2, detailsOf(ref2), again)
		}
	})
}

func detailsOf(r *Refusal) map[string]any {
	if r == nil {
		return nil
	}
	return maps.Clone(r.Details)
}

// nestedArrays is n arrays, one inside the other.
func nestedArrays(n int) any {
	var v any = []any{}
	for range n - 1 {
		v = []any{v}
	}
	return v
}
