package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"relay/realm"
)

// peerCommand manages federation peers and blocks through the running
// node's operator API (/api/v1/federation/…).
func peerCommand() *cli.Command {
	// Each subcommand gets flags of its own: a cli.Flag keeps state.
	flags := func(more ...cli.Flag) []cli.Flag {
		jsonFlag := &cli.BoolFlag{Name: "json", Usage: "print the node's answer as JSON", EnvVars: []string{"RELAY_PEER_JSON"}}
		return append(append(nodeFlags(), jsonFlag), more...)
	}
	return &cli.Command{
		Name:   "peer",
		Usage:  "federation peers, realms and blocks, through a running node",
		Action: unknownCommand,
		Description: "Each subcommand calls the node's operator API as its human (--node, --operator-token-file). " +
			"A node started with --no-p2p does not federate and answers not_found.",
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "add a peer by its multiaddr ending in /p2p/<peer id>; it is kept, admitted and dialled",
				ArgsUsage: "ADDR",
				Flags:     flags(),
				Action: operatorCall(1, func(c *cli.Context, args []string) (string, string, any) {
					return http.MethodPost, "/api/v1/federation/peers", map[string]string{"addr": args[0]}
				}, func(c *cli.Context, args []string, out *realm.PeerOut) error {
					if out.Peer.State == "connected" {
						fmt.Fprintf(c.App.Writer, "added peer %s (connected)\n", out.Peer.PeerID)
					} else {
						fmt.Fprintf(c.App.Writer, "added peer %s (%s); `relay peer list` shows when it connects\n", out.Peer.PeerID, out.Peer.State)
					}
					return nil
				}),
			},
			{
				Name:  "list",
				Usage: "list the peers with their connection state",
				Flags: flags(),
				Action: operatorCall(0, func(c *cli.Context, args []string) (string, string, any) {
					return http.MethodGet, "/api/v1/federation/peers", nil
				}, func(c *cli.Context, args []string, out *realm.PeersOut) error {
					return writePeers(c.App.Writer, *out)
				}),
			},
			{
				Name:      "remove",
				Usage:     "remove a peer and hang up on it",
				ArgsUsage: "PEER_ID",
				Flags:     flags(),
				Action: operatorCall(1, func(c *cli.Context, args []string) (string, string, any) {
					return http.MethodDelete, "/api/v1/federation/peers/" + url.PathEscape(args[0]), nil
				}, func(c *cli.Context, args []string, out *realm.DoneOut) error {
					_, err := fmt.Fprintf(c.App.Writer, "removed peer %s\n", args[0])
					return err
				}),
			},
			{
				Name:      "block",
				Usage:     "block a realm: its events are no longer stored, served or relayed",
				ArgsUsage: "REALM",
				Flags:     flags(&cli.StringFlag{Name: "reason", Usage: "a note for the record (at most 500 characters)", EnvVars: []string{"RELAY_BLOCK_REASON"}}),
				Action: operatorCall(1, func(c *cli.Context, args []string) (string, string, any) {
					return http.MethodPost, "/api/v1/federation/blocks", map[string]string{"realm": args[0], "reason": c.String("reason")}
				}, func(c *cli.Context, args []string, out *realm.BlockOut) error {
					_, err := fmt.Fprintf(c.App.Writer, "blocked realm %s\n", out.Block.Realm)
					return err
				}),
			},
			{
				Name:      "unblock",
				Usage:     "unblock a realm (and lift a quarantine); sync resumes",
				ArgsUsage: "REALM",
				Flags:     flags(),
				Action: operatorCall(1, func(c *cli.Context, args []string) (string, string, any) {
					return http.MethodDelete, "/api/v1/federation/blocks/" + url.PathEscape(args[0]), nil
				}, func(c *cli.Context, args []string, out *realm.DoneOut) error {
					_, err := fmt.Fprintf(c.App.Writer, "unblocked realm %s\n", args[0])
					return err
				}),
			},
			{
				Name:  "realms",
				Usage: "list every realm held or known: head, lag, block and quarantine",
				Flags: flags(),
				Action: operatorCall(0, func(c *cli.Context, args []string) (string, string, any) {
					return http.MethodGet, "/api/v1/federation/realms", nil
				}, func(c *cli.Context, args []string, out *realm.RealmsOut) error {
					return writeRealms(c.App.Writer, *out)
				}),
			},
			{
				Name:  "status",
				Usage: "the federation at a glance: addresses to give out, counters, conflicts, blocks",
				Flags: flags(),
				Action: operatorCall(0, func(c *cli.Context, args []string) (string, string, any) {
					return http.MethodGet, "/api/v1/federation", nil
				}, func(c *cli.Context, args []string, out *realm.FederationOut) error {
					return writeStatus(c.App.Writer, *out)
				}),
			},
		},
	}
}

// operatorCall is the action of a subcommand that calls the running node's
// operator API: it takes exactly n arguments, sends the request call makes
// of them, and prints the answer, as the node gave it with --json, else by
// show.
func operatorCall[T any](n int, call func(c *cli.Context, args []string) (method, path string, body any), show func(c *cli.Context, args []string, out *T) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		args, err := positional(c, n)
		if err != nil {
			return err
		}
		method, path, body := call(c, args)
		var out T
		raw, err := callNode(c, method, path, body, &out)
		if err != nil || c.Bool("json") {
			return writeRaw(c, raw, err)
		}
		return show(c, args, &out)
	}
}

// positional returns exactly n arguments. Flags written after them
// (`relay peer block evil --reason spam`), which the flag parser leaves
// among the arguments, are applied here.
func positional(c *cli.Context, n int) ([]string, error) {
	var args []string
	rest := c.Args().Slice()
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			args = append(args, rest[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			args = append(args, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := lookupFlag(c.Command.Flags, name)
		if f == nil {
			return nil, fmt.Errorf("%s: unknown flag %s", commandPath(c), a)
		}
		if _, isBool := f.(*cli.BoolFlag); isBool && !hasValue {
			value, hasValue = "true", true
		}
		if !hasValue {
			if i+1 == len(rest) {
				return nil, fmt.Errorf("%s: flag %s needs a value", commandPath(c), a)
			}
			i++
			value = rest[i]
		}
		if err := c.Set(name, value); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", commandPath(c), a, err)
		}
	}
	if n == 0 && len(args) > 0 {
		return nil, fmt.Errorf("unexpected argument %q: %s takes flags only", args[0], commandPath(c))
	}
	if len(args) != n {
		usage := commandPath(c)
		if c.Command.ArgsUsage != "" {
			usage += " " + c.Command.ArgsUsage
		}
		return nil, fmt.Errorf("usage: %s (want %d argument(s), have %d)", usage, n, len(args))
	}
	return args, nil
}

// commandPath is the command as typed: "relay peer add".
func commandPath(c *cli.Context) string {
	var names []string
	for _, l := range c.Lineage() {
		if l.Command != nil && l.Command.Name != "" {
			names = append([]string{l.Command.Name}, names...)
		}
	}
	return strings.Join(names, " ")
}

func lookupFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// writeRaw prints the node's answer as it came, or passes err on.
func writeRaw(c *cli.Context, raw []byte, err error) error {
	if err != nil {
		return err
	}
	if _, err := c.App.Writer.Write(raw); err != nil {
		return err
	}
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		_, err = io.WriteString(c.App.Writer, "\n")
	}
	return err
}

func writePeers(w io.Writer, out realm.PeersOut) error {
	if len(out.Peers) == 0 {
		_, err := fmt.Fprintln(w, "no peers; add one with `relay peer add ADDR`")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER ID\tREALM\tSTATE\tSOURCE\tLAST SYNC\tADDRESS\tLAST ERROR")
	for _, p := range out.Peers {
		addr := "-"
		if len(p.Addrs) > 0 {
			addr = p.Addrs[0]
			if len(p.Addrs) > 1 {
				addr += fmt.Sprintf(" (+%d)", len(p.Addrs)-1)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.PeerID, orDash(p.Realm), p.State, p.Source, ago(p.LastSync), addr, orDash(lastError(p.LastError, 60)))
	}
	return tw.Flush()
}

func writeRealms(w io.Writer, out realm.RealmsOut) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// STATE last: what a parked event waits for is the end of its text.
	fmt.Fprintln(tw, "REALM\tHELD\tSEEN\tLAG\tPEER ID\tSTATE")
	for _, r := range out.Realms {
		state := "following"
		switch {
		case r.Local:
			state = "local"
		case r.Blocked:
			state = "blocked"
		case r.Quarantined != "":
			state = "quarantined: " + oneLine(r.Quarantined, 240)
		case r.Waiting != "" && r.Parked > 0:
			state = "parked: " + oneLine(r.Waiting, 240)
		case r.Waiting != "":
			state = "waiting: " + oneLine(r.Waiting, 240)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", r.Realm, r.Seq, r.Highest, r.Lag, orDash(r.PeerID), state)
	}
	return tw.Flush()
}

func writeStatus(w io.Writer, out realm.FederationOut) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "realm\t%s\n", out.Realm)
	fmt.Fprintf(tw, "peer id\t%s\n", out.PeerID)
	for i, a := range out.Addrs {
		label := ""
		if i == 0 {
			label = "addresses"
		}
		fmt.Fprintf(tw, "%s\t%s\n", label, a)
	}
	fmt.Fprintf(tw, "peers connected\t%d\n", out.PeersConnected)
	fmt.Fprintf(tw, "events published\t%d\n", out.Counters.Published)
	fmt.Fprintf(tw, "events received\t%s\n", counts(out.Counters.Received))
	fmt.Fprintf(tw, "refused\t%s\n", counts(out.Counters.Refused))
	var blocked []string
	for _, b := range out.Blocked {
		s := string(b.Realm)
		if b.Reason != "" {
			s += " (" + oneLine(b.Reason, 60) + ")"
		}
		blocked = append(blocked, s)
	}
	fmt.Fprintf(tw, "blocked\t%s\n", orDash(strings.Join(blocked, ", ")))
	for _, k := range out.Conflicts {
		fmt.Fprintf(tw, "KEY CONFLICT\trealm %s is pinned to %s; %s claimed it (refused) at %s\n", k.Realm, k.Pinned, k.Claimed, k.At.Format(time.RFC3339))
	}
	for _, e := range out.Equivocations {
		fmt.Fprintf(tw, "EQUIVOCATION\trealm %s, seq %d: two events for one seq, evidence kept: %s\n", e.Realm, e.Seq, e.CID)
	}
	for _, a := range out.OwnChain {
		fmt.Fprintf(tw, "THIS REALM'S KEY SIGNS ELSEWHERE\t%s at seq %d: %s\n", a.Kind, a.Seq, a.Detail)
	}
	return tw.Flush()
}

// counts writes a map of counters as "a 1, b 2", by key.
func counts(m map[string]uint64) string {
	keys := make([]string, 0, len(m))
	var total uint64
	for k, v := range m {
		if v > 0 { // every cause is listed, counted from zero
			keys = append(keys, k)
			total += v
		}
	}
	if len(keys) == 0 {
		return "0"
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}

func ago(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return time.Since(*t).Round(time.Second).String() + " ago"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// lastError is a peer's last error in one line of n runes at most: the
// end of a dial error (libp2p's begins with boilerplate and ends with the
// cause, "connection refused"), the start of any other.
func lastError(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); strings.HasPrefix(s, "failed to dial") && len(r) > n {
		return "…" + string(r[len(r)-(n-1):])
	}
	return oneLine(s, n)
}

// oneLine keeps a table row on one line.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
