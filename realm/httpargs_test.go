package realm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// argsBefore is httpArgs's body path as it was, the one reference for
// flatArgs: decode into a map with UseNumber, set the overlay, marshal.
func argsBefore(body []byte, over []argMember) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var obj any
	if err := dec.Decode(&obj); err != nil || dec.More() {
		return nil, false
	}
	m, ok := obj.(map[string]any)
	if !ok {
		return nil, false
	}
	for _, o := range over {
		if o.val == nil {
			delete(m, o.key)
			continue
		}
		var v any
		if err := json.Unmarshal(o.val, &v); err != nil {
			return nil, false
		}
		m[o.key] = v
	}
	b, err := json.Marshal(m)
	return b, err == nil
}

var overlays = [][]argMember{
	nil,
	{{"id", []byte(`"th_1"`)}},
	{{"id", []byte(`12`)}},
	{{"endpoint_id", []byte(`"ep_1"`)}, {"conversation_id", []byte(`"cv_1"`)}, {"operation_token", []byte(`"a17"`)}},
	{{"endpoint_id", []byte(`"ep_1"`)}, {"operation_token", nil}},
}

// flatBodies are bodies flatArgs writes itself: what agents send.
var flatBodies = []string{
	`{}`, ` { } `, `{"kind":"note","body":"bench note from agent 3, number 17"}`,
	`{"content":"The index follows the log.","kind":["post"],"tags":["bench-7"]}`,
	`{"subject":"s","content":"\"quotes\" and \\ are written as sent","kind":["claim","question"]}`,
	"{\"body\":\"café ☕ 日本\",\"kind\":\"note\"}", `{"body":"line\nbreak\ttab\r"}`,
	`{"n":-0,"m":12.50,"e":1E+400,"f":-1e-7,"t":true,"f2":false,"z":null,"a":[],"b":[1,"x",null,true]}`,
	`{"operation_token":"from the body","id":"th_9","z":1,"a":2,"M":3}`,
	"\n\t{\r\n\"kind\" :\t\"note\" , \"body\":\"b\"\n}\n",
}

// notFlatBodies are left to the decode.
var notFlatBodies = []string{
	`{"a":{}}`, `{"a":[[1]]}`, `{"a":[{}]}`, `{"a":1,"a":2}`, `{"a":"<b>"}`, `{"a":"x&y"}`, `{"a":"\u0041"}`,
	`{"a":"\/"}`, `{"a":"\b"}`, `{"\n":1}`, "{\"a\":\"\xff\"}", "{\"a\":\"\u2028\"}", `{"a":1} `[:7] + `}x`,
	`{"a":1}}`, `{"a":1}]`, `{"a":1}{}`, `[1]`, `"s"`, `1`, `null`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":+1}`,
	`{"a":1e}`, `{"a":tru}`, `{"a":truex}`, `{"a":"x}`, `{"a":1,}`, `{,}`, `{"a"}`, `{"a":[1,]}`, `{"a":[1 2]}`,
	"{\"a\":\"\x01\"}", "\u00a0{}", `{"a":"x"}` + "\x00",
}

func checkFlat(t testing.TB, body string, over []argMember) bool {
	t.Helper()
	got, ok := flatArgs([]byte(body), over)
	if !ok {
		return false
	}
	want, wok := argsBefore([]byte(body), over)
	if !wok || !bytes.Equal(got, want) {
		t.Errorf("%.200q with %v: flat %s, before %s (%v)", body, over, got, want, wok)
	}
	return true
}

func TestFlatArgs(t *testing.T) {
	for _, over := range overlays {
		for _, body := range flatBodies {
			if !checkFlat(t, body, over) {
				t.Errorf("%.200q: not written flat", body)
			}
		}
		for _, body := range notFlatBodies {
			if checkFlat(t, body, over) {
				t.Errorf("%.200q: written flat", body)
			}
		}
	}
}

// A body of more members than any operation takes goes to the decode,
// whose cost grows with the body alone, not with its members squared.
func TestFlatArgsMembers(t *testing.T) {
	body := func(n int) string {
		var b strings.Builder
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q:%d", fmt.Sprint("k", i), i)
		}
		return b.String() + "}"
	}
	if !checkFlat(t, body(maxFlatMembers), nil) {
		t.Errorf("%d members: not written flat", maxFlatMembers)
	}
	if checkFlat(t, body(maxFlatMembers+1), nil) {
		t.Errorf("%d members: written flat", maxFlatMembers+1)
	}
}

// FuzzFlatArgs holds flatArgs to the decode and marshal on any body.
func FuzzFlatArgs(f *testing.F) {
	for _, body := range append(flatBodies, notFlatBodies...) {
		f.Add([]byte(body), uint8(0))
	}
	f.Add([]byte(`{"a":"`+strings.Repeat("x", 300)+`"}`), uint8(3))
	f.Fuzz(func(t *testing.T, body []byte, i uint8) {
		checkFlat(t, string(body), overlays[int(i)%len(overlays)])
	})
}

// BenchmarkHTTPArgs compares the body path of httpArgs, flat and as it was
// (argsBefore), on a forum post's body and a corpus append's.
func BenchmarkHTTPArgs(b *testing.B) {
	bodies := []struct {
		name string
		body []byte
		over []argMember
	}{
		{"post", []byte(`{"kind":"note","body":"bench note from agent 3, number 1742"}`), overlays[1]},
		{"append", []byte(`{"content":"The index follows the log. Every append waits for its batch, and the batch waits for the disk.",` +
			`"kind":["status-update"],"tags":["bench-7"]}`), overlays[3]},
	}
	for _, tc := range bodies {
		b.Run(tc.name+"/flat", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := flatArgs(tc.body, tc.over); !ok {
					b.Fatal("not flat")
				}
			}
		})
		b.Run(tc.name+"/before", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := argsBefore(tc.body, tc.over); !ok {
					b.Fatal("refused")
				}
			}
		})
	}
}

// httpArgs writes the same arguments whichever way it reads the body, flat
// or through the decode: the path's and the header's arguments over the
// body's, a body's token dropped without the header.
func TestHTTPArgsPaths(t *testing.T) {
	tn := startNode(t, "args")
	op, ok := tn.Registry().Lookup("append_message")
	if !ok {
		t.Fatal("no append_message")
	}
	bodies := []string{
		`{"content":"c","kind":["post"]}`,
		`{"content":"c","operation_token":"from the body","endpoint_id":"ep_body"}`,
		`{"content":"c","payload":{"nested":true}}`, // not flat: decoded
		`{"content":"c","operation_token":"from the body","conversation_id":"cv_body","payload":{}}`,
		`{"content":"x&y <b>","tags":["t"]}`, // not flat: escaped by the marshal
	}
	for _, token := range []string{"", "tok-<1>"} {
		for _, body := range bodies {
			r := httptest.NewRequest(http.MethodPost, "/ep_1/appendToConversation/cv_1", strings.NewReader(body))
			r.SetPathValue("endpoint_id", "ep_1")
			r.SetPathValue("conversation_id", "cv_1")
			r.Header.Set("Content-Type", "application/json")
			if token != "" {
				r.Header.Set("Operation-Token", token)
			}
			over, ok := overlayArgs(r, op)
			if !ok {
				t.Fatal("overlay")
			}
			want, ok := argsBefore([]byte(body), over)
			if !ok {
				t.Fatalf("%s: refused", body)
			}
			got, err := tn.httpArgs(httptest.NewRecorder(), r, op)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("token %q, body %s: %s, %v; want %s", token, body, got, err, want)
			}
		}
	}
}

// BenchmarkOverlayArgs reads a post's path argument, as every post over
// HTTP does.
func BenchmarkOverlayArgs(b *testing.B) {
	tn := startNodeAt(b, "bench", b.TempDir(), func(c *Config) { c.InMemory = true })
	op, ok := tn.Registry().Lookup("post_threads_id_messages")
	if !ok {
		b.Fatal("no post_threads_id_messages")
	}
	r := httptest.NewRequest(http.MethodPost, "/api/v1/threads/th_12/messages", nil)
	r.SetPathValue("id", "th_12")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := overlayArgs(r, op); !ok {
			b.Fatal("overlay")
		}
	}
}
