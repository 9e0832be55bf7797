package parley

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"testing"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// TestListingsFollowTheirOrder: threads asked, answered, noted in, pinned
// and set aside at random are listed by get_threads (newest first, with
// its filters) and by a board (pinned, then waiting, then the rest) in
// the order a sort of every thread gives, page by page, with has_more.
func TestListingsFollowTheirOrder(t *testing.T) {
	s := newTestService(t)
	ctx := context.Background()
	r := rand.New(rand.NewSource(7))
	hid, err := protocol.ParseIdentity("human:operator")
	if err != nil {
		t.Fatal(err)
	}
	all, err := protocol.NewRights("read", "write", "pin", "lock", "verify", "grant")
	if err != nil {
		t.Fatal(err)
	}
	human := &api.Principal{Identity: hid, Human: true, Rights: all}
	var ids []string
	for i := range 40 {
		switch op := r.Intn(6); {
		case op == 0 || len(ids) < 5:
			ids = append(ids, openThread(t, s, fmt.Sprintf("a%d", r.Intn(4))).ID)
		case op == 1:
			if _, err := note(s, agent(t, fmt.Sprintf("n%d", i)), ids[r.Intn(len(ids))], "a note"); err != nil {
				t.Logf("note: %v", err) // a closed or set-aside thread refuses it
			}
		case op == 2:
			_, err := s.post(ctx, agent(t, fmt.Sprintf("b%d", i)), "", &protocol.Envelope{Kind: protocol.ActAnswer, Body: "an answer", Thread: protocol.KeyRef(ids[r.Intn(len(ids))])}, "")
			if err != nil {
				t.Logf("answer: %v", err)
			}
		case op == 3:
			pinned := r.Intn(2) == 0
			if _, err := s.pin(ctx, &api.Call{Principal: human}, pinIn{ID: protocol.KeyRef(ids[r.Intn(len(ids))]), Pinned: &pinned}); err != nil {
				t.Fatal(err)
			}
		case op == 4:
			if _, err := s.setState(ctx, &api.Call{Principal: human}, setStateIn{ID: protocol.KeyRef(ids[r.Intn(len(ids))]), State: protocol.StateDeferred}); err != nil {
				t.Logf("state: %v", err)
			}
		default:
			time.Sleep(2 * time.Millisecond) // later times for what follows
		}
	}

	var threads []*threadRec
	err = s.st.View(func(tx *store.Tx) error {
		return tx.Iterate(pfxThread, false, func(_, v []byte) error {
			var th threadRec
			if err := json.Unmarshal(v, &th); err != nil {
				return err
			}
			threads = append(threads, &th)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	ids = nil
	key := func(th *threadRec) string { return s.threadOut(th).ID }
	byNewer := slices.Clone(threads)
	sort.SliceStable(byNewer, func(i, j int) bool { return newer(byNewer[i], byNewer[j]) })
	byBoard := slices.Clone(threads)
	sort.SliceStable(byBoard, func(i, j int) bool {
		a, b := byBoard[i], byBoard[j]
		if a.Pinned != b.Pinned {
			return a.Pinned
		}
		if a.waiting() != b.waiting() {
			return a.waiting()
		}
		return newer(a, b)
	})
	filtered := func(ts []*threadRec, keep func(*threadRec) bool) []string {
		var out []string
		for _, th := range ts {
			if keep(th) {
				out = append(out, key(th))
			}
		}
		return out
	}
	pages := func(name string, want []string, list func(offset, limit int) (ThreadsOut, error)) {
		t.Helper()
		for _, limit := range []int{1, 3, 7, 200} {
			var got []string
			for offset := 0; ; offset += limit {
				out, err := list(offset, limit)
				if err != nil {
					t.Fatalf("%s offset %d limit %d: %v", name, offset, limit, err)
				}
				for _, th := range out.Threads {
					got = append(got, th.ID)
				}
				if more := offset+limit < len(want); out.HasMore != more {
					t.Fatalf("%s offset %d limit %d: has_more %v, want %v", name, offset, limit, out.HasMore, more)
				}
				if !out.HasMore {
					break
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s, pages of %d:\ngot  %v\nwant %v", name, limit, got, want)
			}
		}
	}
	yes, no := true, false
	mid := byNewer[len(byNewer)/2].UpdatedAt
	since, err := time.Parse(time.RFC3339, mid.Format(time.RFC3339Nano))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		in   listThreadsIn
		keep func(*threadRec) bool
	}{
		{"all", listThreadsIn{}, func(*threadRec) bool { return true }},
		{"awaiting", listThreadsIn{Awaiting: &yes}, func(th *threadRec) bool { return th.Awaiting }},
		{"not awaiting", listThreadsIn{Awaiting: &no}, func(th *threadRec) bool { return !th.Awaiting }},
		{"deferred", listThreadsIn{State: protocol.StateDeferred}, func(th *threadRec) bool { return th.State.State == protocol.StateDeferred }},
		{"since", listThreadsIn{Since: mid.Format(time.RFC3339Nano)}, func(th *threadRec) bool { return th.UpdatedAt.After(since) }},
		{"creator", listThreadsIn{Creator: "test:a1"}, func(th *threadRec) bool { return th.Creator == "test:a1" }},
	} {
		pages("get_threads "+tc.name, filtered(byNewer, tc.keep), func(offset, limit int) (ThreadsOut, error) {
			in := tc.in
			in.Offset, in.Limit = offset, limit
			return s.listThreads(ctx, nil, in)
		})
	}
	pages("the lobby", filtered(byBoard, func(*threadRec) bool { return true }), func(offset, limit int) (ThreadsOut, error) {
		return s.boardThreads(ctx, nil, boardThreadsIn{ID: "lobby", Offset: offset, Limit: limit})
	})
}

// BenchmarkListThreads is a page of get_threads and of the lobby over a
// forum of 2,000 threads: what one costs should not grow with the forum.
func BenchmarkListThreads(b *testing.B) {
	s := newTestService(b)
	ctx := context.Background()
	p := agent(b, "bench")
	for range 2000 {
		if _, err := s.post(ctx, p, "lobby", &protocol.Envelope{Kind: protocol.ActAsk, Body: "Is the index right?"}, ""); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("get_threads", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.listThreads(ctx, nil, listThreadsIn{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get_threads offset 1900", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.listThreads(ctx, nil, listThreadsIn{Offset: 1900}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lobby", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.boardThreads(ctx, nil, boardThreadsIn{ID: "lobby"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
