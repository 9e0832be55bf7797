package federation

import (
	"bytes"
	"crypto/ed25519"
	"testing"

	"github.com/ipfs/go-cid"

	"relay/protocol"
)

// testChain signs n consecutive events of realm from seq 1; sign[i],
// when set, signs event i instead of key, and edit[i] changes event i
// before it is signed. Each event links to the encoding before it as
// signed, so an event signed by another key is still linked into the
// chain.
func testChain(t *testing.T, realm string, key ed25519.PrivateKey, n int, sign map[int]ed25519.PrivateKey, edit map[int]func(*protocol.Event)) [][]byte {
	t.Helper()
	data, err := protocol.EncodeData(map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	var raws [][]byte
	prev := cid.Undef
	for i := range n {
		ev := &protocol.Event{Realm: realm, Seq: uint64(i + 1), Type: "test.note", At: 1, Author: "human:operator", Data: data}
		if i > 0 {
			ev.Prev = protocol.Link{Cid: prev}
		}
		if f := edit[i]; f != nil {
			f(ev)
		}
		k := key
		if sign[i] != nil {
			k = sign[i]
		}
		raw, c, err := ev.Sign(k)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
		prev = c
	}
	return raws
}

// TestAuthenticRun checks which events of a gossiped run are stored: a
// run is authenticated by its newest signature; when that fails, the
// events are checked one by one and only those before the first that is
// not the realm's pass.
func TestAuthenticRun(t *testing.T) {
	realmKey := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	forgerSeed := make([]byte, ed25519.SeedSize)
	forgerSeed[0] = 1
	forger := ed25519.NewKeyFromSeed(forgerSeed)
	pub := realmKey.Public().(ed25519.PublicKey)
	genuine := testChain(t, "a", realmKey, 6, nil, nil)
	other := func(ev *protocol.Event) { ev.At = 2 } // another event at the same seq

	// A forged event in the middle, linked into what follows: the events
	// after it link to the forgery, so the forger signs them too.
	relinked := testChain(t, "a", realmKey, 6, map[int]ed25519.PrivateKey{2: forger, 3: forger, 4: forger, 5: forger}, map[int]func(*protocol.Event){2: other})
	// A forged event in the middle, the genuine events after it: the link
	// after it breaks.
	forged := testChain(t, "a", realmKey, 3, map[int]ed25519.PrivateKey{2: forger}, map[int]func(*protocol.Event){2: other})
	unlinked := append(append(append([][]byte{}, genuine[:2]...), forged[2]), genuine[3:]...)
	// The newest signature corrupted: a bit of it flipped, the encoding
	// still canonical.
	corrupt := append([][]byte{}, genuine...)
	corrupt[5] = append([]byte{}, genuine[5]...)
	newest, _, err := protocol.DecodeEvent(genuine[5])
	if err != nil {
		t.Fatal(err)
	}
	corrupt[5][bytes.Index(corrupt[5], newest.Sig)+ed25519.SignatureSize-1] ^= 1
	// The newest event forged, linked to the genuine ones before it.
	newestForged := testChain(t, "a", realmKey, 6, map[int]ed25519.PrivateKey{5: forger}, map[int]func(*protocol.Event){5: other})
	// An event the realm itself linked into its chain with a bad signature
	// of its own: its key vouches for it by signing the next event.
	vouched := testChain(t, "a", realmKey, 4, map[int]ed25519.PrivateKey{1: forger}, nil)
	// An event of another realm in the run.
	foreign := append(append([][]byte{}, genuine[:3]...), testChain(t, "b", realmKey, 4, nil, nil)[3])

	var authenticRunTests = []struct {
		name          string
		raws          [][]byte
		decoded       int  // events decodeRun keeps
		whole         bool // the whole message decoded and linked
		authentic     int  // of those, the events authenticRun passes
		sameAsGenuine bool // the authentic events are genuine[:authentic]
	}{
		{"genuine", genuine, 6, true, 6, true},
		{"one genuine", genuine[:1], 1, true, 1, true},
		{"newest forged", newestForged, 6, true, 5, true},
		{"forged in the middle, relinked", relinked, 6, true, 2, true},
		{"forged in the middle, link broken after it", unlinked, 3, false, 2, true},
		{"newest signature corrupted", corrupt, 6, true, 5, true},
		{"one forged", relinked[2:3], 1, true, 0, false},
		{"vouched by the realm", vouched, 4, true, 4, false},
		{"another realm's event", foreign, 3, false, 3, true},
	}
	for _, tc := range authenticRunTests {
		run, whole := decodeRun("a", tc.raws)
		if len(run) != tc.decoded || whole != tc.whole {
			t.Errorf("%s: decoded %d (whole %v), want %d (%v)", tc.name, len(run), whole, tc.decoded, tc.whole)
			continue
		}
		n := authenticRun(run, pub)
		if n != tc.authentic {
			t.Errorf("%s: %d authentic, want %d", tc.name, n, tc.authentic)
			continue
		}
		if tc.sameAsGenuine {
			for i, g := range run[:n] {
				if string(g.raw) != string(genuine[i]) {
					t.Errorf("%s: event %d passed but is not the genuine one", tc.name, i)
				}
			}
		}
	}
}
