package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
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
		if _, err := io.Copy(out, in); err != nil {
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

// TestWALReplaysWhatBadgerLost: every acknowledged write is in the log, so
// a Badger that kept nothing since its last sync is brought back whole.
func TestWALReplaysWhatBadgerLost(t *testing.T) {
	live := t.TempDir()
	cfg := testConfig(live)
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	base := t.TempDir()
	copyFiles(t, live, base) // Badger synced, before any event

	s, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Register(counter{})
	evs := submitMany(t, s, 300)
	dir := crashCopy(t, base, live) // while open: the log holds every acked write
	s.Close()

	s = openTest(t, testConfig(dir), counter{})
	checkHolds(t, s, evs)
	if st := s.State(); st.Status != "ok" || !st.SyncWrites {
		t.Fatalf("state %+v", st)
	}
	// The replay was made durable and retired: the next open replays nothing.
	more := submitMany(t, s, 20)
	s.Close()
	s = openTest(t, testConfig(dir), counter{})
	checkHolds(t, s, append(evs, more...))
}

// TestWALTornTail: a record cut short by a crash was never acknowledged;
// the records before it are replayed and the store opens.
func TestWALTornTail(t *testing.T) {
	live := t.TempDir()
	cfg := testConfig(live)
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	base := t.TempDir()
	copyFiles(t, live, base)

	s, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Register(counter{})
	var evs []*StoredEvent
	for i := range 10 { // one event per record
		se, err := s.Submit(context.Background(), draftFn("t.a", fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, se)
	}
	dir := crashCopy(t, base, live)
	s.Close()

	segs, err := os.ReadDir(filepath.Join(dir, walDirName))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v, %v", segs, err)
	}
	name := filepath.Join(dir, walDirName, segs[0].Name())
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(name, fi.Size()-3); err != nil { // the last record torn
		t.Fatal(err)
	}
	s = openTest(t, testConfig(dir), counter{})
	checkHolds(t, s, evs[:9])
	// The chain goes on from the last event kept.
	se, err := s.Submit(context.Background(), draftFn("t.a", "after"))
	if err != nil || se.Event.Seq != 10 {
		t.Fatalf("next event %v, %v", se, err)
	}
}

// TestWALDamaged: a record that cannot be read before the newest segment's
// tail is not a crash's doing; Open refuses rather than lose what follows.
func TestWALDamaged(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	wdir := filepath.Join(dir, walDirName)
	segs, _ := os.ReadDir(wdir)
	for _, e := range segs {
		os.Remove(filepath.Join(wdir, e.Name()))
	}
	seg := func(first uint64, recs ...*record) []byte {
		var out []byte
		for i, r := range recs {
			sealRecord(r.buf, first+uint64(i))
			out = append(out, r.buf...)
		}
		return out
	}
	rec := func(k, v string) *record {
		r := &record{}
		r.reset(nil)
		r.add("p/t/"+k, write{val: []byte(v)})
		return r
	}
	one := seg(1, rec("a", "1"), rec("b", "2"))
	one[len(one)-1] ^= 0xff // the second record's value, so its checksum fails
	two := seg(3, rec("c", "3"))
	os.WriteFile(filepath.Join(wdir, segmentName(1)), one, 0o600)
	os.WriteFile(filepath.Join(wdir, segmentName(3)), two, 0o600)
	if _, err := Open(testConfig(dir)); !errors.Is(err, errWALDamaged) {
		t.Fatalf("open: %v, want %v", err, errWALDamaged)
	}

	// The same damage in the newest segment is a torn tail: a is kept.
	os.Remove(filepath.Join(wdir, segmentName(3)))
	s = openTest(t, testConfig(dir))
	err = s.View(func(tx *Tx) error {
		if v, err := tx.Get([]byte("p/t/a")); err != nil || string(v) != "1" {
			return fmt.Errorf("a = %q, %v", v, err)
		}
		if _, err := tx.Get([]byte("p/t/b")); !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("b: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
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
	segs, err := os.ReadDir(filepath.Join(dir, walDirName))
	if err != nil || len(segs) != 1 || segs[0].Name() != segmentName(first) {
		t.Fatalf("segments %v, %v; want only %s", segs, err, segmentName(first))
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
