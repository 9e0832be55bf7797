package testnet

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestThreadFollowsHomeWhileReplierBlocked: r3 blocks r2, whose agent
// answers in r1's thread; r1 accepts the answer and then decides. While r2
// is blocked r3 does not hold the answer, yet shows r1's thread as r1 does
// (the acceptance carries the answer's effect on it); unblocked, r3 gets
// the answer, which joins the thread without undoing what came after it.
func TestThreadFollowsHomeWhileReplierBlocked(t *testing.T) {
	net, th, agent := replierBlocked(t)
	r1, r3 := net.Realms[0], net.Realms[2]
	var out postAnswer
	if st := call(t, agent, "POST", "/api/v1/threads/r1:"+th+"/messages", map[string]any{"kind": "answer", "body": "The second one."}, &out); st/100 != 2 || out.Message.Status != "accepted" {
		t.Fatalf("reply: %d %+v", st, out)
	}
	type thread struct {
		Thread struct {
			State        string `json:"state"`
			MessageCount int    `json:"message_count"`
			Awaiting     bool   `json:"awaiting"`
			Last         *struct {
				ID   string `json:"id"`
				Kind string `json:"kind"`
				From struct {
					Identity string `json:"identity"`
				} `json:"from"`
			} `json:"last_message"`
		} `json:"thread"`
	}
	same := func(step string, wantState string) {
		t.Helper()
		var at1, at3 thread
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			at1, at3 = thread{}, thread{}
			call(t, r1, "GET", "/api/v1/threads/"+th, nil, &at1)
			call(t, r3, "GET", "/api/v1/threads/r1:"+th, nil, &at3)
			if at1.Thread.Last != nil && !strings.Contains(at1.Thread.Last.ID, ":") {
				at1.Thread.Last.ID = "r1:" + at1.Thread.Last.ID // as r3 writes r1's keys
			}
			if at1.Thread.State == wantState && at3.Thread.State == wantState && at1.Thread.Last != nil && at3.Thread.Last != nil && *at1.Thread.Last == *at3.Thread.Last &&
				at1.Thread.MessageCount == at3.Thread.MessageCount && at1.Thread.Awaiting == at3.Thread.Awaiting {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: r1 sees %+v %+v, r3 sees %+v %+v", step, at1.Thread, at1.Thread.Last, at3.Thread, at3.Thread.Last)
			}
		}
	}
	same("answered, r2 blocked at r3", "answered")
	if st := call(t, r1, "POST", "/api/v1/threads/"+th+"/messages", map[string]any{"kind": "decide", "body": "The second one it is."}, nil); st/100 != 2 {
		t.Fatalf("decide: %d", st)
	}
	same("decided, r2 blocked at r3", "decided")
	if st := call(t, r3, "DELETE", "/api/v1/federation/blocks/r2", nil, nil); st != 200 {
		t.Fatalf("unblock: %d", st)
	}
	converge(t, net)
	var m postAnswer
	call(t, r3, "GET", "/api/v1/messages/"+out.Message.CID, nil, &m)
	if m.Message.Status != "accepted" {
		t.Fatalf("r3: the reply is %q", m.Message.Status)
	}
	same("decided, r2 unblocked at r3", "decided")
	// The answer is listed where r1 accepted it, before the decision.
	type tree struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	var t1, t3 tree
	call(t, r1, "GET", "/api/v1/threads/"+th, nil, &t1)
	call(t, r3, "GET", "/api/v1/threads/r1:"+th, nil, &t3)
	var ids1, ids3 []string
	for _, m := range t1.Messages {
		if !strings.Contains(m.ID, ":") {
			m.ID = "r1:" + m.ID
		}
		ids1 = append(ids1, m.ID)
	}
	for _, m := range t3.Messages {
		ids3 = append(ids3, m.ID)
	}
	if !slices.Equal(ids1, ids3) || len(ids3) != 3 {
		t.Fatalf("r1 lists %v, r3 lists %v", ids1, ids3)
	}
}

// TestBlockedRepliersClaimRefuted: r3 blocks r2, whose answer in r1's
// thread asserts a claim; r1's operator refutes that claim, then decides.
// r3 shows r1's thread as r1 does meanwhile (the refutation does not wait
// for a claim that will not come); unblocked, r3 gets the claim, refuted
// as at r1.
func TestBlockedRepliersClaimRefuted(t *testing.T) {
	net, th, agent := replierBlocked(t)
	r1, r3 := net.Realms[0], net.Realms[2]
	var out postAnswer
	if st := call(t, agent, "POST", "/api/v1/threads/r1:"+th+"/messages", map[string]any{"kind": "answer", "body": "The second one.",
		"claims": []any{map[string]any{"statement": "it is faster"}}}, &out); st/100 != 2 || out.Message.Status != "accepted" || len(out.Message.Claims) != 1 {
		t.Fatalf("reply: %d %+v", st, out)
	}
	claim := "r2:" + out.Message.Claims[0]
	if st := call(t, r1, "POST", "/api/v1/threads/"+th+"/messages", map[string]any{"kind": "refute", "body": "It is not.", "refutes": []string{claim},
		"evidence": []any{map[string]any{"kind": "note", "value": "benchmark"}}}, nil); st/100 != 2 {
		t.Fatalf("refute: %d", st)
	}
	if st := call(t, r1, "POST", "/api/v1/threads/"+th+"/messages", map[string]any{"kind": "decide", "body": "The first one."}, nil); st/100 != 2 {
		t.Fatalf("decide: %d", st)
	}
	type thread struct {
		Thread struct {
			State        string `json:"state"`
			MessageCount int    `json:"message_count"`
		} `json:"thread"`
	}
	same := func(step string) {
		t.Helper()
		var at1, at3 thread
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			call(t, r1, "GET", "/api/v1/threads/"+th, nil, &at1)
			call(t, r3, "GET", "/api/v1/threads/r1:"+th, nil, &at3)
			if at1.Thread == at3.Thread && at1.Thread.State == "decided" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: r1 sees %+v, r3 sees %+v", step, at1.Thread, at3.Thread)
			}
		}
	}
	same("r2 blocked at r3")
	if st := call(t, r3, "DELETE", "/api/v1/federation/blocks/r2", nil, nil); st != 200 {
		t.Fatalf("unblock: %d", st)
	}
	converge(t, net)
	same("r2 unblocked at r3")
	type claimOut struct {
		Claim struct {
			State     string   `json:"state"`
			RefutedBy []string `json:"refuted_by"`
		} `json:"claim"`
	}
	var c1, c3 claimOut
	call(t, r1, "GET", "/api/v1/claims/"+claim, nil, &c1)
	if st := call(t, r3, "GET", "/api/v1/claims/"+claim, nil, &c3); st != 200 || c3.Claim.State != "refuted" || c1.Claim.State != "refuted" || len(c3.Claim.RefutedBy) != 1 {
		t.Fatalf("the claim at r1 %+v, at r3 (%d) %+v", c1.Claim, st, c3.Claim)
	}
}

// replierBlocked starts three meshed realms, opens a thread at r1 (an ask,
// converged everywhere) and has r3 block r2. It returns the net, the
// thread's key at r1 and an agent of r2 to answer in it.
func replierBlocked(t *testing.T) (net *Net, thread string, agent *Realm) {
	t.Helper()
	net, err := Start(Config{Realms: 3, Topology: Mesh})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	r1, r2, r3 := net.Realms[0], net.Realms[1], net.Realms[2]
	var opened struct {
		Thread struct{ ID string } `json:"thread"`
	}
	call(t, r1, "POST", "/api/v1/boards/lobby/threads", map[string]any{"kind": "ask", "body": "Which cache?"}, &opened)
	converge(t, net)
	if st := call(t, r3, "POST", "/api/v1/federation/blocks", map[string]any{"realm": "r2"}, nil); st != 200 {
		t.Fatalf("block: %d", st)
	}
	return net, opened.Thread.ID, as(r2, agentToken(t, r2, "answerer"))
}

// TestRefuteOfAnotherRealmsPendingClaim: r3 is cut off before r2's agent
// replies into r3's thread with a claim: r3 never gets the reply, so it
// stays pending everywhere. r4's agent then refutes that claim in a reply
// into r1's thread: r1 decides it (accepts it) rather than wait for r3's
// word on the claim's reply, which will not come.
func TestRefuteOfAnotherRealmsPendingClaim(t *testing.T) {
	net, err := Start(Config{Realms: 4, Topology: Mesh})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	r1, r2, r3, r4 := net.Realms[0], net.Realms[1], net.Realms[2], net.Realms[3]
	var o1, o3 struct {
		Thread struct{ ID string } `json:"thread"`
	}
	call(t, r1, "POST", "/api/v1/boards/lobby/threads", map[string]any{"kind": "ask", "body": "Which cache?"}, &o1)
	call(t, r3, "POST", "/api/v1/boards/lobby/threads", map[string]any{"kind": "ask", "body": "Which disk?"}, &o3)
	converge(t, net)
	net.Partition([]int{2}, []int{0, 1, 3})
	var out postAnswer
	call(t, as(r2, agentToken(t, r2, "a2")), "POST", "/api/v1/threads/r3:"+o3.Thread.ID+"/messages", map[string]any{"kind": "answer", "body": "SSD.",
		"claims": []any{map[string]any{"statement": "ssd is faster"}}}, &out)
	if len(out.Message.Claims) != 1 {
		t.Fatalf("r2 reply: %+v", out)
	}
	claim := "r2:" + out.Message.Claims[0]
	a4 := as(r4, agentToken(t, r4, "a4"))
	for deadline := time.Now().Add(10 * time.Second); call(t, a4, "GET", "/api/v1/claims/"+claim, nil, nil) != 200; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("r4 never held the claim")
		}
	}
	var ref postAnswer
	st := call(t, a4, "POST", "/api/v1/threads/r1:"+o1.Thread.ID+"/messages", map[string]any{"kind": "refute", "body": "It is not.", "refutes": []string{claim},
		"evidence": []any{map[string]any{"kind": "note", "value": "benchmark"}}}, &ref)
	if st/100 != 2 {
		t.Fatalf("r4's refute: %d %+v", st, ref)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var m postAnswer
		call(t, r1, "GET", "/api/v1/messages/"+ref.Message.CID, nil, &m)
		if m.Message.Status == "accepted" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("r1 never decides r4's reply: %q", m.Message.Status)
		}
	}
}

// TestBlockedRealmsReplyRefused: r1 blocks r2, whose agent then answers in
// r1's thread. r1 takes none of r2's events, yet reads them at r3, and
// refuses the reply by its block, in an event of its own: r3 and r2 show
// the reply refused (forbidden), not pending for good, and its author's
// inbox says so. Unblocked, r1 gets the reply and keeps it refused.
func TestBlockedRealmsReplyRefused(t *testing.T) {
	net, err := Start(Config{Realms: 3, Topology: Mesh})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	r1, r2, r3 := net.Realms[0], net.Realms[1], net.Realms[2]
	var opened struct {
		Thread struct{ ID string } `json:"thread"`
	}
	call(t, r1, "POST", "/api/v1/boards/lobby/threads", map[string]any{"kind": "ask", "body": "Which cache?"}, &opened)
	converge(t, net)
	block(t, r1, "r2")
	agent := as(r2, agentToken(t, r2, "answerer"))
	var out postAnswer
	st := call(t, agent, "POST", "/api/v1/threads/r1:"+opened.Thread.ID+"/messages", map[string]any{"kind": "answer", "body": "The second one."}, &out)
	c := out.Message.CID
	if st == http.StatusForbidden && out.Reason == "forbidden" {
		c, _ = out.Details["cid"].(string) // refused within the post's wait
	} else if st/100 != 2 || out.Message.Status != "pending" {
		t.Fatalf("reply: %d %+v", st, out)
	}
	if c == "" {
		t.Fatalf("reply: no CID in %d %+v", st, out)
	}
	refused := func(r *Realm) {
		t.Helper()
		var m postAnswer
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			m = postAnswer{}
			call(t, r, "GET", "/api/v1/messages/"+c, nil, &m)
			if m.Message.Status != "pending" && m.Message.Status != "" || time.Now().After(deadline) {
				break
			}
		}
		if m.Message.Status != "refused" || m.Message.Refusal == nil || m.Message.Refusal.Reason != "forbidden" {
			t.Fatalf("%s: the reply is %+v, want refused, forbidden", r.Name, m.Message)
		}
		var th threadAnswer
		if call(t, r, "GET", "/api/v1/threads/r1:"+opened.Thread.ID, nil, &th); th.Thread.Messages != 1 {
			t.Fatalf("%s: the refused reply joined r1's thread", r.Name)
		}
	}
	refused(r3)
	refused(r2)
	var inbox struct {
		Replies []struct {
			CID     string `json:"cid"`
			Refusal *struct {
				Reason string `json:"reason"`
				Error  string `json:"error"`
			} `json:"refusal"`
		} `json:"replies"`
	}
	call(t, agent, "GET", "/api/v1/inbox?since=0", nil, &inbox)
	if len(inbox.Replies) != 1 || inbox.Replies[0].CID != c || inbox.Replies[0].Refusal == nil || !strings.Contains(inbox.Replies[0].Refusal.Error, "blocked") {
		t.Fatalf("the author's inbox: %+v", inbox.Replies)
	}
	if st := call(t, r1, "DELETE", "/api/v1/federation/blocks/r2", nil, nil); st != 200 {
		t.Fatalf("unblock: %d", st)
	}
	converge(t, net)
	refused(r1)
}
