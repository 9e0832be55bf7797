package store

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"relay/protocol"
)

const localRealm = protocol.Realm("home")

func testKey(seed byte) ed25519.PrivateKey {
	s := make([]byte, ed25519.SeedSize)
	for i := range s {
		s[i] = seed
	}
	return ed25519.NewKeyFromSeed(s)
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testConfig is an in-memory store when dir is empty, a durable one otherwise.
func testConfig(dir string) Config {
	cfg := DefaultConfig(dir)
	cfg.InMemory = dir == ""
	cfg.Logger = quietLogger()
	cfg.Realm = localRealm
	cfg.Key = testKey(1)
	var tick int64
	cfg.Now = func() time.Time { tick++; return time.UnixMilli(1_700_000_000_000 + tick) }
	return cfg
}

func openTest(t testing.TB, cfg Config, ps ...Projector) *Store {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		s.Register(p)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustData(t testing.TB, v any) []byte {
	t.Helper()
	b, err := protocol.EncodeData(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func draftFn(typ, body string) func(*Tx) (*protocol.Draft, error) {
	return func(*Tx) (*protocol.Draft, error) {
		data, err := protocol.EncodeData(map[string]any{"body": body})
		if err != nil {
			return nil, err
		}
		return &protocol.Draft{Type: typ, Author: "home:tester", Data: data}, nil
	}
}

// counter counts events per type under p/count/<type>, and all of them under
// p/count/*: the half-written projection a crash must never leave.
type counter struct{}

var counterPrefix = []byte("p/count/")

func (counter) Prefixes() [][]byte { return [][]byte{counterPrefix} }

func (counter) Apply(tx *Tx, ev *StoredEvent) error {
	for _, k := range []string{ev.Event.Type, "*"} {
		key := append([]byte("p/count/"), k...)
		var n uint64
		switch v, err := tx.Get(key); {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		default:
			n = binary.BigEndian.Uint64(v)
		}
		if err := tx.Set(key, binary.BigEndian.AppendUint64(nil, n+1)); err != nil {
			return err
		}
	}
	return nil
}

func counts(t testing.TB, s *Store) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	err := s.View(func(tx *Tx) error {
		return tx.Iterate(counterPrefix, false, func(k, v []byte) error {
			out[strings.TrimPrefix(string(k), string(counterPrefix))] = binary.BigEndian.Uint64(v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkChain verifies realm's chain from seq 1 to its head and returns it.
func checkChain(t testing.TB, s *Store, realm protocol.Realm, key ed25519.PublicKey) []*StoredEvent {
	t.Helper()
	evs, err := s.Range(realm, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	heads, err := s.Heads()
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(evs)) != heads[realm].Seq {
		t.Fatalf("%s: %d events, head at %d", realm, len(evs), heads[realm].Seq)
	}
	// RangeRaw gives the same bytes, from any seq, within its limit.
	for _, from := range []int{1, len(evs)/2 + 1} {
		for _, limit := range []int{0, 2} {
			raws, err := s.RangeRaw(realm, uint64(from), limit)
			if err != nil {
				t.Fatal(err)
			}
			want := evs[from-1:]
			if limit > 0 && len(want) > limit {
				want = want[:limit]
			}
			if len(raws) != len(want) {
				t.Fatalf("RangeRaw(%s, %d, %d): %d events, want %d", realm, from, limit, len(raws), len(want))
			}
			for i, raw := range raws {
				if !bytes.Equal(raw, want[i].Raw) {
					t.Fatalf("RangeRaw(%s, %d, %d)[%d] differs from Range", realm, from, limit, i)
				}
			}
		}
	}
	var h protocol.Head
	for _, se := range evs {
		got, c, err := protocol.DecodeEvent(se.Raw)
		if err != nil {
			t.Fatalf("seq %d: %v", se.Event.Seq, err)
		}
		if c != se.CID {
			t.Fatalf("seq %d: cid %s, stored as %s", se.Event.Seq, c, se.CID)
		}
		if err := got.Verify(key); err != nil {
			t.Fatalf("seq %d: %v", se.Event.Seq, err)
		}
		if err := got.Follows(h); err != nil {
			t.Fatalf("seq %d: %v", se.Event.Seq, err)
		}
		h = protocol.Head{Seq: got.Seq, CID: c}
	}
	if h != heads[realm] {
		t.Fatalf("%s: chain ends at %v, head %v", realm, h, heads[realm])
	}
	return evs
}

// pause holds the committer until the returned func is called, so a test can
// queue ops that will share one batch.
func pause(t testing.TB, s *Store) (release func()) {
	t.Helper()
	started, stop := make(chan struct{}), make(chan struct{})
	go s.exclusive(context.Background(), func() error {
		close(started)
		<-stop
		return nil
	})
	<-started
	return func() { close(stop) }
}

// waitQueued polls until n ops are queued behind a pause.
func waitQueued(t testing.TB, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(s.ops) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d ops queued, want %d", len(s.ops), n)
		}
		time.Sleep(time.Millisecond)
	}
}
