package protocol

import (
	"crypto/ed25519"
	"errors"
	"testing"
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
