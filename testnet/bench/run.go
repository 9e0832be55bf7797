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
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"relay/realm"
)

// The phases. http and mcp post to the forum; appends, search, sync and
// fanout drive the corpus; ceiling is HTTP alone.
const (
	PhaseHTTP    = "http"
	PhaseMCP     = "mcp"
	PhaseAppends = "appends"
	PhaseSearch  = "search"
	PhaseSync    = "sync"
	PhaseFanout  = "fanout"
	PhaseCeiling = "ceiling"
)

// Groups of phases, accepted wherever phases are.
const (
	GroupParley = "parley" // http, mcp
	GroupCorpus = "corpus" // search, sync, appends, fanout
	GroupAll    = "all"
)

// AllPhases is every phase in its default order: the corpus's search and
// sync first, so that they run over a corpus of exactly the size asked
// for (the appends phase then adds to it), and the ceiling last, once the
// node is stopped.
var AllPhases = []string{PhaseHTTP, PhaseMCP, PhaseSearch, PhaseSync, PhaseAppends, PhaseFanout, PhaseCeiling}

// ExpandPhases replaces groups by their phases and checks every name.
func ExpandPhases(phases []string) ([]string, error) {
	var out []string
	for _, p := range phases {
		switch p {
		case GroupAll:
			out = append(out, AllPhases...)
		case GroupParley:
			out = append(out, PhaseHTTP, PhaseMCP)
		case GroupCorpus:
			out = append(out, PhaseSearch, PhaseSync, PhaseAppends, PhaseFanout)
		case PhaseHTTP, PhaseMCP, PhaseAppends, PhaseSearch, PhaseSync, PhaseFanout, PhaseCeiling:
			out = append(out, p)
		default:
			return nil, fmt.Errorf("unknown phase %q: want %s, or a group: parley, corpus, all", p, strings.Join(AllPhases, ", "))
		}
	}
	return out, nil
}

func isCorpusPhase(p string) bool {
	return p == PhaseAppends || p == PhaseSearch || p == PhaseSync || p == PhaseFanout
}

// Options are one run of the generator. Start from DefaultOptions.
type Options struct {
	Concurrency int
	Warmup      time.Duration
	Duration    time.Duration
	Phases      []string
	// Corpus sizes the corpus phases.
	Corpus CorpusOptions
	// Node is a running node's base URL; empty: start one in-process.
	Node string
	// NodeDir keeps the in-process node's store in a directory that
	// outlives the run, so a later run finds the corpus loaded; empty: a
	// temporary directory, removed.
	NodeDir string
	// OperatorToken is the node's operator secret, with Node; the forum
	// phases need it to issue tokens, the corpus phases do not.
	OperatorToken string
	// RateLimitOff starts the in-process node without its rate limit.
	RateLimitOff bool
	// CPUProfile, when set, receives a CPU profile of the process during the
	// measured window of ProfilePhase (default http); for a phase of
	// several runs, the first run's.
	CPUProfile   io.Writer
	ProfilePhase string
	// NodeLogger is the in-process node's logger; nil: discarded.
	NodeLogger *slog.Logger
	// Progress, when set, gets a line as each step starts.
	Progress io.Writer
}

// DefaultOptions are the defaults of `relay bench`: the 32 agents,
// 10 s measured after 2 s of warmup, every phase, the corpus sizes of
// DefaultCorpusOptions.
func DefaultOptions() Options {
	return Options{
		Concurrency:  32,
		Warmup:       2 * time.Second,
		Duration:     10 * time.Second,
		Phases:       slices.Clone(AllPhases),
		Corpus:       DefaultCorpusOptions(),
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

// Report is everything one run measured: the forum's phases and the
// ceiling in Phases, the corpus's in Corpus.
type Report struct {
	Conditions Conditions    `json:"conditions"`
	Phases     []PhaseResult `json:"phases"`
	Corpus     *CorpusReport `json:"corpus,omitempty"`
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
	phases, err := ExpandPhases(opts.Phases)
	if err != nil {
		return nil, err
	}
	if len(phases) == 0 {
		return nil, errors.New("no phase to run")
	}
	opts.Phases = phases
	forum, corpus := false, false
	for _, p := range phases {
		forum = forum || p == PhaseHTTP || p == PhaseMCP
		corpus = corpus || isCorpusPhase(p)
	}
	if corpus {
		if err := opts.Corpus.check(); err != nil {
			return nil, err
		}
	}
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, format+"\n", args...)
		}
	}
	rep := &Report{Conditions: conditions(opts)}
	client := NewClient(opts.Concurrency)
	prof := &profiler{w: opts.CPUProfile, phase: opts.ProfilePhase}
	defer prof.stop()

	base := opts.Node
	lastNodePhase := -1
	for i, p := range phases {
		if p != PhaseCeiling {
			lastNodePhase = i
		}
	}
	// stopNode stops an in-process node as soon as no phase needs it, so
	// that its background work (compactions) does not run under a later
	// ceiling phase.
	stopNode := func() {}
	defer func() { stopNode() }()
	if lastNodePhase >= 0 {
		if base == "" {
			where := "a temporary directory"
			if opts.NodeDir != "" {
				where = opts.NodeDir
			}
			progress("starting an in-process node (durable store in %s)", where)
			n, err := StartNode(NodeOptions{Dir: opts.NodeDir, RateLimitOff: opts.RateLimitOff, Logger: opts.NodeLogger})
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
	} else {
		rep.Conditions.Node = "none (ceiling only)"
	}
	var agents []Agent
	if forum {
		if opts.OperatorToken == "" {
			return nil, errors.New("the forum phases (http, mcp) need the node's operator secret to issue tokens")
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
		agents = make([]Agent, opts.Concurrency)
		for i := range agents {
			agents[i] = Agent{Token: "ceiling", Thread: fmt.Sprintf("th_%d", i+1)}
		}
	}
	var cb *corpusBench
	if corpus {
		cb = newCorpusBench(opts, base, prof, progress)
		rep.Corpus = cb.rep
	}

	for i, phase := range phases {
		if i > lastNodePhase {
			stopNode()
		}
		var err error
		switch phase {
		case PhaseAppends:
			err = cb.appends(ctx)
		case PhaseSearch:
			err = cb.search(ctx)
		case PhaseSync:
			err = cb.sync(ctx)
		case PhaseFanout:
			err = cb.fanout(ctx)
		default:
			var res PhaseResult
			res, err = runLoopPhase(ctx, opts, phase, base, agents, prof, progress)
			if err == nil {
				rep.Phases = append(rep.Phases, res)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("phase %s: %w", phase, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if err := prof.err; err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
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

// runLoopPhase runs one of the forum's phases or the ceiling.
func runLoopPhase(ctx context.Context, opts Options, phase, base string, agents []Agent, prof *profiler, progress func(string, ...any)) (PhaseResult, error) {
	// Every phase gets a fresh client with the same settings, so no phase
	// inherits another's connections.
	client := NewClient(opts.Concurrency)
	defer client.CloseIdleConnections()
	cfg := LoopConfig{Concurrency: opts.Concurrency, Warmup: opts.Warmup, Duration: opts.Duration}
	var post Poster
	target := base
	switch phase {
	case PhaseHTTP:
		post = HTTPPoster(client, base, agents)
	case PhaseMCP:
		if err := MCPInitialize(ctx, client, base, agents[0].Token); err != nil {
			return PhaseResult{}, fmt.Errorf("mcp initialize: %w", err)
		}
		post = MCPPoster(client, base, agents)
		target = mcpEndpoint(base)
	case PhaseCeiling:
		srv, err := StartTrivial()
		if err != nil {
			return PhaseResult{}, fmt.Errorf("trivial handler: %w", err)
		}
		defer srv.Close()
		post = HTTPPoster(client, srv.URL, agents)
		target = srv.URL + " (trivial JSON handler)"
	}
	cfg.OnMeasure = prof.hook(phase)
	progress("phase %s: %d agents, %s warmup, %s measured", phase, opts.Concurrency, opts.Warmup, opts.Duration)
	res := Loop(ctx, cfg, post)
	res.Phase, res.Target = phase, target
	prof.stop()
	return res, nil
}

// profiler takes one CPU profile, of the first measured window of its
// phase.
type profiler struct {
	w       io.Writer
	phase   string
	running bool
	taken   bool
	err     error
}

// hook returns what starts the profile as phase's window opens, if the
// profile is of phase and not taken yet.
func (p *profiler) hook(phase string) func() {
	return func() {
		if p.w == nil || p.taken || p.running || phase != p.phase {
			return
		}
		if p.err = pprof.StartCPUProfile(p.w); p.err == nil {
			p.running = true
		}
	}
}

// stop ends the profile if it runs.
func (p *profiler) stop() {
	if p.running {
		pprof.StopCPUProfile()
		p.running, p.taken = false, true
	}
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
	fmt.Fprintf(w, "node: %s\n", node)
	if len(r.Phases) > 0 {
		fmt.Fprintln(w)
		if err := r.writePhases(w); err != nil {
			return err
		}
	}
	if r.Corpus != nil {
		if err := r.Corpus.writeTable(w); err != nil {
			return err
		}
	}
	for _, p := range r.allLoops() {
		for kind, n := range p.ErrorKinds {
			fmt.Fprintf(w, "%s errors: %d × %s, e.g. %s\n", p.Phase, n, kind, p.ErrorSamples[kind])
		}
	}
	return nil
}

// allLoops are the results of every closed loop of the run.
func (r *Report) allLoops() []PhaseResult {
	out := slices.Clone(r.Phases)
	if c := r.Corpus; c != nil {
		if c.Appends != nil {
			out = append(out, c.Appends.Runs...)
		}
		if c.Search != nil {
			for _, l := range c.Search.Levels {
				out = append(out, l.Runs...)
			}
		}
	}
	return out
}

func (r *Report) writePhases(w io.Writer) error {
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
	return tw.Flush()
}
