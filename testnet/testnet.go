// Package testnet runs several realm nodes in one process on loopback, for
// tests, demos and benchmarks. Federation (peering, link cuts, misbehaving
// peers) joins it when the federation package grows those hooks.
package testnet

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"relay/realm"
)

// Config says how many realms to run and where.
type Config struct {
	Realms int
	// Dir holds one data directory per realm; empty: a temporary directory
	// removed on Close.
	Dir    string
	Logger *slog.Logger
}

// Realm is one running node of the net.
type Realm struct {
	Name          string
	Node          *realm.Node
	URL           string
	OperatorToken string

	cancel context.CancelFunc
	done   chan error
}

// Net is a set of running realms.
type Net struct {
	Realms []*Realm
	tmp    string
}

// Start opens and serves cfg.Realms realms named r1, r2, … on 127.0.0.1 with
// ports chosen by the kernel.
func Start(cfg Config) (*Net, error) {
	if cfg.Realms < 1 {
		return nil, fmt.Errorf("testnet: want at least one realm")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	net := &Net{}
	if cfg.Dir == "" {
		tmp, err := os.MkdirTemp("", "relay-testnet-")
		if err != nil {
			return nil, err
		}
		cfg.Dir, net.tmp = tmp, tmp
	}
	for i := 1; i <= cfg.Realms; i++ {
		r, err := startRealm(fmt.Sprintf("r%d", i), filepath.Join(cfg.Dir, fmt.Sprintf("r%d", i)), cfg.Logger)
		if err != nil {
			net.Close()
			return nil, err
		}
		net.Realms = append(net.Realms, r)
	}
	return net, nil
}

func startRealm(name, dir string, log *slog.Logger) (*Realm, error) {
	cfg := realm.DefaultConfig()
	cfg.Realm = name
	cfg.DataDir = dir
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.Logger = log.With("realm", name)
	n, err := realm.Open(cfg)
	if err != nil {
		return nil, err
	}
	if err := n.Listen(); err != nil {
		n.Close()
		return nil, err
	}
	secret, err := os.ReadFile(filepath.Join(dir, "operator.token"))
	if err != nil {
		n.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Realm{Name: name, Node: n, URL: n.URL(), OperatorToken: strings.TrimSpace(string(secret)), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- n.Serve(ctx) }()
	return r, nil
}

// Stop shuts the realm down gracefully and waits for it.
func (r *Realm) Stop() error {
	r.cancel()
	return <-r.done
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
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
