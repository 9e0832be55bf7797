package corpus

import (
	"context"
	"encoding/json"
	"math/rand"
	"slices"
	"testing"

	"relay/realm/api"
)

// TestMessagesByAuthorIndex: /messages with author_id (or a tag, a
// mention, a kind, a schema or a payload), read through its index, gives every page, cursor and has_more that filtering all
// messages gives, with other filters and bounds beside it.
func TestMessagesByAuthorIndex(t *testing.T) {
	f := openSearchFixture(t, "")
	r := rand.New(rand.NewSource(3))
	var agents []*api.Principal
	for range 4 {
		agents = append(agents, f.agent())
	}
	var convs []string
	for i := range 120 {
		p := agents[r.Intn(len(agents))]
		in := writeIn{Content: text("a message"), Kind: &[]string{[]string{"post", "claim", "question"}[r.Intn(3)]}}
		if len(convs) == 0 || r.Intn(5) == 0 {
			in.Subject = "a conversation"
		} else {
			in.ConversationID = convs[r.Intn(len(convs))]
		}
		if i%3 == 0 {
			in.Tags = []string{"t"}
		}
		if i%4 == 0 {
			in.Mentions = []string{agents[r.Intn(len(agents))].Agent.AuthorID}
		}
		switch i % 5 {
		case 1:
			in.Payload = json.RawMessage(`[1,2]`)
		case 2:
			one := 1
			in.Payload, in.SchemaName, in.SchemaVersion = json.RawMessage(`{"n":1}`), "toastmachine.object", &one
		}
		m := f.post(p, in)
		if in.Subject != "" {
			convs = append(convs, m.ConversationID)
		}
	}
	ctx := context.Background()
	list := func(in messagesIn) (ids []string) {
		t.Helper()
		for range 1000 {
			out, err := f.s.listMessages(ctx, &api.Call{}, in)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range out.Messages {
				ids = append(ids, m.MessageID)
			}
			if !out.HasMore {
				return ids
			}
			if in.After != nil && *out.NextCursor <= *in.After {
				t.Fatalf("next_cursor %d does not move past %d", *out.NextCursor, *in.After)
			}
			in.After = out.NextCursor
		}
		t.Fatal("no last page")
		return nil
	}
	all := list(messagesIn{})
	if len(all) != 120 {
		t.Fatalf("%d messages listed, want 120", len(all))
	}
	author := map[string]string{}
	for _, id := range all {
		out, err := f.s.getMessage(ctx, &api.Call{}, messageIDIn{MessageID: id})
		if err != nil {
			t.Fatal(err)
		}
		author[id] = out.Message.AuthorID
	}
	mid := uint64(60)
	yes, no := true, false
	// A tag's messages and those mentioning an agent, read through their
	// indexes, against the filter over all messages.
	for _, limit := range []int{1, 4, 100} {
		for _, tc := range []struct {
			name string
			in   messagesIn
		}{
			{"a tag", messagesIn{Tag: "t"}},
			{"a tag no message has", messagesIn{Tag: "none"}},
			{"a tag and kinds", messagesIn{Tag: "t", Kinds: []string{"question"}}},
			{"a mention", messagesIn{MentionedAgent: agents[0].Agent.AuthorID}},
			{"a mention after", messagesIn{MentionedAgent: agents[1].Agent.AuthorID, After: &mid}},
			{"a kind", messagesIn{Kinds: []string{"claim"}}},
			{"a kind no message has", messagesIn{Kinds: []string{"verification"}}},
			{"post", messagesIn{Kinds: []string{"post"}}},
			{"two kinds", messagesIn{Kinds: []string{"claim", "question"}}},
			{"a payload", messagesIn{HasPayload: &yes}},
			{"no payload", messagesIn{HasPayload: &no}},
			{"a schema", messagesIn{SchemaName: "toastmachine.object"}},
			{"a schema and a kind", messagesIn{SchemaName: "toastmachine.object", Kinds: []string{"question"}}},
			{"a payload before", messagesIn{HasPayload: &yes, Before: &mid}},
		} {
			in := tc.in
			in.Limit = &limit
			got := list(in)
			var want []string
			for _, id := range all {
				out, err := f.s.getMessage(ctx, &api.Call{}, messageIDIn{MessageID: id})
				if err != nil {
					t.Fatal(err)
				}
				probe := in
				probe.Limit, probe.After = nil, nil
				if k, err := probe.filters(); err == nil {
					probe.Kinds = k
				}
				if probe.match(&out.Message) && (in.After == nil || out.Message.Sequence > *in.After) {
					want = append(want, id)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s, pages of %d:\ngot  %v\nwant %v", tc.name, limit, got, want)
			}
		}
	}
	for _, p := range agents {
		me := p.Agent.AuthorID
		for _, limit := range []int{1, 4, 100} {
			for _, tc := range []struct {
				name string
				in   messagesIn
			}{
				{"alone", messagesIn{AuthorID: me}},
				{"with a tag", messagesIn{AuthorID: me, Tag: "t"}},
				{"with kinds", messagesIn{AuthorID: me, Kinds: []string{"claim"}}},
				{"after", messagesIn{AuthorID: me, After: &mid}},
				{"before", messagesIn{AuthorID: me, Before: &mid}},
			} {
				in := tc.in
				in.Limit = &limit
				got := list(in)
				ref := in
				ref.AuthorID = ""
				var want []string
				for _, id := range list(ref) {
					if author[id] == me {
						want = append(want, id)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%s, %s, pages of %d:\ngot  %v\nwant %v", me, tc.name, limit, got, want)
				}
			}
		}
	}
}

// BenchmarkMessagesByAuthor is a page of /messages for an author of few
// of 20,000 messages: it should cost that author's messages, not all.
func BenchmarkMessagesByAuthor(b *testing.B) {
	f := openSearchFixture(b, "")
	many, few := f.agent(), f.agent()
	first := f.post(few, writeIn{Subject: "s", Content: text("mine")})
	for i := range 20000 {
		p := many
		if i%2000 == 0 {
			p = few
		}
		f.post(p, writeIn{ConversationID: first.ConversationID, Content: text("a message")})
	}
	ctx := context.Background()
	for b.Loop() {
		out, err := f.s.listMessages(ctx, &api.Call{}, messagesIn{AuthorID: few.Agent.AuthorID})
		if err != nil || len(out.Messages) != 11 {
			b.Fatalf("%d messages, %v", len(out.Messages), err)
		}
	}
}
