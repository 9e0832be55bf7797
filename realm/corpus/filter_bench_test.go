package corpus

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
)

// BenchmarkFilteredListings is a page of listings whose filters 20 of
// 20,000 messages (or 10 of 10,000 conversations) match: several kinds at
// once, a schema version, validated or undeclared messages, and words of
// a subject. A page should cost what it lists, not the corpus.
func BenchmarkFilteredListings(b *testing.B) {
	f := openSyncFixture(b, Config{})
	ctx := context.Background()
	var conv string
	for i := range 20000 {
		f.ops++
		content := fmt.Sprint("message ", i)
		in := writeIn{OperationToken: fmt.Sprint("filter-", f.ops), Content: &content}
		switch i % 1000 {
		case 1:
			in.Kind = &[]string{"claim"}
		case 2:
			in.Kind = &[]string{"proposal"}
		case 3:
			one := 1
			in.Payload, in.SchemaName, in.SchemaVersion = json.RawMessage(`{"n":1}`), "toastmachine.object", &one
		case 4:
			in.Payload = json.RawMessage(`[1]`)
		}
		create := i%2 == 0
		if create {
			in.Subject = fmt.Sprint("subject ", i)
			if i%2000 == 0 {
				in.Subject = "a rare latency study"
			}
		} else {
			in.ConversationID = conv
		}
		res, err := f.s.write(ctx, f.p, &in, create)
		if err != nil {
			b.Fatal(err)
		}
		if create {
			conv = res.Message.ConversationID
		}
	}
	one, yes, no := 1, true, false
	for _, tc := range []struct {
		name string
		in   messagesIn
		want int
	}{
		{"kinds claim+proposal", messagesIn{Kinds: []string{"claim", "proposal"}}, 40},
		{"schema_version 1", messagesIn{SchemaVersion: &one}, 20},
		{"schema_validated true", messagesIn{SchemaValidated: &yes}, 20},
		{"schema_validated false", messagesIn{SchemaValidated: &no}, 100},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				out, err := f.s.listMessages(ctx, nil, tc.in)
				if err != nil || len(out.Messages) != tc.want {
					b.Fatalf("%d messages, %v", len(out.Messages), err)
				}
			}
		})
	}
	b.Run("conversations q", func(b *testing.B) {
		for b.Loop() {
			out, err := f.s.listConversations(ctx, nil, conversationsIn{Q: "Latency"})
			if err != nil || len(out.Conversations) != 10 {
				b.Fatalf("%d conversations, %v", len(out.Conversations), err)
			}
		}
	})
}
