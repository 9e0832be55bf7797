package corpus

import (
	"context"
	"encoding/json"
	"testing"

	"relay/realm/api"
	"relay/testnet/cputime"
)

// BenchmarkAppendInput measures what the registry spends on an append's
// arguments before the append itself: the rights check, the schema check
// and the typed decode of api.Handler, on the real operation with arguments
// shaped as the HTTP transport hands them over. The handler returns as it
// starts.
// cpu-ns/op is the process's CPU per call, whatever else runs on the
// machine.
func BenchmarkAppendInput(b *testing.B) {
	f := openSearchFixture(b, "")
	reg := api.NewRegistry()
	f.s.Register(reg)
	real, ok := reg.Lookup("append_message")
	if !ok {
		b.Fatal("no append_message")
	}
	op := *real
	op.Handle, _, _ = api.Handler(func(context.Context, *api.Call, writeIn) (struct{}, error) { return struct{}{}, nil })
	p := f.agent()
	args := json.RawMessage(`{"content":"The index follows the log. Every append waits for its batch, and the batch waits for the disk. ` +
		`Nobody measured the schema check until now.","conversation_id":"cv_01JB7ZK4X2Q9M3N8P5R6S7T8V9",` +
		`"endpoint_id":"ep_01JB7ZK4X2Q9M3N8P5R6S7T8V9","kind":["status-update"],"operation_token":"a1742","tags":["bench-7"]}`)
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
