package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"relay/testnet/bench"
)

func benchCommand() *cli.Command {
	def := bench.DefaultOptions()
	dc := def.Corpus
	return &cli.Command{
		Name:  "bench",
		Usage: "measure the forum's durable posts over HTTP and MCP, the corpus's appends, search, sync and fan-out, and the ceiling of HTTP alone",
		Description: "Forum (http, mcp): issues one write token and one thread per agent, then each agent posts notes in a closed loop " +
			"over HTTP and over MCP (tools/call). Corpus: registers one corpus agent per client (POST /register, GET /auth.md); " +
			"search loads the corpus to --corpus-messages through the same HTTP writes and runs queries of 1-3 words; " +
			"sync copies it with a fresh client by snapshot then changes (and by changes alone); appends measures durable appends " +
			"from every agent at once; fanout opens --subscribers streams and measures delivery from each write's ack. " +
			"ceiling: the http loop against a trivial JSON handler in this process. " +
			"By default the node runs in this process on a durable store in a temporary directory. " +
			"Groups for --phases: parley (http,mcp), corpus (search,sync,appends,fanout), all.",
		Subcommands: []*cli.Command{benchFederationCommand()},
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "concurrency", Value: def.Concurrency, Usage: "agents posting at once, each with its own token and thread", EnvVars: []string{"RELAY_BENCH_CONCURRENCY"}},
			&cli.DurationFlag{Name: "duration", Value: def.Duration, Usage: "measured time of each phase", EnvVars: []string{"RELAY_BENCH_DURATION"}},
			&cli.DurationFlag{Name: "warmup", Value: def.Warmup, Usage: "unmeasured time before each phase's window", EnvVars: []string{"RELAY_BENCH_WARMUP"}},
			&cli.StringFlag{Name: "phases", Value: strings.Join(def.Phases, ","), Usage: "phases to run, in order: http, mcp, search, sync, appends, fanout, ceiling, or the groups parley, corpus, all", EnvVars: []string{"RELAY_BENCH_PHASES"}},
			&cli.IntFlag{Name: "runs", Value: dc.Runs, Usage: "measured runs of each corpus phase (medians are reported)", EnvVars: []string{"RELAY_BENCH_RUNS"}},
			&cli.IntFlag{Name: "corpus-messages", Value: dc.Messages, Usage: "messages in the corpus that search and sync run over (loaded over HTTP as needed)", EnvVars: []string{"RELAY_BENCH_CORPUS_MESSAGES"}},
			&cli.IntFlag{Name: "conversation-size", Value: dc.ConversationSize, Usage: "messages per conversation while loading the corpus", EnvVars: []string{"RELAY_BENCH_CONVERSATION_SIZE"}},
			&cli.IntFlag{Name: "vocabulary", Value: dc.Vocabulary, Usage: "distinct words messages and queries are drawn from (Zipf-distributed)", EnvVars: []string{"RELAY_BENCH_VOCABULARY"}},
			&cli.StringFlag{Name: "search-clients", Value: joinInts(dc.SearchClients), Usage: "concurrent searchers, one search loop per value", EnvVars: []string{"RELAY_BENCH_SEARCH_CLIENTS"}},
			&cli.IntFlag{Name: "search-limit", Value: dc.SearchLimit, Usage: "results per search, 1..1000 (0: the node's default, 100)", EnvVars: []string{"RELAY_BENCH_SEARCH_LIMIT"}},
			&cli.IntFlag{Name: "queries", Value: dc.Queries, Usage: "queries drawn, cycled through by the search phase", EnvVars: []string{"RELAY_BENCH_QUERIES"}},
			&cli.IntFlag{Name: "sync-page", Value: dc.SyncPage, Usage: "records per snapshot and changes page, 1..1000", EnvVars: []string{"RELAY_BENCH_SYNC_PAGE"}},
			&cli.Float64Flag{Name: "sync-write-rate", Value: dc.SyncWriteRate, Usage: "messages per second appended while a sync runs (0: none)", EnvVars: []string{"RELAY_BENCH_SYNC_WRITE_RATE"}},
			&cli.IntFlag{Name: "subscribers", Value: dc.Subscribers, Usage: "streams the fanout phase opens", EnvVars: []string{"RELAY_BENCH_SUBSCRIBERS"}},
			&cli.Float64Flag{Name: "fanout-rate", Value: dc.FanoutRate, Usage: "writes per second during the fanout phase, for --duration", EnvVars: []string{"RELAY_BENCH_FANOUT_RATE"}},
			&cli.StringFlag{Name: "node", Usage: "a running node's base URL (default: start one in this process)", EnvVars: []string{"RELAY_BENCH_NODE"}},
			&cli.StringFlag{Name: "data", Usage: "keep the in-process node's store in `DIR` (reused: a corpus loaded there is not loaded again); default a temporary directory, removed", EnvVars: []string{"RELAY_BENCH_DATA"}},
			&cli.StringFlag{Name: "operator-token-file", Value: defaultOperatorTokenFile(), Usage: "file holding the operator secret of --node (the forum phases need it)", EnvVars: []string{"RELAY_BENCH_OPERATOR_TOKEN_FILE"}},
			&cli.BoolFlag{Name: "rate-limit-off", Value: def.RateLimitOff, Usage: "run the in-process node without its per-token rate limit (--rate-limit-off=false keeps it)", EnvVars: []string{"RELAY_BENCH_RATE_LIMIT_OFF"}},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of this process (the in-process node and the generator) during one phase's window to `FILE`", EnvVars: []string{"RELAY_BENCH_CPUPROFILE"}},
			&cli.StringFlag{Name: "cpuprofile-phase", Value: def.ProfilePhase, Usage: "the phase --cpuprofile covers", EnvVars: []string{"RELAY_BENCH_CPUPROFILE_PHASE"}},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object instead of the table", EnvVars: []string{"RELAY_BENCH_JSON"}},
		},
		Action: func(c *cli.Context) error {
			if _, err := positional(c, 0); err != nil { // a stray word would end the flags unseen
				return err
			}
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
			opts.Corpus.Runs = c.Int("runs")
			opts.Corpus.Messages = c.Int("corpus-messages")
			opts.Corpus.ConversationSize = c.Int("conversation-size")
			opts.Corpus.Vocabulary = c.Int("vocabulary")
			clients, err := parseInts(c.String("search-clients"))
			if err != nil {
				return fmt.Errorf("--search-clients: %w", err)
			}
			opts.Corpus.SearchClients = clients
			opts.Corpus.SearchLimit = c.Int("search-limit")
			opts.Corpus.Queries = c.Int("queries")
			opts.Corpus.SyncPage = c.Int("sync-page")
			opts.Corpus.SyncWriteRate = c.Float64("sync-write-rate")
			opts.Corpus.Subscribers = c.Int("subscribers")
			opts.Corpus.FanoutRate = c.Float64("fanout-rate")
			opts.RateLimitOff = c.Bool("rate-limit-off")
			opts.NodeDir = c.String("data")
			// The in-process node logs only what goes wrong: its info lines
			// (a token issued per agent) are noise here.
			opts.NodeLogger = slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))
			opts.Progress = c.App.ErrWriter
			if opts.Node = c.String("node"); opts.Node != "" {
				phases, err := bench.ExpandPhases(opts.Phases)
				if err != nil {
					return err
				}
				// Only the forum phases issue tokens; the corpus's agents
				// register themselves.
				if slices.Contains(phases, bench.PhaseHTTP) || slices.Contains(phases, bench.PhaseMCP) {
					b, err := os.ReadFile(c.String("operator-token-file"))
					if err != nil {
						return fmt.Errorf("operator secret: %w", err)
					}
					opts.OperatorToken = strings.TrimSpace(string(b))
				}
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

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
