package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// FuzzWALSegment: whatever bytes a segment holds, and whatever mark Badger
// holds, replaying it returns (a count or an error) and never panics; it
// replays no more records than the segment could hold.
func FuzzWALSegment(f *testing.F) {
	good := segmentOf(1, "a", "1", "b", "2", "c", "3")
	f.Add(good, uint64(0), true)
	f.Add(good, uint64(2), true)
	f.Add(flipLast(segmentOf(1, "a", "1", "b", "2")), uint64(2), true)
	f.Add(segmentOf(1, "a", "1", "b", "2")[:40], uint64(0), true)
	f.Add(zeroHeader(segmentOf(1, "a", "1", "b", "2", "c", "3"), 1), uint64(1), false)
	f.Add(longHeader(segmentOf(1, "a", "1", "b", "2", "c", "3"), 1), uint64(3), true)
	f.Add([]byte{}, uint64(0), true)
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, mark uint64, newest bool) {
		if err := os.WriteFile(filepath.Join(dir, segmentName(1)), data, 0o600); err != nil {
			t.Fatal(err)
		}
		w := &wal{dir: dir, mark: mark}
		n, err := w.replay(db, 1, newest, 0)
		if n < 0 || n > len(data)/walHeaderSize {
			t.Fatalf("replayed %d records of %d bytes (err %v)", n, len(data), err)
		}
	})
}

// FuzzApplyRecord: a record's payload that passed its checksum but holds
// anything at all is applied or refused, never a panic.
func FuzzApplyRecord(f *testing.F) {
	r := &record{}
	r.reset(nil, 0)
	r.add("p/t/a", write{val: []byte("1")})
	r.add("p/t/b", write{del: true})
	f.Add(r.buf[walHeaderSize:])
	f.Add([]byte{entrySet, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{entryDelete, 0})
	f.Add([]byte{7})
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	f.Fuzz(func(t *testing.T, payload []byte) {
		_ = applyRecord(db, payload)
	})
}
