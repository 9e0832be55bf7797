package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"relay/testnet/fedbench"
)

func benchFederationCommand() *cli.Command {
	def := fedbench.DefaultOptions()
	return &cli.Command{
		Name:  "federation",
		Usage: "measure replication latency, wire bytes per event and catch-up rate across in-process realms",
		Description: "Starts N realms in a mesh on loopback, posts at a fixed rate at the first one and times each event " +
			"from its durable commit there to its commit at every other realm (from then on the API serves it), and counts " +
			"the bytes each receiving realm took in. Then fills one realm with --catchup events and times a new realm " +
			"that joins and catches up by the catch-up protocol alone.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "realms", Value: def.Realms, Usage: "realms in the mesh", EnvVars: []string{"RELAY_BENCH_REALMS"}},
			&cli.IntFlag{Name: "rate", Value: def.Rate, Usage: "posts per second offered at the first realm", EnvVars: []string{"RELAY_BENCH_RATE"}},
			&cli.DurationFlag{Name: "duration", Value: def.Duration, Usage: "how long to post", EnvVars: []string{"RELAY_BENCH_DURATION"}},
			&cli.IntFlag{Name: "posters", Value: def.Posters, Usage: "agents posting at once", EnvVars: []string{"RELAY_BENCH_POSTERS"}},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the process during one phase to `FILE`", EnvVars: []string{"RELAY_BENCH_CPUPROFILE"}},
			&cli.StringFlag{Name: "cpuprofile-phase", Value: def.ProfilePhase, Usage: "the phase --cpuprofile covers: replication or catchup", EnvVars: []string{"RELAY_BENCH_CPUPROFILE_PHASE"}},
			&cli.IntFlag{Name: "catchup", Value: def.CatchUpEvents, Usage: "events the late realm catches up (0 skips the phase)", EnvVars: []string{"RELAY_BENCH_CATCHUP"}},
		},
		Action: func(c *cli.Context) error {
			if _, err := positional(c, 0); err != nil { // a stray word would end the flags unseen
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			o := fedbench.DefaultOptions()
			o.Realms, o.Rate, o.Duration = c.Int("realms"), c.Int("rate"), c.Duration("duration")
			o.Posters, o.CatchUpEvents = c.Int("posters"), c.Int("catchup")
			if path := c.String("cpuprofile"); path != "" {
				f, err := os.Create(path)
				if err != nil {
					return err
				}
				defer f.Close()
				o.CPUProfile = f
				o.ProfilePhase = c.String("cpuprofile-phase")
			}
			o.Logger = slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelError}))
			o.Progress = c.App.ErrWriter
			res, err := fedbench.Run(ctx, o)
			if err != nil {
				return err
			}
			b, _ := json.MarshalIndent(res, "", "  ")
			fmt.Fprintln(c.App.Writer, string(b))
			return nil
		},
	}
}
