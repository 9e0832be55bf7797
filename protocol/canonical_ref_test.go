package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
)

// checkCanonicalByDecoding is CheckCanonical as it was first written, the
// reference the scanner is held to: decode b generically, check every
// value is one DAG-CBOR allows, re-encode it and compare.
func checkCanonicalByDecoding(b []byte) error {
	var v any
	rest, err := decMode.UnmarshalFirst(b, &v)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNonCanonical, err)
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: trailing bytes", ErrNonCanonical)
	}
	if err := checkDecoded(v); err != nil {
		return err
	}
	again, err := encMode.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNonCanonical, err)
	}
	if !bytes.Equal(again, b) {
		return ErrNonCanonical
	}
	return nil
}

func checkDecoded(v any) error {
	switch x := v.(type) {
	case nil, bool, string, []byte, uint64, int64:
		return nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%w: NaN or infinity", ErrNonCanonical)
		}
		return nil
	case []any:
		for _, e := range x {
			if err := checkDecoded(e); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		for _, e := range x {
			if err := checkDecoded(e); err != nil {
				return err
			}
		}
		return nil
	case cbor.Tag:
		if x.Number != tagLink {
			return fmt.Errorf("%w: tag %d", ErrNonCanonical, x.Number)
		}
		raw, ok := x.Content.([]byte)
		if !ok || len(raw) < 2 || raw[0] != 0 {
			return fmt.Errorf("%w: malformed link", ErrNonCanonical)
		}
		if _, err := cid.Cast(raw[1:]); err != nil {
			return fmt.Errorf("%w: malformed link: %v", ErrNonCanonical, err)
		}
		return nil
	default:
		return fmt.Errorf("%w: value of type %T", ErrNonCanonical, v)
	}
}

// canonicalSeeds are inputs both checks must agree on.
func canonicalSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, tc := range badDataTests {
		seeds = append(seeds, mustHex(t, tc.hex))
	}
	for _, tc := range goodEncodingTests {
		seeds = append(seeds, mustHex(t, tc.hex))
	}
	for _, s := range makeGoldenEvents(t) {
		seeds = append(seeds, []byte(s.ev.Data), s.enc)
	}
	for _, link := range []bool{false, true} {
		seeds = append(seeds, nested(t, maxDataDepth, link), nested(t, maxDataDepth+1, link))
	}
	for _, h := range []string{"3b7fffffffffffffff", "3b8000000000000000", "1bffffffffffffffff", "f4", "f5", "f6", "fb8000000000000000",
		"99ffff", "9a00010000", "a0", "80", "60", "40", "d82a4100"} {
		seeds = append(seeds, mustHex(t, h))
	}
	return seeds
}

func TestCheckCanonicalAgreesWithDecoding(t *testing.T) {
	for _, b := range canonicalSeeds(t) {
		agree(t, b)
	}
}

func agree(t *testing.T, b []byte) {
	t.Helper()
	got, want := CheckCanonical(b), checkCanonicalByDecoding(b)
	if (got == nil) != (want == nil) {
		t.Fatalf("%x: the scanner says %v, decoding says %v", b, got, want)
	}
	if got != nil && !errors.Is(got, ErrNonCanonical) {
		t.Fatalf("%x: error outside the sentinel: %v", b, got)
	}
}

// FuzzCheckCanonicalAgrees holds the scanner to the decoding check.
func FuzzCheckCanonicalAgrees(f *testing.F) {
	for _, b := range canonicalSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(agree)
}

func BenchmarkCheckCanonical(b *testing.B) {
	data := []byte(makeGoldenEvents(b)[0].ev.Data)
	for _, c := range []struct {
		name  string
		check func([]byte) error
	}{{"scan", CheckCanonical}, {"decode", checkCanonicalByDecoding}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.check(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
