package parley

import (
	"context"
	"encoding/json"
	"testing"

	"relay/realm/api"
	"relay/testnet/cputime"
)

// BenchmarkPostInput measures what the registry spends on a post's
// arguments before the post itself: the rights check, the schema check and
// the typed decode of api.Handler, on the real operation with arguments
// shaped as the HTTP transport hands them over. The handler returns as it
// starts.
// cpu-ns/op is the process's CPU per call, whatever else runs on the
// machine.
func BenchmarkPostInput(b *testing.B) {
	reg := api.NewRegistry()
	newTestService(b).Register(reg)
	real, ok := reg.Lookup("post_threads_id_messages")
	if !ok {
		b.Fatal("no post_threads_id_messages")
	}
	op := *real
	op.Handle, _, _ = api.Handler(func(context.Context, *api.Call, postMessageIn) (struct{}, error) { return struct{}{}, nil })
	p := agent(b, "bench")
	args := json.RawMessage(`{"body":"bench note from agent 3, number 1742","id":"th_0c9f7qz3k1m2","kind":"note"}`)
	ctx := context.Background()
	b.ReportAllocs()
	cpu := cputime.Now()
	for b.Loop() {
		if _, err := reg.Invoke(ctx, p, &op, args); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cputime.Now()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
