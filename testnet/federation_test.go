package testnet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"relay/protocol"
)

// call makes one API call with the operator's credential and decodes the
// answer into out (when not nil); it returns the status.
func call(t testing.TB, r *Realm, method, path string, in, out any) int {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, r.URL+path, body)
	req.Header.Set("Authorization", "Bearer "+r.OperatorToken)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// openThreads opens n threads at realm r, each with a message.
func openThreads(t testing.TB, r *Realm, n int) {
	t.Helper()
	for i := range n {
		var out struct {
			Thread struct{ ID string } `json:"thread"`
		}
		env := map[string]any{"kind": "propose", "body": fmt.Sprintf("%s says %d", r.Name, i)}
		if st := call(t, r, "POST", "/api/v1/boards/lobby/threads", env, &out); st != http.StatusCreated && st != http.StatusOK {
			t.Fatalf("%s: open thread: %d %+v", r.Name, st, out)
		}
	}
}

// checkChains checks that every realm of the net holds every realm's chain
// dense and linked, from seq 1 to the head.
func checkChains(t testing.TB, net *Net) {
	t.Helper()
	for _, r := range net.Realms {
		heads, err := r.Node.Store().Heads()
		if err != nil {
			t.Fatal(err)
		}
		for realm, h := range heads {
			evs, err := r.Node.Store().Range(realm, 1, int(h.Seq))
			if err != nil {
				t.Fatal(err)
			}
			if uint64(len(evs)) != h.Seq {
				t.Fatalf("%s holds %d events of %s, head %d", r.Name, len(evs), realm, h.Seq)
			}
			for i, se := range evs {
				if se.Event.Seq != uint64(i+1) || (i > 0 && !se.Event.Prev.Cid.Equals(evs[i-1].CID)) {
					t.Fatalf("%s: chain of %s broken at %d", r.Name, realm, i+1)
				}
			}
		}
	}
}

func threadCount(t testing.TB, r *Realm) int {
	var out struct {
		Threads []struct {
			ID    string `json:"id"`
			Realm string `json:"realm"`
		} `json:"threads"`
	}
	call(t, r, "GET", "/api/v1/threads?limit=200", nil, &out)
	return len(out.Threads)
}

func TestFederationTopologies(t *testing.T) {
	for _, tc := range []struct {
		name string
		topo Topology
	}{{"mesh", Mesh}, {"line", Line}} {
		t.Run(tc.name, func(t *testing.T) {
			net, err := Start(Config{Realms: 5, Topology: tc.topo})
			if err != nil {
				t.Fatal(err)
			}
			defer net.Close()
			if err := net.WaitConverged(20 * time.Second); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for _, r := range net.Realms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					openThreads(t, r, 10)
				}()
			}
			wg.Wait()
			if err := net.WaitConverged(30 * time.Second); err != nil {
				t.Fatal(err)
			}
			checkChains(t, net)
			for _, r := range net.Realms {
				heads, _ := r.Node.Store().Heads()
				if len(heads) != 5 {
					t.Fatalf("%s holds %d realms", r.Name, len(heads))
				}
				if n := threadCount(t, r); n != 50 {
					t.Fatalf("%s lists %d threads, want 50", r.Name, n)
				}
			}
			_ = protocol.Realm("")
		})
	}
}

// TestPartitionHeals cuts {r1,r2} from {r3,r4,r5}, writes on both sides,
// heals, and finds every realm with the same heads, no gap, no duplicate.
func TestPartitionHeals(t *testing.T) {
	net, err := Start(Config{Realms: 5, Topology: Mesh})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	net.Partition([]int{0, 1}, []int{2, 3, 4})
	var wg sync.WaitGroup
	for _, r := range net.Realms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			openThreads(t, r, 5)
		}()
	}
	wg.Wait()
	// Each side converges on its own; the other side's news has not crossed.
	heads, _ := net.Realms[0].Node.Store().Heads()
	if heads["r3"].Seq > 1 {
		t.Fatalf("r1 holds %d events of r3 across the cut", heads["r3"].Seq)
	}
	net.HealAll()
	if err := net.WaitConverged(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	checkChains(t, net)
	for _, r := range net.Realms {
		if n := threadCount(t, r); n != 25 {
			t.Fatalf("%s lists %d threads, want 25", r.Name, n)
		}
	}
}

// TestRestartAndLateJoin stops a realm while the others write, restarts it
// to find it caught up, then adds a realm that syncs the whole history by
// catch-up alone.
func TestRestartAndLateJoin(t *testing.T) {
	net, err := Start(Config{Realms: 3, Topology: Mesh})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	openThreads(t, net.Realms[0], 5)
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := net.Realms[2].Stop(); err != nil {
		t.Fatal(err)
	}
	openThreads(t, net.Realms[0], 20)
	openThreads(t, net.Realms[1], 20)
	if err := net.Restart(2); err != nil {
		t.Fatal(err)
	}
	if err := net.WaitConverged(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n := threadCount(t, net.Realms[2]); n != 45 {
		t.Fatalf("restarted realm lists %d threads, want 45", n)
	}

	late, err := net.AddRealm()
	if err != nil {
		t.Fatal(err)
	}
	if err := net.Link(0, 3); err != nil {
		t.Fatal(err)
	}
	if err := net.WaitConverged(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	checkChains(t, net)
	if n := threadCount(t, late); n != 45 {
		t.Fatalf("late realm lists %d threads, want 45", n)
	}
	c := late.Node.Federation().Counters()
	if c.Received["catchup"] == 0 {
		t.Fatalf("late realm caught up without catch-up: %+v", c)
	}
}
