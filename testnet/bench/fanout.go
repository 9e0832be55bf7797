package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The fanout phase: Subscribers streams of /corpus/stream are opened, each
// on its own connection, all from the same sequence; then the writers
// append at a steady rate for the phase's duration, noting when each write
// was sent and when its 201 came back. Every subscriber notes when each
// event's id line arrives. The latency of a delivery is its arrival minus
// the ack of its write; "all received" is every subscriber holding every
// acknowledged write exactly once.
//
// When the node runs in this process, the subscribers' goroutines share
// the cores with it: an arrival is noted when the subscriber's goroutine
// reads it, so scheduling delay on the client side is in the figure.

// receipt is one event as a subscriber saw it.
type receipt struct {
	seq uint64
	at  time.Time
}

// subscriber is one open stream.
type subscriber struct {
	body io.ReadCloser
	got  []receipt
	n    atomic.Int64  // events read, for the wait at the end
	done chan struct{} // closed when read returns
}

func (s *subscriber) read() {
	defer close(s.done)
	r := bufio.NewReaderSize(s.body, 16<<10)
	for {
		line, err := r.ReadSlice('\n')
		if len(line) > 4 && bytes.HasPrefix(line, []byte("id: ")) {
			at := time.Now()
			seq, perr := strconv.ParseUint(string(bytes.TrimSpace(line[4:])), 10, 64)
			if perr == nil {
				s.got = append(s.got, receipt{seq, at})
				s.n.Add(1)
			}
		}
		if err == bufio.ErrBufferFull {
			continue // a long data line: the rest of it follows
		}
		if err != nil {
			return
		}
	}
}

// streamClient opens streams, each on a connection of its own: no timeout
// (a stream lasts), no pooling limit.
func streamClient() *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableCompression: true, MaxIdleConnsPerHost: -1}}
}

// openStreams opens n streams after sequence after; auth, when not empty,
// are the credentials to spread them over (a node with a rate limit counts
// per credential).
func openStreams(ctx context.Context, base string, after uint64, n int, auth []string) ([]*subscriber, error) {
	client := streamClient()
	subs := make([]*subscriber, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/corpus/stream?after="+strconv.FormatUint(after, 10), nil)
			if err != nil {
				errs[i] = err
				return
			}
			req.Header.Set("Accept", "text/event-stream")
			if len(auth) > 0 {
				req.Header.Set("Authorization", auth[i%len(auth)])
			}
			resp, err := client.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			if resp.StatusCode != http.StatusOK {
				raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
				resp.Body.Close()
				errs[i] = fmt.Errorf("stream %d: %w", i, corpusFailure(resp.StatusCode, raw))
				return
			}
			s := &subscriber{body: resp.Body, got: make([]receipt, 0, 1024), done: make(chan struct{})}
			subs[i] = s
			go s.read()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			closeStreams(subs)
			return nil, fmt.Errorf("subscriber %d of %d: %w", i, n, err)
		}
	}
	return subs, nil
}

func closeStreams(subs []*subscriber) {
	for _, s := range subs {
		if s != nil {
			s.body.Close()
		}
	}
}

// sequence is the node's current corpus sequence, from /corpus/index.json.
func sequence(ctx context.Context, client *http.Client, base string) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/corpus/index.json", nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("corpus index: HTTP %d", resp.StatusCode)
	}
	var idx struct {
		Sequence uint64 `json:"sequence"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&idx); err != nil {
		return 0, fmt.Errorf("corpus index: %w", err)
	}
	return idx.Sequence, nil
}

// sent is one write of the fanout phase.
type sent struct {
	send, ack time.Time
}

// drainWait bounds the wait for the last deliveries after the last ack.
const drainWait = 30 * time.Second

func (cb *corpusBench) fanoutOnce(ctx context.Context) (FanoutRun, error) {
	o := cb.opts.Corpus
	run := FanoutRun{Subscribers: o.Subscribers}
	client := NewClient(4)
	defer client.CloseIdleConnections()
	cb.useClient(client)
	after, err := sequence(ctx, client, cb.base)
	if err != nil {
		return run, err
	}
	auth := make([]string, len(cb.writers))
	for i, w := range cb.writers {
		auth[i] = w.auth
	}
	t0 := time.Now()
	subs, err := openStreams(ctx, cb.base, after, o.Subscribers, auth)
	if err != nil {
		return run, err
	}
	defer closeStreams(subs)
	run.OpenSeconds = time.Since(t0).Seconds()

	// The writes: a ticker at the rate, a few writers taking its ticks, so
	// a slow answer does not hold the next write back.
	cb.prof.hook(PhaseFanout)()
	cpu := sampleCPU()
	writers := cb.writers[:min(steadyWriters, len(cb.writers))]
	writes := make([]map[uint64]sent, len(writers))
	var errCount atomic.Int64
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.FanoutRate))
	end := time.Now().Add(cb.opts.Duration)
	var wg sync.WaitGroup
	for i, w := range writers {
		writes[i] = map[uint64]sent{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				t := time.Now()
				if !t.Before(end) {
					return
				}
				seq, err := w.write(ctx)
				if err != nil {
					errCount.Add(1)
					continue
				}
				writes[i][seq] = sent{t, time.Now()}
			}
		}()
	}
	wg.Wait()
	tick.Stop()
	lastAck := time.Now()
	all := map[uint64]sent{}
	for _, m := range writes {
		for s, v := range m {
			all[s] = v
		}
	}
	run.Writes, run.Errors = len(all), errCount.Load()
	run.WriteRate = float64(run.Writes) / cb.opts.Duration.Seconds()
	run.Expected = int64(run.Writes) * int64(len(subs))
	// Wait until every subscriber read as many events as were written, or
	// the bound passes.
	deadline := lastAck.Add(drainWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		done := true
		for _, s := range subs {
			if s.n.Load() < int64(run.Writes) {
				done = false
				break
			}
		}
		if done {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	run.CPU = cpu.since()
	cb.prof.stop()
	closeStreams(subs)
	// Each reader stops at the closed body; wait for them before reading
	// what they noted.
	for _, s := range subs {
		<-s.done
	}
	if err := ctx.Err(); err != nil {
		return run, err
	}
	fromAck := make([]time.Duration, 0, run.Expected)
	fromSend := make([]time.Duration, 0, run.Expected)
	var lastRecv time.Time
	for _, s := range subs {
		seen := make(map[uint64]bool, run.Writes)
		for _, r := range s.got {
			w, ok := all[r.seq]
			if !ok {
				continue // not ours
			}
			if seen[r.seq] {
				run.Duplicates++
				continue
			}
			seen[r.seq] = true
			run.Delivered++
			d := r.at.Sub(w.ack)
			if d < 0 {
				run.BeforeAck++
				d = 0
			}
			fromAck = append(fromAck, d)
			fromSend = append(fromSend, r.at.Sub(w.send))
			if r.at.After(lastRecv) {
				lastRecv = r.at
			}
		}
		if len(seen) == run.Writes {
			run.Complete++
		}
	}
	run.Missing = run.Expected - run.Delivered
	run.FromAck, run.FromSend = summarizeDurations(fromAck), summarizeDurations(fromSend)
	if lastRecv.After(lastAck) {
		run.DrainSeconds = lastRecv.Sub(lastAck).Seconds()
	}
	return run, nil
}

func (cb *corpusBench) fanout(ctx context.Context) error {
	if err := cb.setup(ctx); err != nil {
		return err
	}
	o := cb.opts.Corpus
	res := &FanoutResult{AllReceived: true}
	for r := range o.Runs {
		cb.log("phase fanout, run %d of %d: %d subscribers, %.0f writes/s for %s", r+1, o.Runs, o.Subscribers, o.FanoutRate, cb.opts.Duration)
		run, err := cb.fanoutOnce(ctx)
		cb.prof.stop()
		if err != nil {
			return fmt.Errorf("fanout: %w", err)
		}
		if run.Missing > 0 || run.Duplicates > 0 || run.Complete != run.Subscribers {
			res.AllReceived = false
		}
		res.Runs = append(res.Runs, run)
	}
	res.P50 = medianOf(res.Runs, func(r *FanoutRun) float64 { return r.FromAck.P50 })
	res.P99 = medianOf(res.Runs, func(r *FanoutRun) float64 { return r.FromAck.P99 })
	cb.rep.Fanout = res
	return nil
}
