package corpus

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// TestConversationsByTagIndex: conversations filtered by a tag, or by
// kinds, read from their index, are the pages a scan of every
// conversation gives, with q, after and has_more.
func TestConversationsByTagIndex(t *testing.T) {
	f := openSyncFixture(t, Config{})
	ctx := context.Background()
	r := rand.New(rand.NewSource(3))
	tags := []string{"a", "b", "c", "d"}
	var convs []string
	for i := range 150 {
		f.ops++
		content := fmt.Sprint("message ", i)
		in := writeIn{OperationToken: fmt.Sprint("tag-", f.ops), Content: &content, Tags: []string{tags[r.Intn(len(tags))]}}
		kind := []string{[]string{"post", "question", "claim"}[r.Intn(3)]}
		in.Kind = &kind
		if len(convs) < 5 || r.Intn(3) == 0 {
			in.Subject = fmt.Sprintf("subject %d %s", i, []string{"red", "blue"}[r.Intn(2)])
		} else {
			in.ConversationID = convs[r.Intn(len(convs))]
		}
		res, err := f.s.write(ctx, f.p, &in, in.ConversationID == "")
		if err != nil {
			t.Fatal(err)
		}
		if in.ConversationID == "" {
			convs = append(convs, res.ConversationID)
		}
	}
	list := func(in conversationsIn) []string {
		var ids []string
		for {
			out, err := f.s.listConversations(ctx, nil, in)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range out.Conversations {
				ids = append(ids, c.ConversationID)
			}
			if !out.HasMore {
				return ids
			}
			if out.NextCursor == nil {
				t.Fatal("has_more without next_cursor")
			}
			if in.After != nil && *out.NextCursor <= *in.After {
				t.Fatalf("next_cursor %d does not move past %d", *out.NextCursor, *in.After)
			}
			in.After = out.NextCursor
		}
	}
	for _, tag := range []string{"a", "b", "none", ""} {
		for _, q := range []string{"", "red"} {
			for _, kinds := range [][]string{nil, {"question"}, {"claim", "question"}, {"verification"}} {
				for _, limit := range []int{1, 3, 7, 100} {
					in := conversationsIn{Tag: tag, Q: q, Kinds: kinds, Limit: &limit}
					got := list(in)
					was := tagIndexMax
					tagIndexMax = -1 // every conversation scanned, as before the index
					want := list(in)
					tagIndexMax = was
					if !slices.Equal(got, want) {
						t.Fatalf("tag %q q %q kinds %v limit %d:\ngot  %v\nwant %v", tag, q, kinds, limit, got, want)
					}
					if tag == "a" && q == "" && kinds == nil && len(want) == 0 {
						t.Fatal("no conversation tagged a")
					}
				}
			}
		}
	}
}

// BenchmarkConversationsByKind is a page of /conversations?kinds= for a
// kind 5 of 5,000 conversations hold: it should cost those, not all.
func BenchmarkConversationsByKind(b *testing.B) {
	f := openSyncFixture(b, Config{})
	ctx := context.Background()
	for i := range 5000 {
		f.ops++
		content := fmt.Sprint("message ", i)
		kind := []string{"post"}
		if i%1000 == 0 {
			kind = []string{"challenge"}
		}
		in := writeIn{OperationToken: fmt.Sprint("kind-", f.ops), Subject: "s", Content: &content, Kind: &kind}
		if _, err := f.s.write(ctx, f.p, &in, true); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		out, err := f.s.listConversations(ctx, nil, conversationsIn{Kinds: []string{"challenge"}})
		if err != nil || len(out.Conversations) != 5 {
			b.Fatalf("%d conversations, %v", len(out.Conversations), err)
		}
	}
}
