package parley

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// TestInboxSinceSeesLateAcceptedReply: beta's dan asks in alice's thread at
// T0+1s; the reply reaches this realm, and is accepted, at T0+60s. alice
// polled her inbox at T0+30s and polls again with since=T0+30s: the thread
// awaits her since T0+60s, so it is listed.
func TestInboxSinceSeesLateAcceptedReply(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := t0
	cfg := store.DefaultConfig("")
	cfg.InMemory = true
	cfg.Realm = testRealm
	cfg.Key = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := New(st, Config{Realm: testRealm, Logger: cfg.Logger})
	if err := s.Bootstrap(ctx, "test:human"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.st.EnsureProjections(ctx); err != nil {
		t.Fatal(err)
	}
	go s.Run(ctx)
	alice := agent(t, "alice")
	open, err := s.post(ctx, alice, "lobby", &protocol.Envelope{Kind: protocol.ActAsk, Body: "home asks"}, "")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	clock = t0.Add(60 * time.Second) // the reply is decided here now
	mu.Unlock()
	beta := newChainWriter(t, s.st, "beta", 3, nil)
	beta.at = t0.Add(time.Second).UnixMilli() // made at beta long before
	beta.emit(evMessagePosted, "dan", messageData{Thread: "test:" + open.Thread.ID, N: 1, Kind: "ask", Body: "A question back?", AuthorKind: "llm"})
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var m messageRec
		s.st.View(func(tx *store.Tx) error {
			_, err := tx.GetJSON(key(pfxMessage, rid{"beta", 1}.bytes()), &m)
			return err
		})
		if m.Status == ReplyAccepted {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("reply not accepted: %q", m.Status)
		}
	}
	call := &api.Call{Principal: alice}
	all, err := s.inbox(ctx, call, inboxIn{Since: "0"})
	if err != nil || len(all.Threads) != 1 {
		t.Fatalf("inbox since 0: %+v %v", all, err)
	}
	since := t0.Add(30 * time.Second).Format(time.RFC3339)
	got, err := s.inbox(ctx, call, inboxIn{Since: sinceArg(since)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Threads) != 1 {
		t.Fatalf("inbox since %s (before the reply joined at %s): %d threads",
			since, t0.Add(60*time.Second).Format(time.RFC3339), len(got.Threads))
	}
}
