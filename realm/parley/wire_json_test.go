package parley

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"relay/protocol"
)

// encoderJSON is v as the HTTP transport's encoder writes it, without the
// newline.
func encoderJSON(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func checkPostOutJSON(t *testing.T, p PostOut) {
	t.Helper()
	got, ok := p.AppendJSON([]byte("prefix"))
	if !ok {
		t.Fatalf("%+v: not appended", p)
	}
	if want := append([]byte("prefix"), encoderJSON(t, p)...); !bytes.Equal(got, want) {
		t.Errorf("AppendJSON:\n got %s\nwant %s", got, want)
	}
}

var (
	wireAt     = time.Date(2026, 12, 1, 6, 30, 0, 123456789, time.UTC)
	wireOrigin = "llm"
	wireParent = "msg_3"
)

// postOutTests set every field of the answer, each one way or the other.
var postOutTests = []PostOut{
	{},
	{
		Message: MessageOut{Parley: protocol.ParleyVersion, ID: "msg_4", Realm: "ainotes", CID: "bafy", Thread: "th_1",
			Kind: protocol.ActNote, Body: "a <b> & \"c\"\n\u2028 é 😀", From: From{Identity: "ainotes:a"},
			AuthorKind: "llm", Claims: []string{}, Refutes: []string{}, Evidence: []protocol.Evidence{}, CreatedAt: wireAt},
		Thread: ThreadOut{ID: "th_1", Realm: "ainotes", CID: "bafy2", Board: 1, Title: "t", State: protocol.State("open"),
			StateSetAt: wireAt, Creator: "ainotes:a", CreatedAt: wireAt, UpdatedAt: wireAt.Add(time.Second), MessageCount: 4},
	},
	{
		Message: MessageOut{Parley: protocol.ParleyVersion, ID: "msg_5", Realm: "ainotes", CID: "bafy", Thread: "th_1",
			Parent: &wireParent, Kind: protocol.ActAnswer, Body: "b", From: From{Identity: "ainotes:a", Extension: "worker-2"},
			AuthorKind: "user", RelatesTo: []string{"th_2", "ainotes:msg_1"}, Claims: []string{"cl_1", "cl_2"},
			Refutes: []string{"cl_0"}, Evidence: []protocol.Evidence{{Kind: "url", Value: "https://x/?a=1&b=<2>"}, {Kind: "quote", Value: "v", Note: "n"}},
			Image: &ImageOut{URL: "/api/v1/images/bafy3", CID: "bafy3", MediaType: "image/png", Bytes: 1234}, Awaiting: true,
			CreatedAt: wireAt.In(time.FixedZone("x", 3600)), Status: "accepted"},
		Thread: ThreadOut{ID: "th_1", Realm: "other", CID: "bafy2", Board: 18446744073709551615, Title: "t\x00\xff",
			State: protocol.State("closed"), StateOrigin: &wireOrigin, StateConfirmedAt: &wireAt, StateConfirmedBy: "human:h",
			StateSetBy: "ainotes:a", StateSetByRealm: "other", StateSetAt: wireAt, Proposal: true, Locked: true,
			Creator: "ainotes:a", CreatedAt: wireAt, UpdatedAt: wireAt, Awaiting: true,
			LastMessage:  &LastMessage{ID: "msg_5", Kind: protocol.ActAnswer, From: From{Identity: "ainotes:a", Extension: "e"}, CreatedAt: wireAt},
			MessageCount: -1, ClaimCount: 2, Pinned: true, LLMReplyForbidden: true},
	},
	{
		Message: MessageOut{Image: &ImageOut{URL: "https://img/x.png"}, CreatedAt: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
		Thread:  ThreadOut{LastMessage: &LastMessage{}},
	},
}

func TestPostOutJSON(t *testing.T) {
	for _, p := range postOutTests {
		checkPostOutJSON(t, p)
	}
}

// What the hand encoder leaves to encoding/json: provenance, a refusal, and
// a time encoding/json refuses.
func TestPostOutJSONDeclines(t *testing.T) {
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, p := range []PostOut{
		{Message: MessageOut{Provenance: map[string]any{"tool": "x"}}},
		{Message: MessageOut{Refusal: &Refusal{Reason: "forbidden"}}},
		{Message: MessageOut{CreatedAt: far}},
		{Thread: ThreadOut{UpdatedAt: far}},
		{Thread: ThreadOut{StateConfirmedAt: &far}},
		{Thread: ThreadOut{LastMessage: &LastMessage{CreatedAt: far}}},
	} {
		if b, ok := p.AppendJSON([]byte("x")); ok || string(b) != "x" {
			t.Errorf("%+v: %q, %v; want it declined", p, b, ok)
		}
	}
}

// FuzzPostOutJSON holds the hand encoder to encoding/json on any strings.
func FuzzPostOutJSON(f *testing.F) {
	f.Add("a <b> & c", "\u2028\x7f\xff", "é😀\"\\")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		p := postOutTests[2]
		p.Message.Body, p.Message.From.Extension, p.Message.Evidence = a, b, []protocol.Evidence{{Kind: protocol.EvidenceKind(c), Value: a, Note: b}}
		p.Message.RelatesTo = []string{c, a}
		p.Thread.Title, p.Thread.StateSetBy, p.Thread.Creator = c, b, a
		checkPostOutJSON(t, p)
	})
}

// BenchmarkPostOutJSON compares a post's answer encoded by hand with the
// HTTP transport's encoder, on an answer shaped as a note's.
func BenchmarkPostOutJSON(b *testing.B) {
	p := postOutTests[1]
	p.Thread.LastMessage = &LastMessage{ID: "msg_4", Kind: protocol.ActNote, From: p.Message.From, CreatedAt: wireAt}
	b.Run("encoder", func(b *testing.B) {
		var buf bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			var ok bool
			if buf, ok = p.AppendJSON(buf[:0]); !ok {
				b.Fatal("declined")
			}
		}
	})
}
