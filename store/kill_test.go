package store

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
)

const killEnv = "RELAY_STORE_KILL_DIR"

// killSegSize is the child's segment size.
const killSegSize = 128 << 10

// anyPrepared reports whether the log in dir holds a segment of exactly
// size bytes: one made from a prepared file, not appended to.
func anyPrepared(t *testing.T, dir string, size int64) bool {
	t.Helper()
	for _, name := range segmentFiles(t, dir) {
		fi, err := os.Stat(filepath.Join(dir, walDirName, name))
		if err == nil && fi.Size() == size {
			return true
		}
	}
	return false
}

// TestKillChild is the child of TestKill9: it writes as fast as 32 writers
// can and prints each CID once Submit has acknowledged it, until killed.
func TestKillChild(t *testing.T) {
	dir := os.Getenv(killEnv)
	if dir == "" {
		t.Skip("run as a child by TestKill9")
	}
	cfg := testConfig(dir)
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	s, err := Open(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s.Register(counter{})
	// Small segments, so that the kill finds the log moving on to
	// prepared segments, and checkpoints retiring the old ones.
	s.wal.mu.Lock()
	s.wal.segSize = killSegSize
	s.wal.mu.Unlock()
	var mu sync.Mutex
	types := []string{"t.a", "t.b", "t.c"}
	for w := range 32 {
		go func() {
			for i := 0; ; i++ {
				se, err := s.Submit(context.Background(), draftFn(types[(w+i)%3], fmt.Sprint(w, "/", i)))
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(3)
				}
				mu.Lock()
				fmt.Fprintln(os.Stdout, se.CID) // one write(2) per line
				mu.Unlock()
			}
		}()
	}
	time.Sleep(30 * time.Second) // the parent kills us long before
	os.Exit(4)
}

// TestKill9 kills a writing process with SIGKILL and checks that everything
// it acknowledged survived, and that the log and the projection agree.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), killEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1<<16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	var acked []cid.Cid
	bad := 0
	take := func(l string) {
		c, err := cid.Decode(l)
		if err != nil {
			bad++
			return
		}
		acked = append(acked, c)
	}
	// The kill comes after 2,000 acks once the log has moved on to a
	// prepared segment, or after 20 s: on a loaded machine the child may
	// take a while to get there.
	start := time.Now()
	timeout := time.After(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	prepared := false
wait:
	for len(acked) < 2000 || !prepared {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("child exited early: %s", stderr.String())
			}
			take(l)
		case <-tick.C:
			// Once the child acks, its log's directory exists.
			prepared = prepared || len(acked) > 0 && anyPrepared(t, dir, killSegSize)
		case <-timeout:
			break wait
		}
	}
	beforeKill := len(acked)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		take(l)
	}
	werr := cmd.Wait()
	t.Logf("child: %d acks in %v, %d more read after SIGKILL (%v); %d unparsable lines",
		beforeKill, time.Since(start).Round(time.Millisecond), len(acked)-beforeKill, werr, bad)
	if len(acked) == 0 {
		t.Fatalf("no acks: %s", stderr.String())
	}
	if !prepared { // seen while the child ran: a segment it fills grows past the size
		t.Error("the child's log never moved on to a prepared segment")
	}

	s := openTest(t, testConfig(dir), counter{})
	for _, c := range acked {
		if _, err := s.EventByCID(c); err != nil {
			t.Fatalf("acked %s lost: %v", c, err)
		}
	}
	evs := checkChain(t, s, localRealm, pub(testKey(1)))
	n := uint64(len(evs))
	if s.Sequence() != n {
		t.Fatalf("Sequence %d, %d events", s.Sequence(), n)
	}
	all, err := s.Since(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, se := range all {
		if se.Sequence != uint64(i+1) {
			t.Fatalf("Sequence %d at position %d", se.Sequence, i+1)
		}
	}
	c := counts(t, s)
	if c["*"] != n || c["t.a"]+c["t.b"]+c["t.c"] != n {
		t.Fatalf("projection %v, %d events", c, n)
	}
	if st := s.State(); st.Status != "ok" || st.Events != n {
		t.Fatalf("state %+v", st)
	}
	se, err := s.Submit(context.Background(), draftFn("t.a", "after"))
	if err != nil || se.Event.Seq != n+1 {
		t.Fatalf("Submit after recovery: %v", err)
	}
	t.Logf("recovered %d events (%d acked), chain and projection consistent", n, len(acked))
}
