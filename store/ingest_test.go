package store

import (
	"context"
	"crypto/ed25519"
	"errors"
	"maps"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"

	"relay/protocol"
)

const awayRealm = protocol.Realm("away")

// remoteEvent signs the event another realm would send.
func remoteEvent(t testing.TB, key ed25519.PrivateKey, seq uint64, prev cid.Cid, body string) ([]byte, cid.Cid) {
	t.Helper()
	ev := &protocol.Event{Realm: string(awayRealm), Seq: seq, Type: "t.remote", At: 1_700_000_000_000 + int64(seq),
		Author: "away:bot", Data: mustData(t, map[string]any{"body": body})}
	if prev.Defined() {
		ev.Prev = protocol.Link{Cid: prev}
	}
	raw, c, err := ev.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	return raw, c
}

func verifyWith(key ed25519.PrivateKey) func(*protocol.Event) error {
	return func(ev *protocol.Event) error { return ev.Verify(pub(key)) }
}

func TestIngest(t *testing.T) {
	s := openTest(t, testConfig(""), counter{})
	ctx := context.Background()
	away := testKey(2)
	verify := verifyWith(away)

	var chain [][]byte
	var prev cid.Cid
	for i := uint64(1); i <= 3; i++ {
		raw, c := remoteEvent(t, away, i, prev, "ok")
		chain, prev = append(chain, raw), c
	}
	altRaw, altCID := remoteEvent(t, away, 2, cidOf(chain[0]), "the other story")
	forged, _ := remoteEvent(t, testKey(9), 4, prev, "forged")
	forgedEq, _ := remoteEvent(t, testKey(9), 2, cidOf(chain[0]), "forged twin")
	gap, _ := remoteEvent(t, away, 5, prev, "too far")
	wrongPrev, _ := remoteEvent(t, away, 4, cidOf(chain[0]), "wrong prev")

	var ingestTests = []struct {
		name string
		raw  []byte
		want error // nil: stored
	}{
		{"first", chain[0], nil},
		{"second", chain[1], nil},
		{"duplicate", chain[1], ErrDuplicate},
		{"third", chain[2], nil},
		{"gap", gap, ErrGap},
		{"bad signature", forged, protocol.ErrBadSignature},
		{"forged equivocation", forgedEq, protocol.ErrBadSignature},
		{"prev mismatch", wrongPrev, protocol.ErrChainBroken},
		{"equivocation", altRaw, ErrEquivocation},
		{"trailing bytes", append(append([]byte{}, chain[0]...), 0), protocol.ErrInvalidEvent},
	}
	stored := 0
	for _, tc := range ingestTests {
		se, err := s.Ingest(ctx, tc.raw, verify)
		if tc.want == nil {
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			stored++
			if se.Sequence != uint64(stored) || se.CID != cidOf(tc.raw) {
				t.Fatalf("%s: stored as %d %s", tc.name, se.Sequence, se.CID)
			}
			continue
		}
		if !errors.Is(err, tc.want) || se != nil {
			t.Fatalf("%s: got %v, %v; want %v", tc.name, se, err, tc.want)
		}
	}
	checkChain(t, s, awayRealm, pub(away))
	if s.Sequence() != 3 {
		t.Fatalf("Sequence %d", s.Sequence())
	}
	if c := counts(t, s); c["t.remote"] != 3 {
		t.Fatalf("projector saw %d", c["t.remote"])
	}
	ev, err := s.Equivocations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 2 || ev[0].Seq != 2 || ev[0].Realm != awayRealm {
		t.Fatalf("evidence %+v", ev)
	}
	found := map[cid.Cid]bool{ev[0].CID: true, ev[1].CID: true}
	if !found[altCID] || !found[cidOf(chain[1])] || cidOf(ev[0].Raw) != ev[0].CID {
		t.Fatalf("evidence does not hold both events")
	}

	// A local event goes on after the remote ones in node Sequence only.
	se, err := s.Submit(ctx, draftFn("t.a", "local"))
	if err != nil {
		t.Fatal(err)
	}
	if se.Sequence != 4 || se.Event.Seq != 1 {
		t.Fatalf("local event at Sequence %d seq %d", se.Sequence, se.Event.Seq)
	}
	since, err := s.Since(2, 10)
	if err != nil || len(since) != 2 || since[0].Sequence != 3 || since[1].CID != se.CID {
		t.Fatalf("Since: %v %v", since, err)
	}
	if st := s.State(); st.Events != 4 || st.Realms != 2 || st.Sequence != 4 || st.Status != "ok" {
		t.Fatalf("state %+v", st)
	}
}

func cidOf(raw []byte) cid.Cid { return protocol.CIDOf(raw) }

func TestRebuild(t *testing.T) {
	s := openTest(t, testConfig(""), counter{})
	ctx := context.Background()
	for i, typ := range []string{"t.a", "t.b", "t.a", "t.c", "t.a"} {
		if _, err := s.Submit(ctx, draftFn(typ, string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := remoteEvent(t, testKey(2), 1, cid.Undef, "r")
	if _, err := s.Ingest(ctx, raw, verifyWith(testKey(2))); err != nil {
		t.Fatal(err)
	}
	want := counts(t, s)
	if want["*"] != 6 || want["t.a"] != 3 {
		t.Fatalf("counts %v", want)
	}
	// Damage the projection the way a bug would.
	if _, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) {
		tx.Set([]byte("p/count/junk"), make([]byte, 8))
		return nil, tx.Delete([]byte("p/count/t.b"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	if got := counts(t, s); !maps.Equal(got, want) {
		t.Fatalf("after Rebuild %v, want %v", got, want)
	}
	if st := s.State(); st.Status != "ok" {
		t.Fatalf("status %q", st.Status)
	}
	// Writes after a rebuild carry on from the rebuilt projection.
	if _, err := s.Submit(ctx, draftFn("t.b", "z")); err != nil {
		t.Fatal(err)
	}
	if got := counts(t, s); got["t.b"] != 2 || got["*"] != 7 {
		t.Fatalf("after a new event %v", got)
	}
}

func TestRebuildSmallBatches(t *testing.T) {
	cfg := testConfig("")
	cfg.MaxBatch = 3
	s := openTest(t, cfg, counter{})
	for range 10 {
		if _, err := s.Submit(context.Background(), draftFn("t.a", "x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := counts(t, s); got["t.a"] != 10 {
		t.Fatalf("counts %v", got)
	}
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(testConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := s.Submit(ctx, draftFn("t.a", "x")); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := remoteEvent(t, testKey(2), 1, cid.Undef, "r")
	if _, err := s.Ingest(ctx, raw, verifyWith(testKey(2))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, idFn("th")); err != nil {
		t.Fatal(err)
	}
	heads, _ := s.Heads()
	seq := s.Sequence()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, testConfig(dir))
	got, _ := s.Heads()
	if !maps.Equal(got, heads) || s.Sequence() != seq || seq != 6 {
		t.Fatalf("reopened: heads %v seq %d; had %v %d", got, s.Sequence(), heads, seq)
	}
	se, err := s.Submit(ctx, draftFn("t.a", "y"))
	if err != nil {
		t.Fatal(err)
	}
	if se.Event.Seq != 6 || se.Sequence != 7 || !se.Event.Prev.Equals(heads[localRealm].CID) {
		t.Fatalf("after reopen: seq %d Sequence %d", se.Event.Seq, se.Sequence)
	}
	if _, err := s.Submit(ctx, idFn("th")); err != nil {
		t.Fatal(err)
	}
	err = s.View(func(tx *Tx) error {
		v, err := tx.Get([]byte("l/last/th"))
		if err == nil && string(v) != "2" {
			t.Errorf("NextID after reopen: %s", v)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	checkChain(t, s, localRealm, pub(testKey(1)))
	if st := s.State(); !st.SyncWrites || st.InMemory || st.SchemaVersion != SchemaVersion {
		t.Fatalf("state %+v", st)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set(keySchema, u64(SchemaVersion+1)) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := Open(testConfig(dir)); err == nil {
		s.Close()
		t.Fatal("opened a store with a newer schema")
	}
}

// ingestChainWays are the two entry points of a chain: raw events, and
// events the caller decoded.
var ingestChainWays = []struct {
	name   string
	ingest func(s *Store, ctx context.Context, raws [][]byte, verify func(*protocol.Event) error) (int, error)
}{
	{"raw", (*Store).IngestChain},
	{"decoded", func(s *Store, ctx context.Context, raws [][]byte, verify func(*protocol.Event) error) (int, error) {
		run := make([]Checked, len(raws))
		for i, raw := range raws {
			ev, c, err := protocol.DecodeEvent(raw)
			if err != nil {
				return 0, err
			}
			run[i] = Checked{ev, c, raw}
		}
		wait, err := s.QueueDecodedChain(ctx, run, verify)
		if err != nil {
			return 0, err
		}
		return wait()
	}},
}

func TestIngestChain(t *testing.T) {
	for _, way := range ingestChainWays {
		t.Run(way.name, func(t *testing.T) { testIngestChain(t, way.ingest) })
	}
}

func testIngestChain(t *testing.T, ingest func(s *Store, ctx context.Context, raws [][]byte, verify func(*protocol.Event) error) (int, error)) {
	s := openTest(t, testConfig(""), counter{})
	ctx := context.Background()
	away := testKey(2)
	var seen []uint64
	var mu sync.Mutex
	s.Watch(func(evs []*StoredEvent) {
		mu.Lock()
		defer mu.Unlock()
		for _, se := range evs {
			seen = append(seen, se.Event.Seq)
		}
	})
	var chain [][]byte
	var prev cid.Cid
	for i := uint64(1); i <= 10; i++ {
		raw, c := remoteEvent(t, away, i, prev, "ok")
		chain, prev = append(chain, raw), c
	}
	forgedTail, _ := remoteEvent(t, testKey(9), 11, prev, "forged")
	altRaw, _ := remoteEvent(t, away, 3, cidOf(chain[1]), "the other story")
	unlinked, _ := remoteEvent(t, away, 5, cidOf(chain[0]), "bad link")
	// A fork at seq 3 that only the realm's next event vouches for: its own
	// signature is not the realm's, so it is no evidence a peer would take.
	badFork, badForkCID := remoteEvent(t, testKey(9), 3, cidOf(chain[1]), "unsigned fork")
	vouch, _ := remoteEvent(t, away, 4, badForkCID, "vouching")

	runs := []struct {
		name  string
		run   [][]byte
		added int
		want  error
	}{
		{"gap", chain[2:4], 0, ErrGap},
		{"first four", chain[:4], 4, nil},
		{"overlap", chain[2:7], 3, nil},
		{"all held", chain[:7], 0, nil},
		{"broken link", [][]byte{chain[7], unlinked}, 0, protocol.ErrChainBroken},
		{"forged newest", [][]byte{chain[7], chain[8], chain[9], forgedTail}, 0, protocol.ErrBadSignature},
		{"rest", chain[7:], 3, nil},
		{"fork without its own signature", [][]byte{badFork, vouch}, 0, protocol.ErrBadSignature},
		{"equivocation", [][]byte{chain[0], chain[1], altRaw}, 0, ErrEquivocation},
	}
	for _, tc := range runs {
		run := make([][]byte, len(tc.run))
		copy(run, tc.run)
		n, err := ingest(s, ctx, run, verifyWith(away))
		if n != tc.added || !errors.Is(err, tc.want) {
			t.Fatalf("%s: added %d, %v; want %d, %v", tc.name, n, err, tc.added, tc.want)
		}
	}
	checkChain(t, s, awayRealm, pub(away))
	if c := counts(t, s); c["t.remote"] != 10 {
		t.Fatalf("projector saw %d", c["t.remote"])
	}
	if ev, _ := s.Equivocations(); len(ev) != 2 {
		t.Fatalf("evidence %d", len(ev))
	}
	mu.Lock()
	defer mu.Unlock()
	for i, seq := range seen {
		if seq != uint64(i+1) {
			t.Fatalf("watcher saw %v", seen)
		}
	}
	if len(seen) != 10 {
		t.Fatalf("watcher saw %v", seen)
	}
}

// A store opened under another realm name than the one whose chain its key
// signed is refused: authoring on would start a second chain with the key.
// Opened with another key (a replica's view of both realms), it is not.
func TestOpenRefusesRenamedRealm(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := openTest(t, testConfig(dir))
	if _, err := s.Submit(ctx, draftFn("t.a", "x")); err != nil {
		t.Fatal(err)
	}
	raw, _ := remoteEvent(t, testKey(2), 1, cid.Undef, "r")
	if _, err := s.Ingest(ctx, raw, verifyWith(testKey(2))); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(dir)
	cfg.Realm = "renamed"
	if s, err := Open(cfg); !errors.Is(err, ErrOtherRealm) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("opened as another realm with the same key: %v, want ErrOtherRealm", err)
	}
	cfg.Key = testKey(3)
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("opened as another realm with its own key: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	openTest(t, testConfig(dir)) // as it was: opens
}
