package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"relay/realm"
	"relay/realm/backup"
	"relay/store"
)

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write a stopped node's event log, every realm's chain with its blobs, to a verifiable file",
		UsageText: "relay export --data DIR --output FILE [--gzip] [--with-key] [--force]",
		Description: "Reads the data directory of a stopped node (stop `relay serve` first: the store allows one process) " +
			"and writes every event it holds, in the order it stored them, with the public key of every realm, the blobs " +
			"(images) and a trailer naming every chain's head. `relay import` verifies all of it.\n\n" +
			"Local state is not exported: tokens, token requests, sessions, OAuth grants, corpus registrations, " +
			"operation tokens, inbox cursors and feature requests.\n\n" +
			"--with-key adds the realm's private key, so that an import can carry the realm on; the file is then " +
			"created with mode 0600 and is as secret as realm.key. Without it, keep realm.key safe elsewhere and give it " +
			"to `relay import --key`.\n\n" +
			"The file is written as FILE.partial and renamed when complete. Progress goes to stderr when it is a " +
			"terminal; a summary line always.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Value: realm.DefaultConfig().DataDir, Usage: "the stopped node's data directory", EnvVars: []string{"RELAY_DATA"}},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Required: true, Usage: "the export `FILE`; - writes to stdout", EnvVars: []string{"RELAY_EXPORT_OUTPUT"}},
			&cli.BoolFlag{Name: "gzip", Usage: "compress the file (the default when FILE ends in .gz)", EnvVars: []string{"RELAY_EXPORT_GZIP"}},
			&cli.BoolFlag{Name: "with-key", Usage: "include the realm's private key (the file becomes a secret)", EnvVars: []string{"RELAY_EXPORT_WITH_KEY"}},
			&cli.BoolFlag{Name: "force", Usage: "replace FILE if it exists", EnvVars: []string{"RELAY_EXPORT_FORCE"}},
		},
		Action: func(c *cli.Context) error {
			if _, err := positional(c, 0); err != nil { // a stray word would end the flags unseen
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			path := c.String("output")
			cfg := realm.ExportConfig{
				DataDir:  c.String("data"),
				Compress: c.Bool("gzip") || strings.HasSuffix(path, ".gz"),
				WithKey:  c.Bool("with-key"),
				Logger:   quietLogger(c.App.ErrWriter),
			}
			prog := newProgress(c.App.ErrWriter, "export")
			cfg.Progress = prog.update
			out, commit, abort, err := createOutput(c.App.Writer, path, cfg.WithKey, c.Bool("force"))
			if err != nil {
				return err
			}
			cfg.Out = out
			start := time.Now()
			res, err := realm.Export(ctx, cfg)
			prog.done()
			if err == nil {
				err = commit()
			}
			if err != nil {
				abort()
				return err
			}
			where := path
			if path == "-" {
				where = "stdout"
			}
			el := time.Since(start)
			fmt.Fprintf(c.App.ErrWriter, "exported realm %s: %s of %s, %s, %s to %s in %s (%s events/s)\n",
				res.Realm, plural(res.Events, "event"), plural(res.Realms, "realm"), plural(res.Blobs, "blob"), size(res.Bytes), where, round(el), rate(res.Events, el))
			if cfg.WithKey {
				fmt.Fprintf(c.App.ErrWriter, "warning: %s holds realm %s's private key: anyone who has it can sign as the realm. Keep it as safe as realm.key.\n", where, res.Realm)
			}
			return nil
		},
	}
}

// createOutput opens where an export goes: stdout for "-", else FILE.partial
// (0600 when it will hold the key), renamed to FILE by commit. abort removes
// the partial file.
func createOutput(stdout io.Writer, path string, secret, force bool) (w io.Writer, commit func() error, abort func(), err error) {
	if path == "-" {
		if isTerminal(stdout) {
			return nil, nil, nil, errors.New("not writing an export to a terminal: give --output FILE or redirect stdout")
		}
		return stdout, func() error { return nil }, func() {}, nil
	}
	if _, err := os.Stat(path); err == nil && !force {
		return nil, nil, nil, fmt.Errorf("%s exists: choose another --output, or --force to replace it", path)
	}
	mode := os.FileMode(0o644)
	if secret {
		mode = 0o600
	}
	tmp := path + ".partial"
	os.Remove(tmp) // what an interrupted export left
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return nil, nil, nil, err
	}
	commit = func() error {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
		return store.SyncDir(filepath.Dir(path)) // the name too survives a power cut
	}
	abort = func() {
		f.Close()
		os.Remove(tmp)
	}
	return f, commit, abort, nil
}

func importCommand() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "verify an export and restore it into a fresh data directory",
		UsageText: "relay import --data DIR --input FILE [--key realm.key] [--verify-all]\nrelay import --check --input FILE",
		Description: "Verifies every frame of the file (checksums, order, counts), every event (canonical encoding, CID " +
			"recomputed from its bytes, its place in its realm's chain: seq dense from 1, prev the CID of the event " +
			"before) and signatures (every realm's newest event in each chunk of 512, which through the hash links " +
			"authenticates all before it; --verify-all checks every one), every blob's CID and the trailer's heads, " +
			"while it restores the events into DIR with every projection rebuilt.\n\n" +
			"DIR must not exist or be empty. The node becomes the export's realm: that needs the realm's private key, " +
			"from the file (`relay export --with-key`) or from --key (the realm.key of the exported node). Without " +
			"either the import is refused: a node that carried the realm on without its key would fork its chain. " +
			"Never run the restored node and the old one at once.\n\n" +
			"Nothing is half-imported: the node is built in DIR/import.partial and moved into place only when the " +
			"whole file has verified. A fresh operator secret is written to DIR/operator.token; local state (tokens, " +
			"sessions, corpus registrations …) is not in an export, so tokens are issued again.\n\n" +
			"--check only verifies the file, writing nothing.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Value: realm.DefaultConfig().DataDir, Usage: "the data directory to restore into: must not exist or be empty", EnvVars: []string{"RELAY_DATA"}},
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Required: true, Usage: "the export `FILE`; - reads stdin", EnvVars: []string{"RELAY_IMPORT_INPUT"}},
			&cli.StringFlag{Name: "key", Usage: "the realm's realm.key, for an export made without --with-key", EnvVars: []string{"RELAY_IMPORT_KEY"}},
			&cli.BoolFlag{Name: "verify-all", Usage: "check every event's signature, not only the newest of each chunk", EnvVars: []string{"RELAY_IMPORT_VERIFY_ALL"}},
			&cli.BoolFlag{Name: "check", Usage: "verify the file and write nothing", EnvVars: []string{"RELAY_IMPORT_CHECK"}},
		},
		Action: func(c *cli.Context) error {
			if _, err := positional(c, 0); err != nil { // a stray word would end the flags unseen
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			in, name, closeIn, err := openInput(c.App.Reader, c.String("input"))
			if err != nil {
				return err
			}
			defer closeIn()
			prog := newProgress(c.App.ErrWriter, "import")
			start := time.Now()
			if c.Bool("check") {
				for _, f := range []string{"data", "key"} {
					if c.IsSet(f) {
						fmt.Fprintf(c.App.ErrWriter, "warning: --check reads the file only; --%s is not used\n", f)
					}
				}
				sum, err := backup.Read(ctx, in, backup.Options{VerifyAll: c.Bool("verify-all"), Progress: prog.update}, backup.Sink{})
				prog.done()
				if err != nil {
					return err
				}
				el := time.Since(start)
				key := "without the realm key"
				if sum.Secret {
					key = "with the realm key"
				}
				fmt.Fprintf(c.App.ErrWriter, "%s verifies: realm %s, exported %s by relay %s, %s of %s, %s, %s; in %s (%s events/s)\n",
					name, sum.Header.Origin, time.UnixMilli(sum.Header.CreatedAt).UTC().Format(time.RFC3339), sum.Header.Relay,
					plural(sum.Events, "event"), plural(len(sum.Heads), "realm"), plural(sum.Blobs, "blob"), key, round(el), rate(sum.Events, el))
				return nil
			}
			cfg := realm.ImportConfig{DataDir: c.String("data"), In: in, VerifyAll: c.Bool("verify-all"), Progress: prog.update,
				Logger: quietLogger(c.App.ErrWriter)}
			if k := c.String("key"); k != "" {
				if cfg.Key, err = os.ReadFile(k); err != nil {
					return fmt.Errorf("--key: %w", err)
				}
			}
			res, err := realm.Import(ctx, cfg)
			prog.done()
			if err != nil {
				return err
			}
			el := time.Since(start)
			fmt.Fprintf(c.App.ErrWriter, "imported realm %s (peer id %s): %s of %s, %s into %s in %s (%s events/s)\n",
				res.Realm, res.PeerID, plural(res.Events, "event"), plural(res.Realms, "realm"), plural(res.Blobs, "blob"), cfg.DataDir, round(el), rate(res.Events, el))
			if res.Pinned > 0 {
				fmt.Fprintf(c.App.ErrWriter, "realm directory: %s pinned as the file's node had them\n", plural(res.Pinned, "realm key"))
			}
			fmt.Fprintf(c.App.ErrWriter, "operator secret written to %s; issue agent tokens again (local state is not exported)\n", res.OperatorTokenFile)
			if res.Pinned > 0 {
				fmt.Fprintf(c.App.ErrWriter, "start it with --peer for its peers (not exported either): it writes nothing before it has compared its chain with one, taking back the events it signed after this export (--restored-is-latest if none holds any)\n")
			}
			return nil
		},
	}
}

func openInput(stdin io.Reader, path string) (io.Reader, string, func(), error) {
	if path == "-" {
		return stdin, "stdin", func() {}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, "", nil, err
	}
	return f, filepath.Base(path), func() { f.Close() }, nil
}

// progress draws one updating line on a terminal, at most five times a
// second, and nothing elsewhere.
type progress struct {
	w     io.Writer
	what  string
	on    bool
	start time.Time
	last  time.Time
	drawn bool
}

func newProgress(w io.Writer, what string) *progress {
	return &progress{w: w, what: what, on: isTerminal(w), start: time.Now()}
}

func (p *progress) update(s backup.Progress) {
	if !p.on || time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	line := fmt.Sprintf("%s: %s", p.what, count(s.Events))
	if s.EventsTotal > 0 {
		line += fmt.Sprintf(" / %s events (%d%%)", count(s.EventsTotal), s.Events*100/s.EventsTotal)
	} else {
		line += " events"
	}
	line += fmt.Sprintf(", %s events/s, %s blobs, %s", rate(s.Events, time.Since(p.start)), count(s.Blobs), size(s.Bytes))
	fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	p.drawn = true
}

// done clears the line, so the summary starts clean.
func (p *progress) done() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// count writes n with thousands separators.
func count[T ~int | ~int64 | ~uint64](n T) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

func plural[T ~int | ~uint64](n T, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return count(n) + " " + what + "s"
}

func rate(n uint64, d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	return count(uint64(float64(n) / d.Seconds()))
}

func round(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(10 * time.Millisecond)
}

func size(b int64) string {
	switch {
	case b >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(b)/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(b)/1e3)
	}
	return fmt.Sprintf("%d bytes", b)
}

// quietLogger logs only what goes wrong: the node's info lines (its
// operator credential created, …) would interleave with the summary.
func quietLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
