package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"relay/realm"
)

func run(args []string) error { return newApp().Run(args) }

// newApp is the command line; tests set its Reader and Writers.
func newApp() *cli.App {
	return &cli.App{
		Name:                 "relay",
		Usage:                "a federated realm node where AI agents think together",
		Version:              realm.Version,
		EnableBashCompletion: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", EnvVars: []string{"RELAY_LOG_LEVEL"}},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json", EnvVars: []string{"RELAY_LOG_FORMAT"}},
		},
		Before: func(c *cli.Context) error { return setupLogging(c.String("log-level"), c.String("log-format")) },
		Commands: []*cli.Command{
			serveCommand(),
			tokenCommand(),
			exportCommand(),
			importCommand(),
			benchCommand(),
			{
				Name:  "version",
				Usage: "print the version",
				Action: func(c *cli.Context) error {
					fmt.Fprintln(c.App.Writer, "relay", realm.Version)
					return nil
				},
			},
		},
	}
}

func setupLogging(level, format string) error {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch strings.ToLower(format) {
	case "text":
		h = slog.NewTextHandler(os.Stderr, opts)
	case "json":
		h = slog.NewJSONHandler(os.Stderr, opts)
	default:
		return fmt.Errorf("--log-format: want text or json, have %q", format)
	}
	slog.SetDefault(slog.New(h))
	return nil
}

func serveCommand() *cli.Command {
	def := realm.DefaultConfig()
	return &cli.Command{
		Name:  "serve",
		Usage: "run a realm node",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "realm", Usage: "realm name, [a-z0-9-]{1,32} (default: the data directory's, else \"local\")", EnvVars: []string{"RELAY_REALM"}},
			&cli.StringFlag{Name: "data", Value: def.DataDir, Usage: "data directory: realm key, operator secret, store", EnvVars: []string{"RELAY_DATA"}},
			&cli.StringFlag{Name: "http", Value: def.HTTPAddr, Usage: "HTTP listen address", EnvVars: []string{"RELAY_HTTP"}},
			&cli.StringSliceFlag{Name: "p2p", Value: cli.NewStringSlice(def.P2PAddrs...), Usage: "libp2p listen multiaddr (repeatable)", EnvVars: []string{"RELAY_P2P"}},
			&cli.StringSliceFlag{Name: "peer", Usage: "peer multiaddr with /p2p/<peer id> (repeatable)", EnvVars: []string{"RELAY_PEER"}},
			&cli.StringFlag{Name: "human", Value: def.HumanName, Usage: "the operator's name: the human is human:<name>", EnvVars: []string{"RELAY_HUMAN"}},
			&cli.StringSliceFlag{Name: "allowed-host", Usage: "Host header MCP accepts on a loopback connection, for a reverse proxy (repeatable)", EnvVars: []string{"RELAY_ALLOWED_HOST"}},
			&cli.IntFlag{Name: "rate-limit", Value: def.RateLimit, Usage: "requests per minute per credential (and per address without one); 0 turns it off", EnvVars: []string{"RELAY_RATE_LIMIT"}},
			&cli.BoolFlag{Name: "in-memory", Usage: "keep the store in memory (nothing survives; for demos)", EnvVars: []string{"RELAY_IN_MEMORY"}},
		},
		Action: func(c *cli.Context) error {
			cfg := realm.DefaultConfig()
			cfg.Realm = c.String("realm")
			cfg.DataDir = c.String("data")
			cfg.HTTPAddr = c.String("http")
			cfg.P2PAddrs = c.StringSlice("p2p")
			cfg.Peers = c.StringSlice("peer")
			cfg.HumanName = c.String("human")
			cfg.AllowedHosts = c.StringSlice("allowed-host")
			cfg.InMemory = c.Bool("in-memory")
			cfg.RateLimit = c.Int("rate-limit")
			if cfg.RateLimit < 0 {
				return fmt.Errorf("--rate-limit: want 0 (off) or more, have %d", cfg.RateLimit)
			}
			cfg.Logger = slog.Default()
			return serve(c.Context, cfg, c.App.Writer)
		},
	}
}

func serve(ctx context.Context, cfg realm.Config, out interface{ Write([]byte) (int, error) }) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := realm.Open(cfg)
	if err != nil {
		return err
	}
	if err := n.Listen(); err != nil {
		n.Close()
		return err
	}
	fmt.Fprintf(out, "realm %s serving at %s (peer id %s)\n", n.Realm(), n.URL(), n.PeerID())
	if n.OperatorTokenFile != "" {
		fmt.Fprintf(out, "operator secret written to %s (keep it; it acts as the realm's human)\n", n.OperatorTokenFile)
	} else {
		fmt.Fprintf(out, "operator secret: %s/operator.token\n", strings.TrimRight(cfg.DataDir, "/"))
	}
	return n.Serve(ctx)
}
