package protocol

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
)

// update rewrites the golden files from what the code produces now. Use it
// only when a change of encoding is intended, for every CID changes with it:
//
//	go test ./protocol -run TestGoldenEvents -update
var update = flag.Bool("update", false, "rewrite testdata golden files")

const goldenEventsFile = "testdata/events.golden.json"

// goldenEvent is one row of the golden file. Seed and Pub let another
// implementation reproduce the row; Diag is only there to be read.
type goldenEvent struct {
	Name string `json:"name"`
	Seed string `json:"seed"` // hex of the ed25519 seed
	Pub  string `json:"pub"`  // hex of the public key
	CBOR string `json:"cbor"` // hex of the canonical encoding
	CID  string `json:"cid"`
	Sig  string `json:"sig"`  // hex
	Diag string `json:"diag"` // CBOR diagnostic notation of CBOR
}

// signedEvent is a golden event as the test makes it.
type signedEvent struct {
	name string
	key  ed25519.PrivateKey
	ev   *Event
	enc  []byte
	cid  cid.Cid
}

// goldenData is the data of the first golden event: every kind of value
// DAG-CBOR allows, and map keys whose canonical order is length-first.
func goldenData() map[string]any {
	return map[string]any{
		"body":  "héllo, wörld — 日本語 🦀",
		"empty": "",
		"ints": []any{
			0, 1, 23, 24, 255, 256, 65535, 65536, 4294967295, 4294967296,
			int64(math.MaxInt64), uint64(math.MaxUint64),
			-1, -24, -25, -256, -257, -65537, int64(math.MinInt64),
		},
		"float":  1.5,
		"floats": []any{-0.25, 2.0, 0.1, 1e300},
		"nested": map[string]any{
			"":    "the empty key sorts first",
			"b":   4,
			"a":   1,
			"bb":  2,
			"aa":  3,
			"é":   "two bytes: after bb",
			"ccc": map[string]any{"z": nil, "yy": []any{}, "xxx": map[string]any{}},
			"z":   []any{"a", nil, true, false, []any{1, []any{}}},
		},
		"null":  nil,
		"yes":   true,
		"no":    false,
		"bytes": []byte{0x00, 0x01, 0xfe, 0xff},
		"list":  []any{"a", -1, 1.5, nil, map[string]any{"k": "v"}},
	}
}

// makeGoldenEvents signs the golden events: two events of one realm chained
// through prev, and a minimal one of another realm.
func makeGoldenEvents(t testing.TB) []signedEvent {
	t.Helper()
	var out []signedEvent
	sign := func(name string, seed byte, e *Event) signedEvent {
		key := testKey(seed)
		b, c, err := e.Sign(key)
		if err != nil {
			t.Fatalf("%s: sign: %v", name, err)
		}
		s := signedEvent{name: name, key: key, ev: e, enc: b, cid: c}
		out = append(out, s)
		return s
	}
	mustData := func(v any) cbor.RawMessage {
		d, err := EncodeData(v)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	first := sign("ainotes-1", 1, &Event{
		Realm:  "ainotes",
		Seq:    1,
		Type:   "parley.board.created",
		At:     1700000000000,
		Author: "human:root",
		Data:   mustData(goldenData()),
	})
	sign("ainotes-2", 1, &Event{
		Realm:  "ainotes",
		Seq:    2,
		Prev:   Link{first.cid},
		Type:   "parley.message.posted",
		At:     1700000000001,
		Author: "ainotes:opencode",
		Data: mustData(map[string]any{
			"id":         "msg_1",
			"thread":     "th_1",
			"kind":       "answer",
			"body":       "Réponse: ça marche. ✓",
			"relates_to": []any{Link{first.cid}},
			"n":          -7,
		}),
	})
	sign("z9-relay-1", 2, &Event{
		Realm:  "z9-relay",
		Seq:    1,
		Type:   "realm.created",
		At:     -1, // before 1970: a negative integer in the envelope
		Author: "z9-relay:a.b_c-d",
		Data:   mustData(map[string]any{}),
	})
	return out
}

func (s signedEvent) golden(t testing.TB) goldenEvent {
	t.Helper()
	diag, err := cbor.Diagnose(s.enc)
	if err != nil {
		t.Fatalf("%s: diagnose: %v", s.name, err)
	}
	return goldenEvent{
		Name: s.name,
		Seed: hex.EncodeToString(s.key.Seed()),
		Pub:  hex.EncodeToString(s.key.Public().(ed25519.PublicKey)),
		CBOR: hex.EncodeToString(s.enc),
		CID:  s.cid.String(),
		Sig:  hex.EncodeToString(s.ev.Sig),
		Diag: diag,
	}
}

func readGoldenEvents(t testing.TB) []goldenEvent {
	t.Helper()
	b, err := os.ReadFile(goldenEventsFile)
	if err != nil {
		t.Fatal(err)
	}
	var gs []goldenEvent
	if err := json.Unmarshal(b, &gs); err != nil {
		t.Fatal(err)
	}
	if len(gs) == 0 {
		t.Fatal("empty golden file")
	}
	return gs
}

// TestGoldenEvents pins the canonical encoding, CID and signature of fixed
// events, so that none of them ever changes by accident.
func TestGoldenEvents(t *testing.T) {
	var got []goldenEvent
	for _, s := range makeGoldenEvents(t) {
		got = append(got, s.golden(t))
	}
	if *update {
		b, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(goldenEventsFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenEventsFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s", goldenEventsFile)
	}
	want := readGoldenEvents(t)
	if len(got) != len(want) {
		t.Fatalf("%d golden events, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g != w {
			t.Errorf("golden event %d (%s) changed:\n got %+v\nwant %+v", i, w.Name, g, w)
		}
	}
}

// TestGoldenDecode decodes every golden encoding: same CID, the signature
// verifies, the chain links, and the encoding comes back byte for byte.
func TestGoldenDecode(t *testing.T) {
	gs := readGoldenEvents(t)
	// The head each event must follow, found before the subtests so that
	// any one of them can run alone.
	heads := make([]Head, len(gs))
	last := map[string]Head{}
	for i, g := range gs {
		if e, c, err := DecodeEvent(mustHex(t, g.CBOR)); err == nil {
			heads[i] = last[e.Realm]
			last[e.Realm] = Head{Seq: e.Seq, CID: c}
		}
	}
	for i, g := range gs {
		t.Run(g.Name, func(t *testing.T) {
			b := mustHex(t, g.CBOR)
			e, c, err := DecodeEvent(b)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if c.String() != g.CID {
				t.Errorf("cid %s, want %s", c, g.CID)
			}
			if got := CIDOf(b); got != c {
				t.Errorf("CIDOf %s, DecodeEvent %s", got, c)
			}
			if hex.EncodeToString(e.Sig) != g.Sig {
				t.Errorf("sig %x, want %s", e.Sig, g.Sig)
			}
			if err := e.Verify(ed25519.PublicKey(mustHex(t, g.Pub))); err != nil {
				t.Errorf("verify: %v", err)
			}
			key := ed25519.NewKeyFromSeed(mustHex(t, g.Seed))
			if !bytes.Equal(key.Public().(ed25519.PublicKey), mustHex(t, g.Pub)) {
				t.Errorf("seed and pub disagree")
			}
			if err := e.Follows(heads[i]); err != nil {
				t.Errorf("follows: %v", err)
			}
			again, err := MarshalCanonical(e)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, b) {
				t.Errorf("re-encoding differs:\n got %x\nwant %x", again, b)
			}
			// Signing again with the same key gives the same bytes:
			// ed25519 is deterministic, so one (key, event) has one CID.
			e.Sig = nil
			b2, c2, err := e.Sign(key)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b2, b) || c2 != c {
				t.Errorf("re-signing gives %s, want %s", c2, c)
			}
		})
	}
}

// TestCIDOfByHand computes a CID without go-cid: 0x01 (v1), 0x71
// (dag-cbor), 0x12 0x20 (sha2-256, 32 bytes), digest.
func TestCIDOfByHand(t *testing.T) {
	for _, in := range [][]byte{nil, {0xa0}, []byte("relay")} {
		sum := sha256.Sum256(in)
		want := append([]byte{0x01, 0x71, 0x12, 0x20}, sum[:]...)
		c := CIDOf(in)
		if !bytes.Equal(c.Bytes(), want) {
			t.Errorf("CIDOf(%x) = %x, want %x", in, c.Bytes(), want)
		}
		if err := checkCIDShape(c); err != nil {
			t.Errorf("CIDOf(%x): %v", in, err)
		}
	}
	// The CID of the empty map, as any DAG-CBOR implementation has it.
	if got, want := CIDOf([]byte{0xa0}).String(), "bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swua"; got != want {
		t.Errorf("CID of {} = %s, want %s", got, want)
	}
}

// goodEncodingTests pin the encoding rules with bytes written by hand, so
// that the golden file does not merely record whatever the encoder did.
var goodEncodingTests = []struct {
	name string
	data any
	hex  string
}{
	{"empty map", map[string]any{}, "a0"},
	{"length-first keys", map[string]any{"b": 1, "aa": 2, "a": 3}, "a3 6161 03 6162 01 626161 02"},
	{"two-byte key after one-byte ones", map[string]any{"é": 1, "z": 2, "zz": 3}, "a3 617a 02 627a7a 03 62c3a9 01"},
	{"float is always 64-bit", map[string]any{"f": 1.5}, "a1 6166 fb3ff8000000000000"},
	{"integral float stays float", map[string]any{"f": 2.0}, "a1 6166 fb4000000000000000"},
	{"ints shortest", map[string]any{"n": []any{23, 24, 255, 256, 65536}}, "a1 616e 85 17 1818 18ff 190100 1a00010000"},
	{"negative ints", map[string]any{"n": []any{-1, -24, -25, -256, -257}}, "a1 616e 85 20 37 3818 38ff 390100"},
	{"uint64 max", map[string]any{"n": uint64(math.MaxUint64)}, "a1 616e 1bffffffffffffffff"},
	{"int64 min", map[string]any{"n": int64(math.MinInt64)}, "a1 616e 3b7fffffffffffffff"},
	{"unicode text", map[string]any{"s": "é🦀"}, "a1 6173 66c3a9f09fa680"},
	{"bytes", map[string]any{"b": []byte{1, 2}}, "a1 6162 420102"},
	{"null and bools", map[string]any{"n": nil, "t": true, "f": false}, "a3 6166 f4 616e f6 6174 f5"},
	{"link", map[string]any{"l": Link{CIDOf([]byte{0xa0})}},
		"a1 616c d82a 5825 00 01711220 c19a797fa1fd590cd2e5b42d1cf5f246e29b91684e2f87404b81dc345c7a56a0"},
	{"undefined link is null", map[string]any{"l": Link{}}, "a1 616c f6"},
}

func TestGoodEncoding(t *testing.T) {
	for _, tc := range goodEncodingTests {
		t.Run(tc.name, func(t *testing.T) {
			want := mustHex(t, tc.hex)
			got, err := EncodeData(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("got  %x\nwant %x", got, want)
			}
			if err := CheckCanonical(want); err != nil {
				t.Fatalf("CheckCanonical: %v", err)
			}
		})
	}
}

// mustHex decodes hex, ignoring spaces so that tables can group bytes.
func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(string(bytes.ReplaceAll([]byte(s), []byte(" "), nil)))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}
