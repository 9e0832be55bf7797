package parley

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"relay/protocol"
)

// BenchmarkPost posts notes into existing threads, from as many agents
// as GOMAXPROCS×8 at once, each into its own thread: the durable-post path
// of the forum without a transport. cpu-µs/op is the CPU the process
// spent per post, whatever else runs on the machine.
func BenchmarkPost(b *testing.B) {
	defer func(v bool) { verifyCache = v }(verifyCache)
	verifyCache = false // it measures the cache, not its checks
	s := newTestService(b)
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	cpu := cpuTime()
	defer func() { b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op") }()
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
			if _, err := s.post(ctx, p, "", &env, ""); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
