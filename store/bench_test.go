package store

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"relay/protocol"
	"relay/testnet/cputime"
)

// All benchmarks write to disk with SyncWrites: acknowledged means durable.

// report adds throughput and latency percentiles to a benchmark's output.
func report(b *testing.B, elapsed time.Duration, lat []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(float64(len(lat)-1)*p)]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "appends/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// benchPayload is a typical small event body.
var benchPayload = func() []byte {
	b, err := protocol.EncodeData(map[string]any{
		"body":   "A message of a realistic length, about the size agents post when they answer a thread.",
		"thread": "th_1042", "kind": "answer",
	})
	if err != nil {
		panic(err)
	}
	return b
}()

func benchDraft(*Tx) (*protocol.Draft, error) {
	return &protocol.Draft{Type: "parley.message.posted", Author: "home:bench", Data: benchPayload}, nil
}

// BenchmarkAppendBaselineFsyncEach is the naive path: one synced Badger
// transaction per record, a single writer.
func BenchmarkAppendBaselineFsyncEach(b *testing.B) {
	db, err := badger.Open(badger.DefaultOptions(b.TempDir()).WithSyncWrites(true).WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	val := make([]byte, 300)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		err := db.Update(func(txn *badger.Txn) error { return txn.Set(sequenceKey(uint64(i)), val) })
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	report(b, time.Since(start), lat)
}

func benchStore(b *testing.B) *Store {
	cfg := testConfig(b.TempDir())
	cfg.Now = time.Now
	return openTest(b, cfg, counter{})
}

func BenchmarkSubmitSingleWriter(b *testing.B) {
	s := benchStore(b)
	lat := make([]time.Duration, 0, b.N)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := s.Submit(ctx, benchDraft); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	report(b, time.Since(start), lat)
}

func BenchmarkSubmit32Writers(b *testing.B) {
	s := benchStore(b)
	const writers = 32
	ctx := context.Background()
	var next atomic.Int64
	lats := make([][]time.Duration, writers)
	commits := s.commits.Load()
	b.ResetTimer()
	cpu0 := cputime.Now()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if _, err := s.Submit(ctx, benchDraft); err != nil {
					b.Error(err)
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.ReportMetric(float64((cputime.Now()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	report(b, elapsed, slices.Concat(lats...))
	if c := s.commits.Load() - commits; c > 0 {
		b.ReportMetric(float64(b.N)/float64(c), "ops/commit")
	}
}
