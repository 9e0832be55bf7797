// Package fedbench measures the federation, as `relay bench federation`
// runs it: replication latency from a durable post at one realm to its
// commit at the others (from which the API serves it), bytes on the wire per
// event, and the catch-up rate of a realm that joins late.
package fedbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"

	"relay/federation"
	"relay/protocol"
	"relay/store"
	"relay/testnet"
	"relay/testnet/bench"
	"relay/testnet/cputime"
)

// Options are one run. Start from DefaultOptions.
type Options struct {
	Realms int
	// Rate is the posts per second offered to the first realm.
	Rate     int
	Duration time.Duration
	// Posters are the agents posting at once at the first realm.
	Posters int
	// CatchUpEvents is how many events the late realm catches up; 0 skips
	// the phase.
	CatchUpEvents int
	// CPUProfile, when set, receives a CPU profile of the process during
	// ProfilePhase: "replication" (while posting) or "catchup" (while the
	// late realm catches up).
	CPUProfile   io.Writer
	ProfilePhase string
	Logger       *slog.Logger
	Progress     io.Writer
}

// DefaultOptions are the conditions: 5 realms, 1,000 posts/s,
// 100,000 events to catch up.
func DefaultOptions() Options {
	return Options{Realms: 5, Rate: 1000, Duration: 10 * time.Second, Posters: 64, CatchUpEvents: 100_000, ProfilePhase: "replication"}
}

// Latency is a distribution in milliseconds.
type Latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// Result is what a run measured.
type Result struct {
	Realms        int     `json:"realms"`
	OfferedRate   int     `json:"offered_posts_per_s"`
	AchievedRate  float64 `json:"achieved_posts_per_s"`
	Posts         int     `json:"posts"`
	Failures      int     `json:"failures"`
	Replication   Latency `json:"replication"` // origin commit → commit at each other realm
	Missing       int     `json:"missing"`     // (post, realm) pairs not seen at the end
	EventBytes    float64 `json:"event_bytes_avg"`
	WireInPerRecv float64 `json:"wire_in_bytes_per_event_per_receiver"`
	WireRatio     float64 `json:"wire_ratio" jsonschema:"wire bytes in per receiving realm per event, over the event's own size"`
	// WireByProtocol is WireInPerRecv by libp2p protocol.
	WireByProtocol map[string]float64 `json:"wire_in_bytes_per_event_per_receiver_by_protocol"`
	// OriginWireIn is what the posting realm took in per event of its own:
	// copies of its events sent back, control messages, catch-up requests.
	OriginWireIn float64 `json:"origin_wire_in_bytes_per_event"`
	// CPUPerPost is the process's CPU time (every realm, and the posting
	// client) per post while posting and replicating, in milliseconds.
	CPUPerPost float64 `json:"cpu_ms_per_post"`
	// Per receiving realm and origin event: how each was stored (gossip,
	// catch-up), and the gossip copies and control IDs that came with it.
	Received map[string]float64 `json:"received_per_event_per_receiver"`
	Gossip   GossipPerEvent     `json:"gossip_per_event_per_receiver"`

	CatchUpEvents   int     `json:"catchup_events,omitempty"`
	FillRate        float64 `json:"fill_events_per_s,omitempty"`
	CatchUpSeconds  float64 `json:"catchup_s,omitempty"`
	CatchUpRate     float64 `json:"catchup_events_per_s,omitempty"`
	CatchUpWireIn   int64   `json:"catchup_wire_in_bytes,omitempty"`
	CatchUpLogBytes int64   `json:"catchup_log_bytes,omitempty"`
	// CatchUpCPUPerEvent is the process's CPU time (both realms) per event
	// caught up, in microseconds.
	CatchUpCPUPerEvent float64 `json:"catchup_cpu_us_per_event,omitempty"`
}

// GossipPerEvent is federation.GossipCounters per event and receiver.
type GossipPerEvent struct {
	Messages   float64 `json:"messages"`
	Duplicates float64 `json:"duplicates"`
	IHave      float64 `json:"ihave_ids"`
	IWant      float64 `json:"iwant_ids"`
	IDontWant  float64 `json:"idontwant_ids"`
	RPCs       float64 `json:"rpcs"`
	// Bytes of message data (the runs of events) in every copy, and in the
	// copies already seen.
	DataBytes float64 `json:"data_bytes"`
	DupBytes  float64 `json:"duplicate_bytes"`
}

// wireSettle is how long to wait before reading the bandwidth counters,
// which libp2p totals once a second.
const wireSettle = 1500 * time.Millisecond

// Run measures replication, then catch-up.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	res := &Result{Realms: o.Realms, OfferedRate: o.Rate}
	if err := replication(ctx, o, res); err != nil {
		return nil, err
	}
	if o.CatchUpEvents > 0 {
		if err := catchUp(ctx, o, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// commits records when each realm committed each event of the origin.
type commits struct {
	mu sync.Mutex
	at map[string]time.Time // CID → commit time
}

func watch(st *store.Store, origin protocol.Realm) *commits {
	c := &commits{at: map[string]time.Time{}}
	st.Watch(func(evs []*store.StoredEvent) {
		now := time.Now()
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, se := range evs {
			if se.Event.Realm == string(origin) {
				c.at[se.CID.KeyString()] = now
			}
		}
	})
	return c
}

func replication(ctx context.Context, o Options, res *Result) error {
	fmt.Fprintf(o.Progress, "replication: starting %d realms in a mesh\n", o.Realms)
	// Anti-entropy as often as relay serve runs it, not at the testnet's
	// one second: each pass is bytes on the wire.
	net, err := testnet.Start(testnet.Config{Realms: o.Realms, Topology: testnet.Mesh, RateLimit: -1, Logger: o.Logger,
		SyncInterval: federation.DefaultConfig().SyncInterval})
	if err != nil {
		return err
	}
	defer net.Close()
	if err := net.WaitConverged(30 * time.Second); err != nil {
		return err
	}
	origin := net.Realms[0]
	client := bench.NewClient(o.Posters)
	agents, err := bench.SetupAgents(ctx, client, origin.URL, origin.OperatorToken, "fedbench", o.Posters)
	if err != nil {
		return err
	}
	if err := net.WaitConverged(30 * time.Second); err != nil {
		return err
	}
	// Let the topic meshes settle before the clock starts (and the
	// bandwidth counters, which libp2p totals once a second, catch up).
	time.Sleep(2 * time.Second)
	oname := protocol.Realm(origin.Name)
	recs := make([]*commits, len(net.Realms))
	for i, r := range net.Realms {
		recs[i] = watch(r.Node.Store(), oname)
	}
	wireBefore := make([]int64, len(net.Realms))
	protoBefore := make([]map[string]int64, len(net.Realms))
	countsBefore := make([]federation.Counters, len(net.Realms))
	for i, r := range net.Realms {
		wireBefore[i], _ = r.Node.Federation().Wire()
		protoBefore[i] = r.Node.Federation().WireInByProtocol()
		countsBefore[i] = r.Node.Federation().Counters()
	}
	if err := o.startProfile("replication"); err != nil {
		return err
	}
	cpuBefore := cputime.Now()

	fmt.Fprintf(o.Progress, "replication: %d posts/s for %v at %s\n", o.Rate, o.Duration, origin.Name)
	post := bench.HTTPPoster(client, origin.URL, agents)
	total := int(float64(o.Rate) * o.Duration.Seconds())
	tokens := make(chan int, total)
	var failures atomic.Int64
	var wg sync.WaitGroup
	for a := range o.Posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range tokens {
				if err := post(ctx, a, seq); err != nil {
					failures.Add(1)
				}
			}
		}()
	}
	start := time.Now()
	interval := time.Second / time.Duration(o.Rate)
	for i := range total {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		tokens <- i
	}
	close(tokens)
	wg.Wait()
	elapsed := time.Since(start)
	res.Posts = total
	res.Failures = int(failures.Load())
	res.AchievedRate = float64(total-res.Failures) / elapsed.Seconds()

	// Wait for every realm to hold the origin's head.
	want, _ := origin.Node.Store().Heads()
	deadline := time.Now().Add(60 * time.Second)
	for _, r := range net.Realms[1:] {
		for {
			h, _ := r.Node.Store().Heads()
			if h[oname].Seq >= want[oname].Seq || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	cpu := cputime.Now() - cpuBefore
	o.stopProfile("replication")
	// libp2p's bandwidth counters add up once a second.
	time.Sleep(wireSettle)

	var lat []time.Duration
	var size, events int64
	recs[0].mu.Lock()
	sent := recs[0].at
	recs[0].mu.Unlock()
	for key := range sent {
		c, err := castKey(key)
		if err != nil {
			continue
		}
		se, err := origin.Node.Store().EventByCID(c)
		if err == nil {
			size += int64(len(se.Raw))
			events++
		}
	}
	for _, rec := range recs[1:] {
		rec.mu.Lock()
		for key, t0 := range sent {
			if t1, ok := rec.at[key]; ok {
				lat = append(lat, t1.Sub(t0))
			} else {
				res.Missing++
			}
		}
		rec.mu.Unlock()
	}
	res.Replication = summarize(lat)
	if events > 0 {
		res.EventBytes = float64(size) / float64(events)
		var in int64
		for i, r := range net.Realms[1:] {
			after, _ := r.Node.Federation().Wire()
			in += after - wireBefore[i+1]
		}
		res.WireInPerRecv = float64(in) / float64(events) / float64(len(net.Realms)-1)
		res.WireByProtocol = map[string]float64{}
		for i, r := range net.Realms[1:] {
			for p, n := range r.Node.Federation().WireInByProtocol() {
				res.WireByProtocol[p] += float64(n-protoBefore[i+1][p]) / float64(events) / float64(len(net.Realms)-1)
			}
		}
		originIn, _ := origin.Node.Federation().Wire()
		res.OriginWireIn = float64(originIn-wireBefore[0]) / float64(events)

		res.WireRatio = res.WireInPerRecv / res.EventBytes
		per := float64(events) * float64(len(net.Realms)-1)
		res.Received = map[string]float64{}
		for i, r := range net.Realms[1:] {
			c, b := r.Node.Federation().Counters(), countsBefore[i+1]
			for way, n := range c.Received {
				res.Received[way] += float64(n-b.Received[way]) / per
			}
			res.Gossip.Messages += float64(c.Gossip.Messages-b.Gossip.Messages) / per
			res.Gossip.Duplicates += float64(c.Gossip.Duplicates-b.Gossip.Duplicates) / per
			res.Gossip.IHave += float64(c.Gossip.IHave-b.Gossip.IHave) / per
			res.Gossip.IWant += float64(c.Gossip.IWant-b.Gossip.IWant) / per
			res.Gossip.IDontWant += float64(c.Gossip.IDontWant-b.Gossip.IDontWant) / per
			res.Gossip.RPCs += float64(c.Gossip.RPCs-b.Gossip.RPCs) / per
			res.Gossip.DataBytes += float64(c.Gossip.DataBytes-b.Gossip.DataBytes) / per
			res.Gossip.DupBytes += float64(c.Gossip.DupBytes-b.Gossip.DupBytes) / per
		}
	}
	if res.Posts > 0 {
		res.CPUPerPost = float64(cpu) / float64(time.Millisecond) / float64(res.Posts)
	}
	return nil
}

func catchUp(ctx context.Context, o Options, res *Result) error {
	fmt.Fprintf(o.Progress, "catch-up: filling one realm with %d events\n", o.CatchUpEvents)
	net, err := testnet.Start(testnet.Config{Realms: 1, Topology: testnet.Unpeered, RateLimit: -1, Logger: o.Logger})
	if err != nil {
		return err
	}
	defer net.Close()
	src := net.Realms[0]
	client := bench.NewClient(o.Posters)
	agents, err := bench.SetupAgents(ctx, client, src.URL, src.OperatorToken, "fill", o.Posters)
	if err != nil {
		return err
	}
	post := bench.HTTPPoster(client, src.URL, agents)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	heads, _ := src.Node.Store().Heads()
	have := int(heads[protocol.Realm(src.Name)].Seq)
	for a := range o.Posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1))
				if i > o.CatchUpEvents-have || ctx.Err() != nil {
					return
				}
				post(ctx, a, i)
			}
		}()
	}
	wg.Wait()
	res.FillRate = float64(o.CatchUpEvents-have) / time.Since(start).Seconds()
	heads, _ = src.Node.Store().Heads()
	target := heads[protocol.Realm(src.Name)]
	res.CatchUpEvents = int(target.Seq)
	for _, se := range mustRange(src, target.Seq) {
		res.CatchUpLogBytes += int64(len(se.Raw))
	}

	fmt.Fprintf(o.Progress, "catch-up: a new realm joins and catches up %d events\n", target.Seq)
	late, err := net.AddRealm()
	if err != nil {
		return err
	}
	if err := o.startProfile("catchup"); err != nil {
		return err
	}
	defer o.stopProfile("catchup")
	cpuBefore := cputime.Now()
	start = time.Now()
	if err := net.Link(0, 1); err != nil {
		return err
	}
	for {
		h, _ := late.Node.Store().Heads()
		if h[protocol.Realm(src.Name)].Seq >= target.Seq {
			break
		}
		if time.Since(start) > 10*time.Minute {
			return fmt.Errorf("catch-up: not done after 10 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	d := time.Since(start)
	res.CatchUpSeconds = d.Seconds()
	res.CatchUpRate = float64(target.Seq) / d.Seconds()
	res.CatchUpCPUPerEvent = float64(cputime.Now()-cpuBefore) / float64(time.Microsecond) / float64(target.Seq)
	o.stopProfile("catchup")
	time.Sleep(wireSettle)
	res.CatchUpWireIn, _ = late.Node.Federation().Wire()
	return nil
}

func (o *Options) startProfile(phase string) error {
	if o.CPUProfile == nil || o.ProfilePhase != phase {
		return nil
	}
	return pprof.StartCPUProfile(o.CPUProfile)
}

// stopProfile ends the profile of phase; once only.
func (o *Options) stopProfile(phase string) {
	if o.CPUProfile == nil || o.ProfilePhase != phase {
		return
	}
	pprof.StopCPUProfile()
	o.CPUProfile = nil
}

func mustRange(r *testnet.Realm, n uint64) []*store.StoredEvent {
	evs, _ := r.Node.Store().Range(protocol.Realm(r.Name), 1, int(n))
	return evs
}

func summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	at := func(p float64) float64 {
		i := int(p * float64(len(ds)-1))
		return float64(ds[i]) / float64(time.Millisecond)
	}
	return Latency{N: len(ds), P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: at(1)}
}

func castKey(k string) (cid.Cid, error) { return cid.Cast([]byte(k)) }
