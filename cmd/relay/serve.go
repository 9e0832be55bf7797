package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"relay/federation"
	"relay/realm"
	"relay/realm/corpus"
	"relay/store"
)

// serveFlags are the flags of `relay serve` that a config file may set too,
// each under its own name.
func serveFlags() []cli.Flag {
	def := realm.DefaultConfig()
	return []cli.Flag{
		altsrc.NewStringFlag(&cli.StringFlag{Name: "realm", Usage: "realm name, [a-z0-9-]{1,32} (default: the data directory's, else \"local\")", EnvVars: []string{"RELAY_REALM"}}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "data", Value: def.DataDir, Usage: "data directory: realm key, operator secret, store", EnvVars: []string{"RELAY_DATA"}}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "http", Value: def.HTTPAddr, Usage: "HTTP listen address", EnvVars: []string{"RELAY_HTTP"}}),
		altsrc.NewStringSliceFlag(&cli.StringSliceFlag{Name: "p2p", Value: cli.NewStringSlice(def.P2PAddrs...), Usage: "libp2p listen multiaddr (repeatable)", EnvVars: []string{"RELAY_P2P"}}),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "no-p2p", Usage: "do not federate: no libp2p host, no peers (the federation API answers not_found)", EnvVars: []string{"RELAY_NO_P2P"}}),
		altsrc.NewStringSliceFlag(&cli.StringSliceFlag{Name: "peer", Usage: "peer multiaddr with /p2p/<peer id>, dialled and admitted (repeatable)", EnvVars: []string{"RELAY_PEER"}}),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "open-federation", Usage: "admit realms that dial in without being named as peers", EnvVars: []string{"RELAY_OPEN_FEDERATION"}}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "sync-interval", Value: federation.DefaultConfig().SyncInterval, Usage: "how often connected peers compare heads (anti-entropy)", EnvVars: []string{"RELAY_SYNC_INTERVAL"}}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "max-clock-ahead", Value: federation.DefaultConfig().MaxAhead, Usage: "how far past this node's clock a peer's event may be dated; later ones wait until then", EnvVars: []string{"RELAY_MAX_CLOCK_AHEAD"}}),
		&cli.BoolFlag{Name: "restored-is-latest", Usage: "a realm restored from an export writes at once, without waiting to compare its chain with a peer's: no peer holds newer events of it"},
		&cli.BoolFlag{Name: "new-operator-secret", Usage: "give the operator credential a new secret, written to DATA/operator.token; the old one stops working (when that file was lost)"},
		altsrc.NewStringFlag(&cli.StringFlag{Name: "human", Value: def.HumanName, Usage: "the operator's name, given when the realm is created: the human is human:<name> (default: the realm's, else \"operator\")", EnvVars: []string{"RELAY_HUMAN"}}),
		altsrc.NewStringSliceFlag(&cli.StringSliceFlag{Name: "allowed-host", Usage: "Host header MCP accepts on a loopback connection, for a reverse proxy (repeatable)", EnvVars: []string{"RELAY_ALLOWED_HOST"}}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "rate-limit", Value: def.RateLimit, Usage: "requests per minute per credential (and per address without one); 0 turns it off", EnvVars: []string{"RELAY_RATE_LIMIT"}}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "search-cache", Value: corpus.DefaultMessageCacheBytes >> 20, Usage: "MiB of decoded messages corpus search keeps in memory; 0 keeps none", EnvVars: []string{"RELAY_SEARCH_CACHE"}}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "min-free-disk", Value: store.DefaultMinFreeBytes >> 20, Usage: "MiB of free disk, beyond what flushing the memtables will write, under which the store refuses writes (it takes them again once as much more is free); 0 turns the check off", EnvVars: []string{"RELAY_MIN_FREE_DISK"}}),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "in-memory", Usage: "keep the store in memory (nothing survives; for demos); needs a data directory that holds no realm yet", EnvVars: []string{"RELAY_IN_MEMORY"}}),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "trust-forwarded-proto", Usage: "take X-Forwarded-Proto: https from a reverse proxy as TLS (console cookies become Secure); only behind a proxy that sets it", EnvVars: []string{"RELAY_TRUST_FORWARDED_PROTO"}}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "session-ttl", Value: def.Sessions.TTL, Usage: "how long an idle console session lives", EnvVars: []string{"RELAY_SESSION_TTL"}}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "session-max-age", Value: def.Sessions.MaxAge, Usage: "how long a console session lives at most", EnvVars: []string{"RELAY_SESSION_MAX_AGE"}}),
	}
}

func serveCommand() *cli.Command { return serveCommandWith(serve) }

// serveCommandWith is `relay serve` handing its config to start; tests pass
// a start that only records it.
func serveCommandWith(start func(context.Context, realm.Config, io.Writer) error) *cli.Command {
	flags := serveFlags()
	return &cli.Command{
		Name:  "serve",
		Usage: "run a realm node",
		Description: "Each setting comes from the first of: the command line, the RELAY_* environment variables, " +
			"the --config file, the default. The config file is TOML (key = value lines) or, when its name ends in .json, a JSON object; " +
			"its keys are the flag names, and p2p, peer and allowed-host take a list.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "read flags not given otherwise from `FILE` (TOML, or JSON when it ends in .json)", EnvVars: []string{"RELAY_CONFIG"}, TakesFile: true},
		}, flags...),
		Before: func(c *cli.Context) error { return applyConfigFile(c, c.String("config"), flags) },
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return fmt.Errorf("serve takes flags only, not %q", c.Args().First())
			}
			cfg, err := serveConfig(c)
			if err != nil {
				return err
			}
			return start(c.Context, cfg, c.App.Writer)
		},
	}
}

// serveConfig turns the flags into the node's config.
func serveConfig(c *cli.Context) (realm.Config, error) {
	cfg := realm.DefaultConfig()
	cfg.Realm = c.String("realm")
	cfg.DataDir = c.String("data")
	cfg.HTTPAddr = c.String("http")
	cfg.P2PAddrs = nonEmpty(c.StringSlice("p2p"))
	cfg.Peers = nonEmpty(c.StringSlice("peer"))
	cfg.OpenFederation = c.Bool("open-federation")
	cfg.SyncInterval = c.Duration("sync-interval")
	cfg.MaxClockAhead = c.Duration("max-clock-ahead")
	switch mb := c.Int("min-free-disk"); {
	case mb < 0 || int64(mb) > math.MaxInt64>>20:
		return cfg, fmt.Errorf("--min-free-disk: want 0 (off) or more MiB, have %d", mb)
	case mb == 0:
		cfg.MinFreeBytes = -1
	default:
		cfg.MinFreeBytes = int64(mb) << 20
	}
	cfg.HumanName = c.String("human")
	cfg.NewOperatorSecret = c.Bool("new-operator-secret")
	cfg.RestoredIsLatest = c.Bool("restored-is-latest")
	cfg.AllowedHosts = c.StringSlice("allowed-host")
	cfg.InMemory = c.Bool("in-memory")
	cfg.RateLimit = c.Int("rate-limit")
	switch mb := c.Int("search-cache"); {
	case mb < 0 || mb > math.MaxInt>>20:
		return cfg, fmt.Errorf("--search-cache: want 0 (none) to %d MiB, have %d", math.MaxInt>>20, mb)
	case mb == 0:
		cfg.SearchCacheBytes = -1
	default:
		cfg.SearchCacheBytes = mb << 20
	}
	cfg.TrustForwardedProto = c.Bool("trust-forwarded-proto")
	cfg.Sessions.TTL = c.Duration("session-ttl")
	cfg.Sessions.MaxAge = c.Duration("session-max-age")
	if cfg.Sessions.TTL < 0 || cfg.Sessions.MaxAge < 0 {
		return cfg, fmt.Errorf("--session-ttl and --session-max-age: want 0 (the default) or more, have %v and %v", cfg.Sessions.TTL, cfg.Sessions.MaxAge)
	}
	if cfg.RateLimit < 0 {
		return cfg, fmt.Errorf("--rate-limit: want 0 (off) or more, have %d", cfg.RateLimit)
	}
	if cfg.SyncInterval <= 0 {
		return cfg, fmt.Errorf("--sync-interval: want more than 0, have %v", cfg.SyncInterval)
	}
	if cfg.MaxClockAhead <= 0 {
		return cfg, fmt.Errorf("--max-clock-ahead: want more than 0, have %v", cfg.MaxClockAhead)
	}
	if c.Bool("no-p2p") {
		cfg.P2PAddrs = nil
	}
	if len(cfg.P2PAddrs) == 0 {
		// Peers would be dropped without a word: say so instead.
		if len(cfg.Peers) > 0 {
			return cfg, fmt.Errorf("--peer needs federation, which --no-p2p (or an empty --p2p) turns off")
		}
		if cfg.OpenFederation {
			return cfg, fmt.Errorf("--open-federation needs federation, which --no-p2p (or an empty --p2p) turns off")
		}
	}
	cfg.Logger = slog.Default()
	return cfg, nil
}

// nonEmpty drops blank entries, so that `--p2p ""` means no addresses.
func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func serve(ctx context.Context, cfg realm.Config, out io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// The first signal starts a graceful shutdown; a second one ends
		// the process at once, as signals do by default.
		<-ctx.Done()
		stop()
	}()
	// A bad or busy HTTP address is found before the data directory is
	// made and its realm pinned, so that a typo costs nothing to retry.
	// The HTTP port stays bound while the p2p ports are tried, so that the
	// two set to one port is found too.
	l, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("--http %s: %w", cfg.HTTPAddr, err)
	}
	err = federation.CheckListenFree(cfg.P2PAddrs)
	l.Close()
	if err != nil {
		return err
	}
	n, err := realm.Open(ctx, cfg)
	if err != nil {
		// A signal while the store opens (a large one takes seconds) is
		// a stop as asked, not a failure of the step it cut short; Open
		// has closed the store.
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			fmt.Fprintln(out, "stopped while starting")
			return nil
		}
		return err
	}
	if err := n.Listen(); err != nil {
		n.Close()
		return err
	}
	fmt.Fprintf(out, "realm %s serving at %s (peer id %s)\n", n.Realm(), n.URL(), n.PeerID())
	fmt.Fprintf(out, "operator console: %s/console/login\n", n.URL())
	if f := n.Federation(); f != nil {
		fmt.Fprintln(out, "p2p addresses (give one to another operator for `relay peer add` or --peer):")
		for _, a := range f.Addrs() {
			fmt.Fprintf(out, "  %s\n", a)
		}
	} else {
		fmt.Fprintln(out, "federation off: no p2p listen address")
	}
	secretFile := filepath.Join(cfg.DataDir, "operator.token")
	switch _, err := os.Stat(secretFile); {
	case n.OperatorTokenFile != "":
		fmt.Fprintf(out, "operator secret written to %s (keep it; it acts as the realm's human)\n", n.OperatorTokenFile)
	case err == nil:
		fmt.Fprintf(out, "operator secret: %s\n", secretFile)
	default:
		fmt.Fprintf(out, "operator secret: %s is missing; start with --new-operator-secret to write a new one there (the old secret then stops working)\n", secretFile)
	}
	return n.Serve(ctx)
}
