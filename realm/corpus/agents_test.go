package corpus

import "testing"

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
