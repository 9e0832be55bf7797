package protocol

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
)

func testKey(seed byte) ed25519.PrivateKey {
	s := make([]byte, ed25519.SeedSize)
	for i := range s {
		s[i] = seed
	}
	return ed25519.NewKeyFromSeed(s)
}

func TestSignDecodeRoundTrip(t *testing.T) {
	key := testKey(1)
	data, err := EncodeData(map[string]any{"body": "hello", "n": 3, "f": 1.5, "list": []any{"a", nil, true}})
	if err != nil {
		t.Fatal(err)
	}
	e1 := &Event{Realm: "ainotes", Seq: 1, Type: "parley.board.created", At: 1700000000000, Author: "human:root", Data: data}
	b1, c1, err := e1.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	e2 := &Event{Realm: "ainotes", Seq: 2, Prev: Link{c1}, Type: "parley.thread.opened", At: 1700000000001, Author: "ainotes:bot", Data: data}
	b2, c2, err := e2.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		b    []byte
		head Head
	}{{b1, Head{}}, {b2, Head{Seq: 1, CID: c1}}} {
		got, c, err := DecodeEvent(tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if err := got.Verify(key.Public().(ed25519.PublicKey)); err != nil {
			t.Fatal(err)
		}
		if err := got.Follows(tc.head); err != nil {
			t.Fatal(err)
		}
		if c != CIDOf(tc.b) {
			t.Fatal("cid mismatch")
		}
	}
	if err := e2.Verify(testKey(2).Public().(ed25519.PublicKey)); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("wrong key verified: %v", err)
	}
	_ = c2
}

// tamperTests change one field of a signed event; the signature must no
// longer verify.
var tamperTests = []struct {
	name   string
	tamper func(e *Event)
}{
	{"data", func(e *Event) { e.Data = append(cbor.RawMessage{0xa1, 0x61, 'x'}, 0x01) }},
	{"data by one byte", func(e *Event) { e.Data = bytes.Replace(e.Data, []byte("body"), []byte("bodx"), 1) }},
	{"realm", func(e *Event) { e.Realm = "other" }},
	{"seq", func(e *Event) { e.Seq++ }},
	{"prev", func(e *Event) { e.Prev = Link{CIDOf([]byte("another head"))} }},
	{"type", func(e *Event) { e.Type += "x" }},
	{"at", func(e *Event) { e.At++ }},
	{"author", func(e *Event) { e.Author = "human:mallory" }},
	{"sig flipped bit", func(e *Event) { e.Sig = slices.Clone(e.Sig); e.Sig[0] ^= 1 }},
	{"sig truncated", func(e *Event) { e.Sig = e.Sig[:63] }},
	{"sig missing", func(e *Event) { e.Sig = nil }},
}

func TestVerifyTampered(t *testing.T) {
	evs := makeGoldenEvents(t)
	for _, s := range evs[:2] {
		pub := s.key.Public().(ed25519.PublicKey)
		for _, tc := range tamperTests {
			t.Run(s.name+"/"+tc.name, func(t *testing.T) {
				e, _, err := DecodeEvent(s.enc)
				if err != nil {
					t.Fatal(err)
				}
				if err := e.Verify(pub); err != nil {
					t.Fatalf("untouched event: %v", err)
				}
				before := *e
				tc.tamper(e)
				if reflect.DeepEqual(before, *e) {
					t.Fatal("tamper changed nothing")
				}
				if err := e.Verify(pub); !errors.Is(err, ErrBadSignature) {
					t.Fatalf("Verify = %v, want ErrBadSignature", err)
				}
			})
		}
	}
}

// TestVerifyTamperedBytes flips a byte of the body inside the encoding: the
// result is still a canonical event, and only the signature tells.
func TestVerifyTamperedBytes(t *testing.T) {
	s := makeGoldenEvents(t)[0]
	// "ö" and "ë" are both two bytes: the string keeps its length.
	b := bytes.Replace(s.enc, []byte("wörld"), []byte("wërld"), 1)
	if bytes.Equal(b, s.enc) {
		t.Fatal("no byte replaced")
	}
	e, c, err := DecodeEvent(b)
	if err != nil {
		t.Fatalf("tampered bytes should still decode: %v", err)
	}
	if c == s.cid {
		t.Fatal("tampered event kept its CID")
	}
	if err := e.Verify(s.key.Public().(ed25519.PublicKey)); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("Verify = %v, want ErrBadSignature", err)
	}
}

func TestVerifyBadKey(t *testing.T) {
	s := makeGoldenEvents(t)[0]
	pub := s.key.Public().(ed25519.PublicKey)
	for name, k := range map[string]ed25519.PublicKey{
		"another realm's key": testKey(9).Public().(ed25519.PublicKey),
		"short key":           pub[:31],
		"no key":              nil,
	} {
		if err := s.ev.Verify(k); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: Verify = %v, want ErrBadSignature", name, err)
		}
	}
}

func TestFollows(t *testing.T) {
	evs := makeGoldenEvents(t)
	one, two := evs[0], evs[1]
	other := CIDOf([]byte("another event"))
	tests := []struct {
		name string
		e    *Event
		head Head
		ok   bool
	}{
		{"first event on an empty chain", one.ev, Head{}, true},
		{"second event after the first", two.ev, Head{Seq: 1, CID: one.cid}, true},
		{"first event again", one.ev, Head{Seq: 1, CID: one.cid}, false},
		{"second event on an empty chain", two.ev, Head{}, false},
		{"second event after another first", two.ev, Head{Seq: 1, CID: other}, false},
		{"second event again", two.ev, Head{Seq: 2, CID: two.cid}, false},
		{"gap", two.ev, Head{Seq: 0, CID: cid.Undef}, false},
		{"behind the head", one.ev, Head{Seq: 5, CID: other}, false},
		{"seq 2 without prev", &Event{Seq: 2}, Head{Seq: 1, CID: one.cid}, false},
		{"head of undefined CID", two.ev, Head{Seq: 1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.e.Follows(tc.head)
			if tc.ok && err != nil {
				t.Fatalf("Follows = %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrChainBroken) {
				t.Fatalf("Follows = %v, want ErrChainBroken", err)
			}
		})
	}
}

// TestSignSplicesSignature holds Sign's spliced encoding to what the
// canonical encoder makes of the signed event, across the integer widths of
// "at" and "seq" and with and without prev.
func TestSignSplicesSignature(t *testing.T) {
	key := testKey(2)
	data, err := EncodeData(map[string]any{"body": "x"})
	if err != nil {
		t.Fatal(err)
	}
	prev := CIDOf([]byte("prev"))
	ints := []int64{0, 1, 23, 24, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, 1700000000000, 1<<63 - 1}
	for _, at := range append(ints, -1, -24, -25, -1700000000000, -1<<63) {
		for _, seq := range ints {
			if seq <= 0 {
				continue
			}
			e := &Event{Realm: "ainotes", Seq: uint64(seq), Type: "t.x", At: at, Author: "ainotes:a", Data: data}
			if seq > 1 {
				e.Prev = Link{prev}
			}
			b, c, err := e.Sign(key)
			if err != nil {
				t.Fatal(err)
			}
			want, err := encMode.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, want) || c != CIDOf(want) {
				t.Fatalf("at %d seq %d: spliced\n%x\nwant\n%x", at, seq, b, want)
			}
		}
	}
	if withSig([]byte{0xa6}, make([]byte, 64)) != nil || withSig(nil, nil) != nil {
		t.Fatal("withSig took a map of the wrong shape")
	}
}

// TestSignMatchesStandardLibrary: Sign uses curve25519-voi, whose ed25519
// must give, for every key and message, the standard library's signature,
// which is what every peer verifies with.
func TestSignMatchesStandardLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seed := make([]byte, ed25519.SeedSize)
	for i := range 500 {
		for j := range seed {
			seed[j] = byte(rng.Uint32())
		}
		key := ed25519.NewKeyFromSeed(seed)
		body := make([]byte, rng.IntN(600))
		for j := range body {
			body[j] = 'a' + byte(rng.IntN(26))
		}
		data, err := EncodeData(map[string]any{"body": string(body)})
		if err != nil {
			t.Fatal(err)
		}
		e := &Event{Realm: "ainotes", Seq: 1, Type: "t.x", At: int64(i), Author: "ainotes:a", Data: data}
		if _, _, err := e.Sign(key); err != nil {
			t.Fatal(err)
		}
		msg, err := e.SigningBytes()
		if err != nil {
			t.Fatal(err)
		}
		if want := ed25519.Sign(key, msg); !bytes.Equal(e.Sig, want) {
			t.Fatalf("key %d: signature %x, the standard library's %x", i, e.Sig, want)
		}
		if !ed25519.Verify(key.Public().(ed25519.PublicKey), msg, e.Sig) {
			t.Fatalf("key %d: the signature does not verify", i)
		}
	}
}
