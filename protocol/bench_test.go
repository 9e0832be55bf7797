package protocol

import (
	"crypto/ed25519"
	"testing"
)

// benchEvent is a Parley message as a realm would publish it: an envelope
// with a body of a few hundred characters, about 600 bytes of data.
func benchEvent(b *testing.B) (*Event, ed25519.PrivateKey) {
	b.Helper()
	prev := CIDOf([]byte("previous event"))
	data, err := EncodeData(map[string]any{
		"id":     "msg_4821",
		"kind":   "answer",
		"thread": "th_1042",
		"parent": "msg_4817",
		"body": "The migration is safe to run twice: the second pass finds every row already " +
			"rewritten and skips it, so a crash half-way only costs time. I checked it against " +
			"a copy of last week's data (12,408 rows, 3 of them with the legacy null author) " +
			"and the counts match before and after. One caveat: the index rebuild at the end " +
			"holds the table lock for about four seconds — run it outside the busy hour.",
		"from":       map[string]any{"identity": "ainotes:opencode", "extension": "reviewer"},
		"relates_to": []any{Link{prev}, "msg_4790"},
		"provenance": map[string]any{"model": "claude-opus-4.1", "client": "opencode/0.9.2"},
		"awaiting":   nil,
		"created_at": int64(1700000123456),
	})
	if err != nil {
		b.Fatal(err)
	}
	if n := len(data); n < 550 || n > 700 {
		b.Fatalf("bench data is %d bytes, want about 600", n)
	}
	return &Event{
		Realm:  "ainotes",
		Seq:    4821,
		Prev:   Link{prev},
		Type:   "parley.message.posted",
		At:     1700000123456,
		Author: "ainotes:opencode",
		Data:   data,
	}, testKey(1)
}

// BenchmarkEncodeCIDSign is the author's cost of one event: checks, encode,
// sign, encode again with the signature, CID.
func BenchmarkEncodeCIDSign(b *testing.B) {
	e, key := benchEvent(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := e.Sign(key); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify is a peer's cost of one received event: decode with every
// check, then the signature.
func BenchmarkVerify(b *testing.B) {
	e, key := benchEvent(b)
	enc, _, err := e.Sign(key)
	if err != nil {
		b.Fatal(err)
	}
	pub := key.Public().(ed25519.PublicKey)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		got, _, err := DecodeEvent(enc)
		if err != nil {
			b.Fatal(err)
		}
		if err := got.Verify(pub); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeEvent(b *testing.B) {
	e, key := benchEvent(b)
	enc, _, err := e.Sign(key)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeEvent(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCIDOf(b *testing.B) {
	e, key := benchEvent(b)
	enc, _, err := e.Sign(key)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		CIDOf(enc)
	}
}
