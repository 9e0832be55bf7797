package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// CBOR written by hand, so that tests can make what the encoder never would.

func cborHead(major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return []byte{m | byte(n)}
	case n <= 0xff:
		return []byte{m | 24, byte(n)}
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16([]byte{m | 25}, uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32([]byte{m | 26}, uint32(n))
	default:
		return binary.BigEndian.AppendUint64([]byte{m | 27}, n)
	}
}

func cborInt(n int64) []byte {
	if n >= 0 {
		return cborHead(0, uint64(n))
	}
	return cborHead(1, uint64(-1-n))
}

func cborText(s string) []byte  { return append(cborHead(3, uint64(len(s))), s...) }
func cborBytes(b []byte) []byte { return append(cborHead(2, uint64(len(b))), b...) }

func cborLink(c cid.Cid) []byte {
	return append(cborHead(6, tagLink), cborBytes(append([]byte{0}, c.Bytes()...))...)
}

// pair is one map entry; k is the encoded key, so it need not be text.
type pair struct{ k, v []byte }

// pairs is a map in the order it is written.
type pairs []pair

func (ps pairs) enc() []byte {
	b := cborHead(5, uint64(len(ps)))
	for _, p := range ps {
		b = append(append(b, p.k...), p.v...)
	}
	return b
}

// set returns a copy with the value of key k replaced.
func (ps pairs) set(k string, v []byte) pairs {
	out := slices.Clone(ps)
	for i := range out {
		if bytes.Equal(out[i].k, cborText(k)) {
			out[i].v = v
			return out
		}
	}
	panic("no key " + k)
}

// drop returns a copy without key k.
func (ps pairs) drop(k string) pairs {
	return slices.DeleteFunc(slices.Clone(ps), func(p pair) bool { return bytes.Equal(p.k, cborText(k)) })
}

// add returns a copy with one more entry, in canonical position (after any
// entry with an equal key, so a duplicate lands next to its twin).
func (ps pairs) add(k string, v []byte) pairs {
	key := cborText(k)
	i := 0
	for i < len(ps) && !lengthFirstLess(key, ps[i].k) {
		i++
	}
	return slices.Insert(slices.Clone(ps), i, pair{key, v})
}

func (ps pairs) swap(i, j int) pairs {
	out := slices.Clone(ps)
	out[i], out[j] = out[j], out[i]
	return out
}

func lengthFirstLess(a, b []byte) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return bytes.Compare(a, b) < 0
}

// eventPairs writes e as the canonical encoder should: keys length-first.
func eventPairs(e *Event) pairs {
	prev := []byte{0xf6}
	if e.Prev.Defined() {
		prev = cborLink(e.Prev.Cid)
	}
	return pairs{
		{cborText("at"), cborInt(e.At)},
		{cborText("seq"), cborHead(0, e.Seq)},
		{cborText("sig"), cborBytes(e.Sig)},
		{cborText("data"), e.Data},
		{cborText("prev"), prev},
		{cborText("type"), cborText(e.Type)},
		{cborText("realm"), cborText(e.Realm)},
		{cborText("author"), cborText(e.Author)},
	}
}

// refusalBase is what the refusal cases start from: a signed seq 1 event
// and a signed seq 2 event that follows it.
type refusalBase struct {
	one, two pairs
	prev     cid.Cid
}

func newRefusalBase(t testing.TB) *refusalBase {
	t.Helper()
	evs := makeGoldenEvents(t)
	one, two := evs[0], evs[1]
	rb := &refusalBase{one: eventPairs(one.ev), two: eventPairs(two.ev), prev: one.cid}
	// The hand-written form must be the encoder's form, or the cases below
	// would test the hand-writing.
	if !bytes.Equal(rb.one.enc(), one.enc) || !bytes.Equal(rb.two.enc(), two.enc) {
		t.Fatal("hand-written encoding differs from the encoder's")
	}
	return rb
}

func rawCID(t testing.TB, codec uint64, mhType uint64) cid.Cid {
	mh, err := multihash.Sum([]byte("relay"), mhType, -1)
	if err != nil {
		t.Fatal(err)
	}
	return cid.NewCidV1(codec, mh)
}

// badDataTests are event data that CheckCanonical must refuse. decodeErr is
// what DecodeEvent returns for an event carrying them: ErrNonCanonical when
// the whole event decodes and CheckCanonical catches it, ErrInvalidEvent
// when the strict decoder refuses the event first.
var badDataTests = []struct {
	name      string
	hex       string
	decodeErr error
}{
	{"keys out of order", "a2 6162 01 6161 02", ErrNonCanonical},
	{"keys not length-first", "a2 626161 01 6162 02", ErrNonCanonical},
	{"int not shortest", "a1 616e 1801", ErrNonCanonical},
	{"int not shortest (2 bytes)", "a1 616e 190018", ErrNonCanonical},
	{"negative int not shortest", "a1 616e 3800", ErrNonCanonical},
	{"text length not shortest", "a1 6173 780161", ErrNonCanonical},
	{"map length not shortest", "b801 6161 01", ErrNonCanonical},
	{"float16", "a1 6166 f93e00", ErrNonCanonical},
	{"float32", "a1 6166 fa3fc00000", ErrNonCanonical},
	{"NaN", "a1 6166 fb7ff8000000000000", ErrNonCanonical},
	{"NaN as float16", "a1 6166 f97e00", ErrNonCanonical},
	{"+Infinity", "a1 6166 fb7ff0000000000000", ErrNonCanonical},
	{"-Infinity", "a1 6166 fbfff0000000000000", ErrNonCanonical},
	{"duplicate key", "a2 6161 01 6161 01", ErrNonCanonical},
	{"integer key", "a1 01 01", ErrNonCanonical},
	{"bytes key", "a1 4161 01", ErrNonCanonical},
	{"tag 1 (time)", "a1 6174 c11a6553f100", ErrNonCanonical},
	{"tag 0 (time text)", "a1 6174 c074323032332d31312d31345432323a31333a32305a", ErrNonCanonical},
	{"tag 2 (bignum)", "a1 616e c24101", ErrNonCanonical},
	{"tag 55799 (self-described)", "d9d9f7 a0", ErrNonCanonical},
	{"tag 42 without 0x00 prefix", "a1 616c d82a 5824 01711220c19a797fa1fd590cd2e5b42d1cf5f246e29b91684e2f87404b81dc345c7a56a0", ErrNonCanonical},
	{"tag 42 truncated cid", "a1 616c d82a 45 0001711220", ErrNonCanonical},
	{"tag 42 garbage cid", "a1 616c d82a 43 00ffff", ErrNonCanonical},
	{"tag 42 empty", "a1 616c d82a 40", ErrNonCanonical},
	{"tag 42 over text", "a1 616c d82a 6161", ErrNonCanonical},
	{"tag 42 cid with trailing byte", "a1 616c d82a 5826 00 01711220c19a797fa1fd590cd2e5b42d1cf5f246e29b91684e2f87404b81dc345c7a56a0 00", ErrNonCanonical},
	{"undefined", "a1 6175 f7", ErrNonCanonical},
	{"simple value 0", "a1 6173 e0", ErrNonCanonical},
	{"simple value 255", "a1 6173 f8ff", ErrNonCanonical},
	{"non-UTF-8 text", "a1 6173 62c328", ErrNonCanonical},
	{"non-UTF-8 key", "a1 62c328 01", ErrNonCanonical},
	{"indefinite-length map", "bf 6161 01 ff", ErrInvalidEvent},
	{"indefinite-length text", "a1 6173 7f 6161 ff", ErrInvalidEvent},
	{"indefinite-length bytes", "a1 6162 5f 4101 ff", ErrInvalidEvent},
	{"indefinite-length array", "a1 616c 9f 01 ff", ErrInvalidEvent},
	{"nested too deep", strings.Repeat("a1 6161 ", 33) + "a0", ErrInvalidEvent},
}

func TestCheckCanonicalRefuses(t *testing.T) {
	for _, tc := range badDataTests {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckCanonical(mustHex(t, tc.hex)); !errors.Is(err, ErrNonCanonical) {
				t.Fatalf("CheckCanonical = %v, want ErrNonCanonical", err)
			}
		})
	}
}

// refusalTests are encoded events that DecodeEvent must refuse.
var refusalTests = []struct {
	name string
	make func(t testing.TB, rb *refusalBase) []byte
	want error
}{
	// Canonical form of the envelope.
	{"keys out of order", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.swap(0, 1).enc()
	}, ErrNonCanonical},
	{"keys sorted bytewise, not length-first", func(t testing.TB, rb *refusalBase) []byte {
		ps := slices.Clone(rb.one)
		// Compare the key text, not its encoding: the encoding starts with
		// the length, which would make the order length-first again.
		slices.SortFunc(ps, func(a, b pair) int { return bytes.Compare(a.k[1:], b.k[1:]) })
		return ps.enc()
	}, ErrNonCanonical},
	{"seq not shortest", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("seq", []byte{0x19, 0x00, 0x01}).enc()
	}, ErrNonCanonical},
	{"at not shortest", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("at", []byte{0x1b, 0, 0, 0, 0, 0, 0, 0, 0}).enc()
	}, ErrNonCanonical},
	{"type length not shortest", func(t testing.TB, rb *refusalBase) []byte {
		typ := "parley.board.created"
		return rb.one.set("type", append([]byte{0x78, byte(len(typ))}, typ...)).enc()
	}, ErrNonCanonical},
	{"map length not shortest", func(t testing.TB, rb *refusalBase) []byte {
		return append([]byte{0xb8, 8}, rb.one.enc()[1:]...)
	}, ErrNonCanonical},
	{"field name in capitals", func(t testing.TB, rb *refusalBase) []byte {
		ps := rb.one.drop("realm")
		return ps.add("Realm", cborText("ainotes")).enc()
	}, ErrNonCanonical},
	{"prev missing at seq 1", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.drop("prev").enc()
	}, ErrNonCanonical},
	{"indefinite-length map", func(t testing.TB, rb *refusalBase) []byte {
		b := rb.one.enc()
		return append(append([]byte{0xbf}, b[1:]...), 0xff)
	}, ErrInvalidEvent},
	{"indefinite-length text", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("type", slices.Concat([]byte{0x7f}, cborText("parley.board"), cborText(".created"), []byte{0xff})).enc()
	}, ErrInvalidEvent},
	{"indefinite-length sig", func(t testing.TB, rb *refusalBase) []byte {
		sig := eventValue(rb.one, "sig")[2:]
		return rb.one.set("sig", slices.Concat([]byte{0x5f}, cborBytes(sig[:32]), cborBytes(sig[32:]), []byte{0xff})).enc()
	}, ErrInvalidEvent},
	{"duplicate field", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.add("seq", cborInt(1)).enc()
	}, ErrInvalidEvent},
	{"unknown field", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.add("extra", cborInt(1)).enc()
	}, ErrInvalidEvent},
	{"integer key", func(t testing.TB, rb *refusalBase) []byte {
		return append(rb.one, pair{cborInt(1), cborInt(1)}).enc()
	}, ErrInvalidEvent},
	{"trailing byte", func(t testing.TB, rb *refusalBase) []byte {
		return append(rb.one.enc(), 0x00)
	}, ErrInvalidEvent},
	{"two events", func(t testing.TB, rb *refusalBase) []byte {
		return append(rb.one.enc(), rb.one.enc()...)
	}, ErrInvalidEvent},
	{"truncated", func(t testing.TB, rb *refusalBase) []byte {
		b := rb.one.enc()
		return b[:len(b)-1]
	}, ErrInvalidEvent},
	{"empty input", func(t testing.TB, rb *refusalBase) []byte { return nil }, ErrInvalidEvent},
	{"null", func(t testing.TB, rb *refusalBase) []byte { return []byte{0xf6} }, ErrInvalidEvent},
	{"undefined", func(t testing.TB, rb *refusalBase) []byte { return []byte{0xf7} }, ErrInvalidEvent},
	{"an array", func(t testing.TB, rb *refusalBase) []byte { return []byte{0x80} }, ErrInvalidEvent},
	{"an empty map", func(t testing.TB, rb *refusalBase) []byte { return []byte{0xa0} }, ErrInvalidEvent},
	{"non-UTF-8 realm", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("realm", []byte{0x62, 0xc3, 0x28}).enc()
	}, ErrInvalidEvent},
	{"non-UTF-8 type", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("type", []byte{0x63, 'a', 0xff, 'b'}).enc()
	}, ErrInvalidEvent},
	{"type as bytes", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("type", cborBytes([]byte("parley.board.created"))).enc()
	}, ErrInvalidEvent},
	{"sig as text", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("sig", cborText(strings.Repeat("s", 64))).enc()
	}, ErrInvalidEvent},

	// Field rules.
	{"seq 0", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("seq", cborInt(0)).enc()
	}, ErrInvalidEvent},
	{"seq negative", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("seq", cborInt(-1)).enc()
	}, ErrInvalidEvent},
	{"seq as float", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("seq", []byte{0xfb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0}).enc()
	}, ErrInvalidEvent},
	{"seq 1 with prev", func(t testing.TB, rb *refusalBase) []byte {
		return rb.two.set("seq", cborInt(1)).enc()
	}, ErrInvalidEvent},
	{"seq 2 without prev", func(t testing.TB, rb *refusalBase) []byte {
		return rb.two.set("prev", []byte{0xf6}).enc()
	}, ErrInvalidEvent},
	{"seq 2 with prev missing", func(t testing.TB, rb *refusalBase) []byte {
		return rb.two.drop("prev").enc()
	}, ErrInvalidEvent},
	{"prev undefined", func(t testing.TB, rb *refusalBase) []byte {
		return rb.two.set("prev", []byte{0xf7}).enc()
	}, ErrInvalidEvent},
	{"prev as bytes, not a link", func(t testing.TB, rb *refusalBase) []byte {
		return rb.two.set("prev", cborBytes(append([]byte{0}, rb.prev.Bytes()...))).enc()
	}, ErrInvalidEvent},
	{"prev under tag 1", func(t testing.TB, rb *refusalBase) []byte {
		return rb.two.set("prev", []byte{0xc1, 0x1a, 0x65, 0x53, 0xf1, 0x00}).enc()
	}, ErrInvalidEvent},
	{"prev link malformed", func(t testing.TB, rb *refusalBase) []byte {
		return rb.two.set("prev", slices.Concat(cborHead(6, tagLink), cborBytes([]byte{0, 1, 0x71, 0x12}))).enc()
	}, ErrInvalidEvent},
	{"prev link without 0x00 prefix", func(t testing.TB, rb *refusalBase) []byte {
		return rb.two.set("prev", slices.Concat(cborHead(6, tagLink), cborBytes(rb.prev.Bytes()))).enc()
	}, ErrInvalidEvent},
	{"prev link to raw codec", func(t testing.TB, rb *refusalBase) []byte {
		return rb.two.set("prev", cborLink(rawCID(t, cid.Raw, multihash.SHA2_256))).enc()
	}, ErrInvalidEvent},
	{"prev link with sha2-512", func(t testing.TB, rb *refusalBase) []byte {
		return rb.two.set("prev", cborLink(rawCID(t, cid.DagCBOR, multihash.SHA2_512))).enc()
	}, ErrInvalidEvent},
	{"prev link CIDv0", func(t testing.TB, rb *refusalBase) []byte {
		return rb.two.set("prev", cborLink(cid.NewCidV0(rb.prev.Hash()))).enc()
	}, ErrInvalidEvent},
	{"data is an array", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("data", []byte{0x81, 0x01}).enc()
	}, ErrInvalidEvent},
	{"data is null", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("data", []byte{0xf6}).enc()
	}, ErrInvalidEvent},
	{"data is text", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("data", cborText("{}")).enc()
	}, ErrInvalidEvent},
	{"data missing", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.drop("data").enc()
	}, ErrInvalidEvent},
	{"sig of 63 bytes", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("sig", cborBytes(make([]byte, 63))).enc()
	}, ErrInvalidEvent},
	{"sig of 65 bytes", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("sig", cborBytes(make([]byte, 65))).enc()
	}, ErrInvalidEvent},
	{"sig empty", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("sig", cborBytes(nil)).enc()
	}, ErrInvalidEvent},
	{"sig missing", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.drop("sig").enc()
	}, ErrInvalidEvent},
	{"realm invalid", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("realm", cborText("AI Notes")).enc()
	}, ErrInvalidEvent},
	{"realm empty", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("realm", cborText("")).enc()
	}, ErrInvalidEvent},
	{"type empty", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("type", cborText("")).enc()
	}, ErrInvalidEvent},
	{"type too long", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("type", cborText(strings.Repeat("t", 65))).enc()
	}, ErrInvalidEvent},
	{"author too long", func(t testing.TB, rb *refusalBase) []byte {
		return rb.one.set("author", cborText(strings.Repeat("a", 201))).enc()
	}, ErrInvalidEvent},

	// Size.
	{"oversized", func(t testing.TB, rb *refusalBase) []byte {
		data := pairs{}.add("pad", cborText(strings.Repeat("x", MaxEventSize))).enc()
		return rb.one.set("data", data).enc()
	}, ErrEventTooLarge},
	{"oversized garbage", func(t testing.TB, rb *refusalBase) []byte {
		return make([]byte, MaxEventSize+1)
	}, ErrEventTooLarge},
}

// eventValue returns the encoded value of key k.
func eventValue(ps pairs, k string) []byte {
	for _, p := range ps {
		if bytes.Equal(p.k, cborText(k)) {
			return p.v
		}
	}
	panic("no key " + k)
}

func TestDecodeEventRefuses(t *testing.T) {
	rb := newRefusalBase(t)
	for _, tc := range refusalTests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.make(t, rb)
			e, c, err := DecodeEvent(b)
			if !errors.Is(err, tc.want) {
				t.Fatalf("DecodeEvent = %v, want %v", err, tc.want)
			}
			if e != nil || c.Defined() {
				t.Fatalf("DecodeEvent returned an event with its error")
			}
		})
	}
	for _, tc := range badDataTests {
		t.Run("data/"+tc.name, func(t *testing.T) {
			b := rb.one.set("data", mustHex(t, tc.hex)).enc()
			if _, _, err := DecodeEvent(b); !errors.Is(err, tc.decodeErr) {
				t.Fatalf("DecodeEvent = %v, want %v", err, tc.decodeErr)
			}
		})
	}
}

// TestDecodeEventSizeLimit checks both sides of MaxEventSize, for Sign and
// for DecodeEvent.
func TestDecodeEventSizeLimit(t *testing.T) {
	key := testKey(3)
	sized := func(pad int) *Event {
		data, err := EncodeData(map[string]string{"pad": strings.Repeat("x", pad)})
		if err != nil {
			t.Fatal(err)
		}
		return &Event{Realm: "big", Seq: 1, Type: "t", Author: "big:a", Data: data}
	}
	e := sized(100_000) // long enough that the pad's length head keeps its size
	b, _, err := e.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	pad := 100_000 + MaxEventSize - len(b)

	e = sized(pad)
	b, c, err := e.Sign(key)
	if err != nil {
		t.Fatalf("event of exactly MaxEventSize: %v", err)
	}
	if len(b) != MaxEventSize {
		t.Fatalf("built %d bytes, want %d", len(b), MaxEventSize)
	}
	if _, c2, err := DecodeEvent(b); err != nil || c2 != c {
		t.Fatalf("DecodeEvent at the limit: %v", err)
	}

	e = sized(pad + 1)
	if _, _, err := e.Sign(key); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("Sign one byte over: %v, want ErrEventTooLarge", err)
	}
	if _, _, err := DecodeEvent(append(b, 0)); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("DecodeEvent one byte over: %v, want ErrEventTooLarge", err)
	}
}

// badSignTests are events Sign must refuse before signing anything.
var badSignTests = []struct {
	name string
	ev   Event
	want error
}{
	{"seq 0", Event{Realm: "a", Seq: 0, Type: "t", Data: []byte{0xa0}}, ErrInvalidEvent},
	{"bad realm", Event{Realm: "A", Seq: 1, Type: "t", Data: []byte{0xa0}}, ErrInvalidEvent},
	{"no type", Event{Realm: "a", Seq: 1, Data: []byte{0xa0}}, ErrInvalidEvent},
	{"no data", Event{Realm: "a", Seq: 1, Type: "t"}, ErrInvalidEvent},
	{"data is an array", Event{Realm: "a", Seq: 1, Type: "t", Data: []byte{0x80}}, ErrInvalidEvent},
	{"seq 2 without prev", Event{Realm: "a", Seq: 2, Type: "t", Data: []byte{0xa0}}, ErrInvalidEvent},
	{"seq 1 with prev", Event{Realm: "a", Seq: 1, Prev: Link{CIDOf(nil)}, Type: "t", Data: []byte{0xa0}}, ErrInvalidEvent},
	{"prev of another shape", Event{Realm: "a", Seq: 2, Prev: Link{cid.NewCidV1(cid.Raw, CIDOf(nil).Hash())}, Type: "t", Data: []byte{0xa0}}, ErrInvalidEvent},
	{"data keys out of order", Event{Realm: "a", Seq: 1, Type: "t", Data: []byte{0xa2, 0x61, 'b', 1, 0x61, 'a', 2}}, ErrNonCanonical},
	{"data with float32", Event{Realm: "a", Seq: 1, Type: "t", Data: []byte{0xa1, 0x61, 'f', 0xfa, 0x3f, 0xc0, 0, 0}}, ErrNonCanonical},
	{"data with trailing bytes", Event{Realm: "a", Seq: 1, Type: "t", Data: []byte{0xa0, 0xa0}}, ErrNonCanonical},
	// The encoder writes any Go string as text; DecodeEvent refuses text
	// that is not UTF-8, so Sign must too.
	{"type not UTF-8", Event{Realm: "a", Seq: 1, Type: "t\xff", Data: []byte{0xa0}}, ErrInvalidEvent},
	{"author not UTF-8", Event{Realm: "a", Seq: 1, Type: "t", Author: "a:\xc3", Data: []byte{0xa0}}, ErrInvalidEvent},
}

func TestSignRefuses(t *testing.T) {
	key := testKey(1)
	for _, tc := range badSignTests {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.ev
			if _, _, err := e.Sign(key); !errors.Is(err, tc.want) {
				t.Fatalf("Sign = %v, want %v", err, tc.want)
			}
			if e.Sig != nil {
				t.Fatalf("Sign set a signature on a refused event")
			}
		})
	}
}

// TestEncodeDataRefuses: data must be a map, and hold no float the
// canonical form cannot carry.
func TestEncodeDataRefuses(t *testing.T) {
	for _, v := range []any{nil, 1, "x", []any{}, map[string]any{"f": math.NaN()}, map[string]any{"f": math.Inf(-1)}} {
		if _, err := EncodeData(v); err == nil {
			t.Errorf("EncodeData(%#v) succeeded", v)
		}
	}
}

// nested returns data nested depth levels deep: maps, with a link at the
// bottom when link is set (a tag is a level too).
func nested(t testing.TB, depth int, link bool) []byte {
	var v any = map[string]any{}
	if link {
		v = Link{CIDOf(nil)}
	}
	for range depth - 1 {
		v = map[string]any{"a": v}
	}
	if link {
		v = map[string]any{"a": v} // the tag's content is one more level
	}
	b, err := MarshalCanonical(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNestingLimit: data as deep as CheckCanonical allows must survive a
// round trip through Sign and DecodeEvent, the envelope's extra level
// notwithstanding; one level more is refused on both sides.
func TestNestingLimit(t *testing.T) {
	key := testKey(1)
	for _, link := range []bool{false, true} {
		deepest := nested(t, maxDataDepth, link)
		if err := CheckCanonical(deepest); err != nil {
			t.Fatalf("link %v: CheckCanonical at the limit: %v", link, err)
		}
		e := &Event{Realm: "a", Seq: 1, Type: "t", Data: deepest}
		b, c, err := e.Sign(key)
		if err != nil {
			t.Fatalf("link %v: Sign at the limit: %v", link, err)
		}
		if _, c2, err := DecodeEvent(b); err != nil || c2 != c {
			t.Fatalf("link %v: DecodeEvent of a signed event at the limit: %v", link, err)
		}

		tooDeep := nested(t, maxDataDepth+1, link)
		if err := CheckCanonical(tooDeep); !errors.Is(err, ErrNonCanonical) {
			t.Fatalf("link %v: CheckCanonical one over: %v", link, err)
		}
		e = &Event{Realm: "a", Seq: 1, Type: "t", Data: tooDeep}
		if _, _, err := e.Sign(key); !errors.Is(err, ErrNonCanonical) {
			t.Fatalf("link %v: Sign one over: %v", link, err)
		}
		e.Sig = make([]byte, 64)
		if _, _, err := DecodeEvent(eventPairs(e).enc()); err == nil {
			t.Fatalf("link %v: DecodeEvent one over succeeded", link)
		}
	}
}
