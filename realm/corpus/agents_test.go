package corpus

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// TestAgentName: a name is made only of an id made as this realm makes
// them; another realm's ids are untrusted text.
func TestAgentName(t *testing.T) {
	for _, c := range []struct{ author, want string }{
		{"r1:05a7ea5c5f05cf51", "agent-05a7ea"},
		{"r1:05a7ea", "agent-05a7ea"},
		{"r1:05a7e", ""},
		{"r1:05A7EA5C", ""},
		{"r1:ééé", ""},
		{"r1:05a7e\xff", ""},
		{"no-realm", ""},
		{"", ""},
	} {
		if got := agentName(c.author); got != c.want {
			t.Errorf("agentName(%q) = %q, want %q", c.author, got, c.want)
		}
	}
}

// TestConversationCount: an agent's conversation_count counts the
// conversations it started, not those it appended to, and the vocabulary
// says so.
func TestConversationCount(t *testing.T) {
	f := openSearchFixture(t, "")
	a, b := f.agent(), f.agent()
	m := f.post(a, writeIn{Subject: "s", Content: text("one")})
	f.post(b, writeIn{ConversationID: m.ConversationID, Content: text("two")})
	for _, c := range []struct {
		p    *api.Principal
		want int
	}{{a, 1}, {b, 0}} {
		out, err := f.s.getAgent(context.Background(), &api.Call{}, authorIDIn{AuthorID: c.p.Agent.AuthorID})
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Agent.Statistics.ConversationCount; got != c.want {
			t.Errorf("%s: conversation_count %d, want %d", c.p.Agent.AuthorID, got, c.want)
		}
	}
	for _, term := range VocabTerms {
		if term[0] == "conversation_count" && !strings.Contains(term[1], "started") {
			t.Errorf("vocabulary: conversation_count is %q, not the conversations an agent started", term[1])
		}
	}
}

// TestAgentDirectoryOrder: the directory lists agents by registration time
// and, among those registered in the same millisecond, by author_id,
// whatever order they were numbered in.
func TestAgentDirectoryOrder(t *testing.T) {
	f := openSearchFixture(t, "")
	const n = 6
	at := protocol.Now()
	var want []string
	for i := range n {
		p := f.agent()
		// Registered in one millisecond, author ids descending as the
		// numbers ascend; the last one a millisecond later.
		r := f.s.agents.get(p.Agent.N)
		r.AuthorID = fmt.Sprintf("ainotes:%02x", 0xf0-i)
		r.RegisteredAt = at
		if i == n-1 {
			r.RegisteredAt = at.Add(time.Millisecond)
		}
		_, err := f.st.Submit(context.Background(), func(tx *store.Tx) (*protocol.Draft, error) {
			return nil, putJSON(tx, agentKey(r.N), r)
		})
		if err != nil {
			t.Fatal(err)
		}
		f.s.agents.put(r)
		want = append(want, r.AuthorID)
	}
	slices.Sort(want[:n-1])
	for _, limit := range []int{1, 2, n} {
		var got []string
		for offset := 0; offset < n; offset += limit {
			out, err := f.s.listAgents(context.Background(), &api.Call{}, offsetIn{Limit: &limit, Offset: offset})
			if err != nil {
				t.Fatal(err)
			}
			if out.Total != n {
				t.Fatalf("total %d, want %d", out.Total, n)
			}
			for _, a := range out.Agents {
				got = append(got, a.AuthorID)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: directory order %v, want %v", limit, got, want)
		}
	}
}
