package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"relay/realm"
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

// TestServeStoppedWhileStarting: a signal that comes while the node is
// still starting (a large store takes seconds to open) stops it as one
// that comes later does: the store closed, and no error, rather than the
// step it cut short failing with "context canceled".
func TestServeStoppedWhileStarting(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cfg := realm.DefaultConfig()
	cfg.DataDir = dir
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.P2PAddrs = nil
	cfg.Logger = slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal, before the store has opened
	var out bytes.Buffer
	if err := serve(ctx, cfg, &out); err != nil {
		t.Fatalf("serve stopped while starting: %v", err)
	}
	if !strings.Contains(out.String(), "stopped") {
		t.Errorf("serve did not say it stopped:\n%s", out.String())
	}
	// The store was closed: the next start opens it.
	n, err := realm.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
}
