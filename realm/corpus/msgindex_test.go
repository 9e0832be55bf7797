package corpus

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"relay/protocol"
	"relay/realm/api"
)

// TestMessagesByAuthorIndex: /messages with author_id (or a tag, a
// mention, kinds, a schema, a schema version, a verdict or a payload),
// read through its indexes, gives every page, cursor and has_more that
// filtering all messages gives, with other filters and bounds beside it.
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
		kinds := [][]string{{"post"}, {"claim"}, {"question"}, {"claim", "question"}, {"proposal", "post"}}[r.Intn(5)]
		in := writeIn{Content: text("a message"), Kind: &kinds}
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
	// Other realms' messages: one of a schema this realm has not, one
	// with a verdict but no schema (not kept), one of two kinds.
	key := ed25519.NewKeyFromSeed(bytesOf(9))
	two := 2
	var prev cid.Cid
	for i, d := range []messageData{
		{Kind: []string{"claim"}, SchemaName: "away.object", SchemaVersion: 2, SchemaValidated: true},
		{Kind: []string{"question"}, SchemaValidated: true},
		{Kind: []string{"claim", "proposal"}},
	} {
		payload := `{"n":1}`
		d.MessageID, d.ConversationID, d.Subject, d.Content, d.Payload = fmt.Sprint("m-away-", i), fmt.Sprint("c-away-", i), "Away", text("from away"), &payload
		data, err := protocol.EncodeData(d)
		if err != nil {
			t.Fatal(err)
		}
		ev := &protocol.Event{Realm: "away", Seq: uint64(i + 1), Type: evMessageCreated, At: time.Now().UnixMilli(), Author: "away:bot", Data: data}
		if i > 0 {
			ev.Prev = protocol.Link{Cid: prev}
		}
		raw, c, err := ev.Sign(key)
		if err != nil {
			t.Fatal(err)
		}
		prev = c
		if _, err := f.st.Ingest(context.Background(), raw, func(*protocol.Event) error { return nil }); err != nil {
			t.Fatal(err)
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
	if len(all) != 123 {
		t.Fatalf("%d messages listed, want 123", len(all))
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
	one, three := 1, 3
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
			{"three kinds", messagesIn{Kinds: []string{"proposal", "question", "claim"}}},
			{"two kinds after", messagesIn{Kinds: []string{"claim", "proposal"}, After: &mid}},
			{"two kinds before", messagesIn{Kinds: []string{"claim", "question"}, Before: &mid}},
			{"two kinds and post", messagesIn{Kinds: []string{"claim", "post"}}},
			{"two kinds and a tag", messagesIn{Tag: "t", Kinds: []string{"claim", "question"}}},
			{"two kinds and a payload", messagesIn{HasPayload: &yes, Kinds: []string{"claim", "proposal"}}},
			{"a schema version", messagesIn{SchemaVersion: &one}},
			{"another schema version", messagesIn{SchemaVersion: &two}},
			{"a schema version no message has", messagesIn{SchemaVersion: &three}},
			{"a schema version after", messagesIn{SchemaVersion: &one, After: &mid}},
			{"a schema version and kinds", messagesIn{SchemaVersion: &one, Kinds: []string{"question", "claim"}}},
			{"validated", messagesIn{SchemaValidated: &yes}},
			{"validated before", messagesIn{SchemaValidated: &yes, Before: &mid}},
			{"not validated", messagesIn{SchemaValidated: &no}},
			{"validated and a version", messagesIn{SchemaValidated: &yes, SchemaVersion: &two}},
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
