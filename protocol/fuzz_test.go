package protocol

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"slices"
	"testing"
)

// eventSeeds are the golden encodings and every refused variant of them.
func eventSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, g := range readGoldenEvents(t) {
		seeds = append(seeds, mustHex(t, g.CBOR))
	}
	rb := newRefusalBase(t)
	for _, tc := range refusalTests {
		if b := tc.make(t, rb); len(b) <= MaxEventSize {
			seeds = append(seeds, b)
		}
	}
	for _, tc := range badDataTests {
		seeds = append(seeds, rb.one.set("data", mustHex(t, tc.hex)).enc())
	}
	return seeds
}

// FuzzDecodeEvent: DecodeEvent never panics, and what it accepts is exactly
// the canonical encoding of what it returns.
func FuzzDecodeEvent(f *testing.F) {
	for _, b := range eventSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, c, err := DecodeEvent(b)
		if err != nil {
			if e != nil || c.Defined() {
				t.Fatalf("an event and an error: %v", err)
			}
			if !errors.Is(err, ErrInvalidEvent) && !errors.Is(err, ErrNonCanonical) && !errors.Is(err, ErrEventTooLarge) {
				t.Fatalf("error outside the sentinels: %v", err)
			}
			return
		}
		again, err := MarshalCanonical(e)
		if err != nil {
			t.Fatalf("re-encoding an accepted event: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("accepted a non-canonical encoding:\n in  %x\n out %x", b, again)
		}
		if CIDOf(b) != c {
			t.Fatalf("cid %s, CIDOf %s", c, CIDOf(b))
		}
		if err := CheckCanonical(e.Data); err != nil {
			t.Fatalf("accepted data CheckCanonical refuses: %v", err)
		}
		// Verify must answer, not panic, whatever the signature.
		_ = e.Verify(testKey(1).Public().(ed25519.PublicKey))
		// As must a projector's look at a few fields of the data.
		var some struct {
			Thread  string   `cbor:"thread"`
			Refutes []string `cbor:"refutes"`
		}
		_ = DecodeDataFields(e.Data, &some)
	})
}

// FuzzCheckCanonical: CheckCanonical never panics, and what it accepts
// decodes and re-encodes to itself.
func FuzzCheckCanonical(f *testing.F) {
	for _, tc := range badDataTests {
		f.Add(mustHex(f, tc.hex))
	}
	for _, tc := range goodEncodingTests {
		f.Add(mustHex(f, tc.hex))
	}
	for _, s := range makeGoldenEvents(f) {
		f.Add([]byte(s.ev.Data))
		f.Add(s.enc)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := CheckCanonical(b); err != nil {
			if !errors.Is(err, ErrNonCanonical) {
				t.Fatalf("error outside the sentinel: %v", err)
			}
			return
		}
		var v any
		if err := UnmarshalStrict(b, &v); err != nil {
			t.Fatalf("accepted, but UnmarshalStrict fails: %v", err)
		}
		again, err := MarshalCanonical(v)
		if err != nil {
			t.Fatalf("accepted, but re-encoding fails: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("accepted a non-canonical encoding:\n in  %x\n out %x", b, again)
		}
	})
}

// FuzzSignDecode: whatever Sign accepts, DecodeEvent accepts with the same
// CID, and it verifies. A realm must never sign an event its peers refuse:
// the chain would stop there.
func FuzzSignDecode(f *testing.F) {
	for _, s := range makeGoldenEvents(f) {
		f.Add(s.ev.Realm, s.ev.Type, s.ev.Author, s.ev.At, []byte(s.ev.Data))
	}
	for _, tc := range badDataTests {
		f.Add("a", "t", "a:b", int64(0), mustHex(f, tc.hex))
	}
	key := testKey(7)
	pub := key.Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, realm, typ, author string, at int64, data []byte) {
		e := &Event{Realm: realm, Seq: 1, Type: typ, At: at, Author: author, Data: data}
		b, c, err := e.Sign(key)
		if err != nil {
			return
		}
		got, c2, err := DecodeEvent(b)
		if err != nil {
			t.Fatalf("Sign made an event DecodeEvent refuses: %v\n%x", err, b)
		}
		if c2 != c {
			t.Fatalf("cid %s after decoding, %s from Sign", c2, c)
		}
		if err := got.Verify(pub); err != nil {
			t.Fatalf("verify: %v", err)
		}
	})
}

// FuzzParseIdentity: never panics; a parsed identity writes itself back as
// its input and re-parses to itself.
func FuzzParseIdentity(f *testing.F) {
	for _, name := range []string{"identity_valid.txt", "identity_invalid.txt"} {
		for _, s := range readCases(f, name) {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseIdentity(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("error outside the sentinel: %v", err)
			}
			return
		}
		if id.String() != s {
			t.Fatalf("ParseIdentity(%q).String() = %q", s, id)
		}
		again, err := ParseIdentity(id.String())
		if err != nil || again != id {
			t.Fatalf("%q re-parses to %+v, %v", id, again, err)
		}
		if id.IsHuman() != (id.Prefix == HumanPrefix) {
			t.Fatalf("IsHuman of %q", s)
		}
	})
}

// FuzzParseKey: never panics; a parsed key's String re-parses to itself.
func FuzzParseKey(f *testing.F) {
	kinds := []KeyKind{KeyThread, KeyMessage, KeyClaim}
	for _, name := range []string{"key_valid.txt", "key_invalid.txt"} {
		for _, c := range readKeyCases(f, name) {
			f.Add(uint8(max(0, slices.Index(kinds, c.kind))), c.in)
		}
	}
	f.Fuzz(func(t *testing.T, kindIndex uint8, s string) {
		kind := kinds[int(kindIndex)%len(kinds)]
		k, err := ParseKey(kind, s)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("error outside the sentinel: %v", err)
			}
			return
		}
		if k.Kind != kind || k.N == 0 {
			t.Fatalf("ParseKey(%s, %q) = %+v", kind, s, k)
		}
		again, err := ParseKey(kind, k.String())
		if err != nil || again != k {
			t.Fatalf("%q re-parses to %+v, %v; want %+v", k, again, err, k)
		}
		if local, err := ParseKey(kind, k.Local()); err != nil || local.N != k.N || local.Realm != "" {
			t.Fatalf("Local %q re-parses to %+v, %v", k.Local(), local, err)
		}
	})
}

// FuzzSlug: whatever the label, Slug makes a valid line, and is idempotent.
func FuzzSlug(f *testing.F) {
	for _, tc := range slugTests {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, label string) {
		s := Slug(label)
		if err := checkLine(s); err != nil {
			t.Fatalf("Slug(%q) = %q: %v", label, s, err)
		}
		if again := Slug(s); again != s {
			t.Fatalf("Slug(%q) = %q, Slug of that = %q", label, s, again)
		}
	})
}
