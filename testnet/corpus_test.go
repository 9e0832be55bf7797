package testnet

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"relay/realm"
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
	// r3 holds r1's author's messages, not its registration: it names it
	// as r1 does.
	_, home := corpusDo(t, "GET", net.Realms[0].URL+"/agents/"+a1.author, "", nil, nil)
	st, there := corpusDo(t, "GET", r3.URL+"/agents/"+a1.author, "", nil, nil)
	name := home["agent"].(map[string]any)["agent_name"]
	if st != 200 || name == "" || there["agent"].(map[string]any)["agent_name"] != name {
		t.Fatalf("r1's author's name: %v at r1, %d %v at r3", name, st, there)
	}
}

func mustString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestEarlyEventParks: r3 blocks r1, so it never gets r1's conversation;
// r2's append to it is stored in r2's chain at r3 all the same, held but
// not shown, while r2's later conversation, which touches nothing the
// append does, is shown at once, and so is a later append to it: r2's
// chain goes on. Once r3 takes r1's events again, the append is shown,
// after r1's conversation, and nothing of r2's waits.
func TestEarlyEventParks(t *testing.T) {
	net := meshOf3(t)
	r1, r2, r3 := net.Realms[0], net.Realms[1], net.Realms[2]
	block(t, r3, "r1")
	a1, a2 := newCorpusAgent(t, r1), newCorpusAgent(t, r2)
	_, c := a1.write(t, "/createConversation", map[string]any{"subject": "Order", "content": "First things first."})
	conv := c["conversation_id"].(string)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, m := corpusDo(t, "GET", r2.URL+"/messages?conversation_id="+conv, "", nil, nil); len(mustList(m, "messages")) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("r2 never held r1's conversation")
		}
		time.Sleep(100 * time.Millisecond)
	}
	st, appended := a2.write(t, "/appendToConversation/"+conv, map[string]any{"content": "Second."})
	if st/100 != 2 {
		t.Fatalf("append at r2: %d %v", st, appended)
	}
	// r1 appends after r2 did: r3 will get this message before r2's, which
	// waits parked, yet its conversation must end as everywhere else.
	time.Sleep(5 * time.Millisecond)
	if st, third := a1.write(t, "/appendToConversation/"+conv, map[string]any{"content": "Third."}); st/100 != 2 {
		t.Fatalf("append at r1: %d %v", st, third)
	}
	st, later := a2.write(t, "/createConversation", map[string]any{"subject": "Unrelated", "content": "Not held back."})
	if st/100 != 2 {
		t.Fatalf("a later conversation at r2: %d %v", st, later)
	}
	st, laterAppend := a2.write(t, "/appendToConversation/"+later["conversation_id"].(string), map[string]any{"content": "Nor this."})
	if st/100 != 2 {
		t.Fatalf("a later append at r2: %d %v", st, laterAppend)
	}
	// r3 holds r2's whole chain; its operator sees that one event waits,
	// for r1's conversation.
	want, _ := r2.Node.Store().Heads()
	deadline = time.Now().Add(15 * time.Second)
	for {
		heads, _ := r3.Node.Store().Heads()
		if heads["r2"].Seq == want["r2"].Seq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r3 holds r2 to %d of %d; realms %+v", heads["r2"].Seq, want["r2"].Seq, mustRealms(t, r3))
		}
		time.Sleep(100 * time.Millisecond)
	}
	parked := false
	for _, rs := range mustRealms(t, r3) {
		if rs.Quarantined != "" {
			t.Fatalf("r3 quarantined %s: %s", rs.Realm, rs.Quarantined)
		}
		if rs.Realm == "r2" {
			parked = rs.Parked == 1 && strings.Contains(rs.Waiting, conv)
		} else if rs.Waiting != "" || rs.Parked != 0 {
			t.Fatalf("r3 on %s: waiting %q, parked %d", rs.Realm, rs.Waiting, rs.Parked)
		}
	}
	if !parked {
		t.Fatalf("r3 does not say that r2's append waits for r1's conversation: %+v", mustRealms(t, r3))
	}
	if st, _ := corpusDo(t, "GET", r3.URL+"/messages/"+appended["message_id"].(string), "", nil, nil); st != 404 {
		t.Fatalf("r3 shows r2's append before r1's conversation: %d", st)
	}
	for _, path := range []string{"/conversations/" + later["conversation_id"].(string), "/messages/" + laterAppend["message_id"].(string)} {
		if st, _ := corpusDo(t, "GET", r3.URL+path, "", nil, nil); st != 200 {
			t.Fatalf("r3 holds back %s, which touches nothing r2's parked append does: %d", path, st)
		}
	}

	// An export of r3 holds the parked event in r2's chain; the import
	// parks it again. r3 comes back still blocking r1, the event parked.
	held, _ := r3.Node.Store().Heads()
	if err := r3.Stop(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	ctx := context.Background()
	if _, err := realm.Export(ctx, realm.ExportConfig{DataDir: r3.Dir, Out: &buf, WithKey: true}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if _, err := realm.Import(ctx, realm.ImportConfig{DataDir: dst, In: &buf}); err != nil {
		t.Fatal(err)
	}
	cfg := realm.DefaultConfig()
	cfg.P2PAddrs, cfg.DataDir = nil, dst
	n, err := realm.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := n.Store().Heads()
	parkedThere, _ := n.Store().ParkedEvents(0)
	n.Close()
	if !maps.Equal(got, held) || len(parkedThere) != 1 || parkedThere[0].Realm != "r2" || parkedThere[0].Seq != 2 {
		t.Fatalf("imported heads %v (want %v), parked %+v", got, held, parkedThere)
	}
	if err := net.Restart(2); err != nil {
		t.Fatal(err)
	}
	if rs := realmOf(t, r3, "r2"); rs.Parked != 1 {
		t.Fatalf("r3 restarted, on r2: %+v", rs)
	}

	if st := call(t, r3, "DELETE", "/api/v1/federation/blocks/r1", nil, nil); st != 200 {
		t.Fatalf("unblock: %d", st)
	}
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, list := corpusDo(t, "GET", r3.URL+"/messages?conversation_id="+conv, "", nil, nil)
		if msgs := mustList(list, "messages"); len(msgs) == 3 {
			slices.SortFunc(msgs, func(a, b any) int {
				return cmp.Compare(a.(map[string]any)["sequence"].(float64), b.(map[string]any)["sequence"].(float64))
			})
			if first := msgs[0].(map[string]any); first["realm"] != "r1" || first["message_id"] == appended["message_id"] {
				t.Fatalf("r3's conversation, in sequence order: %v", msgs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r3 lists %d messages of the conversation", len(mustList(list, "messages")))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The conversation was last updated by r1's append, on r3 as on the
	// others, though r2's earlier append was shown there last.
	var updated []any
	for _, r := range net.Realms {
		_, c := corpusDo(t, "GET", r.URL+"/conversations/"+conv, "", nil, nil)
		updated = append(updated, c["conversation"].(map[string]any)["updated_at"])
	}
	if updated[0] != updated[1] || updated[0] != updated[2] {
		t.Fatalf("the conversation's updated_at on r1, r2, r3: %v", updated)
	}
	// Nothing of r2's waits any more.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st, _ := corpusDo(t, "GET", r3.URL+"/conversations/"+later["conversation_id"].(string), "", nil, nil)
		if rs := realmOf(t, r3, "r2"); st == 200 && rs.Parked == 0 && rs.Waiting == "" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("r3, after the unblock, on r2's later conversation: %d; on r2: %+v", st, rs)
		}
	}
}

// meshOf3 starts three realms in a mesh, converged; closed with the test.
func meshOf3(t *testing.T) *Net {
	t.Helper()
	net, err := Start(Config{Realms: 3, Topology: Mesh})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	return net
}

// block has r's operator block realm.
func block(t *testing.T, r *Realm, realm string) {
	t.Helper()
	if st := call(t, r, "POST", "/api/v1/federation/blocks", map[string]any{"realm": realm}, nil); st != 200 {
		t.Fatalf("%s blocks %s: %d", r.Name, realm, st)
	}
}

// realmOf is r's status of realm name.
func realmOf(t *testing.T, r *Realm, name string) (rs struct {
	Realm       string `json:"realm"`
	Quarantined string `json:"quarantined"`
	Waiting     string `json:"waiting"`
	Parked      int    `json:"parked"`
}) {
	for _, x := range mustRealms(t, r) {
		if x.Realm == name {
			return x
		}
	}
	t.Fatalf("%s does not list realm %s", r.Name, name)
	return rs
}

func mustList(m map[string]any, field string) []any {
	l, _ := m[field].([]any)
	return l
}

func mustRealms(t *testing.T, r *Realm) []struct {
	Realm       string `json:"realm"`
	Quarantined string `json:"quarantined"`
	Waiting     string `json:"waiting"`
	Parked      int    `json:"parked"`
} {
	var out struct {
		Realms []struct {
			Realm       string `json:"realm"`
			Quarantined string `json:"quarantined"`
			Waiting     string `json:"waiting"`
			Parked      int    `json:"parked"`
		} `json:"realms"`
	}
	call(t, r, "GET", "/api/v1/federation/realms", nil, &out)
	return out.Realms
}

// TestParkedThenRefusedQuarantines: r3 blocks r1. r2, lying, asserts in
// its own chain that its verification supports r1's message, which is no
// claim: r3 parks the assertion, the target not held. Once r3 takes r1's
// events, the assertion breaks the verification convention: r3 keeps it
// refused and quarantines r2, as r1, which held both, did on arrival.
func TestParkedThenRefusedQuarantines(t *testing.T) {
	net := meshOf3(t)
	r1, r2, r3 := net.Realms[0], net.Realms[1], net.Realms[2]
	a1, a2 := newCorpusAgent(t, r1), newCorpusAgent(t, r2)
	_, mine := a2.write(t, "/createConversation", map[string]any{"subject": "Checks", "content": "Verified.", "kind": []string{"verification"}})
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	block(t, r3, "r1")
	_, theirs := a1.write(t, "/createConversation", map[string]any{"subject": "Plain", "content": "Just a post."})
	target := theirs["message_id"].(string)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if st, _ := corpusDo(t, "GET", r2.URL+"/messages/"+target, "", nil, nil); st == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("r2 never held r1's message")
		}
	}
	liar := r2.Node.Federation().Misbehave()
	for deadline := time.Now().Add(20 * time.Second); liar.TopicPeers("r2") < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("r2's topic has no peers")
		}
	}
	ev := nextEvent(t, r2, "corpus.relationship.asserted", map[string]any{"relationship_id": "7f1d9a52-0000-4000-8000-000000000001",
		"source_message_id": mine["message_id"], "target_message_id": target, "relationship_type": "supports"})
	ev.Author = a2.author
	raw, _, err := liar.Sign(ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := liar.Publish("r2", raw); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); realmOf(t, r3, "r2").Parked != 1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("r3 did not park r2's assertion: %+v", realmOf(t, r3, "r2"))
		}
	}
	if st := call(t, r3, "DELETE", "/api/v1/federation/blocks/r1", nil, nil); st != 200 {
		t.Fatalf("unblock: %d", st)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		rs := realmOf(t, r3, "r2")
		if rs.Parked == 0 && strings.Contains(rs.Quarantined, "verification") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r3 on r2 after the unblock: %+v", rs)
		}
	}
	if rs := realmOf(t, r1, "r2"); rs.Quarantined == "" {
		t.Fatalf("r1, which held both messages, did not quarantine r2: %+v", rs)
	}
}

// TestRelationshipEndpointsByCID: a relationship names its messages by id
// or by CID, here another realm's: the assertion records the ids, and
// every realm shows it so.
func TestRelationshipEndpointsByCID(t *testing.T) {
	net, r1, r2 := pair(t)
	a1, a2 := newCorpusAgent(t, r1), newCorpusAgent(t, r2)
	st, c := a1.write(t, "/createConversation", map[string]any{"subject": "Latency", "content": "Caching lowers latency.", "kind": []string{"claim"}})
	if st != 201 {
		t.Fatalf("create at r1: %d %v", st, c)
	}
	first := c["message"].(map[string]any)
	converge(t, net)
	st, m := a2.write(t, "/appendToConversation/"+c["conversation_id"].(string), map[string]any{"content": "Measured: p99 halves.", "kind": []string{"verification"}})
	if st != 201 {
		t.Fatalf("append at r2: %d %v", st, m)
	}
	second := m["message"].(map[string]any)
	st, rel := a2.write(t, "/createRelationship", map[string]any{"source_message_id": second["cid"], "target_message_id": first["cid"], "relationship_type": "supports"})
	if st != 201 {
		t.Fatalf("relationship by CIDs at r2: %d %v", st, rel)
	}
	id := rel["relationship"].(map[string]any)["relationship_id"].(string)
	converge(t, net)
	for _, r := range net.Realms {
		st, got := corpusDo(t, "GET", r.URL+"/relationship-assertions/"+id, "", nil, nil)
		rr, _ := got["relationship"].(map[string]any)
		if st != 200 || rr["source_message_id"] != second["message_id"] || rr["target_message_id"] != first["message_id"] {
			t.Fatalf("%s: the relationship: %d %v", r.Name, st, got)
		}
	}
	// A CID of no message is a missing endpoint; the same message twice
	// relates to itself.
	st, out := a2.write(t, "/createRelationship", map[string]any{"source_message_id": second["message_id"], "target_message_id": rel["relationship"].(map[string]any)["cid"], "relationship_type": "extends"})
	if st != http.StatusNotFound {
		t.Fatalf("a relationship's CID as target: %d %v", st, out)
	}
	st, out = a2.write(t, "/createRelationship", map[string]any{"source_message_id": second["message_id"], "target_message_id": second["cid"], "relationship_type": "extends"})
	if st != http.StatusBadRequest {
		t.Fatalf("a message related to itself by its CID: %d %v", st, out)
	}
}
