// Package testnet runs several realm nodes in one process on loopback, peered
// over libp2p, for tests, demos and benchmarks, with the hooks fault
// injection needs: cut and heal links, stop and restart a realm, add a realm
// late.
package testnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"relay/protocol"
	"relay/realm"
)

// Topology says which realms peer with which.
type Topology int

const (
	// Mesh peers every realm with every other.
	Mesh Topology = iota
	// Line peers realm i with realm i+1 only: events cross several hops.
	Line
	// Unpeered starts the realms without peers: the caller links them.
	Unpeered
)

// Config says how many realms to run and where.
type Config struct {
	Realms int
	// Dir holds one data directory per realm, r1, r2, …; empty: a temporary
	// directory removed on Close. A Dir from an earlier run is used again:
	// each realm keeps its key, secret, store and peers, and the peers it
	// kept are pointed at the realms' new ports.
	Dir      string
	Topology Topology
	// NoP2P runs the realms without federation.
	NoP2P bool
	// SyncInterval is the anti-entropy period; 0: one second, so tests
	// converge fast.
	SyncInterval time.Duration
	// MaxClockAhead is how far ahead of a realm's clock a peer's events may
	// be dated and be taken at once; 0: the federation default.
	MaxClockAhead time.Duration
	// Skew sets, by realm name, how far that realm's clock runs ahead
	// (negative: behind) when it dates its events.
	Skew map[string]time.Duration
	// RateLimit is requests per minute per credential at each realm; 0: the
	// realm default; negative: off.
	RateLimit int
	Logger    *slog.Logger
}

// Realm is one node of the net.
type Realm struct {
	Name          string
	Dir           string
	Node          *realm.Node
	URL           string
	OperatorToken string

	httpAddr string
	p2pAddr  string
	cancel   context.CancelFunc
	done     chan error
}

// Net is a set of running realms.
type Net struct {
	Realms []*Realm
	cfg    Config
	tmp    string
}

// MaxRealms bounds a net: each realm is a whole node (tens of megabytes at
// least), and a mesh links every pair.
const MaxRealms = 64

// Start opens and serves cfg.Realms realms named r1, r2, … on 127.0.0.1 with
// ports chosen by the kernel, and peers them as cfg.Topology says.
func Start(cfg Config) (*Net, error) { return StartContext(context.Background(), cfg) }

// StartContext is Start, given up (the realms started closed) when ctx is
// done before the net is up.
func StartContext(ctx context.Context, cfg Config) (*Net, error) {
	if cfg.Realms < 1 || cfg.Realms > MaxRealms {
		return nil, fmt.Errorf("testnet: want 1 to %d realms, have %d", MaxRealms, cfg.Realms)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = time.Second
	}
	net := &Net{cfg: cfg}
	if cfg.Dir == "" {
		tmp, err := os.MkdirTemp("", "relay-testnet-")
		if err != nil {
			return nil, err
		}
		net.cfg.Dir, net.tmp = tmp, tmp
	}
	for range cfg.Realms {
		if err := ctx.Err(); err != nil {
			net.Close()
			return nil, err
		}
		if _, err := net.AddRealm(); err != nil {
			net.Close()
			return nil, err
		}
	}
	if cfg.NoP2P {
		return net, nil
	}
	err := net.relink()
	switch cfg.Topology {
	case Mesh:
		for i := range net.Realms {
			for j := i + 1; j < len(net.Realms) && ctx.Err() == nil; j++ {
				err = errors.Join(err, net.Link(i, j))
			}
		}
	case Line:
		for i := 0; i+1 < len(net.Realms); i++ {
			err = errors.Join(err, net.Link(i, i+1))
		}
	}
	if err = errors.Join(err, ctx.Err()); err != nil {
		net.Close()
		return nil, err
	}
	return net, nil
}

// AddRealm starts one more realm, named r<N>, without peers.
func (n *Net) AddRealm() (*Realm, error) {
	name := fmt.Sprintf("r%d", len(n.Realms)+1)
	r := &Realm{Name: name, Dir: filepath.Join(n.cfg.Dir, name), httpAddr: "127.0.0.1:0", p2pAddr: "/ip4/127.0.0.1/tcp/0"}
	if err := n.start(r); err != nil {
		return nil, err
	}
	n.Realms = append(n.Realms, r)
	return r, nil
}

func (n *Net) start(r *Realm) error {
	cfg := realm.DefaultConfig()
	cfg.Realm = r.Name
	cfg.DataDir = r.Dir
	cfg.HTTPAddr = r.httpAddr
	cfg.P2PAddrs = []string{r.p2pAddr}
	if n.cfg.NoP2P {
		cfg.P2PAddrs = nil
	}
	cfg.SyncInterval = n.cfg.SyncInterval
	cfg.MaxClockAhead = n.cfg.MaxClockAhead
	if d := n.cfg.Skew[r.Name]; d != 0 {
		cfg.Clock = func() time.Time { return time.Now().Add(d) }
	}
	switch {
	case n.cfg.RateLimit > 0:
		cfg.RateLimit = n.cfg.RateLimit
	case n.cfg.RateLimit < 0:
		cfg.RateLimit = 0
	}
	cfg.Logger = n.cfg.Logger.With("realm", r.Name)
	node, err := realm.Open(context.Background(), cfg)
	if err != nil {
		return err
	}
	if err := node.Listen(); err != nil {
		node.Close()
		return err
	}
	secret, err := os.ReadFile(filepath.Join(r.Dir, "operator.token"))
	if err != nil {
		node.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.Node, r.URL, r.OperatorToken = node, node.URL(), strings.TrimSpace(string(secret))
	r.cancel, r.done = cancel, make(chan error, 1)
	// A restart keeps its ports, so peers find it where they left it.
	r.httpAddr = strings.TrimPrefix(r.URL, "http://")
	if f := node.Federation(); f != nil {
		for _, a := range f.Addrs() {
			if strings.Contains(a, "/tcp/") {
				r.p2pAddr = a[:strings.Index(a, "/p2p/")]
				break
			}
		}
	}
	go func() { r.done <- node.Serve(ctx) }()
	return nil
}

// P2P is the realm's full TCP multiaddr, ending in /p2p/<peer id>.
func (r *Realm) P2P() string {
	return r.p2pAddr + "/p2p/" + r.Node.PeerID()
}

// relink points the peers each realm kept from an earlier run on the same
// Dir at the other realms' current addresses: the realms started on new
// ports, and a kept peer would otherwise be dialled where it no longer is.
func (n *Net) relink() error {
	byID := make(map[string]*Realm, len(n.Realms))
	for _, r := range n.Realms {
		byID[r.Node.PeerID()] = r
	}
	var err error
	for _, r := range n.Realms {
		f := r.Node.Federation()
		for _, p := range f.Peers() {
			// Only the peers the operator added are kept; inbound ones are
			// not, and must not become kept by being re-added.
			if o, ok := byID[p.PeerID]; ok && p.Source == "operator" && o != r {
				_, e := f.AddPeer(context.Background(), o.P2P())
				err = errors.Join(err, e)
			}
		}
	}
	return err
}

// Link peers realms i and j both ways (each admits and dials the other).
func (n *Net) Link(i, j int) error {
	a, b := n.Realms[i], n.Realms[j]
	ctx := context.Background()
	if _, err := a.Node.Federation().AddPeer(ctx, b.P2P()); err != nil {
		return err
	}
	_, err := b.Node.Federation().AddPeer(ctx, a.P2P())
	return err
}

// Cut cuts the link between realms i and j (both directions) until Heal.
func (n *Net) Cut(i, j int) { n.setCut(i, j, true) }

// Heal restores a cut link.
func (n *Net) Heal(i, j int) { n.setCut(i, j, false) }

func (n *Net) setCut(i, j int, cut bool) {
	a, b := n.Realms[i], n.Realms[j]
	a.Node.Federation().SetLinkCut(b.Node.Federation().PeerID(), cut)
	b.Node.Federation().SetLinkCut(a.Node.Federation().PeerID(), cut)
}

// Partition cuts every link between the two groups of realm indexes.
func (n *Net) Partition(left, right []int) {
	for _, i := range left {
		for _, j := range right {
			n.Cut(i, j)
		}
	}
}

// HealAll heals every link.
func (n *Net) HealAll() {
	for i := range n.Realms {
		for j := i + 1; j < len(n.Realms); j++ {
			n.Heal(i, j)
		}
	}
}

// Stop shuts the realm down gracefully and waits for it.
func (r *Realm) Stop() error {
	if r.cancel == nil {
		return nil
	}
	r.cancel()
	r.cancel = nil
	return <-r.done
}

// Restart stops realm i (if running) and starts it again on the same data
// directory and ports.
func (n *Net) Restart(i int) error {
	r := n.Realms[i]
	if err := r.Stop(); err != nil {
		return err
	}
	return n.start(r)
}

// Converged reports whether every running realm holds the same heads.
func (n *Net) Converged() (bool, error) {
	var first map[protocol.Realm]protocol.Head
	for _, r := range n.Realms {
		if r.cancel == nil {
			continue
		}
		h, err := r.Node.Store().Heads()
		if err != nil {
			return false, err
		}
		if first == nil {
			first = h
			continue
		}
		if len(h) != len(first) {
			return false, nil
		}
		for k, v := range first {
			if w, ok := h[k]; !ok || w.Seq != v.Seq || !w.CID.Equals(v.CID) {
				return false, nil
			}
		}
	}
	return true, nil
}

// WaitConverged polls until every running realm holds the same heads of
// every realm, or the timeout passes.
func (n *Net) WaitConverged(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := n.Converged()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testnet: not converged after %v: %s", timeout, n.headsSummary())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (n *Net) headsSummary() string {
	var b strings.Builder
	for _, r := range n.Realms {
		if r.cancel == nil {
			continue
		}
		h, _ := r.Node.Store().Heads()
		fmt.Fprintf(&b, "%s{", r.Name)
		for _, o := range n.Realms {
			fmt.Fprintf(&b, " %s:%d", o.Name, h[protocol.Realm(o.Name)].Seq)
		}
		b.WriteString(" } ")
	}
	return b.String()
}

// Close stops every realm and removes a temporary directory.
func (n *Net) Close() error {
	var wg sync.WaitGroup
	errs := make([]error, len(n.Realms))
	for i, r := range n.Realms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.Stop()
		}()
	}
	wg.Wait()
	if n.tmp != "" {
		os.RemoveAll(n.tmp)
	}
	return errors.Join(errs...)
}
