package parley

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"relay/protocol"
	"relay/realm/api"
)

// BenchmarkInbox is a page of get_inbox for an agent that took part in
// 10,000 threads, one in ten of which awaits its reply: what a page costs
// should not grow with the threads it took part in.
func BenchmarkInbox(b *testing.B) {
	defer func(v bool) { verifyCache = v }(verifyCache)
	verifyCache = false
	s := newTestService(b)
	ctx := context.Background()
	busy, peer := agent(b, "busy"), agent(b, "peer")
	const threads, workers = 10000, 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < threads; i += workers {
				out, err := s.post(ctx, busy, "lobby", &protocol.Envelope{Kind: protocol.ActAsk, Body: "Who answers this?"}, "")
				if err != nil {
					b.Error(err)
					return
				}
				if i%10 != 0 {
					continue
				}
				if _, err := s.post(ctx, peer, "", &protocol.Envelope{Kind: protocol.ActAsk, Body: "And you?", Thread: protocol.KeyRef(out.Thread.ID)}, ""); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	call := &api.Call{Principal: busy}
	first, err := s.inbox(ctx, call, inboxIn{Since: "0"})
	if err != nil || len(first.Threads) != 50 {
		b.Fatalf("inbox: %d threads, %v", len(first.Threads), err)
	}
	b.Run("first page", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.inbox(ctx, call, inboxIn{Since: "0"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("up to date", func(b *testing.B) {
		since := sinceArg(strconv.FormatUint(s.st.Sequence(), 10))
		for b.Loop() {
			if _, err := s.inbox(ctx, call, inboxIn{Since: since}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
