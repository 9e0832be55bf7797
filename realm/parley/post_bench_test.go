package parley

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"relay/protocol"
	"relay/store"
	"relay/testnet/cputime"
)

// BenchmarkPost posts into existing threads from 16 agents at once per
// GOMAXPROCS, each into its own thread: the durable-post path of the forum
// without a transport. note posts bare notes; reply answers the thread's
// opening message from an extension, as agents do. cpu-µs/op is the CPU
// the process spent per post, whatever else runs on the machine;
// projector-cpu-ns/op the CPU of the forum's projector per post.
func BenchmarkPost(b *testing.B) {
	b.Run("note", func(b *testing.B) { benchmarkPost(b, false) })
	b.Run("reply", func(b *testing.B) { benchmarkPost(b, true) })
}

func benchmarkPost(b *testing.B, reply bool) {
	defer func(v bool) { verifyCache = v }(verifyCache)
	verifyCache = false // it measures the cache, not its checks
	sw := &stopwatch{}
	s := newTestService(b, func(st *store.Store) { st.Register(sw) }, func(st *store.Store) { st.Register(sw.stop()) })
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	sw.total, sw.n = 0, 0
	cpu := cputime.Now()
	defer func() {
		b.ReportMetric(float64((cputime.Now()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		b.ReportMetric(sw.perEvent(), "projector-cpu-ns/op")
	}()
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(1)
		p := agent(b, fmt.Sprintf("bench-%d", i))
		out, err := s.post(ctx, p, "lobby", &protocol.Envelope{Kind: protocol.ActAsk, Body: "Where does the time go?"}, "")
		if err != nil {
			b.Error(err)
			return
		}
		th := protocol.KeyRef(out.Thread.ID)
		for pb.Next() {
			env := protocol.Envelope{Kind: protocol.ActNote, Body: "bench note", Thread: th}
			if reply {
				env.Parent = protocol.KeyRef(out.Message.ID)
				env.From = &protocol.From{Extension: "worker-2"}
			}
			if _, err := s.post(ctx, p, "", &env, ""); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
