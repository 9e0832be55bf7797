package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type percentileTest struct {
	n    int // samples 1..n ms
	p    float64
	want time.Duration
}

var percentileTests = []percentileTest{
	{1, 0.50, 1 * time.Millisecond},
	{1, 0.99, 1 * time.Millisecond},
	{100, 0.50, 50 * time.Millisecond},
	{100, 0.90, 90 * time.Millisecond},
	{100, 0.99, 99 * time.Millisecond},
	{100, 1.00, 100 * time.Millisecond},
	{1000, 0.99, 990 * time.Millisecond},
	{3, 0.50, 2 * time.Millisecond},
}

func TestPercentile(t *testing.T) {
	for _, tc := range percentileTests {
		s := make([]time.Duration, tc.n)
		for i := range s {
			s[i] = time.Duration(i+1) * time.Millisecond
		}
		if got := percentile(s, tc.p); got != tc.want {
			t.Errorf("n=%d p=%v: got %v, want %v", tc.n, tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("empty: got %v", got)
	}
}

func TestSummarizeMerges(t *testing.T) {
	a, b := newRecorder(0), newRecorder(0)
	for i := 1; i <= 50; i++ {
		a.add(time.Duration(2*i) * time.Millisecond)   // even
		b.add(time.Duration(2*i-1) * time.Millisecond) // odd
	}
	l := summarize([]*recorder{a, b})
	if l.Count != 100 || l.P50 != 50 || l.P99 != 99 || l.Max != 100 || l.Mean != 50.5 {
		t.Fatalf("got %+v", l)
	}
}

// TestLoopCounts drives a poster that fails every third request and checks
// that the warmup is left out, failures are counted by kind and only
// successes are timed.
func TestLoopCounts(t *testing.T) {
	const warmup = 50 * time.Millisecond
	var calls, inWarmup atomic.Int64
	var opened atomic.Bool
	start := time.Now()
	post := func(ctx context.Context, agent, seq int) error {
		calls.Add(1)
		if time.Since(start) < warmup-5*time.Millisecond {
			inWarmup.Add(1) // surely started before the window
		}
		time.Sleep(time.Millisecond)
		switch seq % 3 {
		case 1:
			return &Failure{Kind: "HTTP 429 rate_limited", Detail: "slow down"}
		case 2:
			return errors.New("connection reset")
		}
		return nil
	}
	res := Loop(context.Background(), LoopConfig{Concurrency: 4, Warmup: warmup, Duration: 200 * time.Millisecond,
		OnMeasure: func() { opened.Store(true) }}, post)
	if !opened.Load() {
		t.Fatal("OnMeasure not called")
	}
	if res.OK == 0 || res.Errors == 0 || inWarmup.Load() == 0 {
		t.Fatalf("got %+v after %d warmup calls", res, inWarmup.Load())
	}
	if total := res.OK + res.Errors; total > calls.Load()-inWarmup.Load() {
		t.Errorf("counted %d of %d calls, %d of them in the warmup: the warmup was counted", total, calls.Load(), inWarmup.Load())
	}
	if res.ErrorKinds["HTTP 429 rate_limited"] == 0 || res.ErrorKinds["transport"] == 0 || len(res.ErrorKinds) != 2 {
		t.Errorf("error kinds %v", res.ErrorKinds)
	}
	if res.ErrorSamples["transport"] != "connection reset" {
		t.Errorf("samples %v", res.ErrorSamples)
	}
	if res.Latency.Count != int(res.OK) || res.Latency.P50 < 1 {
		t.Errorf("latency %+v for %d successes", res.Latency, res.OK)
	}
	if res.Seconds < 0.2 || res.Rate <= 0 {
		t.Errorf("window %.3fs rate %.0f", res.Seconds, res.Rate)
	}
}

// TestBodiesAreJSON checks the hand-built request bodies.
func TestBodiesAreJSON(t *testing.T) {
	var note struct{ Kind, Body string }
	if err := json.Unmarshal(noteBody(3, 1234), &note); err != nil || note.Kind != "note" || !strings.Contains(note.Body, "1234") {
		t.Fatalf("note %s: %+v %v", noteBody(3, 1234), note, err)
	}
	bodies := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		buf.ReadFrom(r.Body)
		bodies <- buf.Bytes()
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{}}}`))
	}))
	defer srv.Close()
	post := MCPPoster(srv.Client(), srv.URL, []Agent{{Token: "t", Thread: "th_7"}})
	if err := post(context.Background(), 0, 0); err != nil {
		t.Fatal(err)
	}
	got := <-bodies
	var call struct {
		JSONRPC string
		Method  string
		Params  struct {
			Name      string
			Arguments map[string]string
		}
	}
	if err := json.Unmarshal(got, &call); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if call.Method != "tools/call" || call.Params.Name != postTool || call.Params.Arguments["id"] != "th_7" || call.Params.Arguments["kind"] != "note" {
		t.Fatalf("%s", got)
	}
}

func TestTrivialHandler(t *testing.T) {
	h := TrivialHandler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/threads/th_1/messages", bytes.NewReader(noteBody(0, 0))))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"ok":true`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{")))
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("bad JSON: %d", rec.Code)
	}
}

// TestRunSmoke runs every phase briefly against an in-process node with a
// durable store: the real thing, small.
func TestRunSmoke(t *testing.T) {
	opts := DefaultOptions()
	opts.Phases = []string{GroupParley, PhaseCeiling}
	opts.Concurrency = 4
	// Long enough that a loaded machine still completes posts in the
	// window: at a load of 9 on two cores, one second once saw none.
	opts.Warmup = 500 * time.Millisecond
	opts.Duration = 2 * time.Second
	var prof bytes.Buffer
	opts.CPUProfile = &prof
	rep, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Phases) != 3 {
		t.Fatalf("phases %+v", rep.Phases)
	}
	for _, p := range rep.Phases {
		if p.OK == 0 || p.Errors != 0 {
			t.Errorf("%s: %d ok, %d errors %v %v", p.Phase, p.OK, p.Errors, p.ErrorKinds, p.ErrorSamples)
		}
		if runtime.GOOS == "linux" && (p.CPU == nil || p.CPU.ProcessCores <= 0) {
			t.Errorf("%s: CPU use not measured: %+v", p.Phase, p.CPU)
		}
		if p.Phase != PhaseCeiling && p.OfCeiling <= 0 {
			t.Errorf("%s: no ratio to the ceiling", p.Phase)
		}
	}
	c := rep.Conditions
	if c.RateLimit != 0 || c.NodeStore["sync_writes"] != true || c.NodeStore["in_memory"] != false || c.GOMAXPROCS < 1 || c.CPUModel == "" {
		t.Errorf("conditions %+v", c)
	}
	if prof.Len() == 0 {
		t.Error("no CPU profile")
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil || !strings.Contains(table.String(), "ceiling") {
		t.Errorf("table %q %v", table.String(), err)
	}
	t.Logf("\n%s", table.String())
}
