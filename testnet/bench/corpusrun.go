package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// CorpusOptions size the corpus phases.
type CorpusOptions struct {
	// Runs is how many measured runs the appends, search, sync and fanout
	// phases make; the report quotes their medians.
	Runs int `json:"runs"`
	// Messages is the size of the corpus search and sync run over: the
	// load writes until this generator has had that many acknowledged.
	Messages int `json:"messages"`
	// ConversationSize is how many messages the load puts in a
	// conversation before it starts another.
	ConversationSize int `json:"conversation_size"`
	// Vocabulary is the number of distinct words messages are made of.
	Vocabulary int `json:"vocabulary"`
	// SearchClients are the concurrencies of the search phase, each a
	// closed loop of that many searchers.
	SearchClients []int `json:"search_clients"`
	// SearchLimit is the limit of every search; 0: the node's default.
	SearchLimit int `json:"search_limit"`
	// Queries is the number of queries drawn, cycled through.
	Queries int `json:"queries"`
	// SyncPage is the limit of every snapshot and changes page.
	SyncPage int `json:"sync_page"`
	// SyncWriteRate is messages per second appended while a sync runs, so
	// the changes after the snapshot are not empty; 0 writes none.
	SyncWriteRate float64 `json:"sync_write_rate"`
	// Subscribers is the number of streams the fanout phase opens.
	Subscribers int `json:"subscribers"`
	// FanoutRate is writes per second during the fanout phase, for
	// Options.Duration.
	FanoutRate float64 `json:"fanout_rate"`
}

// DefaultCorpusOptions are the sizes: a 100,000-message corpus,
// 1,000 subscribers, three runs of each.
func DefaultCorpusOptions() CorpusOptions {
	return CorpusOptions{
		Runs:             3,
		Messages:         100_000,
		ConversationSize: 20,
		Vocabulary:       50_000,
		SearchClients:    []int{1, 8},
		Queries:          10_000,
		SyncPage:         1000,
		SyncWriteRate:    100,
		Subscribers:      1000,
		FanoutRate:       50,
	}
}

func (o *CorpusOptions) check() error {
	switch {
	case o.Runs < 1:
		return errors.New("corpus runs: want at least 1")
	case o.Messages < 1 || o.ConversationSize < 1 || o.Queries < 1:
		return errors.New("corpus messages, conversation size and queries: want at least 1")
	case o.SearchLimit < 0 || o.SearchLimit > 1000:
		return errors.New("search limit: want 0 (the node's default) to 1000")
	case o.SyncPage < 1 || o.SyncPage > 1000:
		return errors.New("sync page: want 1 to 1000")
	case o.Subscribers < 1 || o.FanoutRate <= 0 || o.SyncWriteRate < 0:
		return errors.New("subscribers and fanout rate: want more than 0; sync write rate: 0 or more")
	case len(o.SearchClients) == 0:
		return errors.New("search clients: want at least one concurrency")
	}
	for _, c := range o.SearchClients {
		if c < 1 {
			return errors.New("search clients: want concurrencies of at least 1")
		}
	}
	return nil
}

// corpusBench runs the corpus phases against one node; its writers are
// registered once and keep their conversations and acknowledgements from
// phase to phase, so the phases build one corpus.
type corpusBench struct {
	opts    Options
	base    string
	run     string // this generator's prefix of Operation-Tokens
	vocab   *vocabulary
	writers []*corpusWriter
	before  int // messages of local agents on the node before the setup
	rep     *CorpusReport
	prof    *profiler
	log     func(format string, args ...any)
}

func newCorpusBench(opts Options, base string, prof *profiler, progress func(string, ...any)) *corpusBench {
	return &corpusBench{opts: opts, base: strings.TrimRight(base, "/"), run: runID(), prof: prof, log: progress,
		rep: &CorpusReport{Options: opts.Corpus, Agents: opts.Concurrency}}
}

// setup registers and onboards the agents, once, and has each open its
// conversation.
func (cb *corpusBench) setup(ctx context.Context) error {
	if cb.writers != nil {
		return nil
	}
	cb.vocab = newVocabulary(cb.opts.Corpus.Vocabulary, 1)
	cb.log("registering %d corpus agents (POST /register, GET /auth.md, a first conversation each)", cb.opts.Concurrency)
	client := NewClient(cb.opts.Concurrency)
	before, err := nodeMessages(ctx, client, cb.base)
	if err != nil {
		return err
	}
	cb.before, cb.rep.Before = before, before
	agents, err := RegisterCorpusAgents(ctx, client, cb.base, cb.opts.Concurrency)
	if err != nil {
		return err
	}
	writers := make([]*corpusWriter, len(agents))
	errs := make([]error, len(agents))
	var wg sync.WaitGroup
	for i, a := range agents {
		w := newWriter(client, cb.base, a, cb.vocab, fmt.Sprintf("bench-%s-%d-", cb.run, i), uint64(i)+1)
		w.keepAcks = true
		writers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := w.write(ctx); err != nil {
				errs[i] = fmt.Errorf("corpus agent %d: first conversation: %w", i, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	cb.writers = writers
	return nil
}

// useClient points every writer at client.
func (cb *corpusBench) useClient(client *http.Client) {
	for _, w := range cb.writers {
		w.client = client
	}
}

// held is the number of messages the node holds: those it held before and
// the writes it acknowledged to this generator since.
func (cb *corpusBench) held() int {
	n := cb.before
	for _, w := range cb.writers {
		n += len(w.acks)
	}
	return n
}

// ---------------------------------------------------------------------------
// appends

func (cb *corpusBench) appends(ctx context.Context) error {
	if err := cb.setup(ctx); err != nil {
		return err
	}
	res := &AppendsResult{Target: TargetAppendsPerSec}
	for _, w := range cb.writers {
		w.convEvery = 0 // pure appends, each agent to its own conversation
	}
	for r := range cb.opts.Corpus.Runs {
		client := NewClient(cb.opts.Concurrency)
		cb.useClient(client)
		cfg := LoopConfig{Concurrency: cb.opts.Concurrency, Warmup: cb.opts.Warmup, Duration: cb.opts.Duration}
		cfg.OnMeasure = cb.prof.hook(PhaseAppends)
		cb.log("phase appends, run %d of %d: %d agents, %s warmup, %s measured", r+1, cb.opts.Corpus.Runs, cb.opts.Concurrency, cb.opts.Warmup, cb.opts.Duration)
		pr := Loop(ctx, cfg, func(ctx context.Context, agent, _ int) error {
			_, err := cb.writers[agent].write(ctx)
			return err
		})
		cb.prof.stop()
		client.CloseIdleConnections()
		if err := ctx.Err(); err != nil {
			return err
		}
		pr.Phase, pr.Target = PhaseAppends, cb.base+"/{endpoint_id}/appendToConversation/{conversation_id}"
		res.Runs = append(res.Runs, pr)
	}
	res.Rate = medianOf(res.Runs, func(p *PhaseResult) float64 { return p.Rate })
	res.P50 = medianOf(res.Runs, func(p *PhaseResult) float64 { return p.Latency.P50 })
	res.P99 = medianOf(res.Runs, func(p *PhaseResult) float64 { return p.Latency.P99 })
	res.OfTarget = res.Rate / res.Target
	cb.rep.Appends = res
	return nil
}

// ---------------------------------------------------------------------------
// load

// ensureCorpus writes until the node holds Messages messages, every agent
// at once, a new conversation every ConversationSize messages. A node that
// already holds them (a kept data directory) is not written to.
func (cb *corpusBench) ensureCorpus(ctx context.Context) error {
	if err := cb.setup(ctx); err != nil {
		return err
	}
	want := cb.opts.Corpus.Messages
	missing := want - cb.held()
	if missing <= 0 {
		return nil
	}
	cb.log("loading the corpus: %d messages to write to reach %d, %d agents", missing, want, len(cb.writers))
	client := NewClient(cb.opts.Concurrency)
	defer client.CloseIdleConnections()
	cb.useClient(client)
	var left atomic.Int64
	left.Store(int64(missing))
	var written, failed atomic.Int64
	kinds := make([]map[string]int64, len(cb.writers))
	cpu := sampleCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for i, w := range cb.writers {
		w.convEvery = cb.opts.Corpus.ConversationSize
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 && ctx.Err() == nil {
				if _, err := w.write(ctx); err != nil {
					left.Add(1) // written again
					if failed.Add(1) > int64(missing)/10+100 {
						return // something is wrong: stop, the error is reported
					}
					if kinds[i] == nil {
						kinds[i] = map[string]int64{}
					}
					kinds[i][failureKind(err)]++
					continue
				}
				written.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	l := &LoadResult{Written: written.Load(), Held: cb.held(), Seconds: elapsed.Seconds(), Errors: failed.Load(), CPU: cpu.since()}
	l.Rate = float64(l.Written) / l.Seconds
	for _, k := range kinds {
		for kind, n := range k {
			if l.ErrorKinds == nil {
				l.ErrorKinds = map[string]int64{}
			}
			l.ErrorKinds[kind] += n
		}
	}
	cb.rep.Load = l
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.Held < want {
		return fmt.Errorf("corpus load: %d of %d messages written, %d errors %v", l.Held, want, l.Errors, l.ErrorKinds)
	}
	cb.log("loaded: %d messages in %s (%.0f/s)", l.Written, elapsed.Round(time.Millisecond), l.Rate)
	return nil
}

// nodeMessages is the number of messages the node's local agents wrote:
// the sum of message_count over /agents.
func nodeMessages(ctx context.Context, client *http.Client, base string) (int, error) {
	total := 0
	for offset := 0; ; offset += 1000 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/agents?limit=1000&offset="+strconv.Itoa(offset), nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		var page struct {
			Agents []struct {
				MessageCount int `json:"message_count"`
			} `json:"agents"`
			HasMore bool `json:"has_more"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		drain(resp.Body)
		if resp.StatusCode != http.StatusOK || err != nil {
			return 0, fmt.Errorf("/agents: HTTP %d %v", resp.StatusCode, err)
		}
		for _, a := range page.Agents {
			total += a.MessageCount
		}
		if !page.HasMore {
			return total, nil
		}
	}
}

// failureKind is how Loop would count err.
func failureKind(err error) string {
	var f *Failure
	if errors.As(err, &f) {
		return f.Kind
	}
	return "transport"
}

// ---------------------------------------------------------------------------
// search

func (cb *corpusBench) search(ctx context.Context) error {
	if err := cb.ensureCorpus(ctx); err != nil {
		return err
	}
	o := cb.opts.Corpus
	gen := cb.vocab.gen(0x5ea4c4)
	urls := make([]string, o.Queries)
	distinct := map[string]bool{}
	terms := map[string]bool{}
	for i := range urls {
		q := gen.query()
		distinct[q] = true
		for _, t := range strings.Fields(q) {
			terms[t] = true
		}
		urls[i] = cb.base + "/search?q=" + url.QueryEscape(q)
		if o.SearchLimit > 0 {
			urls[i] += "&limit=" + strconv.Itoa(o.SearchLimit)
		}
	}
	limit := o.SearchLimit
	if limit == 0 {
		limit = 100 // the seed's default
	}
	res := &SearchResult{Corpus: cb.held(), Queries: len(distinct), DistinctTerms: len(terms), Limit: limit, TargetP99: TargetSearchP99ms}
	next := 0 // queries are not repeated across runs until all were sent
	for _, clients := range o.SearchClients {
		lvl := SearchLevel{Clients: clients}
		var empty, total int64
		for r := range o.Runs {
			client := NewClient(clients)
			bufs := make([]bytes.Buffer, clients)
			var nEmpty, nAll atomic.Int64
			cfg := LoopConfig{Concurrency: clients, Warmup: cb.opts.Warmup, Duration: cb.opts.Duration}
			cfg.OnMeasure = cb.prof.hook(PhaseSearch)
			cb.log("phase search, %d clients, run %d of %d: %s warmup, %s measured", clients, r+1, o.Runs, cb.opts.Warmup, cb.opts.Duration)
			base := next
			pr := Loop(ctx, cfg, func(ctx context.Context, agent, seq int) error {
				u := urls[(base+seq*clients+agent)%len(urls)]
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
				if err != nil {
					return err
				}
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				b := &bufs[agent]
				b.Reset()
				if _, err := b.ReadFrom(resp.Body); err != nil {
					return err
				}
				if resp.StatusCode != http.StatusOK {
					return corpusFailure(resp.StatusCode, b.Bytes())
				}
				nAll.Add(1)
				if bytes.HasPrefix(b.Bytes(), []byte(`{"results":[]`)) {
					nEmpty.Add(1)
				}
				return nil
			})
			cb.prof.stop()
			client.CloseIdleConnections()
			if err := ctx.Err(); err != nil {
				return err
			}
			next = (next + int(nAll.Load())) % len(urls)
			empty, total = empty+nEmpty.Load(), total+nAll.Load()
			pr.Phase, pr.Target = PhaseSearch, cb.base+"/search"
			lvl.Runs = append(lvl.Runs, pr)
		}
		lvl.Rate = medianOf(lvl.Runs, func(p *PhaseResult) float64 { return p.Rate })
		lvl.P50 = medianOf(lvl.Runs, func(p *PhaseResult) float64 { return p.Latency.P50 })
		lvl.P99 = medianOf(lvl.Runs, func(p *PhaseResult) float64 { return p.Latency.P99 })
		if total > 0 {
			lvl.Empty = float64(empty) / float64(total)
		}
		if lvl.P99 > 0 {
			lvl.OfTarget = TargetSearchP99ms / lvl.P99
		}
		res.Levels = append(res.Levels, lvl)
	}
	cb.rep.Search = res
	return nil
}

// ---------------------------------------------------------------------------
// background writes

// steadyWriters is how many agents share a steady rate of writes (sync's
// background writes, fanout's): enough that one slow answer does not hold
// back the next write.
const steadyWriters = 8

// trickle appends about rate messages per second with the first few
// writers until stop is called, which returns how many it wrote; the
// writers' acks record them as every write does.
func (cb *corpusBench) trickle(ctx context.Context, rate float64) (stop func() int) {
	if rate <= 0 {
		return func() int { return 0 }
	}
	// stop ends the loop but lets a write in flight finish: a write cut off
	// might be stored without its ack, and then counted as another's.
	done := make(chan struct{})
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	var n atomic.Int64
	var wg sync.WaitGroup
	for _, w := range cb.writers[:min(steadyWriters, len(cb.writers))] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case <-done:
					return
				case <-tick.C:
				}
				if _, err := w.write(ctx); err == nil {
					n.Add(1)
				}
			}
		}()
	}
	return func() int {
		close(done)
		tick.Stop()
		wg.Wait()
		return int(n.Load())
	}
}

// drain reads and closes a body, so that its connection is reused.
func drain(r io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(r, 1<<20))
	r.Close()
}
