package bench

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Poster sends agent's seq-th request and waits for its answer; nil means
// the request succeeded. A *Failure names the kind of a refusal; any other
// error counts as a transport failure.
type Poster func(ctx context.Context, agent, seq int) error

// Failure is an answered request that did not succeed, by kind (for
// example "HTTP 429 rate_limited" or "isError invalid_body").
type Failure struct {
	Kind   string
	Detail string // a sample of what the server said
}

func (f *Failure) Error() string {
	if f.Detail == "" {
		return f.Kind
	}
	return f.Kind + ": " + f.Detail
}

// LoopConfig says how hard and how long to drive a Poster.
type LoopConfig struct {
	Concurrency int
	Warmup      time.Duration // requests started before its end are not counted
	Duration    time.Duration // the measured window
	// OnMeasure, when set, is called as the measured window opens (to start
	// a profile, for example).
	OnMeasure func()
}

// PhaseResult is what one loop measured.
type PhaseResult struct {
	Phase        string            `json:"phase"`
	Target       string            `json:"target"`
	OK           int64             `json:"ok"`
	Errors       int64             `json:"errors"`
	ErrorKinds   map[string]int64  `json:"error_kinds,omitempty"`
	ErrorSamples map[string]string `json:"error_samples,omitempty"`
	Seconds      float64           `json:"seconds"`
	Rate         float64           `json:"rate_per_s"`
	Latency      Latency           `json:"latency"`
	// OfCeiling is Rate over the ceiling phase's rate, when both ran.
	OfCeiling float64 `json:"of_ceiling,omitempty"`
	// CPU is the machine's CPU use during the window, where measurable.
	CPU *CPUUse `json:"cpu,omitempty"`
}

// CPUUse is how busy the machine was during a measured window, in cores:
// this process (node and generator when the node is in-process) and every
// other process. Other load is what makes two runs on one machine differ;
// a run with OtherCores well above zero is not a clean figure.
type CPUUse struct {
	ProcessCores float64 `json:"process_cores"`
	OtherCores   float64 `json:"other_cores"`
}

// agentTally is one agent's counts; owned by its goroutine until the loop
// ends.
type agentTally struct {
	ok      int64
	errs    map[string]int64
	samples map[string]string
	last    time.Time
	rec     *recorder
}

// Loop runs cfg.Concurrency agents in a closed loop, each sending its next
// request when the last one answers, for cfg.Warmup then cfg.Duration.
// Latencies and counts cover the measured window only; only successes are
// timed.
func Loop(ctx context.Context, cfg LoopConfig, post Poster) PhaseResult {
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	start := time.Now()
	measure := start.Add(cfg.Warmup)
	end := measure.Add(cfg.Duration)
	// A generous guess of what one agent can do, so that append rarely grows.
	expect := int(cfg.Duration.Seconds() * 2000)

	coord := make(chan struct{})
	var cpu cpuSample
	opened := false
	go func() {
		defer close(coord)
		t := time.NewTimer(cfg.Warmup)
		defer t.Stop()
		select {
		case <-t.C:
			cpu, opened = sampleCPU(), true
			if cfg.OnMeasure != nil {
				cfg.OnMeasure()
			}
		case <-ctx.Done():
		}
	}()

	tallies := make([]*agentTally, cfg.Concurrency)
	var wg sync.WaitGroup
	for a := range tallies {
		tl := &agentTally{rec: newRecorder(expect)}
		tallies[a] = tl
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ; seq++ {
				t0 := time.Now()
				if !t0.Before(end) || ctx.Err() != nil {
					return
				}
				err := post(ctx, a, seq)
				t1 := time.Now()
				if t0.Before(measure) {
					continue
				}
				tl.last = t1
				if err == nil {
					tl.ok++
					tl.rec.add(t1.Sub(t0))
					continue
				}
				tl.fail(err)
			}
		}()
	}
	wg.Wait()
	<-coord

	res := PhaseResult{ErrorKinds: map[string]int64{}, ErrorSamples: map[string]string{}}
	if opened {
		res.CPU = cpu.since()
	}
	last := measure
	recs := make([]*recorder, len(tallies))
	for i, tl := range tallies {
		recs[i] = tl.rec
		res.OK += tl.ok
		for k, v := range tl.errs {
			res.Errors += v
			res.ErrorKinds[k] += v
			if _, ok := res.ErrorSamples[k]; !ok {
				res.ErrorSamples[k] = tl.samples[k]
			}
		}
		if tl.last.After(last) {
			last = tl.last
		}
	}
	window := last.Sub(measure)
	if window <= 0 {
		window = cfg.Duration
	}
	res.Seconds = window.Seconds()
	res.Rate = float64(res.OK) / res.Seconds
	res.Latency = summarize(recs)
	if len(res.ErrorKinds) == 0 {
		res.ErrorKinds, res.ErrorSamples = nil, nil
	}
	return res
}

func (tl *agentTally) fail(err error) {
	kind, detail := "transport", err.Error()
	var f *Failure
	switch {
	case errors.As(err, &f):
		kind, detail = f.Kind, f.Detail
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		kind = "canceled"
	}
	if tl.errs == nil {
		tl.errs, tl.samples = map[string]int64{}, map[string]string{}
	}
	tl.errs[kind]++
	if _, ok := tl.samples[kind]; !ok {
		if len(detail) > 300 {
			detail = detail[:300] + "…"
		}
		tl.samples[kind] = detail
	}
}
