package testnet

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

type corpusAgent struct {
	r                    *Realm
	id, endpoint, author string
	n                    int
}

func corpusDo(t *testing.T, method, url, bearer string, body any, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, url, rd)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// newCorpusAgent registers an agent at r and onboards it.
func newCorpusAgent(t *testing.T, r *Realm) *corpusAgent {
	st, out := corpusDo(t, "POST", r.URL+"/register", "", nil, nil)
	if st != 201 {
		t.Fatalf("register at %s: %d %v", r.Name, st, out)
	}
	a := &corpusAgent{r: r, id: out["agent_id"].(string), endpoint: out["endpoint_id"].(string), author: out["author_id"].(string)}
	req, _ := http.NewRequest("GET", r.URL+"/auth.md", nil)
	req.Header.Set("Authorization", "Bearer "+a.id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return a
}

func (a *corpusAgent) write(t *testing.T, path string, body any) (int, map[string]any) {
	a.n++
	return corpusDo(t, "POST", a.r.URL+"/"+a.endpoint+path, a.id, body, map[string]string{"Operation-Token": strings.Repeat("x", 1) + string(rune('a'+a.n))})
}

// TestCorpusAcrossRealms: an agent at r2 appends to a conversation r1
// started and asserts a relationship to r1's message; r3 shows both
// messages of the conversation and the relationship, each with its realm.
func TestCorpusAcrossRealms(t *testing.T) {
	net, err := Start(Config{Realms: 3, Topology: Mesh})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	a1, a2 := newCorpusAgent(t, net.Realms[0]), newCorpusAgent(t, net.Realms[1])
	st, c := a1.write(t, "/createConversation", map[string]any{"subject": "Latency", "content": "Caching lowers latency.", "kind": []string{"claim"}})
	if st != 201 && st != 200 {
		t.Fatalf("create at r1: %d %v", st, c)
	}
	conv := c["conversation_id"].(string)
	first := c["message"].(map[string]any)["message_id"].(string)
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	st, m := a2.write(t, "/appendToConversation/"+conv, map[string]any{"content": "Measured: p99 halves.", "kind": []string{"verification"}})
	if st != 201 && st != 200 {
		t.Fatalf("append at r2 to r1's conversation: %d %v", st, m)
	}
	second := m["message"].(map[string]any)["message_id"].(string)
	st, rel := a2.write(t, "/createRelationship", map[string]any{"source_message_id": second, "target_message_id": first, "relationship_type": "supports"})
	if st != 201 && st != 200 {
		t.Fatalf("relationship at r2 to r1's message: %d %v", st, rel)
	}
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	r3 := net.Realms[2]
	st, list := corpusDo(t, "GET", r3.URL+"/messages?conversation_id="+conv, "", nil, nil)
	msgs, _ := list["messages"].([]any)
	if st != 200 || len(msgs) != 2 {
		t.Fatalf("r3 lists %d messages of the conversation: %d %v", len(msgs), st, list)
	}
	realms := map[string]bool{}
	for _, x := range msgs {
		realms[x.(map[string]any)["realm"].(string)] = true
	}
	if !realms["r1"] || !realms["r2"] {
		t.Fatalf("realms of the messages at r3: %v", realms)
	}
	st, only := corpusDo(t, "GET", r3.URL+"/messages?realm=r2&conversation_id="+conv, "", nil, nil)
	if msgs, _ := only["messages"].([]any); st != 200 || len(msgs) != 1 {
		t.Fatalf("r3: r2's messages of the conversation: %d %v", st, only)
	}
	st, rels := corpusDo(t, "GET", r3.URL+"/relationship-assertions?direction=incoming&message_id="+first, "", nil, nil)
	if st != 200 || !strings.Contains(mustString(rels), second) {
		t.Fatalf("r3: relationships of r1's message: %d %v", st, rels)
	}
}

func mustString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestEarlyEventWaits: an event that refers to another realm's record this
// realm does not hold yet waits for it (no quarantine), and stores once the
// record arrives. r3 blocks r1 while r2 appends to r1's conversation.
func TestEarlyEventWaits(t *testing.T) {
	net, err := Start(Config{Realms: 3, Topology: Mesh})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	r1, r2, r3 := net.Realms[0], net.Realms[1], net.Realms[2]
	if st := call(t, r3, "POST", "/api/v1/federation/blocks", map[string]any{"realm": "r1"}, nil); st != 200 {
		t.Fatalf("block: %d", st)
	}
	a1, a2 := newCorpusAgent(t, r1), newCorpusAgent(t, r2)
	_, c := a1.write(t, "/createConversation", map[string]any{"subject": "Order", "content": "First things first."})
	conv := c["conversation_id"].(string)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _ := corpusDo(t, "GET", r2.URL+"/messages?conversation_id="+conv, "", nil, nil)
		if st == 200 {
			if _, m := corpusDo(t, "GET", r2.URL+"/messages?conversation_id="+conv, "", nil, nil); len(m["messages"].([]any)) == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("r2 never held r1's conversation")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st, m := a2.write(t, "/appendToConversation/"+conv, map[string]any{"content": "Second."}); st/100 != 2 {
		t.Fatalf("append at r2: %d %v", st, m)
	}
	// r3 sees r2's append and cannot store it yet: its operator sees why
	// r2's chain waits, the conversation named.
	want, _ := r2.Node.Store().Heads()
	deadline = time.Now().Add(15 * time.Second)
	for waiting := false; !waiting; {
		for _, rs := range mustRealms(t, r3) {
			if rs.Quarantined != "" {
				t.Fatalf("r3 quarantined %s: %s", rs.Realm, rs.Quarantined)
			}
			if rs.Realm != "r2" && rs.Waiting != "" {
				t.Fatalf("r3 on %s: waiting %q", rs.Realm, rs.Waiting)
			}
			waiting = waiting || rs.Realm == "r2" && strings.Contains(rs.Waiting, conv)
		}
		if time.Now().After(deadline) {
			t.Fatal("r3 never said that r2's chain waits for r1's conversation")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if heads, _ := r3.Node.Store().Heads(); heads["r2"].Seq >= want["r2"].Seq {
		t.Fatal("r3 stored r2's append without r1's conversation")
	}
	if st := call(t, r3, "DELETE", "/api/v1/federation/blocks/r1", nil, nil); st != 200 {
		t.Fatalf("unblock: %d", st)
	}
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	_, list := corpusDo(t, "GET", r3.URL+"/messages?conversation_id="+conv, "", nil, nil)
	if msgs, _ := list["messages"].([]any); len(msgs) != 2 {
		t.Fatalf("r3 lists %d messages of the conversation", len(msgs))
	}
}

func mustRealms(t *testing.T, r *Realm) []struct {
	Realm       string `json:"realm"`
	Quarantined string `json:"quarantined"`
	Waiting     string `json:"waiting"`
} {
	var out struct {
		Realms []struct {
			Realm       string `json:"realm"`
			Quarantined string `json:"quarantined"`
			Waiting     string `json:"waiting"`
		} `json:"realms"`
	}
	call(t, r, "GET", "/api/v1/federation/realms", nil, &out)
	return out.Realms
}
