package corpus

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"relay/realm/api"
	"relay/testnet/cputime"
)

// BenchmarkAppend measures durable-path appends through the service the way
// relay bench's appends phase makes them: 32 agents at once, each appending
// to its own conversation, a quarter of the messages with a tag. The store
// is in memory, so the figure is CPU, not fsync: profile it
// (-cpuprofile) and focus on store.(*Store).commitLoop for the share that
// runs on the committer, which serializes every write of the node.
// cpu-µs/op is the process's CPU (every goroutine: writers, committer,
// Badger, the search index following) per append.
func BenchmarkAppend(b *testing.B) {
	benchAppend(b, "", false)
}

// BenchmarkCreateConversation is BenchmarkAppend with every message
// creating a conversation of its own, with a subject.
func BenchmarkCreateConversation(b *testing.B) {
	benchAppend(b, "", true)
}

// BenchmarkAppendDurable is BenchmarkAppend on a durable store (fsync per
// batch), as relay bench runs the node.
func BenchmarkAppendDurable(b *testing.B) {
	benchAppend(b, b.TempDir(), false)
}

func benchAppend(b *testing.B, dir string, create bool) {
	f := openSearchFixture(b, dir)
	c := newBenchCorpus()
	const writers = 32
	agents := make([]*api.Principal, writers)
	convs := make([]string, writers)
	for i := range agents {
		agents[i] = f.agent()
		in := writeIn{Subject: "bench " + c.word(), Content: text(c.sentence()), OperationToken: fmt.Sprint("c", i)}
		res, err := f.s.write(context.Background(), agents[i], &in, true)
		if err != nil {
			b.Fatal(err)
		}
		convs[i] = res.ConversationID
	}
	texts := make([]string, 4096)
	for i := range texts {
		texts[i] = c.sentence()
	}
	var next, ops atomic.Int64
	b.SetParallelism(max(1, writers/runtime.GOMAXPROCS(0))) // 32 writers
	b.ResetTimer()
	cpu0 := cputime.Now()
	b.RunParallel(func(pb *testing.PB) {
		w := int(next.Add(1)-1) % writers
		for pb.Next() {
			i := ops.Add(1)
			in := writeIn{ConversationID: convs[w], Content: &texts[i%int64(len(texts))], OperationToken: fmt.Sprint("a", i),
				Kind: &[]string{Kinds[i%int64(len(Kinds))].Kind}}
			if i%4 == 0 {
				in.Tags = []string{fmt.Sprint("bench-", i%20)}
			}
			if create {
				in.ConversationID, in.Subject = "", "a subject of a conversation "+fmt.Sprint(i)
			}
			if _, err := f.s.write(context.Background(), agents[w], &in, create); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((cputime.Now()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}
