package protocol

import (
	"crypto/sha256"
	"math/rand/v2"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

func mustMultihash(t testing.TB, digest []byte, code uint64) multihash.Multihash {
	mh, err := multihash.Encode(digest, code)
	if err != nil {
		t.Fatal(err)
	}
	return mh
}

// cidStringTests are CIDs of the versions, codecs and digest lengths
// relay meets, and one too long for CIDString's own encoder.
func cidStringTests(t testing.TB) []cid.Cid {
	sum := sha256.Sum256([]byte("relay"))
	long := make([]byte, 100)
	return []cid.Cid{
		CIDOf([]byte("an event")),
		BlobCID([]byte("a blob")),
		cid.NewCidV0(mustMultihash(t, sum[:], multihash.SHA2_256)),
		cid.NewCidV1(cid.Raw, mustMultihash(t, sum[:], multihash.SHA2_256)),
		cid.NewCidV1(cid.DagJSON, mustMultihash(t, sum[:20], multihash.SHA1)),
		cid.NewCidV1(cid.DagCBOR, mustMultihash(t, []byte{}, multihash.IDENTITY)),
		cid.NewCidV1(cid.DagCBOR, mustMultihash(t, long[:72], multihash.IDENTITY)),
		cid.NewCidV1(cid.DagCBOR, mustMultihash(t, long, multihash.IDENTITY)),
	}
}

// CIDString writes what c.String() writes, for any CID.
func TestCIDString(t *testing.T) {
	cids := cidStringTests(t)
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		d := make([]byte, r.IntN(90))
		for i := range d {
			d[i] = byte(r.UintN(256))
		}
		cids = append(cids, cid.NewCidV1(r.Uint64N(1<<20), mustMultihash(t, d, multihash.IDENTITY)))
	}
	for _, c := range cids {
		if got, want := CIDString(c), c.String(); got != want {
			t.Errorf("CIDString(%q) = %s, want %s", c.KeyString(), got, want)
		}
	}
}

func FuzzCIDString(f *testing.F) {
	for _, c := range cidStringTests(f) {
		f.Add(c.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := cid.Cast(b)
		if err != nil {
			return
		}
		if got, want := CIDString(c), c.String(); got != want {
			t.Fatalf("CIDString(%x) = %s, want %s", b, got, want)
		}
	})
}

func BenchmarkCIDString(b *testing.B) {
	c := CIDOf([]byte("an event"))
	b.Run("CIDString", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = CIDString(c)
		}
	})
	b.Run("String", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = c.String()
		}
	})
}
