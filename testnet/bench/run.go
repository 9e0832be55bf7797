package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"relay/realm"
)

// The phases, in their default order.
const (
	PhaseHTTP    = "http"
	PhaseMCP     = "mcp"
	PhaseCeiling = "ceiling"
)

// Options are one run of the generator. Start from DefaultOptions.
type Options struct {
	Concurrency int
	Warmup      time.Duration
	Duration    time.Duration
	Phases      []string
	// Node is a running node's base URL; empty: start one in-process.
	Node          string
	OperatorToken string // the node's operator secret, with Node
	// RateLimitOff starts the in-process node without its rate limit.
	RateLimitOff bool
	// CPUProfile, when set, receives a CPU profile of the process during the
	// measured window of ProfilePhase (default http).
	CPUProfile   io.Writer
	ProfilePhase string
	// NodeLogger is the in-process node's logger; nil: discarded.
	NodeLogger *slog.Logger
	// Progress, when set, gets a line as each step starts.
	Progress io.Writer
}

// DefaultOptions are the defaults of `relay bench`: the 32 agents,
// 10 s measured after 2 s of warmup, every phase.
func DefaultOptions() Options {
	return Options{
		Concurrency:  32,
		Warmup:       2 * time.Second,
		Duration:     10 * time.Second,
		Phases:       []string{PhaseHTTP, PhaseMCP, PhaseCeiling},
		RateLimitOff: true,
		ProfilePhase: PhaseHTTP,
	}
}

// Conditions are what the figures depend on besides the code.
type Conditions struct {
	Date         time.Time `json:"date"`
	GOMAXPROCS   int       `json:"gomaxprocs"`
	NumCPU       int       `json:"num_cpu"`
	CPUModel     string    `json:"cpu_model"`
	LoadAverage  string    `json:"load_average,omitempty"` // /proc/loadavg before the run
	GoVersion    string    `json:"go_version"`
	OS           string    `json:"os"`
	Arch         string    `json:"arch"`
	RelayVersion string    `json:"relay_version"`
	Concurrency  int       `json:"concurrency"`
	WarmupS      float64   `json:"warmup_s"`
	DurationS    float64   `json:"duration_s"`
	Node         string    `json:"node"` // "in-process" or the URL
	NodeVersion  string    `json:"node_version,omitempty"`
	// NodeStore is the store settings the node reports in force
	// (sync_writes, in_memory, …): the proof the posts were durable.
	NodeStore map[string]any `json:"node_store,omitempty"`
	// RateLimit is the in-process node's limit per token and minute (0:
	// off); -1 when the node is not ours and its limit unknown.
	RateLimit int `json:"rate_limit_per_min"`
}

// Report is everything one run measured.
type Report struct {
	Conditions Conditions    `json:"conditions"`
	Phases     []PhaseResult `json:"phases"`
}

// Phase returns the result of the named phase, or nil.
func (r *Report) Phase(name string) *PhaseResult {
	for i := range r.Phases {
		if r.Phases[i].Phase == name {
			return &r.Phases[i]
		}
	}
	return nil
}

// Run sets up the agents and runs the phases in order.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Concurrency < 1 {
		return nil, errors.New("concurrency: want at least 1")
	}
	if opts.Duration <= 0 || opts.Warmup < 0 {
		return nil, errors.New("want a positive duration and a warmup of zero or more")
	}
	if len(opts.Phases) == 0 {
		return nil, errors.New("no phase to run")
	}
	for _, p := range opts.Phases {
		if p != PhaseHTTP && p != PhaseMCP && p != PhaseCeiling {
			return nil, fmt.Errorf("unknown phase %q: want http, mcp or ceiling", p)
		}
	}
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, format+"\n", args...)
		}
	}
	rep := &Report{Conditions: conditions(opts)}
	client := NewClient(opts.Concurrency)

	base := opts.Node
	lastNodePhase := -1
	for i, p := range opts.Phases {
		if p != PhaseCeiling {
			lastNodePhase = i
		}
	}
	// stopNode stops an in-process node as soon as no phase needs it, so
	// that its background work (compactions) does not run under a later
	// ceiling phase.
	stopNode := func() {}
	defer func() { stopNode() }()
	var agents []Agent
	if lastNodePhase >= 0 {
		if base == "" {
			progress("starting an in-process node (durable store in a temporary directory)")
			n, err := StartNode(NodeOptions{RateLimitOff: opts.RateLimitOff, Logger: opts.NodeLogger})
			if err != nil {
				return nil, fmt.Errorf("in-process node: %w", err)
			}
			stopNode = func() { n.Stop(); stopNode = func() {} }
			base, opts.OperatorToken = n.URL, n.OperatorToken
			rep.Conditions.RateLimit = n.RateLimit
		}
		if err := describeNode(ctx, client, base, &rep.Conditions); err != nil {
			return nil, fmt.Errorf("node %s: %w", base, err)
		}
		progress("issuing %d agent tokens and opening a thread each on %s", opts.Concurrency, base)
		var err error
		agents, err = SetupAgents(ctx, client, base, opts.OperatorToken, "bench "+time.Now().UTC().Format("20060102T150405"), opts.Concurrency)
		client.CloseIdleConnections()
		if err != nil {
			return nil, err
		}
	} else {
		// The ceiling needs no node; its agents only need distinct names.
		rep.Conditions.Node = "none (ceiling only)"
		agents = make([]Agent, opts.Concurrency)
		for i := range agents {
			agents[i] = Agent{Token: "ceiling", Thread: fmt.Sprintf("th_%d", i+1)}
		}
	}

	for i, phase := range opts.Phases {
		if i > lastNodePhase {
			stopNode()
		}
		// Every phase gets a fresh client with the same settings, so no
		// phase inherits another's connections.
		client := NewClient(opts.Concurrency)
		cfg := LoopConfig{Concurrency: opts.Concurrency, Warmup: opts.Warmup, Duration: opts.Duration}
		var post Poster
		target := base
		var cleanup func() error
		switch phase {
		case PhaseHTTP:
			post = HTTPPoster(client, base, agents)
		case PhaseMCP:
			if err := MCPInitialize(ctx, client, base, agents[0].Token); err != nil {
				return nil, fmt.Errorf("mcp initialize: %w", err)
			}
			post = MCPPoster(client, base, agents)
			target = mcpEndpoint(base)
		case PhaseCeiling:
			srv, err := StartTrivial()
			if err != nil {
				return nil, fmt.Errorf("trivial handler: %w", err)
			}
			cleanup = srv.Close
			post = HTTPPoster(client, srv.URL, agents)
			target = srv.URL + " (trivial JSON handler)"
		}
		var perr error
		profiling := false
		if opts.CPUProfile != nil && phase == opts.ProfilePhase {
			cfg.OnMeasure = func() {
				if perr = pprof.StartCPUProfile(opts.CPUProfile); perr == nil {
					profiling = true
				}
			}
		}
		progress("phase %s: %d agents, %s warmup, %s measured", phase, opts.Concurrency, opts.Warmup, opts.Duration)
		res := Loop(ctx, cfg, post)
		res.Phase, res.Target = phase, target
		if profiling {
			pprof.StopCPUProfile()
		}
		client.CloseIdleConnections()
		if cleanup != nil {
			perr = errors.Join(perr, cleanup())
		}
		if perr != nil {
			return nil, fmt.Errorf("phase %s: %w", phase, perr)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rep.Phases = append(rep.Phases, res)
	}
	if c := rep.Phase(PhaseCeiling); c != nil && c.Rate > 0 {
		for i := range rep.Phases {
			if rep.Phases[i].Phase != PhaseCeiling {
				rep.Phases[i].OfCeiling = rep.Phases[i].Rate / c.Rate
			}
		}
	}
	return rep, nil
}

func conditions(opts Options) Conditions {
	c := Conditions{
		Date:         time.Now().UTC().Truncate(time.Second),
		GOMAXPROCS:   runtime.GOMAXPROCS(0),
		NumCPU:       runtime.NumCPU(),
		CPUModel:     cpuModel(),
		LoadAverage:  loadAverage(),
		GoVersion:    runtime.Version(),
		OS:           runtime.GOOS,
		Arch:         runtime.GOARCH,
		RelayVersion: realm.Version,
		Concurrency:  opts.Concurrency,
		WarmupS:      opts.Warmup.Seconds(),
		DurationS:    opts.Duration.Seconds(),
		Node:         "in-process",
		RateLimit:    -1,
	}
	if opts.Node != "" {
		c.Node = opts.Node
	}
	return c
}

// describeNode records the node's version and store settings from its
// health answer.
func describeNode(ctx context.Context, client *http.Client, base string, c *Conditions) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/api/v1/health", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h struct {
		Status  string         `json:"status"`
		Version string         `json:"version"`
		Pragmas map[string]any `json:"pragmas"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return fmt.Errorf("health: %w", err)
	}
	if h.Status != "ok" {
		return fmt.Errorf("health: status %q", h.Status)
	}
	c.NodeVersion, c.NodeStore = h.Version, h.Pragmas
	return nil
}

// cpuModel is the first "model name" of /proc/cpuinfo, else the
// architecture.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// loadAverage is the 1, 5 and 15 minute load of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// WriteTable prints the report for people.
func (r *Report) WriteTable(w io.Writer) error {
	c := r.Conditions
	fmt.Fprintf(w, "relay bench %s: %d agents, %gs measured after %gs warmup\n", c.RelayVersion, c.Concurrency, c.DurationS, c.WarmupS)
	fmt.Fprintf(w, "machine: %s, %d CPUs, GOMAXPROCS %d, %s %s/%s, load %s\n", c.CPUModel, c.NumCPU, c.GOMAXPROCS, c.GoVersion, c.OS, c.Arch, c.LoadAverage)
	node := c.Node
	if c.NodeVersion != "" {
		node += " (relay " + c.NodeVersion + ")"
	}
	switch {
	case c.RateLimit == 0:
		node += ", rate limit off"
	case c.RateLimit > 0:
		node += fmt.Sprintf(", rate limit %d/min per token", c.RateLimit)
	}
	if c.NodeStore != nil {
		node += fmt.Sprintf(", store sync_writes=%v in_memory=%v", c.NodeStore["sync_writes"], c.NodeStore["in_memory"])
	}
	fmt.Fprintf(w, "node: %s\n\n", node)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tposts/s\tok\terrors\tp50 ms\tp90 ms\tp99 ms\tmax ms\tof ceiling\tcores: this/other\t")
	for _, p := range r.Phases {
		of, cpu := "-", "-"
		if p.OfCeiling > 0 {
			of = fmt.Sprintf("%.1f %%", 100*p.OfCeiling)
		}
		if p.CPU != nil {
			cpu = fmt.Sprintf("%.2f/%.2f", p.CPU.ProcessCores, p.CPU.OtherCores)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t\n", p.Phase, p.Rate, p.OK, p.Errors,
			p.Latency.P50, p.Latency.P90, p.Latency.P99, p.Latency.Max, of, cpu)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range r.Phases {
		for kind, n := range p.ErrorKinds {
			fmt.Fprintf(w, "%s errors: %d × %s, e.g. %s\n", p.Phase, n, kind, p.ErrorSamples[kind])
		}
	}
	return nil
}
