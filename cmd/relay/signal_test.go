package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const serveChildEnv = "RELAY_TEST_SERVE_CHILD"

// TestServeChild is the child of TestServeSecondSignal: `relay serve` as
// the command line runs it, signals included.
func TestServeChild(t *testing.T) {
	dir := os.Getenv(serveChildEnv)
	if dir == "" {
		t.Skip("run as a child by TestServeSecondSignal")
	}
	if err := run([]string{"relay", "serve", "--no-p2p", "--data", dir, "--http", "127.0.0.1:0"}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// TestServeSecondSignal: the first SIGTERM starts a graceful shutdown; when
// that cannot finish (the data directory deleted: Badger retries writing
// its memtable out), a second SIGTERM ends the process at once.
func TestServeSecondSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeChild$", "-test.count=1", "-test.timeout=120s")
	cmd.Env = append(os.Environ(), serveChildEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), " serving at "); ok {
				url, _, _ := strings.Cut(rest, " ")
				urls <- url
			}
		}
		exited <- cmd.Wait()
	}()
	var url string
	select {
	case url = <-urls:
	case <-time.After(30 * time.Second):
		t.Fatal("the node did not start")
	}
	// A write: the memtable then holds what Badger cannot write out.
	mustCLI(t, "token", "issue", "--label", "x", "--node", url, "--operator-token-file", filepath.Join(dir, "operator.token"))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the deferred kill
		t.Fatalf("the node exited on the first signal (%v) with a store it cannot close", err)
	case <-time.After(2 * time.Second): // still closing, as it should
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Fatalf("after the second signal: %v, want death by SIGTERM", err)
		}
		exited <- err // for the deferred kill
	case <-time.After(10 * time.Second):
		t.Fatal("the second signal did not end the node")
	}
}
