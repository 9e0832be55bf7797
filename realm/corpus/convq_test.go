package corpus

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"

	"relay/protocol"
	"relay/store"
)

// TestConversationsBySubject: /conversations?q= (with a tag or kinds
// beside it, or not) gives, page by page with has_more and next_cursor,
// the conversations whose subject holds every word, whatever their case,
// in created_sequence order, as a filter over every conversation's record
// does; also where the index by created sequence holds ids alone, as
// earlier versions wrote it.
func TestConversationsBySubject(t *testing.T) {
	f := openSyncFixture(t, Config{})
	ctx := context.Background()
	r := rand.New(rand.NewSource(5))
	subjects := []string{"Latency study", "the LATENCY of writes", "Über Größe", "rate-limit notes", "A plain subject", "latent heat", "Study hall"}
	var convs []string
	for i := range 160 {
		f.ops++
		content := fmt.Sprint("message ", i)
		kind := []string{[]string{"post", "question"}[r.Intn(2)]}
		in := writeIn{OperationToken: fmt.Sprint("q-", f.ops), Content: &content, Kind: &kind, Tags: []string{[]string{"a", "b"}[r.Intn(2)]}}
		if len(convs) < 3 || r.Intn(3) > 0 {
			in.Subject = fmt.Sprintf("%s %d", subjects[r.Intn(len(subjects))], i)
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
	var all []Conversation
	err := f.st.View(func(tx *store.Tx) error {
		return tx.Iterate(pfxConv, false, func(k, v []byte) error {
			var c Conversation
			if err := decodeConversation(string(k[len(pfxConv):]), v, &c); err != nil {
				return err
			}
			all = append(all, c)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].CreatedSequence < all[j].CreatedSequence })
	holds := map[string]map[string]bool{} // conversation → tag and kinds of its messages
	out, err := f.s.listMessages(ctx, nil, messagesIn{Limit: new(1000)})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range out.Messages {
		if holds[m.ConversationID] == nil {
			holds[m.ConversationID] = map[string]bool{}
		}
		for _, k := range m.Kind {
			holds[m.ConversationID]["kind "+k] = true
		}
		for _, tag := range m.Tags {
			holds[m.ConversationID]["tag "+tag] = true
		}
	}

	listed := 0
	check := func(name string) {
		t.Helper()
		for _, q := range []string{"latency", "LATENCY study", "über", "GRÖSSE", "rate-limit", "lat", "1", "zzz", "  "} {
			for _, filter := range []conversationsIn{{}, {Tag: "a"}, {Kinds: []string{"question"}}} {
				var want []Conversation
				for _, c := range all {
					subj := strings.ToLower(c.Subject)
					ok := (filter.Tag == "" || holds[c.ConversationID]["tag "+filter.Tag]) &&
						(filter.Kinds == nil || holds[c.ConversationID]["kind "+filter.Kinds[0]])
					for _, w := range strings.Fields(strings.ToLower(q)) {
						ok = ok && strings.Contains(subj, w)
					}
					if ok {
						want = append(want, c)
					}
				}
				for _, limit := range []int{1, 3, 7, 100} {
					in := filter
					in.Q, in.Limit = q, &limit
					for page, rest := 0, want; ; page++ {
						out, err := f.s.listConversations(ctx, nil, in)
						if err != nil {
							t.Fatal(err)
						}
						n := min(limit, len(rest))
						listed += n
						more := len(rest) > limit
						got, exp := ids(out.Conversations), ids(rest[:n])
						if !slices.Equal(got, exp) || out.HasMore != more {
							t.Fatalf("%s q %q %+v limit %d page %d:\ngot  %v more %v\nwant %v more %v", name, q, filter, limit, page, got, out.HasMore, exp, more)
						}
						if !more {
							if out.NextCursor != nil {
								t.Fatalf("%s q %q limit %d page %d: next_cursor %d on the last page", name, q, limit, page, *out.NextCursor)
							}
							break
						}
						if out.NextCursor == nil || *out.NextCursor != rest[n-1].CreatedSequence {
							t.Fatalf("%s q %q limit %d page %d: next_cursor %v, want %d", name, q, limit, page, out.NextCursor, rest[n-1].CreatedSequence)
						}
						in.After, rest = out.NextCursor, rest[n:]
					}
				}
			}
		}
	}
	check("subjects in the index")

	// Every other entry as an earlier version wrote it: the id alone.
	i := 0
	_, err = f.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		var old [][2][]byte
		err := tx.Iterate(pfxConvSeq, false, func(k, v []byte) error {
			if i++; i%2 == 0 {
				id, _, ok := parseConvSeq(v)
				if !ok {
					return fmt.Errorf("entry %q without its subject", k)
				}
				old = append(old, [2][]byte{k, id})
			}
			return nil
		})
		for _, kv := range old {
			if err == nil {
				err = tx.Set(kv[0], kv[1])
			}
		}
		return nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	check("ids alone")
	if listed < 500 {
		t.Fatalf("%d conversations listed in all: the test lists too few", listed)
	}
}

func ids(cs []Conversation) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.ConversationID)
	}
	return out
}
