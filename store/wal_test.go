package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"relay/protocol"
)

// copyFiles copies the regular files of src into dst (created if needed).
func copyFiles(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		// Sparse: Badger's files are mostly holes (a value log sized 2
		// GiB up front), which a plain copy would read and write out as
		// zeros. SEEK_DATA and SEEK_HOLE find the data.
		fi, err := in.Stat()
		if err != nil {
			t.Fatal(err)
		}
		const seekData, seekHole = 3, 4
		for off := int64(0); off < fi.Size(); {
			start, err := in.Seek(off, seekData)
			if err != nil {
				break // no data after off (ENXIO)
			}
			end, err := in.Seek(start, seekHole)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := in.Seek(start, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(io.NewOffsetWriter(out, start), io.LimitReader(in, end-start)); err != nil {
				t.Fatal(err)
			}
			off = end
		}
		if err := out.Truncate(fi.Size()); err != nil {
			t.Fatal(err)
		}
		in.Close()
		out.Close()
	}
}

// submitMany submits n events from 16 writers, so that batches hold many.
func submitMany(t *testing.T, s *Store, n int) []*StoredEvent {
	t.Helper()
	var mu sync.Mutex
	var out []*StoredEvent
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				se, err := s.Submit(context.Background(), draftFn([]string{"t.a", "t.b"}[i%2], fmt.Sprint("event ", i)))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				out = append(out, se)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// submitEach submits n events one after the other: one per record.
func submitEach(t *testing.T, s *Store, n int) []*StoredEvent {
	t.Helper()
	var evs []*StoredEvent
	for i := range n {
		se, err := s.Submit(context.Background(), draftFn("t.a", fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, se)
	}
	return evs
}

// crashCopy returns a data directory holding Badger as it was in base and
// the write-ahead log of live: what a crash leaves when Badger kept none of
// its unsynced commits since base.
func crashCopy(t *testing.T, base, live string) string {
	t.Helper()
	dir := t.TempDir()
	copyFiles(t, base, dir)
	copyFiles(t, filepath.Join(live, walDirName), filepath.Join(dir, walDirName))
	return dir
}

// checkHolds checks that s holds every event in evs and that its counter
// projection agrees with its log.
func checkHolds(t *testing.T, s *Store, evs []*StoredEvent) {
	t.Helper()
	for _, se := range evs {
		got, err := s.EventByCID(se.CID)
		if err != nil {
			t.Fatalf("event %s lost: %v", se.CID, err)
		}
		if string(got.Raw) != string(se.Raw) || got.Sequence != se.Sequence {
			t.Fatalf("event %s changed", se.CID)
		}
	}
	heads, err := s.Heads()
	if err != nil {
		t.Fatal(err)
	}
	if h := heads[localRealm]; h.Seq != uint64(len(evs)) {
		t.Fatalf("head at %d, want %d", h.Seq, len(evs))
	}
	if s.Sequence() != uint64(len(evs)) {
		t.Fatalf("sequence %d, want %d", s.Sequence(), len(evs))
	}
	if n := countOf(t, s, "*"); n != uint64(len(evs)) {
		t.Fatalf("projection counts %d events, want %d", n, len(evs))
	}
}

func countOf(t *testing.T, s *Store, typ string) uint64 {
	t.Helper()
	var n uint64
	err := s.View(func(tx *Tx) error {
		v, err := tx.Get(append([]byte("p/count/"), typ...))
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		n, err = decodeU64(v)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// newWithBase makes a store in live, closes it, and copies what Badger then
// holds, synced and before any event, into base.
func newWithBase(t *testing.T) (live, base string) {
	t.Helper()
	live, base = t.TempDir(), t.TempDir()
	s, err := Open(testConfig(live))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	copyFiles(t, live, base)
	return live, base
}

// TestWALReplaysWhatBadgerLost: every acknowledged write is in the log, so
// a Badger that kept nothing since its last sync is brought back whole.
func TestWALReplaysWhatBadgerLost(t *testing.T) {
	live, base := newWithBase(t)
	s := openTest(t, testConfig(live), counter{})
	evs := submitMany(t, s, 300)
	dir := crashCopy(t, base, live) // while open: the log holds every acked write
	s.Close()

	s = openTest(t, testConfig(dir), counter{})
	checkHolds(t, s, evs)
	if st := s.State(); st.Status != "ok" || !st.SyncWrites {
		t.Fatalf("state %+v", st)
	}
	if s.walReplayed == 0 {
		t.Fatal("nothing was replayed")
	}
	// The replay was made durable and retired: the next open replays nothing.
	more := submitMany(t, s, 20)
	s.Close()
	s = openTest(t, testConfig(dir), counter{})
	checkHolds(t, s, append(evs, more...))
	if s.walReplayed != 0 {
		t.Fatalf("a clean close left %d records to replay", s.walReplayed)
	}
}

// TestWALTornTail: a record cut short by a crash was never acknowledged;
// the records before it are replayed and the store opens.
func TestWALTornTail(t *testing.T) {
	live, base := newWithBase(t)
	s := openTest(t, testConfig(live), counter{})
	evs := submitEach(t, s, 10)
	dir := crashCopy(t, base, live)
	s.Close()

	segs := segmentFiles(t, dir)
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	name := filepath.Join(dir, walDirName, segs[0])
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(name, fi.Size()-3); err != nil { // the last record torn
		t.Fatal(err)
	}
	s = openTest(t, testConfig(dir), counter{})
	checkHolds(t, s, evs[:9])
	if s.walReplayed != 9 {
		t.Fatalf("replayed %d records, want 9", s.walReplayed)
	}
	// The chain goes on from the last event kept.
	se, err := s.Submit(context.Background(), draftFn("t.a", "after"))
	if err != nil || se.Event.Seq != 10 {
		t.Fatalf("next event %v, %v", se, err)
	}
}

// segmentOf makes the bytes of a segment whose records set p/t/<k> = v.
func segmentOf(first uint64, kv ...string) []byte {
	var out []byte
	for i := 0; i < len(kv); i += 2 {
		r := &record{}
		r.reset(nil, 0)
		r.add("p/t/"+kv[i], write{val: []byte(kv[i+1])})
		sealRecord(r.buf, first+uint64(i/2))
		out = append(out, r.buf...)
	}
	return out
}

// walDir opens and closes a store in a new directory and empties its log.
func walDir(t *testing.T) (dir, wdir string) {
	t.Helper()
	dir = t.TempDir()
	s, err := Open(testConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	wdir = filepath.Join(dir, walDirName)
	segs, _ := os.ReadDir(wdir)
	for _, e := range segs {
		os.Remove(filepath.Join(wdir, e.Name()))
	}
	return dir, wdir
}

func checkKeys(t *testing.T, s *Store, want map[string]string) {
	t.Helper()
	err := s.View(func(tx *Tx) error {
		for k, v := range want {
			got, err := tx.Get([]byte("p/t/" + k))
			if v == "" {
				if !errors.Is(err, ErrNotFound) {
					return fmt.Errorf("%s = %q, %v; want none", k, got, err)
				}
				continue
			}
			if err != nil || string(got) != v {
				return fmt.Errorf("%s = %q, %v; want %q", k, got, err, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWALDamaged: an unreadable record that is not a crash's torn tail
// refuses the open rather than lose what follows it.
func TestWALDamaged(t *testing.T) {
	for _, tc := range []struct {
		name  string
		segs  map[uint64][]byte
		want  map[string]string // after a successful open
		fails bool
	}{{
		name:  "damage before the newest segment",
		segs:  map[uint64][]byte{1: flipLast(segmentOf(1, "a", "1", "b", "2")), 3: segmentOf(3, "c", "3")},
		fails: true,
	}, {
		name:  "damage in the middle of the newest segment",
		segs:  map[uint64][]byte{1: flipAt(segmentOf(1, "a", "1", "b", "2", "c", "3"), 20)},
		fails: true,
	}, {
		name:  "a zeroed header in the middle of the newest segment",
		segs:  map[uint64][]byte{1: zeroHeader(segmentOf(1, "a", "1", "b", "2", "c", "3"), 1)},
		fails: true,
	}, {
		name:  "a length past the end in the middle of the newest segment",
		segs:  map[uint64][]byte{1: longHeader(segmentOf(1, "a", "1", "b", "2", "c", "3"), 1)},
		fails: true,
	}, {
		name: "a torn last record",
		segs: map[uint64][]byte{1: segmentOf(1, "a", "1", "b", "2")[:40]},
		want: map[string]string{"a": "1", "b": ""},
	}, {
		name: "a last record whose checksum fails at the end of the file",
		segs: map[uint64][]byte{1: flipLast(segmentOf(1, "a", "1", "b", "2"))},
		want: map[string]string{"a": "1", "b": ""},
	}, {
		name: "zeros after the last record",
		segs: map[uint64][]byte{1: append(segmentOf(1, "a", "1"), make([]byte, 4096)...)},
		want: map[string]string{"a": "1"},
	}, {
		name: "a last record never written but its tail",
		segs: map[uint64][]byte{1: append(segmentOf(1, "a", "1"), append(make([]byte, walHeaderSize), "garbage"...)...)},
		want: map[string]string{"a": "1"},
	}, {
		name: "a whole segment and an empty newer one (what a crash after the cut leaves)",
		segs: map[uint64][]byte{1: segmentOf(1, "a", "1"), 2: nil},
		want: map[string]string{"a": "1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir, wdir := walDir(t)
			for first, b := range tc.segs {
				if err := os.WriteFile(filepath.Join(wdir, segmentName(first)), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			s, err := Open(testConfig(dir))
			if tc.fails {
				if !errors.Is(err, errWALDamaged) {
					t.Fatalf("open: %v, want %v", err, errWALDamaged)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			checkKeys(t, s, tc.want)
		})
	}
}

func flipLast(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }

// recordAt is where the record i (from 0) of the segment b starts.
func recordAt(b []byte, i int) int {
	off := 0
	for range i {
		off += walHeaderSize + int(binary.LittleEndian.Uint32(b[off:]))
	}
	return off
}

// zeroHeader zeros the header of record i, as a sector that reads back
// empty would.
func zeroHeader(b []byte, i int) []byte {
	clear(b[recordAt(b, i):][:walHeaderSize])
	return b
}

// longHeader makes record i's length run past the end of the segment.
func longHeader(b []byte, i int) []byte {
	b[recordAt(b, i)+3] = 0x7f
	return b
}

func flipAt(b []byte, i int) []byte { b[i] ^= 0xff; return b }

// TestWALTornTailIsCut: the torn record is cut off the segment durably
// before a newer segment exists, so that a crash during the checkpoint that
// follows cannot leave a torn segment behind a newer one.
func TestWALTornTailIsCut(t *testing.T) {
	dir, wdir := walDir(t)
	whole := segmentOf(1, "a", "1", "b", "2")
	name := filepath.Join(wdir, segmentName(1))
	if err := os.WriteFile(name, whole[:len(whole)-5], 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(dir)
	db, err := openBadger(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := &wal{dir: wdir, sync: fsync}
	n, err := w.replay(db, 1, true, 0)
	if err != nil || n != 1 {
		t.Fatalf("replayed %d, %v", n, err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(segmentOf(1, "a", "1")) {
		t.Fatalf("segment after the cut: %x", b)
	}
}

// TestWALSyncsBeforeCommit: a batch is synced in the log before Badger
// holds it, and acked after.
func TestWALSyncsBeforeCommit(t *testing.T) {
	s := openTest(t, testConfig(t.TempDir()))
	var seen []uint64
	sync := s.wal.sync
	s.wal.sync = func(f *os.File) error {
		var n uint64
		err := s.db.View(func(txn *badger.Txn) error {
			item, err := txn.Get(keySequence)
			if errors.Is(err, badger.ErrKeyNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			v, err := item.ValueCopy(nil)
			if err == nil {
				n, err = decodeU64(v)
			}
			return err
		})
		if err != nil {
			return err
		}
		seen = append(seen, n)
		return sync(f)
	}
	for i := range 5 {
		se, err := s.Submit(context.Background(), draftFn("t.a", fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != i+1 || seen[i] != se.Sequence-1 {
			t.Fatalf("event %d: Badger held sequences up to %v when the log was synced", se.Sequence, seen)
		}
	}
	// A failed sync fails the write and the store: nothing unsynced is acked.
	s.wal.sync = func(*os.File) error { return errors.New("disk gone") }
	if _, err := s.Submit(context.Background(), draftFn("t.a", "x")); !errors.Is(err, ErrFailed) {
		t.Fatalf("submit after a failed sync: %v", err)
	}
}

// TestWALFailedCheckpointFailsStore: a direct write that cannot be made
// durable stops the store rather than let a later checkpoint retire the log.
func TestWALFailedCheckpointFailsStore(t *testing.T) {
	s := openTest(t, testConfig(t.TempDir()), counter{})
	submitMany(t, s, 10)
	s.wal.syncDB = func(string) error { return errors.New("disk gone") }
	if err := s.Rebuild(context.Background()); err == nil {
		t.Fatal("rebuild succeeded without a durable marker")
	}
	if _, err := s.Submit(context.Background(), draftFn("t.a", "x")); !errors.Is(err, ErrFailed) {
		t.Fatalf("submit after a failed sync: %v", err)
	}
	if st := s.State(); st.Status != "failed" {
		t.Fatalf("status %q", st.Status)
	}
}

// TestWALSegments: the log moves to a new segment as it grows and retires
// the old ones once Badger is synced past them.
func TestWALSegments(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, testConfig(dir), counter{})
	s.wal.mu.Lock()
	s.wal.segSize = 4 << 10
	s.wal.mu.Unlock()
	evs := submitMany(t, s, 400)
	s.checkpoints.Wait()
	if err := s.wal.checkpoint(); err != nil {
		t.Fatal(err)
	}
	s.wal.mu.Lock()
	first := s.wal.first
	s.wal.mu.Unlock()
	if first < 10 {
		t.Fatalf("the current segment starts at record %d: the log never moved on", first)
	}
	segs := segmentFiles(t, dir)
	if len(segs) != 1 || segs[0] != segmentName(first) {
		t.Fatalf("segments %v; want only %s", segs, segmentName(first))
	}
	s.Close()
	s = openTest(t, testConfig(dir), counter{})
	checkHolds(t, s, evs)
}

// TestWALRebuildRetiresLog: a rebuild writes to Badger directly, so the
// records before it must never be replayed over its result.
func TestWALRebuildRetiresLog(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, testConfig(dir), counter{})
	evs := submitMany(t, s, 50)
	if err := s.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	segs, err := s.wal.segments()
	if err != nil {
		t.Fatal(err)
	}
	for _, first := range segs {
		if first <= 1 {
			t.Fatalf("segment %s from before the rebuild is still there", segmentName(first))
		}
	}
	checkHolds(t, s, evs)
	if _, err := s.Submit(context.Background(), draftFn("t.a", "x")); err != nil {
		t.Fatal(err)
	}
	if got := countOf(t, s, "*"); got != uint64(len(evs)+1) {
		t.Fatalf("count %d", got)
	}
}

func TestRecentWrites(t *testing.T) {
	var r recentWrites
	r.add(map[string]write{"a": {val: []byte("1")}, "b": {val: []byte("1")}})
	r.add(map[string]write{"a": {val: []byte("2")}, "c": {del: true}})
	for _, tc := range []struct {
		k   string
		val string
		del bool
		ok  bool
	}{{"a", "2", false, true}, {"b", "1", false, true}, {"c", "", true, true}, {"d", "", false, false}} {
		w, ok := r.get(tc.k)
		if ok != tc.ok || w.del != tc.del || string(w.val) != tc.val {
			t.Errorf("%s: %q del %v ok %v", tc.k, w.val, w.del, ok)
		}
	}
	// A full generation becomes the older; the one before it is dropped.
	big := make([]byte, recentBytes)
	r.add(map[string]write{"x": {val: big}})
	r.add(map[string]write{"a": {val: []byte("3")}})
	if w, ok := r.get("a"); !ok || string(w.val) != "3" {
		t.Fatalf("a: %q %v", w.val, ok)
	}
	if w, ok := r.get("b"); !ok || string(w.val) != "1" {
		t.Fatalf("b from the older generation: %q %v", w.val, ok)
	}
	r.add(map[string]write{"y": {val: big}})
	if _, ok := r.get("b"); ok {
		t.Fatal("b outlived two generations")
	}
	if w, ok := r.get("a"); !ok || string(w.val) != "3" {
		t.Fatalf("a: %q %v", w.val, ok)
	}
	r.reset()
	if _, ok := r.get("a"); ok {
		t.Fatal("reset kept a")
	}
	// A batch too large to copy empties the cache: a, which it overwrites,
	// must not be served from before it.
	r.add(map[string]write{"a": {val: []byte("4")}})
	large := map[string]write{"a": {val: []byte("5")}}
	for i := range recentMaxWrites {
		large[fmt.Sprint("k", i)] = write{val: []byte("v")}
	}
	r.add(large)
	if w, ok := r.get("a"); ok {
		t.Fatalf("a served as %q after a large batch", w.val)
	}
}

// TestRecentWritesServeCommitted: ops read what earlier, committed batches
// wrote through the committer's cache, and a rebuild's direct deletes are
// not hidden by it. verifyRecent checks every hit against the snapshot.
func TestRecentWritesServeCommitted(t *testing.T) {
	if !verifyRecent {
		t.Fatal("verifyRecent is off in a test binary")
	}
	s := openTest(t, testConfig(t.TempDir()), counter{})
	for i := range 20 {
		if _, err := s.Submit(context.Background(), draftFn("t.a", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.c.recent.cur); n == 0 {
		t.Fatal("no committed write reached the cache")
	}
	if err := s.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(context.Background(), draftFn("t.a", "after")); err != nil {
		t.Fatal(err)
	}
	if got := countOf(t, s, "t.a"); got != 21 {
		t.Fatalf("count %d, want 21", got)
	}
}

// TestSchemaUpgrade: a store of layout 1 opens and is marked with this
// binary's layout, so that older binaries refuse it; a newer one is refused.
func TestSchemaUpgrade(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, testConfig(dir), counter{})
	evs := submitMany(t, s, 10)
	s.Close()
	setSchema := func(n uint64) {
		t.Helper()
		db, err := openBadger(testConfig(dir))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(txn *badger.Txn) error { return txn.Set(keySchema, u64(n)) }); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	setSchema(1)
	s = openTest(t, testConfig(dir), counter{})
	checkHolds(t, s, evs)
	err := s.View(func(tx *Tx) error {
		v, err := tx.Get(keySchema)
		if err != nil {
			return err
		}
		if n, _ := decodeU64(v); n != SchemaVersion {
			return fmt.Errorf("schema %d after open, want %d", n, SchemaVersion)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	setSchema(SchemaVersion + 1)
	if _, err := Open(testConfig(dir)); err == nil {
		t.Fatal("a store of a newer layout opened")
	}
}

// segmentFiles lists the names of the log's segments in dir, in order.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, walDirName))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), walExt) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestWALPreparedSegments: segments after the first are made from a file
// of zeros prepared beforehand; a crash copy replays them, zero tails and
// all, and a record torn inside one is cut off.
func TestWALPreparedSegments(t *testing.T) {
	const segSize = 64 << 10
	live, base := newWithBase(t)
	s := openTest(t, testConfig(live), counter{})
	s.checkpoints.Wait()
	// Keep every segment, as when a crash comes before any checkpoint.
	release := make(chan struct{})
	s.wal.mu.Lock()
	s.wal.segSize = segSize
	syncDB := s.wal.syncDB
	s.wal.syncDB = func(dir string) error { <-release; return syncDB(dir) }
	s.wal.mu.Unlock()
	evs := submitMany(t, s, 1000)
	s.wal.prepared.Wait()
	// One event per record: the last, of pages, is the one torn. It is
	// written again until it is the current segment's last record, not
	// one that filled the segment before.
	var off, before int64
	var cur, next string
	for i := 0; i < 3 || off-before < 3*pageSize; i++ {
		before = off
		body := fmt.Sprint("last ", i)
		if i >= 2 {
			body = strings.Repeat("x", 3*pageSize)
		}
		s.wal.prepared.Wait()
		se, err := s.Submit(context.Background(), draftFn("t.a", body))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, se)
		s.wal.mu.Lock()
		off, cur, next = s.wal.off, segmentName(s.wal.first), segmentName(s.wal.next)
		s.wal.mu.Unlock()
	}
	dir := crashCopy(t, base, live)
	close(release)
	s.Close()
	if n := len(segmentFiles(t, dir)); n < 3 {
		t.Fatalf("%d segments: the log did not move on", n)
	}
	fi, err := os.Stat(filepath.Join(dir, walDirName, cur))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != segSize || off >= segSize {
		t.Fatalf("the current segment holds %d bytes of records in a file of %d: not prepared", off, fi.Size())
	}

	whole := t.TempDir()
	copyFiles(t, dir, whole)
	copyFiles(t, filepath.Join(dir, walDirName), filepath.Join(whole, walDirName))
	// A newer, empty segment, as a cut for a direct write leaves it: the
	// prepared one's zeros are then not the newest segment's tail.
	if err := os.WriteFile(filepath.Join(whole, walDirName, next), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := openTest(t, testConfig(whole), counter{})
	checkHolds(t, s2, evs)
	s2.Close()

	// Every record starts at a multiple of walAlign.
	data, err := os.ReadFile(filepath.Join(dir, walDirName, cur))
	if err != nil {
		t.Fatal(err)
	}
	last := int64(0)
	for at := int64(0); at < off; at += walHeaderSize + int64(binary.LittleEndian.Uint32(data[at:])) {
		if at%walAlign != 0 {
			t.Fatalf("a record starts at offset %d", at)
		}
		last = at
	}
	if off-last < 3*pageSize {
		t.Fatalf("the last record is %d bytes: it should span pages", off-last)
	}
	// A kill -9 stops a write between pages: the last record is cut at
	// every page boundary it spans, or before its last byte that is not
	// padding, and the rest of the prepared segment is still zeros. Each
	// is a torn tail.
	end := off
	for data[end-1] == 0 {
		end--
	}
	cuts := []int64{end - 1}
	for p := (last + pageSize - 1) / pageSize * pageSize; p < off; p += pageSize {
		cuts = append(cuts, p)
	}
	for _, cut := range cuts {
		torn := t.TempDir()
		copyFiles(t, dir, torn)
		copyFiles(t, filepath.Join(dir, walDirName), filepath.Join(torn, walDirName))
		f, err := os.OpenFile(filepath.Join(torn, walDirName, cur), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, off-cut), cut); err != nil {
			t.Fatal(err)
		}
		f.Close()
		s3, err := Open(testConfig(torn))
		if err != nil {
			t.Fatalf("cut at %d (record at %d): %v", cut, last, err)
		}
		checkHolds(t, s3, evs[:len(evs)-1])
		s3.Close()
	}
}

// pageSize is the unit in which the kernel copies a write into a file.
const pageSize = 4096

// TestWALPrepareFails: a spare that cannot be made is removed and not tried
// again before the next segment starts, and one that is gone when the
// segment starts leaves it to start empty; the log goes on either way.
func TestWALPrepareFails(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, testConfig(dir), counter{})
	s.checkpoints.Wait()
	var mu sync.Mutex
	tries := map[uint64]int{} // by the segment the log was in
	s.wal.mu.Lock()
	s.wal.segSize = 64 << 10
	s.wal.zeroFile = func(name string, size int64) error {
		s.wal.mu.Lock()
		first := s.wal.first
		s.wal.mu.Unlock()
		mu.Lock()
		tries[first]++
		mu.Unlock()
		if err := os.WriteFile(name, make([]byte, 4096), 0o600); err != nil {
			return err
		}
		return errors.New("no space left on device")
	}
	s.wal.mu.Unlock()
	evs := submitMany(t, s, 1000)
	s.wal.prepared.Wait()
	mu.Lock()
	if len(tries) < 2 {
		t.Fatalf("tries to prepare a spare, by segment: %v; want some in more than one", tries)
	}
	for first, n := range tries {
		if n > 1 {
			t.Fatalf("%d tries to prepare a spare while in the segment of record %d", n, first)
		}
	}
	mu.Unlock()
	if _, err := os.Stat(filepath.Join(dir, walDirName, spareName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed spare was left: %v", err)
	}

	// A spare prepared, then removed before the segment starts.
	s.wal.mu.Lock()
	s.wal.zeroFile = zeroFile
	s.wal.mu.Unlock()
	for {
		s.wal.mu.Lock()
		ready := s.wal.spareReady
		s.wal.mu.Unlock()
		if ready {
			break
		}
		evs = append(evs, submitMany(t, s, 16)...)
		s.wal.prepared.Wait()
	}
	if err := os.Remove(filepath.Join(dir, walDirName, spareName)); err != nil {
		t.Fatal(err)
	}
	s.wal.mu.Lock()
	first := s.wal.first
	s.wal.mu.Unlock()
	for moved := false; !moved; {
		evs = append(evs, submitMany(t, s, 16)...)
		if err := s.failure(); err != nil {
			t.Fatal(err)
		}
		s.wal.mu.Lock()
		moved = s.wal.first != first
		s.wal.mu.Unlock()
	}
	if err := s.failure(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, testConfig(dir), counter{})
	checkHolds(t, s, evs)
}

// liveCopy returns a data directory holding what a kill -9 of s would
// leave: Badger's files as they are (its unsynced commits in the page
// cache) and the write-ahead log.
func liveCopy(t *testing.T, live string) string {
	t.Helper()
	dir := t.TempDir()
	copyFiles(t, live, dir)
	copyFiles(t, filepath.Join(live, walDirName), filepath.Join(dir, walDirName))
	return dir
}

// TestWALMarkSkipsWhatBadgerHolds: when the log ends before records whose
// writes Badger holds (its mark says which: the last records damaged and
// cut), the records before are not replayed over Badger's newer values,
// and nothing is lost. Before, the last record was cut as a torn tail and the
// ones before it replayed over Badger's newer values: an acknowledged
// write was undone, its counter handed out again, or the store refused to
// open ever again (sequence and last event apart).
func TestWALMarkSkipsWhatBadgerHolds(t *testing.T) {
	for _, damage := range []struct {
		name string
		do   func(b []byte) []byte
	}{
		{"a byte of the last record's payload", func(b []byte) []byte {
			last := 0
			for off := 0; off+walHeaderSize <= len(b) && binary.LittleEndian.Uint32(b[off:]) != 0; off += walHeaderSize + int(binary.LittleEndian.Uint32(b[off:])) {
				last = off
			}
			return flipAt(b, last+walHeaderSize+2)
		}},
		{"the log cut in the last record", func(b []byte) []byte {
			end := 0
			for end+walHeaderSize <= len(b) && binary.LittleEndian.Uint32(b[end:]) != 0 {
				end += walHeaderSize + int(binary.LittleEndian.Uint32(b[end:]))
			}
			return b[:end-5]
		}},
	} {
		t.Run(damage.name, func(t *testing.T) {
			live := t.TempDir()
			s := openTest(t, testConfig(live), counter{})
			evs := submitEach(t, s, 10)
			dir := liveCopy(t, live)
			s.Close()
			damageNewestSegment(t, dir, damage.do)
			s = openTest(t, testConfig(dir), counter{})
			checkHolds(t, s, evs)
			se, err := s.Submit(context.Background(), draftFn("t.a", "after"))
			if err != nil || se.Event.Seq != 11 {
				t.Fatalf("next event %v, %v", se, err)
			}
			s.Close()
			s = openTest(t, testConfig(dir), counter{}) // and again, from what this start left
			checkHolds(t, s, append(evs, se))
		})
	}
}

// TestWALMarkDamageBeforeTheEnd: damage to records Badger holds, with
// readable records after it that Badger does not hold, is refused: the
// records after it are acknowledged writes that replay must not skip.
func TestWALMarkDamageBeforeTheEnd(t *testing.T) {
	live := t.TempDir()
	s := openTest(t, testConfig(live), counter{})
	submitEach(t, s, 5)
	dir := t.TempDir()
	copyFiles(t, live, dir) // Badger holding records 1-5 (its mark), unsynced
	submitEach(t, s, 5)
	copyFiles(t, filepath.Join(live, walDirName), filepath.Join(dir, walDirName)) // the log: 1-10
	s.Close()
	damageNewestSegment(t, dir, func(b []byte) []byte { return zeroHeader(b, 2) }) // record 3
	if _, err := Open(testConfig(dir)); !errors.Is(err, errWALDamaged) {
		t.Fatalf("open: %v, want %v", err, errWALDamaged)
	}
}

// TestWALMarkGap: Badger's files lacking records that the log no longer
// holds (checkpointed away) is damage: the store refuses to open, and
// changes nothing, rather than serve what is left.
func TestWALMarkGap(t *testing.T) {
	live := t.TempDir()
	s := openTest(t, testConfig(live), counter{})
	submitMany(t, s, 5)
	s.Close()
	old := t.TempDir()
	copyFiles(t, live, old) // Badger, synced, with its mark
	s = openTest(t, testConfig(live), counter{})
	submitMany(t, s, 5)
	s.Close() // checkpointed: the log begins after every record so far
	dir := t.TempDir()
	copyFiles(t, old, dir)
	copyFiles(t, filepath.Join(live, walDirName), filepath.Join(dir, walDirName))
	before := segmentFiles(t, dir)
	if _, err := Open(testConfig(dir)); !errors.Is(err, errWALDamaged) {
		t.Fatalf("open: %v, want %v", err, errWALDamaged)
	}
	if after := segmentFiles(t, dir); !slices.Equal(before, after) {
		t.Fatalf("the refused open changed the log: %v, then %v", before, after)
	}
}

// damageNewestSegment rewrites the newest log segment of the store in dir
// with what damage makes of it.
func damageNewestSegment(t *testing.T, dir string, damage func([]byte) []byte) {
	t.Helper()
	segs := segmentFiles(t, dir)
	name := filepath.Join(dir, walDirName, segs[len(segs)-1])
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, damage(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRefusesMissingManifest: a store whose MANIFEST is gone is refused,
// and left as it was, rather than opened empty: Badger would start a new
// database beside the tables it no longer lists, and the node would sign a
// new chain of its realm over the one its peers hold.
func TestOpenRefusesMissingManifest(t *testing.T) {
	for _, name := range []string{"synced into tables", "in the log only"} {
		t.Run(name, func(t *testing.T) {
			live := t.TempDir()
			s := openTest(t, testConfig(live), counter{})
			submitEach(t, s, 10)
			dir := live
			if name == "in the log only" {
				dir = liveCopy(t, live)
			}
			s.Close()
			if err := os.Remove(filepath.Join(dir, "MANIFEST")); err != nil {
				t.Fatal(err)
			}
			before := segmentFiles(t, dir)
			_, err := Open(testConfig(dir))
			if !errors.Is(err, ErrNoManifest) || !strings.Contains(err.Error(), "relay import") {
				t.Fatalf("open without a MANIFEST: %v, want %v", err, ErrNoManifest)
			}
			if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the refused open made a MANIFEST: %v", err)
			}
			if after := segmentFiles(t, dir); !slices.Equal(before, after) {
				t.Fatalf("the refused open changed the log: %v, then %v", before, after)
			}
		})
	}
	// A directory made for a store, still empty, opens.
	s := openTest(t, testConfig(t.TempDir()))
	s.Close()
}

// TestOpenRefusesDamagedTable: a table cut short, or overwritten at its
// end, is refused by name before Badger opens it (it would crash reading
// its footer), and the store is left as it was.
func TestOpenRefusesDamagedTable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"cut in half", func(b []byte) []byte { return b[:len(b)/2] }},
		{"cut to 3 bytes", func(b []byte) []byte { return b[:3] }},
		{"end overwritten", func(b []byte) []byte {
			for i := len(b) - 16; i < len(b); i++ {
				b[i] = 0xee
			}
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, testConfig(dir), counter{})
			submitEach(t, s, 10)
			s.Close() // flushes the memtable into a table
			tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
			if len(tables) == 0 {
				t.Fatal("no table after close")
			}
			b, err := os.ReadFile(tables[0])
			if err != nil {
				t.Fatal(err)
			}
			damaged := tc.damage(b)
			if err := os.WriteFile(tables[0], damaged, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = Open(testConfig(dir))
			if !errors.Is(err, ErrDamagedTable) || !strings.Contains(err.Error(), filepath.Base(tables[0])) {
				t.Fatalf("open with a damaged table: %v, want %v", err, ErrDamagedTable)
			}
			if after, _ := os.ReadFile(tables[0]); !bytes.Equal(after, damaged) {
				t.Fatal("the refused open changed the table")
			}
		})
	}
}

// TestDamagedBlockIsAnError: bytes overwritten inside a table's data are
// caught by the block's checksum when it is read, rather than served.
func TestDamagedBlockIsAnError(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, testConfig(dir), counter{})
	val := make([]byte, 3000) // random: no compression hides it in the file
	rand.Read(val)
	if _, err := s.Submit(context.Background(), func(tx *Tx) (*protocol.Draft, error) {
		return nil, tx.Set([]byte("l/k/v"), val)
	}); err != nil {
		t.Fatal(err)
	}
	s.Close() // flushes the memtable into a table
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) != 1 {
		t.Fatalf("tables after close: %v", tables)
	}
	b, err := os.ReadFile(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, val)
	if at < 0 {
		t.Fatal("the value is not in the table as written")
	}
	b[at+len(val)/2] ^= 0x01
	if err := os.WriteFile(tables[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	// Opening the table reads its last block; a read of the value, its own.
	s2, err := Open(testConfig(dir))
	if err == nil {
		defer s2.Close()
		err = s2.View(func(tx *Tx) error {
			got, err := tx.Get([]byte("l/k/v"))
			if err == nil && !bytes.Equal(got, val) {
				t.Error("the damaged value was served")
			}
			return err
		})
	}
	if err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("reading a damaged block: %v, want a checksum mismatch", err)
	}
}
