package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"relay/protocol"
	"relay/testnet"
)

// peered starts two realms, r1 and r2, peered both ways on loopback, and
// waits until each holds the other's events.
func peered(t *testing.T) (*testnet.Net, *node, *node) {
	t.Helper()
	net, err := testnet.Start(testnet.Config{Realms: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	at := func(r *testnet.Realm) *node { return &node{Node: r.Node, url: r.URL, operator: r.OperatorToken} }
	return net, at(net.Realms[0]), at(net.Realms[1])
}

// waitFor polls f until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// head is the newest seq of realm that n's store holds.
func head(t *testing.T, n *node, realm string) uint64 {
	t.Helper()
	h, err := n.Store().Heads()
	if err != nil {
		t.Fatal(err)
	}
	return h[protocol.Realm(realm)].Seq
}

var flashRE = regexp.MustCompile(`(?s)<div class="flash (ok|err)" role="(?:status|alert)"[^>]*>(.*?)</div>`)

// act posts a console form and returns the flash of the page it leads to.
func (b *browser) act(csrf, key string, form url.Values) string {
	b.t.Helper()
	form.Set("csrf", csrf)
	form.Set("return", "/console/federation")
	p := b.post("/console/op/"+key, form)
	if p.status != http.StatusSeeOther {
		b.t.Fatalf("%s: %d\n%.2000s", key, p.status, p.body)
	}
	m := flashRE.FindStringSubmatch(b.get(p.header.Get("Location")).body)
	if m == nil {
		b.t.Fatalf("%s: no flash", key)
	}
	return m[1] + ": " + m[2]
}

// TestFederationPageOff: a node without federation says so, from the
// operator API's refusal, and shows nothing it does not have.
func TestFederationPageOff(t *testing.T) {
	n := startNode(t, nil)
	b := n.browser(t)
	csrf := b.login(n.operator)
	p := b.get("/console/federation")
	if p.status != 200 || !strings.Contains(p.body, "This node does not federate") || !strings.Contains(p.body, "--no-p2p") {
		t.Fatalf("federation page without federation: %d\n%.2000s", p.status, p.body)
	}
	for _, absent := range []string{`id="peers"`, `id="realms"`, "data-poll", "post_federation_peers"} {
		if strings.Contains(p.body, absent) {
			t.Errorf("the page shows %q without federation", absent)
		}
	}
	if f := b.act(csrf, "post_federation_peers", url.Values{"addr": {"/ip4/127.0.0.1/tcp/1/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN"}}); !strings.Contains(f, "err") || !strings.Contains(f, "not_found") {
		t.Fatalf("add a peer without federation: %s", f)
	}
}

// TestFederationPage: r1's console shows its identity, its peer and both
// realms, and blocks, unblocks, adds and removes peers through the
// registry, with the operator's text escaped.
func TestFederationPage(t *testing.T) {
	_, r1, r2 := peered(t)
	b := r1.browser(t)
	csrf := b.login(r1.operator)
	fed := r1.Federation()
	r2id := r2.Federation().PeerID().String()

	var p page
	waitFor(t, 10*time.Second, "r1's page shows r2 as a connected peer", func() bool {
		p = b.get("/console/federation")
		return p.status == 200 && strings.Contains(p.body, `<span class="badge p-connected">connected</span>`)
	})
	for _, want := range []string{
		fed.PeerID().String(),
		`data-copy="` + fed.Addrs()[0] + `"`, // full addresses, copyable
		`id="realm-r2"`, `id="peer-` + r2id + `"`,
		`data-poll="5"`, // peers' states move neither the store nor the registry
		`action="/console/op/post_federation_blocks"`,
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the federation page lacks %q", want)
		}
	}
	if strings.Contains(p.body, "Needs your attention") {
		t.Error("a quiet federation flagged for attention")
	}

	// A malformed address is the registry's refusal.
	if f := b.act(csrf, "post_federation_peers", url.Values{"addr": {"not a multiaddr"}}); !strings.Contains(f, "err") || !strings.Contains(f, "invalid_body") {
		t.Fatalf("bad peer address: %s", f)
	}

	// Block r2 with a reason that is markup; the page escapes it.
	if f := b.act(csrf, "post_federation_blocks", url.Values{"realm": {"r2"}, "reason": {`<b>spam</b> & "flood"`}}); !strings.Contains(f, "ok") || !strings.Contains(f, "Blocked r2") {
		t.Fatalf("block: %s", f)
	}
	p = b.get("/console/federation")
	if !strings.Contains(p.body, `data-badge="blocked"`) || !strings.Contains(p.body, "&lt;b&gt;spam&lt;/b&gt; &amp; &#34;flood&#34;") || strings.Contains(p.body, "<b>spam</b>") {
		t.Fatalf("blocked r2 on the page:\n%.3000s", p.body)
	}
	if !fed.IsBlocked("r2") {
		t.Fatal("the console's block did not reach the federation")
	}
	if f := b.act(csrf, "delete_federation_blocks_realm", url.Values{"realm": {"r2"}}); !strings.Contains(f, "ok") || !strings.Contains(f, "Unblocked r2") {
		t.Fatalf("unblock: %s", f)
	}
	if fed.IsBlocked("r2") || strings.Contains(b.get("/console/federation").body, `data-badge="blocked"`) {
		t.Fatal("r2 still blocked")
	}

	// Remove r2, then add it back by its address.
	if f := b.act(csrf, "delete_federation_peers_id", url.Values{"id": {r2id}}); !strings.Contains(f, "ok") || !strings.Contains(f, "Removed peer") {
		t.Fatalf("remove: %s", f)
	}
	if strings.Contains(b.get("/console/federation").body, `id="peer-`+r2id+`"`) {
		t.Fatal("a removed peer is still listed")
	}
	if f := b.act(csrf, "post_federation_peers", url.Values{"addr": {r2.Federation().Addrs()[0]}}); !strings.Contains(f, "ok") || !strings.Contains(f, "Added peer") {
		t.Fatalf("add: %s", f)
	}
	waitFor(t, 10*time.Second, "r2 connected again", func() bool {
		return strings.Contains(b.get("/console/federation").body, `<span class="badge p-connected">connected</span>`)
	})
}

// TestRepliesAcrossRealms: a reply from another realm shows where it
// stands — accepted, or pending the thread's realm's word — with the
// agent's text escaped, and another realm's thread offers no moderation.
func TestRepliesAcrossRealms(t *testing.T) {
	net, r1, r2 := peered(t)
	th := r1.mustAPI(t, "POST", "/api/v1/boards/lobby/threads", r1.operator, map[string]any{"kind": "ask", "body": "Which index?"})
	open := th["thread"].(map[string]any)["id"].(string)
	th = r1.mustAPI(t, "POST", "/api/v1/boards/lobby/threads", r1.operator, map[string]any{"kind": "ask", "body": "Which cache?"})
	later := th["thread"].(map[string]any)["id"].(string)
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	agent := r2.mustAPI(t, "POST", "/api/v1/tokens", r2.operator, map[string]any{"label": "scout", "rights": []string{"write"}})["token"].(string)
	out := r2.mustAPI(t, "POST", "/api/v1/threads/r1:"+open+"/messages", agent, map[string]any{"kind": "answer", "body": "BM25 <script>alert(1)</script>"})
	if st := out["message"].(map[string]any)["status"]; st != "accepted" {
		t.Fatalf("reply into r1's thread: %v", out)
	}
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}

	b1 := r1.browser(t)
	b1.login(r1.operator)
	p := b1.get("/console/threads/" + open)
	if !strings.Contains(p.body, `data-status="accepted"`) || !strings.Contains(p.body, "accepted by this realm") || strings.Contains(p.body, "<script>alert") {
		t.Fatalf("r1's own thread with r2's reply:\n%.3000s", p.body)
	}
	b2 := r2.browser(t)
	csrf2 := b2.login(r2.operator)
	p = b2.get("/console/threads/r1:" + open)
	if !strings.Contains(p.body, "accepted by r1") || !strings.Contains(p.body, "belongs to realm") || strings.Contains(p.body, "post_threads_id_confirm") || strings.Contains(p.body, "post_threads_id_pin") {
		t.Fatalf("r1's thread at r2:\n%.3000s", p.body)
	}

	// Cut off, r2's reply into r1's thread waits for r1's word.
	net.Partition([]int{1}, []int{0})
	out = r2.mustAPI(t, "POST", "/api/v1/threads/r1:"+later+"/messages", agent, map[string]any{"kind": "answer", "body": "Cache <img src=x onerror=alert(2)>"})
	if st := out["message"].(map[string]any)["status"]; st != "pending" {
		t.Fatalf("reply while cut off: %v", out)
	}
	p = b2.get("/console/threads/r1:" + later)
	if !strings.Contains(p.body, `id="pending"`) || !strings.Contains(p.body, `data-status="pending"`) || !strings.Contains(p.body, "pending · r1 decides") ||
		!strings.Contains(p.body, "Cache &lt;img src=x onerror=alert(2)&gt;") {
		t.Fatalf("a pending reply at r2:\n%.4000s", p.body)
	}
	// The human's own reply says where it stands.
	post := url.Values{"csrf": {csrf2}, "return": {"/console/threads/r1:" + later}, "id": {"r1:" + later}, "kind": {"note"}, "body": {"From r2's human."}}
	resp := b2.post("/console/op/post_threads_id_messages", post)
	m := flashRE.FindStringSubmatch(b2.get(resp.header.Get("Location")).body)
	if m == nil || m[1] != "ok" || !strings.Contains(m[2], "pending until r1 accepts it") {
		t.Fatalf("the human's reply while cut off: %d %v", resp.status, m)
	}
	// Healed, r1 decides on both (the heads may agree a moment before it
	// does) and r2 hears it.
	net.HealAll()
	waitFor(t, 20*time.Second, "r1's word on both replies reaches r2's console", func() bool {
		p = b2.get("/console/threads/r1:" + later)
		return !strings.Contains(p.body, `id="pending"`) && strings.Count(p.body, "accepted by r1") == 2
	})
}
