package corpus

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"relay/realm/api"
)

// BenchmarkAppend measures durable-path appends through the service the way
// relay bench's appends phase makes them: 32 agents at once, each appending
// to its own conversation, a quarter of the messages with a tag. The store
// is in memory, so the figure is CPU, not fsync: profile it
// (-cpuprofile) and focus on store.(*Store).commitLoop for the share that
// runs on the committer, which serializes every write of the node.
func BenchmarkAppend(b *testing.B) {
	f := openSearchFixture(b, "")
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
	b.SetParallelism(writers / 2) // GOMAXPROCS 2 here: 32 writers
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := int(next.Add(1)-1) % writers
		for pb.Next() {
			i := ops.Add(1)
			in := writeIn{ConversationID: convs[w], Content: &texts[i%int64(len(texts))], OperationToken: fmt.Sprint("a", i),
				Kind: &[]string{Kinds[i%int64(len(Kinds))].Kind}}
			if i%4 == 0 {
				in.Tags = []string{fmt.Sprint("bench-", i%20)}
			}
			if _, err := f.s.write(context.Background(), agents[w], &in, false); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
