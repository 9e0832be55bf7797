package testnet

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// agentToken issues a write token at r.
func agentToken(t *testing.T, r *Realm, label string) string {
	t.Helper()
	var out struct {
		Token string `json:"token"`
	}
	if st := call(t, r, "POST", "/api/v1/tokens", map[string]any{"label": label, "rights": []string{"write"}}, &out); st/100 != 2 {
		t.Fatalf("issue token at %s: %d", r.Name, st)
	}
	return out.Token
}

// as is r with another credential.
func as(r *Realm, token string) *Realm {
	c := *r
	c.OperatorToken = token
	return &c
}

type postAnswer struct {
	Message struct {
		ID      string   `json:"id"`
		CID     string   `json:"cid"`
		Claims  []string `json:"claims"`
		Status  string   `json:"status"`
		Refusal *struct {
			Reason string `json:"reason"`
		} `json:"refusal"`
	} `json:"message"`
	Reason  string         `json:"reason"`
	Details map[string]any `json:"details"`
}

type threadAnswer struct {
	Thread struct {
		Messages int `json:"message_count"`
	} `json:"thread"`
}

// TestReplyAcrossRealms: an agent at r2 answers in r1's thread; r1 accepts
// it into the thread and r3 sees it there. Then, cut off, it answers in a
// thread r1 has meanwhile closed: pending at first, then refused by r1 with
// thread_closed, which the author sees on the message and in the answer to
// a later read.
func TestReplyAcrossRealms(t *testing.T) {
	net, err := Start(Config{Realms: 3, Topology: Mesh})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	r1, r2, r3 := net.Realms[0], net.Realms[1], net.Realms[2]
	openThreads(t, r1, 2)
	converge(t, net)
	agent := as(r2, agentToken(t, r2, "scout"))

	var out postAnswer
	st := call(t, agent, "POST", "/api/v1/threads/r1:th_1/messages", map[string]any{"kind": "answer", "body": "from across the federation"}, &out)
	if st/100 != 2 || out.Message.Status != "accepted" {
		t.Fatalf("reply into r1:th_1: %d %+v", st, out)
	}
	converge(t, net)
	for _, r := range net.Realms {
		// A realm that got r1's acceptance before r2's reply holds it
		// until the reply comes, and the next unpark pass joins them.
		var th threadAnswer
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			call(t, r, "GET", "/api/v1/threads/r1:th_1", nil, &th)
			if th.Thread.Messages == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: r1:th_1 has %d messages, want 2", r.Name, th.Thread.Messages)
			}
		}
		var m postAnswer
		call(t, r, "GET", "/api/v1/messages/"+out.Message.CID, nil, &m)
		if m.Message.Status != "accepted" {
			t.Fatalf("%s: %s is %q", r.Name, out.Message.ID, m.Message.Status)
		}
	}

	// r2 is cut off; r1 closes its second thread; r2's reply is pending.
	net.Partition([]int{1}, []int{0, 2})
	if st := call(t, r1, "POST", "/api/v1/threads/th_2/close", map[string]any{}, nil); st/100 != 2 {
		t.Fatalf("close th_2: %d", st)
	}
	st = call(t, agent, "POST", "/api/v1/threads/r1:th_2/messages", map[string]any{"kind": "answer", "body": "too late",
		"claims": []map[string]any{{"statement": "asserted in a reply that comes too late"}}}, &out)
	if st/100 != 2 || out.Message.Status != "pending" {
		t.Fatalf("reply while cut off: %d %+v", st, out)
	}
	net.HealAll()
	converge(t, net)
	for _, r := range net.Realms {
		// The heads may agree a moment before r1 has decided on the reply
		// it just received: wait for the decision.
		var m postAnswer
		deadline := time.Now().Add(20 * time.Second)
		for {
			call(t, r, "GET", "/api/v1/messages/"+out.Message.CID, nil, &m)
			if m.Message.Status != "pending" || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if m.Message.Status != "refused" || m.Message.Refusal == nil || m.Message.Refusal.Reason != "thread_closed" {
			t.Fatalf("%s: %s is %+v", r.Name, out.Message.ID, m.Message)
		}
		var th threadAnswer
		call(t, r, "GET", "/api/v1/threads/r1:th_2", nil, &th)
		if th.Thread.Messages != 1 {
			t.Fatalf("%s: a refused reply joined r1:th_2", r.Name)
		}
	}
	// What the refused reply asserted is in no thread: every realm says
	// so, and r2 takes no act on it or on the reply.
	if len(out.Message.Claims) != 1 {
		t.Fatalf("the refused reply's claims: %v", out.Message.Claims)
	}
	claim := out.Message.Claims[0]
	for _, r := range net.Realms {
		k := claim
		if r != r2 {
			k = "r2:" + claim
		}
		var cl struct {
			Claim struct {
				Status  string `json:"status"`
				Refusal *struct {
					Reason string `json:"reason"`
				} `json:"refusal"`
			} `json:"claim"`
		}
		if st := call(t, r, "GET", "/api/v1/claims/"+k, nil, &cl); st != http.StatusOK || cl.Claim.Status != "refused" || cl.Claim.Refusal == nil || cl.Claim.Refusal.Reason != "thread_closed" {
			t.Fatalf("%s: claim %s of the refused reply: %d %+v", r.Name, k, st, cl.Claim)
		}
	}
	var refusal postAnswer
	if st := call(t, agent, "POST", "/api/v1/claims/"+claim+"/attest", map[string]any{"verdict": "supports"}, &refusal); st != http.StatusNotFound || refusal.Reason != "claim_not_found" {
		t.Fatalf("attest a claim of a refused reply: %d %+v", st, refusal)
	}
	refusal = postAnswer{}
	if st := call(t, agent, "POST", "/api/v1/threads/r1:th_1/messages", map[string]any{"kind": "refute", "body": "not so", "refutes": []string{claim},
		"evidence": []map[string]any{{"kind": "note", "value": "see above"}}}, &refusal); st != http.StatusNotFound || refusal.Reason != "claim_not_found" {
		t.Fatalf("refute a claim of a refused reply: %d %+v", st, refusal)
	}
	if st := call(t, r1, "POST", "/api/v1/threads/th_2/reopen", map[string]any{}, nil); st/100 != 2 {
		t.Fatalf("reopen th_2: %d", st)
	}
	converge(t, net)
	refusal = postAnswer{}
	if st := call(t, agent, "POST", "/api/v1/threads/r1:th_2/messages", map[string]any{"kind": "note", "body": "on my late answer", "parent": out.Message.ID}, &refusal); st != http.StatusNotFound || refusal.Reason != "parent_not_found" {
		t.Fatalf("answer a refused reply: %d %+v", st, refusal)
	}
	if st := call(t, r1, "POST", "/api/v1/threads/th_2/close", map[string]any{}, nil); st/100 != 2 {
		t.Fatalf("close th_2 again: %d", st)
	}
	converge(t, net)

	// The author's inbox at r2 tells of both outcomes.
	var inbox struct {
		Replies []struct {
			CID     string `json:"cid"`
			Status  string `json:"status"`
			Refusal *struct {
				Reason string `json:"reason"`
			} `json:"refusal"`
		} `json:"replies"`
	}
	call(t, agent, "GET", "/api/v1/inbox?since=0", nil, &inbox)
	if len(inbox.Replies) != 2 || inbox.Replies[0].Status != "accepted" || inbox.Replies[1].Refusal == nil || inbox.Replies[1].Refusal.Reason != "thread_closed" {
		t.Fatalf("inbox replies: %+v", inbox.Replies)
	}
	// Now r2 knows the thread is closed: a new reply is refused at once.
	var refused postAnswer
	if st := call(t, agent, "POST", "/api/v1/threads/r1:th_2/messages", map[string]any{"kind": "answer", "body": "again"}, &refused); st != http.StatusConflict || refused.Reason != "thread_closed" {
		t.Fatalf("reply into a closed thread: %d %+v", st, refused)
	}
	_ = r3
}

// TestDecisionBeforeReply: a replica that gets the thread realm's word
// before the reply itself ends as one that gets them in order. r3 blocks
// r2 while r2 answers in r1's thread and r1 accepts; unblocked, r3 gets the
// reply after the decision.
func TestDecisionBeforeReply(t *testing.T) {
	net, th, agent := replierBlocked(t)
	r1, r3 := net.Realms[0], net.Realms[2]
	var out postAnswer
	if st := call(t, agent, "POST", "/api/v1/threads/r1:"+th+"/messages", map[string]any{"kind": "answer", "body": "The second one."}, &out); st/100 != 2 || out.Message.Status != "accepted" {
		t.Fatalf("reply: %d %+v", st, out)
	}
	time.Sleep(1500 * time.Millisecond) // r3 takes r1's decision, not r2's reply
	if st := call(t, r3, "DELETE", "/api/v1/federation/blocks/r2", nil, nil); st != 200 {
		t.Fatalf("unblock: %d", st)
	}
	converge(t, net)
	type thread struct {
		Thread struct {
			State        string `json:"state"`
			MessageCount int    `json:"message_count"`
			Awaiting     bool   `json:"awaiting"`
		} `json:"thread"`
	}
	var at1, at3 thread
	call(t, r1, "GET", "/api/v1/threads/"+th, nil, &at1)
	call(t, r3, "GET", "/api/v1/threads/r1:"+th, nil, &at3)
	if at1.Thread != at3.Thread || at3.Thread.MessageCount != 2 {
		t.Fatalf("r1 sees %+v, r3 sees %+v", at1.Thread, at3.Thread)
	}
	var m postAnswer
	call(t, r3, "GET", "/api/v1/messages/"+out.Message.CID, nil, &m)
	if m.Message.Status != "accepted" {
		t.Fatalf("r3: the reply is %q", m.Message.Status)
	}
}

// TestOperatorsAreOfTheirRealm: every realm's operator is human:operator.
// r2's operator asking in r1's thread leaves it awaiting r1's operator, in
// r1's operator's inbox, and r1's operator answering is not a self reply.
func TestOperatorsAreOfTheirRealm(t *testing.T) {
	net, r1, r2 := pair(t)
	openThreads(t, r1, 1)
	converge(t, net)
	var out postAnswer
	if st := call(t, r2, "POST", "/api/v1/threads/r1:th_1/messages", map[string]any{"kind": "ask", "body": "r2's operator"}, &out); st/100 != 2 || out.Message.Status != "accepted" {
		t.Fatalf("r2's operator replies in r1:th_1: %d %+v", st, out)
	}
	converge(t, net)
	type inbox struct {
		Threads []struct {
			ID string `json:"id"`
		} `json:"threads"`
		Replies []struct {
			CID string `json:"cid"`
		} `json:"replies"`
	}
	var in1, in2 inbox
	if st := call(t, r1, "GET", "/api/v1/inbox?since=0", nil, &in1); st != http.StatusOK || len(in1.Threads) != 1 || in1.Threads[0].ID != "th_1" || len(in1.Replies) != 0 {
		t.Fatalf("r1's operator's inbox: %d %+v; want th_1, awaiting a reply to r2's operator, and no reply of r2's", st, in1)
	}
	if st := call(t, r2, "GET", "/api/v1/inbox?since=0", nil, &in2); st != http.StatusOK || len(in2.Replies) != 1 || in2.Replies[0].CID != out.Message.CID {
		t.Fatalf("r2's operator's inbox: %d %+v; want its reply, decided", st, in2)
	}
	var again postAnswer
	st := call(t, r1, "POST", "/api/v1/threads/th_1/messages", map[string]any{"kind": "note", "body": "r1's operator", "parent": out.Message.CID}, &again)
	if st/100 != 2 {
		t.Fatalf("r1's operator answers r2's: %d %+v", st, again)
	}
}

// TestAnswerAcrossOperators: every realm's operator is human:operator, yet
// one realm's operator answering what the other asked, without naming the
// message, answers another speaker, not its own ask: at r2 into r1's
// thread, and at r1 in its own thread after r2's operator asked there.
func TestAnswerAcrossOperators(t *testing.T) {
	net, r1, r2 := pair(t)
	if st := call(t, r1, "POST", "/api/v1/boards/lobby/threads", map[string]any{"kind": "ask", "body": "Which cache?"}, nil); st/100 != 2 {
		t.Fatalf("open: %d", st)
	}
	converge(t, net)
	var out postAnswer
	if st := call(t, r2, "POST", "/api/v1/threads/r1:th_1/messages", map[string]any{"kind": "answer", "body": "The second one."}, &out); st/100 != 2 || out.Message.Status != "accepted" {
		t.Fatalf("r2's operator answers r1's: %d %+v", st, out)
	}
	if st := call(t, r2, "POST", "/api/v1/threads/r1:th_1/messages", map[string]any{"kind": "ask", "body": "And why?"}, &out); st/100 != 2 || out.Message.Status != "accepted" {
		t.Fatalf("r2's operator asks: %d %+v", st, out)
	}
	converge(t, net)
	out = postAnswer{}
	if st := call(t, r1, "POST", "/api/v1/threads/th_1/messages", map[string]any{"kind": "answer", "body": "Because it is warm."}, &out); st/100 != 2 {
		t.Fatalf("r1's operator answers r2's: %d %+v", st, out)
	}
}

// TestAttesterRealmShown: every realm's operator is human:operator, so an
// attestation names its attester's realm: r2's operator supporting a
// claim of r1's operator is not r1's operator attesting its own claim,
// and every realm says whose it is.
func TestAttesterRealmShown(t *testing.T) {
	net, r1, r2 := pair(t)
	env := map[string]any{"kind": "propose", "body": "r1's operator claims.", "claims": []map[string]any{{"statement": "it holds"}}}
	if st := call(t, r1, "POST", "/api/v1/boards/lobby/threads", env, nil); st/100 != 2 {
		t.Fatalf("open: %d", st)
	}
	converge(t, net)
	if st := call(t, r2, "POST", "/api/v1/claims/r1:cl_1/attest", map[string]any{"verdict": "supports"}, nil); st/100 != 2 {
		t.Fatalf("r2's operator attests: %d", st)
	}
	converge(t, net)
	for _, r := range net.Realms {
		var out struct {
			Claim struct {
				State        string `json:"state"`
				Attestations []struct {
					Realm string `json:"realm"`
					By    struct {
						Identity string `json:"identity"`
					} `json:"by"`
				} `json:"attestations"`
			} `json:"claim"`
		}
		if st := call(t, r, "GET", "/api/v1/claims/r1:cl_1", nil, &out); st != http.StatusOK || out.Claim.State != "supported" ||
			len(out.Claim.Attestations) != 1 || out.Claim.Attestations[0].Realm != "r2" || out.Claim.Attestations[0].By.Identity != "human:operator" {
			t.Fatalf("%s: r1:cl_1: %d %+v", r.Name, st, out.Claim)
		}
	}
}

// TestStateSetterRealmShown: every realm's operator is human:operator, so
// who set a thread's state names their realm too. r2's operator answers in
// r1's thread, which r1 accepts (answered, set by r2's human), then r1's
// operator decides: every realm names each setter's realm, on the thread
// and in its state history.
func TestStateSetterRealmShown(t *testing.T) {
	net, r1, r2 := pair(t)
	if st := call(t, r1, "POST", "/api/v1/boards/lobby/threads", map[string]any{"kind": "ask", "body": "Which cache?"}, nil); st/100 != 2 {
		t.Fatalf("open: %d", st)
	}
	converge(t, net)
	var out postAnswer
	if st := call(t, r2, "POST", "/api/v1/threads/r1:th_1/messages", map[string]any{"kind": "answer", "body": "The second one."}, &out); st/100 != 2 || out.Message.Status != "accepted" {
		t.Fatalf("r2's operator answers: %d %+v", st, out)
	}
	type thread struct {
		Thread struct {
			State           string `json:"state"`
			StateSetBy      string `json:"state_set_by"`
			StateSetByRealm string `json:"state_set_by_realm"`
		} `json:"thread"`
	}
	type events struct {
		Events []struct {
			To    string `json:"to"`
			By    string `json:"by"`
			Realm string `json:"realm"`
		} `json:"events"`
	}
	check := func(step, state, realm string, history []string) {
		t.Helper()
		converge(t, net)
		for _, r := range net.Realms {
			var th thread
			var ev events
			call(t, r, "GET", "/api/v1/threads/r1:th_1", nil, &th)
			call(t, r, "GET", "/api/v1/threads/r1:th_1/events", nil, &ev)
			var got []string
			for _, e := range ev.Events {
				got = append(got, e.To+" by "+e.By+" of "+e.Realm)
			}
			if th.Thread.State != state || th.Thread.StateSetBy != "human:operator" || th.Thread.StateSetByRealm != realm || fmt.Sprint(got) != fmt.Sprint(history) {
				t.Fatalf("%s: %s shows %+v, history %v; want %s set by %s's human, history %v", step, r.Name, th.Thread, got, state, realm, history)
			}
		}
	}
	check("answered by r2", "answered", "r2", []string{"answered by human:operator of r2"})
	if st := call(t, r1, "POST", "/api/v1/threads/th_1/messages", map[string]any{"kind": "decide", "body": "The second one it is."}, nil); st/100 != 2 {
		t.Fatalf("decide: %d", st)
	}
	check("decided by r1", "decided", "r1", []string{"answered by human:operator of r2", "decided by human:operator of r1"})
}

// TestReplierAwaited: an agent of r2 that answered in r1's thread took
// part in it, though r1's decision joined its reply to the thread: when
// r1's operator asks there next, the thread is in the agent's inbox at r2.
func TestReplierAwaited(t *testing.T) {
	net, r1, r2 := pair(t)
	openThreads(t, r1, 1)
	converge(t, net)
	agent := as(r2, agentToken(t, r2, "scout"))
	var out postAnswer
	if st := call(t, agent, "POST", "/api/v1/threads/r1:th_1/messages", map[string]any{"kind": "answer", "body": "from r2"}, &out); st/100 != 2 || out.Message.Status != "accepted" {
		t.Fatalf("reply into r1:th_1: %d %+v", st, out)
	}
	if st := call(t, r1, "POST", "/api/v1/threads/th_1/messages", map[string]any{"kind": "ask", "body": "and why?"}, nil); st/100 != 2 {
		t.Fatalf("r1's operator asks: %d", st)
	}
	converge(t, net)
	var inbox struct {
		Threads []struct {
			ID string `json:"id"`
		} `json:"threads"`
	}
	if st := call(t, agent, "GET", "/api/v1/inbox?since=0", nil, &inbox); st != http.StatusOK || len(inbox.Threads) != 1 || inbox.Threads[0].ID != "r1:th_1" {
		t.Fatalf("the agent's inbox at r2: %d %+v; want r1:th_1", st, inbox)
	}
}

// TestSupersedeAcrossRealms: a refine posted as a reply into another
// realm's thread supersedes its author's own claim there, and only that:
// not r1's operator's claim when r2's operator, also human:operator,
// refines it.
func TestSupersedeAcrossRealms(t *testing.T) {
	net, r1, r2 := pair(t)
	env := map[string]any{"kind": "propose", "body": "r1's operator claims.", "claims": []map[string]any{{"statement": "it holds"}}}
	if st := call(t, r1, "POST", "/api/v1/boards/lobby/threads", env, nil); st/100 != 2 {
		t.Fatalf("open: %d", st)
	}
	converge(t, net)
	agent := as(r2, agentToken(t, r2, "scout"))
	post := func(who *Realm, env map[string]any) {
		t.Helper()
		var out postAnswer
		if st := call(t, who, "POST", "/api/v1/threads/r1:th_1/messages", env, &out); st/100 != 2 || out.Message.Status != "accepted" {
			t.Fatalf("reply into r1:th_1: %d %+v", st, out)
		}
	}
	post(r2, map[string]any{"kind": "refine", "body": "r2's operator refines.", "relates_to": []string{"r1:cl_1"},
		"claims": []map[string]any{{"statement": "it holds sometimes"}}})
	post(agent, map[string]any{"kind": "answer", "body": "The agent claims.", "claims": []map[string]any{{"statement": "it is slow"}}})
	post(agent, map[string]any{"kind": "refine", "body": "The agent refines.", "relates_to": []string{"r2:cl_2"},
		"claims": []map[string]any{{"statement": "it is slow when cold"}}})
	converge(t, net)
	for _, r := range net.Realms {
		for _, c := range []struct {
			id    string
			state string
		}{{"r1:cl_1", "unverified"}, {"r2:cl_2", "superseded"}} {
			var out struct {
				Claim struct {
					State string `json:"state"`
				} `json:"claim"`
			}
			if st := call(t, r, "GET", "/api/v1/claims/"+c.id, nil, &out); st != http.StatusOK || out.Claim.State != c.state {
				t.Fatalf("%s: %s is %d %q, want %s", r.Name, c.id, st, out.Claim.State, c.state)
			}
		}
	}
}

// pair starts two peered realms; they close when the test ends.
func pair(t *testing.T) (net *Net, r1, r2 *Realm) {
	t.Helper()
	net, err := Start(Config{Realms: 2, Topology: Mesh})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	return net, net.Realms[0], net.Realms[1]
}

// converge waits until every realm of net holds every realm's events.
func converge(t *testing.T, net *Net) {
	t.Helper()
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Held is not yet shown: an event parked for a record that has come
	// is projected by the next unpark pass.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		parked := 0
		for _, r := range net.Realms {
			if r.cancel != nil {
				p, _ := r.Node.Store().ParkedEvents(1)
				parked += len(p)
			}
		}
		if parked == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("converged, but %d realm(s) still hold parked events", parked)
		}
	}
}

// refuteAcrossTest is a refute r2's agent posts, cut off, into r1's th_1
// while r1 does what makes it refuse the refute: posted at r1 it is
// refused with want, and so is the reply when r1 decides on it.
type refuteAcrossTest struct {
	name  string
	claim string // the claim refuted, as r1 writes it
	// meanwhile is what r1's operator posts while r2 is cut off.
	path string
	body map[string]any
	want string
}

var refuteAcrossTests = []refuteAcrossTest{
	{"superseded", "cl_1", "/api/v1/threads/th_1/messages", map[string]any{"kind": "refine", "body": "Sharper.", "relates_to": []string{"cl_1"},
		"claims": []map[string]any{{"statement": "it holds when warm"}}}, "claim_superseded"},
	{"AI reactions forbidden in the claim's thread", "cl_2", "/api/v1/threads/th_2/llm-replies", map[string]any{"forbidden": true}, "llm_reply_forbidden"},
}

// TestReplyRefutingAcrossRealms: r1 holds a reply that refutes a claim to
// the rules it holds its own agents' refutes to, though r2, cut off, could
// not know that they apply; every realm shows r1's refusal.
func TestReplyRefutingAcrossRealms(t *testing.T) {
	net, r1, r2 := pair(t)
	for i := range 2 {
		env := map[string]any{"kind": "propose", "body": fmt.Sprintf("r1's operator claims %d.", i), "claims": []map[string]any{{"statement": "it holds"}}}
		if st := call(t, r1, "POST", "/api/v1/boards/lobby/threads", env, nil); st/100 != 2 {
			t.Fatalf("open: %d", st)
		}
	}
	converge(t, net)
	agent := as(r2, agentToken(t, r2, "scout"))
	r1agent := as(r1, agentToken(t, r1, "local"))
	for _, tt := range refuteAcrossTests {
		net.Partition([]int{1}, []int{0})
		if st := call(t, r1, "POST", tt.path, tt.body, nil); st/100 != 2 {
			t.Fatalf("%s: %s: %d", tt.name, tt.path, st)
		}
		refute := map[string]any{"kind": "refute", "body": "It does not.", "evidence": []map[string]any{{"kind": "note", "value": "measured"}},
			"refutes": []string{tt.claim}}
		var local postAnswer
		if st := call(t, r1agent, "POST", "/api/v1/threads/th_1/messages", refute, &local); st/100 == 2 || local.Reason != tt.want {
			t.Fatalf("%s: the refute posted at r1: %d %+v", tt.name, st, local)
		}
		var out postAnswer
		refute["refutes"] = []string{"r1:" + tt.claim}
		if st := call(t, agent, "POST", "/api/v1/threads/r1:th_1/messages", refute, &out); st/100 != 2 || out.Message.Status != "pending" {
			t.Fatalf("%s: refute while cut off: %d %+v", tt.name, st, out)
		}
		net.HealAll()
		converge(t, net)
		for _, r := range net.Realms {
			var m postAnswer
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				call(t, r, "GET", "/api/v1/messages/"+out.Message.CID, nil, &m)
				if m.Message.Status != "pending" || time.Now().After(deadline) {
					break
				}
			}
			if m.Message.Status != "refused" || m.Message.Refusal == nil || m.Message.Refusal.Reason != tt.want {
				t.Fatalf("%s: %s: the reply is %+v, want refused with %s", tt.name, r.Name, m.Message, tt.want)
			}
		}
	}
}
