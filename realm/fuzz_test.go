package realm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"relay/protocol"
	"relay/realm/internal/accept"
)

// FuzzNegotiate: the offer negotiate picks is one of the offers, and one
// the header gives a q above 0.
func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{
		"", "*/*", "*", "application/json", "text/html;q=0.9, application/json;q=0.8",
		"text/*;q=0", "application/json;q=NaN", "text/markdown;q=0x1p-1", "a/b;q=1e0;x=y",
		"application/ld+json; profile=\"x\"", ",,;;", "text/html;Q=0.5",
	} {
		f.Add(s)
	}
	offered := []string{"application/json", "text/html", "text/markdown"}
	f.Fuzz(func(t *testing.T, h string) {
		mt, ok := negotiate(h, offered)
		if ok != (mt != "") || (ok && !slices.Contains(offered, mt)) {
			t.Fatalf("%q: negotiate gave %q, %v", h, mt, ok)
		}
		if ok {
			if ranges := accept.Parse(h); len(ranges) > 0 {
				if q, spec := accept.Quality(ranges, mt); spec == accept.None || q <= 0 {
					t.Fatalf("%q: picked %q at q %v", h, mt, q)
				}
			}
		}
	})
}

// FuzzETagList checks If-None-Match matching: any list that names the
// entity tag, weak or strong, among other well-formed tags matches it, and
// none that leaves it out does.
func FuzzETagList(f *testing.F) {
	f.Add("abc", "def", "", true)
	f.Add("sha-1", "x", " , ", false)
	f.Add("", "", "W/", true)
	f.Fuzz(func(t *testing.T, tag, other, junk string, weak bool) {
		etagListMatches(junk, `"`+tag+`"`) // anything at all: no panic
		if strings.ContainsAny(tag+other, "\",") || tag == other {
			return
		}
		etag := `"` + tag + `"`
		named := `"` + other + `", ` + etag
		if weak {
			named = `W/"` + other + `",W/` + etag
		}
		if !etagListMatches(named, etag) {
			t.Fatalf("%q does not match %s", named, etag)
		}
		if etagListMatches(`"`+other+`"`, etag) {
			t.Fatalf("%q matches %s", other, etag)
		}
		if !etagListMatches(" * ", etag) {
			t.Fatal("* does not match")
		}
	})
}

// FuzzMCPMessage posts any body to /api/v1/mcp with a write token: the
// endpoint never fails (500) and always answers JSON-RPC, or nothing at
// all for notifications.
func FuzzMCPMessage(f *testing.F) {
	tn := startNodeAt(f, "fuzz", f.TempDir())
	tok, err := tn.auth.Issue(f.Context(), "fuzz", protocol.Rights{protocol.RightRead, protocol.RightWrite}, false)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_manifest","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_threads_id","arguments":{"id":"th_1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping","params":[]}`,
		`{"jsonrpc":"1.0","id":1,"result":{}}`,
		`[]`, `{}`, `null`, `"x"`, ``,
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(2))
	}
	versions := []string{"", "2025-06-18", "2025-03-26", "1999-01-01"}
	f.Fuzz(func(t *testing.T, body []byte, v uint8) {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		if ver := versions[int(v)%len(versions)]; ver != "" {
			req.Header.Set("MCP-Protocol-Version", ver)
		}
		rec := httptest.NewRecorder()
		tn.Handler().ServeHTTP(rec, req)
		out := rec.Body.Bytes()
		switch {
		case rec.Code >= 500:
			t.Fatalf("%q: %d %s", body, rec.Code, out)
		case rec.Code == http.StatusAccepted:
			if len(out) != 0 {
				t.Fatalf("%q: 202 with %s", body, out)
			}
			return
		case !json.Valid(out):
			t.Fatalf("%q: %d, not JSON: %q", body, rec.Code, out)
		}
		if rec.Code != http.StatusOK {
			return // a refusal of the request itself, in the API's error shape
		}
		var msgs []map[string]json.RawMessage
		if bytes.HasPrefix(bytes.TrimSpace(out), []byte("[")) {
			if err := json.Unmarshal(out, &msgs); err != nil || len(msgs) == 0 {
				t.Fatalf("%q: batch answer %s", body, out)
			}
		} else {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatalf("%q: answer %s", body, out)
			}
			msgs = append(msgs, m)
		}
		for _, m := range msgs {
			_, res := m["result"]
			_, fail := m["error"]
			if string(m["jsonrpc"]) != `"2.0"` || res == fail {
				t.Fatalf("%q: not a JSON-RPC response: %s", body, out)
			}
		}
	})
}
