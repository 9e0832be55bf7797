package parley

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// TestInboxPagesFollowTheThreads: agents and the human ask, answer, note,
// close, set aside, pin and forbid AI replies at random; every identity's
// inbox (with and without an extension, from a cursor and from a time),
// read page by page by its cursor, lists what a filter over every thread
// gives, by both of the inbox's paths (decoding each thread taken part in,
// or reading the board order index first).
func TestInboxPagesFollowTheThreads(t *testing.T) {
	s := newTestService(t)
	ctx := context.Background()
	r := rand.New(rand.NewSource(11))
	hid, err := protocol.ParseIdentity("human:operator")
	if err != nil {
		t.Fatal(err)
	}
	all, err := protocol.NewRights("read", "write", "pin", "lock", "verify", "grant")
	if err != nil {
		t.Fatal(err)
	}
	human := &api.Principal{Identity: hid, Human: true, Rights: all}
	who := func() *api.Principal {
		if r.Intn(8) == 0 {
			return human
		}
		return agent(t, fmt.Sprintf("a%d", r.Intn(5)))
	}
	acts := []protocol.Act{protocol.ActAsk, protocol.ActAnswer, protocol.ActNote, protocol.ActPropose, protocol.ActRequest}
	var ids []string
	var mid string // an RFC 3339 time half-way
	for i := range 300 {
		if i == 150 {
			time.Sleep(1100 * time.Millisecond) // a second later: since as a time splits the run
			mid = time.Now().UTC().Format(time.RFC3339)
			time.Sleep(1100 * time.Millisecond)
		}
		switch op := r.Intn(10); {
		case op < 2 || len(ids) < 5:
			out, err := s.post(ctx, who(), "lobby", &protocol.Envelope{Kind: protocol.ActAsk, Body: "Who answers?"}, "")
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, out.Thread.ID)
		case op < 7:
			env := &protocol.Envelope{Kind: acts[r.Intn(len(acts))], Body: "a reply", Thread: protocol.KeyRef(ids[r.Intn(len(ids))])}
			if r.Intn(3) == 0 {
				env.From = &protocol.From{Extension: "x"}
			}
			if _, err := s.post(ctx, who(), "", env, ""); err != nil {
				t.Logf("post: %v", err) // a closed thread, a self-reply, …
			}
		case op == 7:
			pinned := r.Intn(2) == 0
			if _, err := s.pin(ctx, &api.Call{Principal: human}, pinIn{ID: protocol.KeyRef(ids[r.Intn(len(ids))]), Pinned: &pinned}); err != nil {
				t.Fatal(err)
			}
		case op == 8:
			id := protocol.KeyRef(ids[r.Intn(len(ids))])
			var err error
			switch r.Intn(3) {
			case 0:
				_, err = s.closeThread(ctx, &api.Call{Principal: human}, noteIn{ID: id})
			case 1:
				_, err = s.reopenThread(ctx, &api.Call{Principal: human}, noteIn{ID: id})
			default:
				_, err = s.setState(ctx, &api.Call{Principal: human}, setStateIn{ID: id, State: protocol.StateDeferred})
			}
			if err != nil {
				t.Logf("state: %v", err)
			}
		default:
			if _, err := s.llmReplies(ctx, &api.Call{Principal: human}, llmRepliesIn{ID: protocol.KeyRef(ids[r.Intn(len(ids))]), Forbidden: r.Intn(2) == 0}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Every thread and, from every message, who took part in which.
	threads := map[string]*threadRec{}
	part := map[string]map[string]bool{}
	err = s.st.View(func(tx *store.Tx) error {
		err := tx.Iterate(pfxThread, false, func(_, v []byte) error {
			var th threadRec
			if err := json.Unmarshal(v, &th); err != nil {
				return err
			}
			threads[string(th.id().bytes())] = &th
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Iterate(pfxMessage, false, func(_, v []byte) error {
			var m messageRec
			if err := json.Unmarshal(v, &m); err != nil {
				return err
			}
			if part[m.Identity] == nil {
				part[m.Identity] = map[string]bool{}
			}
			part[m.Identity][string(m.Thread.bytes())] = true
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	sinceTime, err := time.Parse(time.RFC3339, mid)
	if err != nil {
		t.Fatal(err)
	}
	want := func(p *api.Principal, ext string, since uint64, at time.Time) []*threadRec {
		me := p.Identity.String()
		var ts []*threadRec
		for tk := range part[me] {
			th := threads[tk]
			if awaits(th, s.realm, me, ext, p.Human) && th.Last.Sequence > since && th.Last.At.After(at) {
				ts = append(ts, th)
			}
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].Last.Sequence < ts[j].Last.Sequence })
		return ts
	}

	defer func(min, ratio int) { inboxScanMin, inboxScanRatio = min, ratio }(inboxScanMin, inboxScanRatio)
	principals := []*api.Principal{human}
	for i := range 5 {
		principals = append(principals, agent(t, fmt.Sprintf("a%d", i)))
	}
	listed := 0
	for _, path := range []struct {
		name       string
		min, ratio int
	}{{"decode", 1 << 30, 1}, {"index", 0, 1 << 30}} {
		inboxScanMin, inboxScanRatio = path.min, path.ratio
		for _, p := range principals {
			for _, ext := range []string{"", "x"} {
				for _, at := range []string{"", mid} {
					for _, limit := range []int{1, 3, 7, 200} {
						name := fmt.Sprintf("%s %s ext %q since %q limit %d", path.name, p.Identity, ext, at, limit)
						var since uint64
						var atTime time.Time
						arg := sinceArg("0")
						if at != "" {
							arg, atTime = sinceArg(at), sinceTime
						}
						for page := 0; ; page++ {
							out, err := s.inbox(ctx, &api.Call{Principal: p}, inboxIn{Since: arg, Extension: ext, Limit: limit})
							if err != nil {
								t.Fatalf("%s page %d: %v", name, page, err)
							}
							w := want(p, ext, since, atTime)
							w = w[:min(len(w), limit)]
							var got, wantIDs []string
							for _, th := range out.Threads {
								got = append(got, th.ID)
							}
							cursor := since
							for _, th := range w {
								wantIDs = append(wantIDs, s.threadOut(th).ID)
								cursor = th.Last.Sequence
							}
							if !slices.Equal(got, wantIDs) || out.Cursor != cursor {
								t.Fatalf("%s page %d:\ngot  %v cursor %d\nwant %v cursor %d", name, page, got, out.Cursor, wantIDs, cursor)
							}
							listed += len(got)
							if len(got) == 0 {
								break
							}
							since, atTime, arg = out.Cursor, time.Time{}, sinceArg(strconv.FormatUint(out.Cursor, 10))
						}
					}
				}
			}
		}
	}
	t.Logf("%d threads listed", listed)
	if listed < 100 {
		t.Fatalf("only %d threads listed in all: the forum tests too little", listed)
	}
}
