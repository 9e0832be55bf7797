package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"relay/federation"
	"relay/realm"
)

// syncBuffer is an output stream the command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// running is a long-lived command (serve, testnet) run in-process.
type running struct {
	out, errOut *syncBuffer
	cancel      context.CancelFunc
	done        chan error
}

func start(t *testing.T, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{out: &syncBuffer{}, errOut: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- runContext(ctx, append([]string{"relay"}, args...), r.out, r.errOut) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the command as SIGINT would and waits for its graceful end.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("command ended with %v; stderr:\n%s", err, r.errOut)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("command did not stop; stderr:\n%s", r.errOut)
	}
}

// waitOutput polls until the command's stdout satisfies ok.
func (r *running) waitOutput(t *testing.T, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := r.out.String()
		if ok(out) {
			return out
		}
		select {
		case err := <-r.done:
			t.Fatalf("command ended early (%v); stdout:\n%s\nstderr:\n%s", err, out, r.errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out; stdout:\n%s\nstderr:\n%s", out, r.errOut)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runCLI runs a short command and returns its stdout.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut syncBuffer
	err := runContext(context.Background(), append([]string{"relay"}, args...), &out, &errOut)
	return out.String(), err
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("relay %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// checkFor polls f until it holds or wait passes.
func checkFor(t *testing.T, wait time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type testnetLine struct {
	Realm, HTTP, P2P, PeerID, OperatorToken string
}

// TestTestnetAndPeerCommands runs `relay testnet --realms 2 --json`, checks
// its lines, and drives every `relay peer` subcommand against realm r1.
func TestTestnetAndPeerCommands(t *testing.T) {
	tn := start(t, "testnet", "--realms", "2", "--json")
	out := tn.waitOutput(t, func(s string) bool { return strings.Count(s, "\n") >= 2 })
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, have %d:\n%s", len(lines), out)
	}
	var realms []testnetLine
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, line)
		}
		want := []string{"realm", "http", "p2p", "peer_id", "operator_token"}
		if len(m) != len(want) {
			t.Fatalf("line %d: want exactly the fields %v, have %v", i+1, want, m)
		}
		get := func(k string) string {
			s, ok := m[k].(string)
			if !ok || s == "" {
				t.Fatalf("line %d: %s is %v, want a non-empty string", i+1, k, m[k])
			}
			return s
		}
		r := testnetLine{get("realm"), get("http"), get("p2p"), get("peer_id"), get("operator_token")}
		if want := []string{"r1", "r2"}[i]; r.Realm != want {
			t.Fatalf("line %d: realm %q, want %q", i+1, r.Realm, want)
		}
		if !strings.HasPrefix(r.HTTP, "http://127.0.0.1:") || !strings.HasPrefix(r.P2P, "/ip4/127.0.0.1/tcp/") || !strings.HasSuffix(r.P2P, "/p2p/"+r.PeerID) {
			t.Fatalf("line %d: %+v", i+1, r)
		}
		realms = append(realms, r)
	}
	r1, r2 := realms[0], realms[1]
	node := []string{"--node", r1.HTTP, "--operator-token", r1.OperatorToken}
	peer := func(args ...string) string { return mustCLI(t, append(append([]string{"peer"}, args...), node...)...) }
	type peersOut struct {
		Peers []struct {
			PeerID string `json:"peer_id"`
			Realm  string `json:"realm"`
			State  string `json:"state"`
		} `json:"peers"`
	}
	r2State := func() (realm, state string, found bool) {
		var out peersOut
		if err := json.Unmarshal([]byte(peer("list", "--json")), &out); err != nil {
			t.Fatal(err)
		}
		for _, p := range out.Peers {
			if p.PeerID == r2.PeerID {
				return p.Realm, p.State, true
			}
		}
		return "", "", false
	}
	checkFor(t, 20*time.Second, func() error {
		if realm, state, _ := r2State(); realm != "r2" || state != "connected" {
			return errors.New("peer list --json: r2 not connected: " + realm + " " + state)
		}
		return nil
	})

	if out := peer("list"); !strings.Contains(out, "PEER ID") || !strings.Contains(out, r2.PeerID) || !strings.Contains(out, "connected") {
		t.Fatalf("peer list:\n%s", out)
	}
	if out := peer("status"); !strings.Contains(out, r1.PeerID) || !strings.Contains(out, r1.P2P) {
		t.Fatalf("peer status:\n%s", out)
	}
	if out := peer("realms"); !strings.Contains(out, "r2") {
		t.Fatalf("peer realms:\n%s", out)
	}

	// A flag after the argument is taken too.
	if out := peer("block", "r2", "--reason", "testing"); !strings.Contains(out, "blocked realm r2") {
		t.Fatalf("peer block:\n%s", out)
	}
	var realmsOut struct {
		Realms []struct {
			Realm   string `json:"realm"`
			Blocked bool   `json:"blocked"`
		} `json:"realms"`
	}
	if err := json.Unmarshal([]byte(peer("realms", "--json")), &realmsOut); err != nil {
		t.Fatal(err)
	}
	blocked := false
	for _, r := range realmsOut.Realms {
		blocked = blocked || (r.Realm == "r2" && r.Blocked)
	}
	if !blocked {
		t.Fatalf("r2 not blocked: %+v", realmsOut)
	}
	if out := peer("status"); !strings.Contains(out, "r2 (testing)") {
		t.Fatalf("peer status after block:\n%s", out)
	}
	peer("unblock", "r2")

	peer("remove", r2.PeerID)
	if _, _, found := r2State(); found {
		t.Fatal("r2 still listed after peer remove")
	}
	peer("add", r2.P2P)
	if _, _, found := r2State(); !found {
		t.Fatal("r2 not listed after peer add")
	}

	if _, err := runCLI(t, append([]string{"peer", "add"}, node...)...); err == nil || !strings.Contains(err.Error(), "usage: relay peer add ADDR") {
		t.Fatalf("peer add without ADDR: %v", err)
	}
	tn.stop(t)
}

// TestServeNoP2P runs a node without federation: it says so on start, and
// `relay peer` answers with the node's reason.
func TestServeNoP2P(t *testing.T) {
	dir := t.TempDir()
	srv := start(t, "serve", "--no-p2p", "--in-memory", "--data", dir, "--http", "127.0.0.1:0")
	out := srv.waitOutput(t, func(s string) bool { return strings.Contains(s, "operator secret") })
	if !strings.Contains(out, "federation off") {
		t.Fatalf("start output does not say federation is off:\n%s", out)
	}
	_, rest, _ := strings.Cut(out, " serving at ")
	url, _, _ := strings.Cut(rest, " ")
	_, err := runCLI(t, "peer", "status", "--node", url, "--operator-token-file", dir+"/operator.token")
	if err == nil || !strings.Contains(err.Error(), "does not federate") {
		t.Fatalf("peer status on a node without p2p: %v", err)
	}
	srv.stop(t)
	// The directory now holds that realm's key: a second in-memory chain
	// under it would fork the first, and its secret replace the first's.
	secret, _ := os.ReadFile(dir + "/operator.token")
	if _, err := runCLI(t, "serve", "--no-p2p", "--in-memory", "--data", dir, "--http", "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "--in-memory needs a data directory of its own") {
		t.Fatalf("--in-memory on a directory with a realm's key: %v", err)
	}
	if again, _ := os.ReadFile(dir + "/operator.token"); string(again) != string(secret) {
		t.Fatal("the refused in-memory node replaced the operator secret")
	}
}

// TestServeBadHTTPAddr: a bad HTTP address is refused, naming --http,
// before the data directory is made: a typo costs nothing to retry.
func TestServeBadHTTPAddr(t *testing.T) {
	dir := t.TempDir() + "/data"
	for _, addr := range []string{"127.0.0.1:99999", "notanaddr", "127.0.0.1:8O80"} {
		if _, err := runCLI(t, "serve", "--no-p2p", "--realm", "typo", "--data", dir, "--http", addr); err == nil || !strings.Contains(err.Error(), "--http "+addr) {
			t.Fatalf("--http %s: %v", addr, err)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the data directory was made: %v", err)
	}
}

// TestServeBusyP2PPort: a --p2p port in use is an error naming it, found
// before the data directory is made.
func TestServeBusyP2PPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir() + "/data"
	addr := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", l.Addr().(*net.TCPAddr).Port)
	if _, err := runCLI(t, "serve", "--realm", "busy", "--data", dir, "--http", "127.0.0.1:0", "--p2p", addr); err == nil || !strings.Contains(err.Error(), "--p2p "+addr) {
		t.Fatalf("--p2p %s: %v", addr, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the data directory was made: %v", err)
	}
	// HTTP and p2p on one port: found before anything is made too.
	l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if _, err := runCLI(t, "serve", "--realm", "busy", "--data", dir, "--http", fmt.Sprintf("127.0.0.1:%d", port), "--p2p", addr); err == nil || !strings.Contains(err.Error(), "--p2p") {
		t.Fatalf("--http and --p2p on port %d: %v", port, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the data directory was made: %v", err)
	}
}

// TestUsageErrorsAreOneLine: a mistyped flag or value is one error that
// points to the command's help, with no help printed before it.
func TestUsageErrorsAreOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--bogus"}, "(see relay serve --help)"},
		{[]string{"serve", "--sync-interval", "abc"}, "-sync-interval"},
		{[]string{"token", "issue", "--bogus"}, "(see relay token issue --help)"},
		{[]string{"--bogus"}, "(see relay --help)"},
		{[]string{"token", "issue"}, "--label is required (see relay token issue --help)"},
		{[]string{"export"}, "--output is required (see relay export --help)"},
		{[]string{"import"}, "--input is required (see relay import --help)"},
	} {
		out, err := runCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(out, "USAGE") {
			t.Errorf("%v: %v, output %q", tc.args, err, out)
		}
	}
}

// TestServePrintsP2PAddrs: a federating node prints its full p2p addresses,
// ready for another operator's `relay peer add`.
func TestServePrintsP2PAddrs(t *testing.T) {
	srv := start(t, "serve", "--in-memory", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--p2p", "/ip4/127.0.0.1/tcp/0")
	out := srv.waitOutput(t, func(s string) bool { return strings.Contains(s, "operator secret") })
	_, rest, _ := strings.Cut(out, "(peer id ")
	id, _, _ := strings.Cut(rest, ")")
	if id == "" || !strings.Contains(out, "\n  /ip4/127.0.0.1/tcp/") || !strings.Contains(out, "/p2p/"+id+"\n") {
		t.Fatalf("start output lacks the full p2p address:\n%s", out)
	}
	srv.stop(t)
}

// TestUnknownCommand: a command that does not exist is an error naming it,
// at the top and under token and peer.
func TestUnknownCommand(t *testing.T) {
	for _, args := range [][]string{{"frob"}, {"token", "frob"}, {"peer", "frob"}} {
		if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), `unknown command "frob"`) {
			t.Errorf("%v: %v", args, err)
		}
	}
	if out, err := runCLI(t, "token"); err != nil || !strings.Contains(out, "issue") {
		t.Errorf("token alone: %v %q", err, out)
	}
}

// TestStrayArgumentsRefused: a word where a command takes flags only is an
// error, before anything runs: the flags after it would otherwise be
// dropped unseen (a token without its rights, an import into ./data).
func TestStrayArgumentsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"token", "issue", "--label", "x", "typo", "--rights", "write"},
		{"export", "--data", t.TempDir(), "--output", "o.relay", "stray"},
		{"import", "--input", "x.relay", "stray", "--data", t.TempDir()},
		{"testnet", "extra", "--realms", "1"},
		{"bench", "extra", "--duration", "1s"},
		{"version", "extra"},
	} {
		if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "unexpected argument") {
			t.Errorf("%v: %v", args, err)
		}
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if out, err := runCLI(t, args...); err != nil || out != "relay "+realm.Version+"\n" {
			t.Errorf("%v: %v %q", args, err, out)
		}
	}
}

// TestCLIRefusesBadValues: values that would otherwise pass unnoticed are
// errors that name what is wrong.
func TestCLIRefusesBadValues(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--no-p2p", "--data", dir, "stray"}, `serve takes flags only, not "stray"`},
		{[]string{"serve", "--no-p2p", "--data", dir, "--session-ttl", "-1h"}, "--session-ttl"},
		{[]string{"serve", "--no-p2p", "--data", dir, "--realm", "Bad Name"}, `--realm: protocol: invalid name: realm "Bad Name"`},
		{[]string{"token", "issue", "--label", "x", "--node", "127.0.0.1:8080", "--operator-token", "s"}, `--node "127.0.0.1:8080": want the node's URL`},
	} {
		if _, err := runCLI(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestWriteRealmsSaysWhy: the realms table ends with each realm's state,
// whole enough to say what a parked event waits for.
func TestWriteRealmsSaysWhy(t *testing.T) {
	why := "corpus: message 0f3c9d2e-7b1a-4c55-9e0f-2a6b8c1d4e5f appends to conversation 5e1d2c3b-4a59-4867-8f90-a1b2c3d4e5f6"
	var b strings.Builder
	err := writeRealms(&b, realm.RealmsOut{Realms: []federation.RealmStatus{
		{Realm: "r2", Seq: 6, Highest: 6, Parked: 1, Waiting: "1 held, not shown yet; event 6, since 2026-11-30T13:49:00Z: " + why},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), why) {
		t.Fatalf("the table cuts what r2's event waits for:\n%s", b.String())
	}
}

func TestLastError(t *testing.T) {
	dial := "failed to dial: failed to dial 12D3KooWEMjk4gsGtcEpM9jKJTdrAbCdEf: all dials failed\n  * [/ip4/127.0.0.1/tcp/4001] dial tcp 127.0.0.1:4001: connect: connection refused"
	if got := lastError(dial, 60); !strings.HasSuffix(got, "connect: connection refused") || len([]rune(got)) != 60 {
		t.Errorf("a dial error: %q", got)
	}
	other := "the peer closed the connection as soon as it opened: it may not admit this realm; ask its operator"
	if got := lastError(other, 60); !strings.HasPrefix(got, "the peer closed the connection") {
		t.Errorf("another error: %q", got)
	}
	if got := lastError("short", 60); got != "short" {
		t.Errorf("a short error: %q", got)
	}
}

// TestNodeNotARelay: --node pointing at some other web server is one line
// that says so, whatever that server answers, rather than its page.
func TestNodeNotARelay(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusNotFound, http.StatusNotImplemented} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(status)
			fmt.Fprint(w, "<!DOCTYPE html>\n<html>\n<body>\n<h1>Error response</h1>\n</body>\n</html>\n")
		}))
		for _, args := range [][]string{
			{"token", "issue", "--label", "x", "--node", srv.URL, "--operator-token", "x"},
			{"peer", "list", "--node", srv.URL, "--operator-token", "x"},
		} {
			_, err := runCLI(t, args...)
			if err == nil || !strings.Contains(err.Error(), "not a relay node") || strings.Contains(err.Error(), "\n") {
				t.Errorf("%v against a web server answering %d: %v", args[:2], status, err)
			}
		}
		srv.Close()
	}
}
