package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// serveArgsEnv carries TestServeChild's `relay serve` arguments, as JSON.
const serveArgsEnv = "RELAY_TEST_SERVE_ARGS"

// TestServeChild is `relay serve` with the arguments startServe gives it,
// in a process of its own, signals included: SIGKILL ends it as it would
// the real one.
func TestServeChild(t *testing.T) {
	raw := os.Getenv(serveArgsEnv)
	if raw == "" {
		t.Skip("run as a child by startServe")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		fmt.Fprintln(os.Stderr, serveArgsEnv+":", err)
		os.Exit(2)
	}
	if err := run(append([]string{"relay", "serve"}, args...)); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// child is one start of `relay serve` in a process of its own.
type child struct {
	url  string // HTTP
	addr string // p2p on loopback TCP, with /p2p/<peer id>, when it listens there
	cmd  *exec.Cmd
	done chan struct{} // closed once it exited, err then its exit
	err  error
}

// startServe starts `relay serve` with args (and env added to this
// process's) in a child process, its output copied to log, and returns once
// it has printed its start; the test's end kills it.
func startServe(t *testing.T, args, env []string, log io.Writer) *child {
	t.Helper()
	if log == nil {
		log = io.Discard
	}
	raw, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeChild$", "-test.count=1", "-test.timeout=300s")
	cmd.Env = append(append(os.Environ(), serveArgsEnv+"="+string(raw)), env...)
	cmd.Stderr = log
	dieWithParent(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.done
	})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		started := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(log, line)
			if started {
				continue
			}
			if _, rest, ok := strings.Cut(line, " serving at "); ok {
				c.url, _, _ = strings.Cut(rest, " ")
			}
			if a := strings.TrimSpace(line); strings.HasPrefix(a, "/ip4/127.0.0.1/tcp/") && strings.Contains(a, "/p2p/") {
				c.addr = a
			}
			// The last line of a start: the addresses are all out.
			if strings.HasPrefix(line, "operator secret") {
				started = true
				close(ready)
			}
		}
		c.err = cmd.Wait()
		close(c.done)
	}()
	select {
	case <-ready:
	case <-c.done:
		t.Fatalf("relay serve %v exited on start: %v", args, c.err)
	case <-time.After(30 * time.Second):
		t.Fatalf("relay serve %v did not start", args)
	}
	if c.url == "" {
		t.Fatalf("relay serve %v printed no URL", args)
	}
	return c
}
