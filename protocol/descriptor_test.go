package protocol

import (
	"crypto/ed25519"
	"errors"
	"testing"
)

func TestDescriptor(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	other := ed25519.NewKeyFromSeed(append(make([]byte, 31), 1))
	d := &Descriptor{Realm: "ainotes", Addrs: []string{"/ip4/127.0.0.1/tcp/4001"}, At: 1_700_000_000_000}
	b, err := SignDescriptor(d, key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeDescriptor(b)
	if err != nil || got.Realm != "ainotes" || string(got.Key) != string(key.Public().(ed25519.PublicKey)) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	// Another key's signature under this key's name does not verify.
	forged := *got
	forged.Key = other.Public().(ed25519.PublicKey)
	fb, _ := encMode.Marshal(&forged)
	bad := map[string][]byte{
		"forged":    fb,
		"flipped":   append(append([]byte{}, b[:len(b)-1]...), b[len(b)-1]^1),
		"truncated": b[:len(b)-3],
		"empty":     nil,
		"huge":      make([]byte, MaxDescriptorSize+1),
	}
	for name, raw := range bad {
		if _, err := DecodeDescriptor(raw); !errors.Is(err, ErrBadDescriptor) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := SignDescriptor(&Descriptor{Realm: "Bad Name"}, key); !errors.Is(err, ErrBadDescriptor) {
		t.Errorf("bad name signed: %v", err)
	}
}

func FuzzDecodeDescriptor(f *testing.F) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	b, _ := SignDescriptor(&Descriptor{Realm: "a", Addrs: []string{"/ip4/1.2.3.4/tcp/1"}}, key)
	f.Add(b)
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := DecodeDescriptor(raw)
		if err != nil {
			return
		}
		again, err := SignDescriptor(&Descriptor{Realm: d.Realm, Addrs: d.Addrs, At: d.At}, key)
		if err != nil || len(again) == 0 {
			t.Fatalf("a decoded descriptor does not re-sign: %v", err)
		}
	})
}
