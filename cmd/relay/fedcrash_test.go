package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"relay/realm"
)

// fedNode is one realm, started each time on the same data and flags.
type fedNode struct {
	name, dir string
	args      []string
	op        string      // the operator secret
	log       *syncBuffer // every start's output
	p         *fedProc    // the running process
	starts    int
}

// fedProc is one start of a node.
type fedProc struct {
	*child
	killed atomic.Bool // by the test: its writers' errors are expected
}

func (n *fedNode) start(t *testing.T) {
	t.Helper()
	n.starts++
	fmt.Fprintf(n.log, "--- start %d ---\n", n.starts)
	// No rate limit: the load comes from few credentials.
	c := startServe(t, n.args, []string{"RELAY_RATE_LIMIT=0"}, n.log)
	if c.addr == "" {
		t.Fatalf("%s printed no p2p address:\n%s", n.name, n.log)
	}
	n.p = &fedProc{child: c}
}

// kill ends the node with SIGKILL, as a crash or the OOM killer would.
func (n *fedNode) kill(t *testing.T) {
	t.Helper()
	n.p.killed.Store(true)
	if err := n.p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-n.p.done
}

func (n *fedNode) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := n.p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// key is how node names a record of realm: bare at home, realm-qualified
// elsewhere.
func (n *fedNode) key(realm, id string) string {
	if realm == n.name {
		return id
	}
	return realm + ":" + id
}

// fedAck is a write a realm answered with success.
type fedAck struct {
	realm, kind, id, in, body, cid string // kind: post or msg; in: its thread or conversation
}

// fedLoad is the writers of every realm and what they were answered.
type fedLoad struct {
	c    *http.Client
	stop atomic.Bool
	wg   sync.WaitGroup
	seq  atomic.Int64 // makes every body unique, across starts too

	mu      sync.Mutex
	acks    []fedAck
	n       map[string]int      // acks by realm
	threads map[string][]string // by realm: the threads its writers opened
	convs   map[string][]string
}

func (l *fedLoad) acked(a fedAck) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acks = append(l.acks, a)
	l.n[a.realm]++
}

func (l *fedLoad) count(realm string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[realm]
}

// fail reports a writer's error unless the test killed its node, and says
// whether the writer ends.
func (l *fedLoad) fail(t *testing.T, n *fedNode, p *fedProc, err error) bool {
	if err != nil && !p.killed.Load() {
		t.Errorf("%s: %v", n.name, err)
	}
	return err != nil
}

// fedMsg is a Parley message as GET /api/v1/messages answers it.
type fedMsg struct {
	Message struct {
		ID, Realm, Thread, Body, Kind, CID, Status string
	}
}

// poster writes notes into its realm's lobby: every tenth opens a thread,
// the rest go into one its realm's writers opened (before a crash too).
func (l *fedLoad) poster(t *testing.T, n *fedNode, tok string) {
	p := n.p
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for i := 0; !l.stop.Load(); i++ {
			body := fmt.Sprintf("%s note %d", n.name, l.seq.Add(1))
			path := "/api/v1/boards/lobby/threads"
			l.mu.Lock()
			own := l.threads[n.name]
			l.mu.Unlock()
			if i%10 != 0 && len(own) > 0 {
				path = "/api/v1/threads/" + own[i%len(own)] + "/messages"
			}
			var out fedMsg
			if _, err := call(l.c, "POST", p.url+path, tok, "", map[string]any{"kind": "note", "body": body}, &out); l.fail(t, n, p, err) {
				return
			}
			m := out.Message
			if m.ID == "" || m.CID == "" || m.Thread == "" {
				t.Errorf("%s: a post answered without its id: %+v", n.name, m)
				return
			}
			l.acked(fedAck{n.name, "post", m.ID, m.Thread, body, m.CID})
			if strings.HasSuffix(path, "/threads") {
				l.mu.Lock()
				l.threads[n.name] = append(l.threads[n.name], m.Thread)
				l.mu.Unlock()
			}
		}
	}()
}

// corpusAgent writes corpus messages: every tenth opens a conversation, the
// rest append to one its realm's agents opened.
func (l *fedLoad) corpusAgent(t *testing.T, n *fedNode, agent, endpoint string) {
	p := n.p
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for i := 0; !l.stop.Load(); i++ {
			k := l.seq.Add(1)
			content := fmt.Sprintf("%s message %d", n.name, k)
			path := "/" + endpoint + "/createConversation"
			body := map[string]any{"subject": fmt.Sprintf("%s subject %d", n.name, k), "content": content}
			l.mu.Lock()
			own := l.convs[n.name]
			l.mu.Unlock()
			if i%10 != 0 && len(own) > 0 {
				path = "/" + endpoint + "/appendToConversation/" + own[i%len(own)]
				body = map[string]any{"content": content}
			}
			var out corpusWrite
			if _, err := call(l.c, "POST", p.url+path, agent, fmt.Sprint("op-", k), body, &out); l.fail(t, n, p, err) {
				return
			}
			if out.MessageID == "" || out.Message.CID == "" {
				t.Errorf("%s: a corpus write answered without its id: %+v", n.name, out)
				return
			}
			l.acked(fedAck{n.name, "msg", out.MessageID, out.ConversationID, content, out.Message.CID})
			if strings.HasSuffix(path, "/createConversation") {
				l.mu.Lock()
				l.convs[n.name] = append(l.convs[n.name], out.ConversationID)
				l.mu.Unlock()
			}
		}
	}()
}

// waitFor polls ok until it holds, after at least min, or until max.
func waitFor(min, max time.Duration, ok func() bool) {
	start := time.Now()
	for time.Since(start) < max && (time.Since(start) < min || !ok()) {
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCrashFederation runs three peered realms as processes of their own
// under write load on each, kills one with SIGKILL mid-load while the others
// go on writing, starts it again on the same data and flags, and checks
// that once the network has converged every realm holds every write any
// realm acknowledged, exactly as answered. Its peers stall just before the
// kill, so that some of what it acknowledged has reached no peer when it
// dies: only catch-up after its restart can bring that.
func TestCrashFederation(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	began := time.Now()
	root := t.TempDir()
	var nodes []*fedNode
	byName := map[string]*fedNode{}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		dir := filepath.Join(root, name)
		n := &fedNode{name: name, dir: dir, log: &syncBuffer{},
			args: []string{"--realm", name, "--data", dir, "--http", "127.0.0.1:0", "--p2p", "/ip4/127.0.0.1/tcp/0"}}
		nodes = append(nodes, n)
		byName[name] = n
	}
	alpha, beta, gamma := nodes[0], nodes[1], nodes[2]
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("%s's log:\n%s", n.name, n.log)
			}
		}
	})

	// Peering as operators do it: a newcomer names the running realms with
	// --peer (for every start), and each running realm's operator adds the
	// newcomer with `relay peer add` (kept), since a realm admits only
	// the peers its operator named.
	alpha.start(t)
	beta.args = append(beta.args, "--peer", alpha.p.addr)
	beta.start(t)
	gamma.args = append(gamma.args, "--peer", alpha.p.addr, "--peer", beta.p.addr)
	gamma.start(t)
	for _, n := range nodes {
		op, err := os.ReadFile(filepath.Join(n.dir, "operator.token"))
		if err != nil {
			t.Fatal(err)
		}
		n.op = strings.TrimSpace(string(op))
	}
	peerAdd := func(n, other *fedNode) {
		mustCLI(t, "peer", "add", other.p.addr, "--node", n.p.url, "--operator-token-file", filepath.Join(n.dir, "operator.token"))
	}
	peerAdd(alpha, beta)
	peerAdd(alpha, gamma)
	peerAdd(beta, gamma)

	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	checkFor(t, 20*time.Second, func() error {
		for _, n := range nodes {
			var out realm.PeersOut
			if _, err := call(c, "GET", n.p.url+"/api/v1/federation/peers", n.op, "", nil, &out); err != nil {
				return err
			}
			up := 0
			for _, p := range out.Peers {
				if p.State == "connected" && byName[p.Realm] != nil {
					up++
				}
			}
			if up != len(nodes)-1 {
				return fmt.Errorf("%s is connected to %d realms: %+v", n.name, up, out.Peers)
			}
		}
		return nil
	})
	t.Logf("three realms peered in %v", time.Since(began).Round(time.Millisecond))

	// Two forum writers and a corpus agent in every realm; a token and an
	// agent's credential outlive a crash, so beta's are used again after.
	const posters = 2
	type creds struct {
		tokens          []string
		agent, endpoint string
	}
	cr := map[string]*creds{}
	for _, n := range nodes {
		cr[n.name] = &creds{}
		for i := range posters {
			var out struct{ Token string }
			if _, err := call(c, "POST", n.p.url+"/api/v1/tokens", n.op, "",
				map[string]any{"label": fmt.Sprint("fed", i), "rights": []string{"write"}}, &out); err != nil {
				t.Fatal(err)
			}
			cr[n.name].tokens = append(cr[n.name].tokens, out.Token)
		}
		var out struct {
			AgentID    string `json:"agent_id"`
			EndpointID string `json:"endpoint_id"`
		}
		if _, err := call(c, "POST", n.p.url+"/register", "", "", nil, &out); err != nil {
			t.Fatal(err)
		}
		// The guide read with the credential is what lets it write.
		if _, err := call(c, "GET", n.p.url+"/auth.md", out.AgentID, "", nil, nil); err != nil {
			t.Fatal(err)
		}
		cr[n.name].agent, cr[n.name].endpoint = out.AgentID, out.EndpointID
	}
	l := &fedLoad{c: c, n: map[string]int{}, threads: map[string][]string{}, convs: map[string][]string{}}
	load := func(n *fedNode) {
		for _, tok := range cr[n.name].tokens {
			l.poster(t, n, tok)
		}
		l.corpusAgent(t, n, cr[n.name].agent, cr[n.name].endpoint)
	}
	defer func() { // on a t.Fatal below, the writers end first
		l.stop.Store(true)
		l.wg.Wait()
	}()
	for _, n := range nodes {
		load(n)
	}

	// Kill beta once every realm has a pile of acknowledged writes, much of
	// it still on its way to the peers; a slow machine gets longer.
	loadStart := time.Now()
	const pile = 150
	waitFor(time.Second, 10*time.Second, func() bool {
		return l.count("alpha") >= pile && l.count("beta") >= pile && l.count("gamma") >= pile || t.Failed()
	})
	// Beta's peers stall (SIGSTOP, as a stuck machine or a congested link
	// would) while beta acknowledges more, and then beta dies: what it
	// acknowledged meanwhile reached no peer, or only part of it did, and
	// only catch-up after its restart can bring it.
	alpha.signal(t, syscall.SIGSTOP)
	gamma.signal(t, syscall.SIGSTOP)
	b0 := l.count("beta")
	waitFor(200*time.Millisecond, 2*time.Second, func() bool { return l.count("beta") >= b0+pile/5 || t.Failed() })
	beta.kill(t)
	betaBefore := l.count("beta")
	alpha.signal(t, syscall.SIGCONT)
	gamma.signal(t, syscall.SIGCONT)
	tr.CloseIdleConnections()
	t.Logf("beta killed after %v of load, %d of its writes acknowledged while its peers stalled: acknowledged alpha %d, beta %d, gamma %d",
		time.Since(loadStart).Round(time.Millisecond), betaBefore-b0, l.count("alpha"), betaBefore, l.count("gamma"))
	if t.Failed() {
		t.FailNow()
	}

	// The others write on without it, then it comes back on the same data
	// and flags (on new ports) while they still write, and writes again.
	a0, g0 := l.count("alpha"), l.count("gamma")
	waitFor(300*time.Millisecond, 10*time.Second, func() bool {
		return l.count("alpha") >= a0+pile/3 && l.count("gamma") >= g0+pile/3 || t.Failed()
	})
	// What the others hold of beta now, against what beta holds when it
	// is back: the difference (acknowledged, or in flight at the kill)
	// never reached them, and only catch-up can bring it.
	heldOf := func(n *fedNode, r string) uint64 {
		var out realm.RealmsOut
		if _, err := call(c, "GET", n.p.url+"/api/v1/federation/realms", n.op, "", nil, &out); err != nil {
			t.Fatal(err)
		}
		for _, s := range out.Realms {
			if s.Realm == r {
				return s.Seq
			}
		}
		return 0
	}
	atAlpha, atGamma := heldOf(alpha, "beta"), heldOf(gamma, "beta")
	restart := time.Now()
	beta.start(t)
	t.Logf("beta restarted in %v at seq %d; alpha held it at %d, gamma at %d",
		time.Since(restart).Round(time.Millisecond), heldOf(beta, "beta"), atAlpha, atGamma)
	load(beta)
	waitFor(300*time.Millisecond, 10*time.Second, func() bool { return l.count("beta") >= betaBefore+pile/3 || t.Failed() })
	l.stop.Store(true)
	l.wg.Wait()
	loadTime := time.Since(loadStart)
	if t.Failed() {
		t.FailNow()
	}

	// Converged: every realm holds every realm's head, as that realm
	// reports it, with nothing parked, refused or quarantined.
	converge := time.Now()
	var heads map[string]uint64
	deadline := time.Now().Add(30 * time.Second)
	for {
		all := map[string]realm.RealmsOut{}
		heads = map[string]uint64{}
		for _, n := range nodes {
			var out realm.RealmsOut
			if _, err := call(c, "GET", n.p.url+"/api/v1/federation/realms", n.op, "", nil, &out); err != nil {
				t.Fatal(err)
			}
			all[n.name] = out
			for _, r := range out.Realms {
				if r.Local {
					heads[n.name] = r.Seq
				}
			}
		}
		var behind []string
		for _, n := range nodes {
			held := map[string]bool{}
			for _, r := range all[n.name].Realms {
				if byName[r.Realm] == nil {
					continue
				}
				held[r.Realm] = true
				if r.Seq != heads[r.Realm] || r.Lag != 0 || r.Parked != 0 || r.Blocked || r.Quarantined != "" || r.Refused != "" {
					behind = append(behind, fmt.Sprintf("%s holds %s at %d of %d: %+v", n.name, r.Realm, r.Seq, heads[r.Realm], r))
				}
			}
			for _, o := range nodes {
				if !held[o.name] {
					behind = append(behind, fmt.Sprintf("%s does not know %s", n.name, o.name))
				}
			}
		}
		if len(behind) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no convergence in 30 s (acknowledged alpha %d, beta %d, gamma %d):\n%s",
				l.count("alpha"), l.count("beta"), l.count("gamma"), strings.Join(behind, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("load ran %v: acknowledged alpha %d, beta %d (%d before the kill), gamma %d; converged %v after it, at heads %v",
		loadTime.Round(time.Millisecond), l.count("alpha"), l.count("beta"), betaBefore, l.count("gamma"),
		time.Since(converge).Round(time.Millisecond), heads)
	for _, n := range nodes {
		var out realm.FederationOut
		if _, err := call(c, "GET", n.p.url+"/api/v1/federation", n.op, "", nil, &out); err != nil {
			t.Fatal(err)
		}
		if len(out.Equivocations) > 0 || len(out.OwnChain) > 0 || len(out.Conflicts) > 0 {
			t.Errorf("%s: equivocations %+v, own-chain alarms %+v, key conflicts %+v", n.name, out.Equivocations, out.OwnChain, out.Conflicts)
		}
		t.Logf("%s: received %v, refused %v, unsent %d", n.name, out.Counters.Received, out.Counters.Refused, out.Counters.Unsent)
	}

	// Every acknowledged write, on every realm, by key and by CID, as
	// answered; and every thread and conversation counts alike everywhere.
	check := time.Now()
	missing := make([][]string, len(nodes))
	counts := make([]map[string]int, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts[i] = map[string]int{}
			bad := func(format string, args ...any) { missing[i] = append(missing[i], fmt.Sprintf(format, args...)) }
			seen := map[string]bool{}
			for _, a := range l.acks {
				switch a.kind {
				case "post":
					for _, ref := range []string{n.key(a.realm, a.id), a.cid} {
						var out fedMsg
						if _, err := call(c, "GET", n.p.url+"/api/v1/messages/"+ref, "", "", nil, &out); err != nil {
							bad("%s's post %s (%s): %v", a.realm, a.id, ref, err)
							continue
						}
						m := out.Message
						if m.ID != n.key(a.realm, a.id) || m.Realm != a.realm || m.Thread != n.key(a.realm, a.in) || m.Body != a.body || m.Kind != "note" || m.CID != a.cid || m.Status != "" {
							bad("%s's post %s (%s) is %+v, acknowledged as %+v", a.realm, a.id, ref, m, a)
						}
					}
					if k := a.realm + "/th/" + a.in; !seen[k] {
						seen[k] = true
						var out struct{ Thread msgCount }
						if _, err := call(c, "GET", n.p.url+"/api/v1/threads/"+n.key(a.realm, a.in), "", "", nil, &out); err != nil {
							bad("%s's thread %s: %v", a.realm, a.in, err)
						}
						counts[i][k] = out.Thread.MessageCount
					}
				case "msg":
					var out corpusMsg
					if _, err := call(c, "GET", n.p.url+"/messages/"+a.id, "", "", nil, &out); err != nil {
						bad("%s's corpus message %s: %v", a.realm, a.id, err)
						continue
					}
					m := out.Message
					if m.MessageID != a.id || m.Realm != a.realm || m.ConversationID != a.in || m.Content != a.body || m.CID != a.cid {
						bad("%s's corpus message %s is %+v, acknowledged as %+v", a.realm, a.id, m, a)
					}
					if k := a.realm + "/conv/" + a.in; !seen[k] {
						seen[k] = true
						var out struct{ Conversation msgCount }
						if _, err := call(c, "GET", n.p.url+"/conversations/"+a.in, "", "", nil, &out); err != nil {
							bad("%s's conversation %s: %v", a.realm, a.in, err)
						}
						counts[i][k] = out.Conversation.MessageCount
					}
				}
			}
		}()
	}
	wg.Wait()
	for i, n := range nodes {
		if len(missing[i]) > 0 {
			show := missing[i]
			if len(show) > 20 {
				show = show[:20]
			}
			t.Errorf("%s lacks or differs on %d of %d acknowledged writes; the first:\n%s", n.name, len(missing[i]), len(l.acks), strings.Join(show, "\n"))
		}
	}
	per := map[string]int{}
	for _, a := range l.acks {
		per[a.realm+"/"+map[string]string{"post": "th", "msg": "conv"}[a.kind]+"/"+a.in]++
	}
	var keys []string
	for k := range per {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		first := counts[0][k]
		for i, n := range nodes {
			if counts[i][k] != first || counts[i][k] < per[k] {
				t.Errorf("%s counts %d messages in %s, alpha %d; %d acknowledged", n.name, counts[i][k], k, first, per[k])
			}
		}
	}
	t.Logf("%d writes found on all three realms, %d threads and conversations alike, in %v; %v in all",
		len(l.acks), len(keys), time.Since(check).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// msgCount is the count in a thread's or conversation's answer.
type msgCount struct {
	MessageCount int `json:"message_count"`
}

// corpusMsg is a corpus message as GET /messages/{id} answers it.
type corpusMsg struct {
	Message struct {
		MessageID      string `json:"message_id"`
		ConversationID string `json:"conversation_id"`
		Content        string
		Realm, CID     string
	}
}
