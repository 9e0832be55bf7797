package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"relay/testnet/bench"
)

func benchCommand() *cli.Command {
	def := bench.DefaultOptions()
	return &cli.Command{
		Name:  "bench",
		Usage: "measure durable posts per second over HTTP and MCP, next to the ceiling of HTTP alone",
		Description: "Issues one write token and one thread per agent, then each agent posts notes in a closed loop: " +
			"over HTTP, over MCP (tools/call), and against a trivial JSON handler in this process (the ceiling). " +
			"By default the node runs in this process on a durable store in a temporary directory.",
		Subcommands: []*cli.Command{benchFederationCommand()},
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "concurrency", Value: def.Concurrency, Usage: "agents posting at once, each with its own token and thread", EnvVars: []string{"RELAY_BENCH_CONCURRENCY"}},
			&cli.DurationFlag{Name: "duration", Value: def.Duration, Usage: "measured time of each phase", EnvVars: []string{"RELAY_BENCH_DURATION"}},
			&cli.DurationFlag{Name: "warmup", Value: def.Warmup, Usage: "unmeasured time before each phase's window", EnvVars: []string{"RELAY_BENCH_WARMUP"}},
			&cli.StringFlag{Name: "phases", Value: strings.Join(def.Phases, ","), Usage: "phases to run, in order: http, mcp, ceiling", EnvVars: []string{"RELAY_BENCH_PHASES"}},
			&cli.StringFlag{Name: "node", Usage: "a running node's base URL (default: start one in this process)", EnvVars: []string{"RELAY_BENCH_NODE"}},
			&cli.StringFlag{Name: "operator-token-file", Value: "./data/operator.token", Usage: "file holding the operator secret of --node", EnvVars: []string{"RELAY_BENCH_OPERATOR_TOKEN_FILE"}},
			&cli.BoolFlag{Name: "rate-limit-off", Value: def.RateLimitOff, Usage: "run the in-process node without its per-token rate limit (--rate-limit-off=false keeps it)", EnvVars: []string{"RELAY_BENCH_RATE_LIMIT_OFF"}},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of this process (the in-process node and the generator) during one phase's window to `FILE`", EnvVars: []string{"RELAY_BENCH_CPUPROFILE"}},
			&cli.StringFlag{Name: "cpuprofile-phase", Value: def.ProfilePhase, Usage: "the phase --cpuprofile covers", EnvVars: []string{"RELAY_BENCH_CPUPROFILE_PHASE"}},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object instead of the table", EnvVars: []string{"RELAY_BENCH_JSON"}},
		},
		Action: func(c *cli.Context) error {
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts := bench.DefaultOptions()
			opts.Concurrency = c.Int("concurrency")
			opts.Duration = c.Duration("duration")
			opts.Warmup = c.Duration("warmup")
			opts.Phases = nil
			for _, p := range strings.Split(c.String("phases"), ",") {
				if p = strings.TrimSpace(p); p != "" {
					opts.Phases = append(opts.Phases, p)
				}
			}
			opts.RateLimitOff = c.Bool("rate-limit-off")
			// The in-process node logs only what goes wrong: its info lines
			// (a token issued per agent) are noise here.
			opts.NodeLogger = slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))
			opts.Progress = c.App.ErrWriter
			if opts.Node = c.String("node"); opts.Node != "" {
				b, err := os.ReadFile(c.String("operator-token-file"))
				if err != nil {
					return fmt.Errorf("operator secret: %w", err)
				}
				opts.OperatorToken = strings.TrimSpace(string(b))
			}
			if path := c.String("cpuprofile"); path != "" {
				f, err := os.Create(path)
				if err != nil {
					return err
				}
				defer f.Close()
				opts.CPUProfile = f
				opts.ProfilePhase = c.String("cpuprofile-phase")
			}
			rep, err := bench.Run(ctx, opts)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return rep.WriteTable(c.App.Writer)
		},
	}
}
