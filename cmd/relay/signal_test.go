package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestServeSecondSignal: the first SIGTERM starts a graceful shutdown; when
// that cannot finish (the data directory deleted: Badger retries writing
// its memtable out), a second SIGTERM ends the process at once.
func TestServeSecondSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := filepath.Join(t.TempDir(), "data")
	c := startServe(t, []string{"--no-p2p", "--data", dir, "--http", "127.0.0.1:0"}, nil, nil)
	// A write: the memtable then holds what Badger cannot write out.
	mustCLI(t, "token", "issue", "--label", "x", "--node", c.url, "--operator-token-file", filepath.Join(dir, "operator.token"))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
		t.Fatalf("the node exited on the first signal (%v) with a store it cannot close", c.err)
	case <-time.After(2 * time.Second): // still closing, as it should
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
		var ee *exec.ExitError
		if !errors.As(c.err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Fatalf("after the second signal: %v, want death by SIGTERM", c.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second signal did not end the node")
	}
}
