package corpus

import (
	"context"
	"strings"
	"testing"

	"relay/realm/api"
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
