package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"relay/realm"
	"relay/testnet"
)

// testnetRealm is one line of `relay testnet --json`; scripts rely on
// exactly these fields.
type testnetRealm struct {
	Realm         string `json:"realm"`
	HTTP          string `json:"http"`
	P2P           string `json:"p2p"`
	PeerID        string `json:"peer_id"`
	OperatorToken string `json:"operator_token"`
}

func testnetCommand() *cli.Command {
	def := realm.DefaultConfig()
	return &cli.Command{
		Name:  "testnet",
		Usage: "run N peered realms on loopback until interrupted",
		Description: "Starts realms r1 … rN on 127.0.0.1 with ports chosen by the kernel, peers them, prints how to reach " +
			"each one and runs until SIGINT or SIGTERM. With --dir the realms keep their data there, and a later run " +
			"with the same --dir starts them again (on new ports, peers re-linked).",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "realms", Value: 3, Usage: "how many realms", EnvVars: []string{"RELAY_TESTNET_REALMS"}},
			&cli.StringFlag{Name: "dir", Usage: "keep the realms' data directories under `DIR` (default: a temporary directory removed on exit)", EnvVars: []string{"RELAY_TESTNET_DIR"}},
			&cli.StringFlag{Name: "topology", Value: "mesh", Usage: "mesh (every realm peers with every other) or line (r1–r2–…–rN: events cross several hops)", EnvVars: []string{"RELAY_TESTNET_TOPOLOGY"}},
			&cli.IntFlag{Name: "rate-limit", Value: def.RateLimit, Usage: "requests per minute per credential at each realm; 0 turns it off", EnvVars: []string{"RELAY_TESTNET_RATE_LIMIT"}},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per realm: realm, http, p2p, peer_id, operator_token", EnvVars: []string{"RELAY_TESTNET_JSON"}},
		},
		Action: func(c *cli.Context) error {
			if _, err := positional(c, 0); err != nil { // a stray word would end the flags unseen
				return err
			}
			cfg := testnet.Config{Realms: c.Int("realms"), Dir: c.String("dir")}
			if cfg.Realms < 1 || cfg.Realms > testnet.MaxRealms {
				return fmt.Errorf("--realms: want 1 to %d, have %d", testnet.MaxRealms, cfg.Realms)
			}
			switch t := c.String("topology"); t {
			case "mesh":
				cfg.Topology = testnet.Mesh
			case "line":
				cfg.Topology = testnet.Line
			default:
				return fmt.Errorf("--topology: want mesh or line, have %q", t)
			}
			switch rl := c.Int("rate-limit"); {
			case rl < 0:
				return fmt.Errorf("--rate-limit: want 0 (off) or more, have %d", rl)
			case rl == 0:
				cfg.RateLimit = -1
			default:
				cfg.RateLimit = rl
			}
			// N realms logging every start-up step drown what matters; a
			// --log-level given on purpose is honoured.
			cfg.Logger = slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))
			if c.IsSet("log-level") {
				cfg.Logger = slog.Default()
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			net, err := testnet.StartContext(ctx, cfg)
			if ctx.Err() != nil { // interrupted while starting: the realms are closed
				fmt.Fprintln(c.App.ErrWriter, "stopped while starting the realms")
				return nil
			}
			if err != nil {
				return err
			}
			rows := make([]testnetRealm, len(net.Realms))
			for i, r := range net.Realms {
				rows[i] = testnetRealm{Realm: r.Name, HTTP: r.URL, P2P: r.P2P(), PeerID: r.Node.PeerID(), OperatorToken: r.OperatorToken}
			}
			if c.Bool("json") {
				err = writeTestnetJSON(c.App.Writer, rows)
				fmt.Fprintf(c.App.ErrWriter, "%s running; interrupt (Ctrl-C) to stop\n", plural(len(rows), "realm"))
			} else {
				err = writeTestnetTable(c.App.Writer, rows, cfg)
			}
			if err == nil {
				<-ctx.Done()
			}
			fmt.Fprintln(c.App.ErrWriter, "stopping the realms")
			if cerr := net.Close(); err == nil {
				err = cerr
			}
			return err
		},
	}
}

func writeTestnetJSON(w io.Writer, rows []testnetRealm) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

func writeTestnetTable(w io.Writer, rows []testnetRealm, cfg testnet.Config) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REALM\tHTTP\tP2P\tPEER ID\tOPERATOR TOKEN")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Realm, r.HTTP, r.P2P, r.PeerID, r.OperatorToken)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	r := rows[0]
	where := "a temporary directory, removed on exit"
	if cfg.Dir != "" {
		where = cfg.Dir + " (kept; run again with the same --dir to resume)"
	}
	var b strings.Builder
	if len(rows) == 1 {
		fmt.Fprintf(&b, "\n1 realm; data in %s.\n", where)
	} else {
		fmt.Fprintf(&b, "\n%s, peered as a %s; data in %s.\n", plural(len(rows), "realm"), topologyName(cfg.Topology), where)
	}
	fmt.Fprintf(&b, "Each operator token acts as that realm's human. Try:\n\n")
	fmt.Fprintf(&b, "  curl -s -H 'Authorization: Bearer %s' %s/api/v1/federation/peers\n", r.OperatorToken, r.HTTP)
	fmt.Fprintf(&b, "  curl -s -H 'Authorization: Bearer %s' -d '{\"kind\":\"propose\",\"body\":\"hello from %s\"}' %s/api/v1/boards/lobby/threads\n", r.OperatorToken, r.Realm, r.HTTP)
	if len(rows) > 1 {
		o := rows[1]
		fmt.Fprintf(&b, "  curl -s %s/api/v1/threads            # the thread reaches %s too\n", o.HTTP, o.Realm)
	}
	fmt.Fprintf(&b, "  relay peer status --node %s --operator-token %s\n", r.HTTP, r.OperatorToken)
	fmt.Fprintf(&b, "  relay peer realms --node %s --operator-token %s\n\n", r.HTTP, r.OperatorToken)
	fmt.Fprintf(&b, "Interrupt (Ctrl-C) to stop.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func topologyName(t testnet.Topology) string {
	if t == testnet.Line {
		return "line"
	}
	return "mesh"
}
