package store

import (
	"context"
	"crypto/ed25519"
	"errors"
	"maps"
	"testing"

	"github.com/ipfs/go-cid"

	"relay/protocol"
)

// signedChain returns n events of realm signed with key, decoded as
// DecodeEvent returns them.
func signedChain(t testing.TB, realm protocol.Realm, key ed25519.PrivateKey, n int) []Checked {
	t.Helper()
	var out []Checked
	var prev cid.Cid
	for i := 1; i <= n; i++ {
		ev := &protocol.Event{Realm: string(realm), Seq: uint64(i), Type: "t.r", At: 1_700_000_000_000 + int64(i),
			Author: string(realm) + ":bot", Data: mustData(t, map[string]any{"i": i})}
		if prev.Defined() {
			ev.Prev = protocol.Link{Cid: prev}
		}
		raw, _, err := ev.Sign(key)
		if err != nil {
			t.Fatal(err)
		}
		dec, c, err := protocol.DecodeEvent(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Checked{Event: dec, CID: c, Raw: raw})
		prev = c
	}
	return out
}

func TestRestore(t *testing.T) {
	ctx := context.Background()
	home := signedChain(t, localRealm, testKey(1), 7)
	away := signedChain(t, awayRealm, testKey(2), 5)
	// Interleaved as a node that received both would hold them.
	var all []Checked
	for i := range max(len(home), len(away)) {
		if i < len(home) {
			all = append(all, home[i])
		}
		if i < len(away) {
			all = append(all, away[i])
		}
	}
	s := openTest(t, testConfig(t.TempDir()), counter{})
	// Queued without waiting, as an importer does: they run in order.
	var waits []func() error
	for i := 0; i < len(all); i += 4 {
		waits = append(waits, s.Restore(ctx, uint64(i), all[i:min(i+4, len(all))]))
	}
	for _, wait := range waits {
		if err := wait(); err != nil {
			t.Fatal(err)
		}
	}
	checkChain(t, s, localRealm, pub(testKey(1)))
	checkChain(t, s, awayRealm, pub(testKey(2)))
	if s.Sequence() != uint64(len(all)) || counts(t, s)["*"] != uint64(len(all)) {
		t.Fatalf("sequence %d, projector saw %v", s.Sequence(), counts(t, s))
	}
	got, err := s.Since(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, se := range got {
		if se.CID != all[i].CID || se.Sequence != uint64(i+1) {
			t.Fatalf("sequence %d holds %s, want %s", i+1, se.CID, all[i].CID)
		}
	}
	// The local realm goes on from the restored head.
	se, err := s.Submit(ctx, draftFn("t.a", "after"))
	if err != nil {
		t.Fatal(err)
	}
	if se.Event.Seq != 8 || !se.Event.Prev.Cid.Equals(home[6].CID) {
		t.Fatalf("next local event: seq %d prev %s", se.Event.Seq, se.Event.Prev.Cid)
	}
}

func TestRestoreRefusesBrokenChain(t *testing.T) {
	ctx := context.Background()
	chain := signedChain(t, awayRealm, testKey(2), 6)
	var restoreTests = []struct {
		name  string
		held  int // events restored before
		chunk []Checked
	}{
		{"not from 1", 0, []Checked{chain[1]}},
		{"gap", 2, []Checked{chain[2], chain[4]}},
		{"replayed", 2, []Checked{chain[0]}},
		{"good then repeated", 2, []Checked{chain[2], chain[3], chain[3]}},
	}
	for _, tc := range restoreTests {
		s := openTest(t, testConfig(""), counter{})
		if err := s.Restore(ctx, 0, chain[:tc.held])(); err != nil {
			t.Fatal(err)
		}
		broken := s.Restore(ctx, uint64(tc.held), tc.chunk)
		next := s.Restore(ctx, uint64(tc.held+len(tc.chunk)), chain[tc.held:tc.held+1])
		if err := broken(); !errors.Is(err, protocol.ErrChainBroken) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// The chunk queued behind a failed one fails too, whatever it holds.
		if err := next(); !errors.Is(err, ErrSequence) {
			t.Fatalf("%s: the next chunk: %v", tc.name, err)
		}
		if s.Sequence() != uint64(tc.held) || counts(t, s)["*"] != uint64(tc.held) {
			t.Fatalf("%s: part of a refused op was stored: sequence %d", tc.name, s.Sequence())
		}
	}
}

func TestRestoreCancelled(t *testing.T) {
	s := openTest(t, testConfig(""), counter{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Restore(ctx, 0, signedChain(t, awayRealm, testKey(2), 1))(); !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
	if s.Sequence() != 0 {
		t.Fatalf("sequence %d", s.Sequence())
	}
}

func TestEachEventReadsOneSnapshot(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, testConfig(""))
	for i := range 5 {
		if _, err := s.Submit(ctx, draftFn("t.a", string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	var seen []uint64
	var heads map[protocol.Realm]protocol.Head
	err := s.View(func(tx *Tx) error {
		// A write committed during the walk is not part of it.
		if _, err := s.Submit(ctx, draftFn("t.a", "late")); err != nil {
			return err
		}
		var err error
		if heads, err = tx.Heads(); err != nil {
			return err
		}
		return tx.EachEvent(1, func(se *StoredEvent) error {
			seen = append(seen, se.Sequence)
			if se.Event.Seq != se.Sequence {
				t.Errorf("sequence %d holds seq %d", se.Sequence, se.Event.Seq)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 4 || seen[0] != 2 || seen[3] != 5 {
		t.Fatalf("walked %v", seen)
	}
	if heads[localRealm].Seq != 5 {
		t.Fatalf("snapshot heads %v", heads)
	}
	live, _ := s.Heads()
	if live[localRealm].Seq != 6 || maps.Equal(live, heads) {
		t.Fatalf("live heads %v", live)
	}
	n := 0
	err = s.View(func(tx *Tx) error {
		return tx.EachEvent(0, func(*StoredEvent) error { n++; return ErrStop })
	})
	if err != nil || n != 1 {
		t.Fatalf("ErrStop: %d, %v", n, err)
	}
}

func TestRaiseID(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, testConfig(""))
	next := func() uint64 {
		var n uint64
		if _, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) {
			var err error
			n, err = tx.NextID("th")
			return nil, err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	raise := func(n uint64) {
		if _, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) { return nil, tx.RaiseID("th", n) }); err != nil {
			t.Fatal(err)
		}
	}
	raise(0)
	if n := next(); n != 1 {
		t.Fatalf("after RaiseID(0): %d", n)
	}
	raise(41)
	if n := next(); n != 42 {
		t.Fatalf("after RaiseID(41): %d", n)
	}
	raise(7) // lower: no change
	if n := next(); n != 43 {
		t.Fatalf("after RaiseID(7): %d", n)
	}
	err := s.View(func(tx *Tx) error { return tx.RaiseID("th", 100) })
	if !errors.Is(err, ErrReadOnly) {
		t.Fatalf("RaiseID in a View: %v", err)
	}
}

func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	openTest(t, testConfig(dir))
	_, err := Open(testConfig(dir))
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v", err)
	}
}
