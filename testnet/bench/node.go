package bench

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"relay/realm"
)

// NodeOptions say how to start the in-process node.
type NodeOptions struct {
	// Dir is the node's data directory; empty: a temporary one, removed by
	// Stop.
	Dir string
	// RateLimitOff runs the node without its per-token rate limit, which
	// would otherwise refuse a busy agent after its burst.
	RateLimitOff bool
	Logger       *slog.Logger
}

// Node is a realm node started by the generator in its own process, on the
// real on-disk store (durable: acknowledged means fsynced), on loopback.
type Node struct {
	URL           string
	OperatorToken string
	// RateLimit is the node's per-token limit in requests per minute; 0: off.
	RateLimit int

	node   *realm.Node
	tmp    string
	cancel context.CancelFunc
	done   chan error
}

// StartNode opens and serves a node named "bench" on 127.0.0.1 with a port
// chosen by the kernel.
func StartNode(opts NodeOptions) (*Node, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	bn := &Node{}
	if opts.Dir == "" {
		tmp, err := os.MkdirTemp("", "relay-bench-")
		if err != nil {
			return nil, err
		}
		opts.Dir, bn.tmp = tmp, tmp
	}
	cfg := realm.DefaultConfig()
	cfg.P2PAddrs = nil // no federation here
	cfg.Realm = "bench"
	cfg.DataDir = opts.Dir
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.Logger = opts.Logger
	if opts.RateLimitOff {
		cfg.RateLimit = 0
	}
	bn.RateLimit = cfg.RateLimit
	n, err := realm.Open(context.Background(), cfg)
	if err != nil {
		bn.removeTmp()
		return nil, err
	}
	if err := n.Listen(); err != nil {
		n.Close()
		bn.removeTmp()
		return nil, err
	}
	secret, err := os.ReadFile(filepath.Join(opts.Dir, "operator.token"))
	if err != nil {
		n.Close()
		bn.removeTmp()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	bn.URL, bn.OperatorToken, bn.node = n.URL(), strings.TrimSpace(string(secret)), n
	bn.cancel, bn.done = cancel, make(chan error, 1)
	go func() { bn.done <- n.Serve(ctx) }()
	return bn, nil
}

// Stop shuts the node down gracefully and removes a temporary directory.
func (bn *Node) Stop() error {
	bn.cancel()
	err := <-bn.done
	bn.removeTmp()
	return err
}

func (bn *Node) removeTmp() {
	if bn.tmp != "" {
		os.RemoveAll(bn.tmp)
	}
}
