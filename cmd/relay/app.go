package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"relay/realm"
)

func run(args []string) error {
	return runContext(context.Background(), args, os.Stdout, os.Stderr)
}

// runContext runs the command line with its own output streams; a command
// that serves stops when ctx is done, as on SIGINT or SIGTERM.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return newApp(stdout, stderr).RunContext(ctx, args)
}

// printVersion prints the version as both `relay version` and `relay
// --version` print it: "relay 0.1.0".
func printVersion(c *cli.Context) { fmt.Fprintln(c.App.Writer, c.App.Name, realm.Version) }

func init() { cli.VersionPrinter = printVersion }

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:                 "relay",
		Usage:                "a federated realm node where AI agents think together",
		Version:              realm.Version,
		EnableBashCompletion: true,
		Writer:               stdout,
		ErrWriter:            stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", EnvVars: []string{"RELAY_LOG_LEVEL"}},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json", EnvVars: []string{"RELAY_LOG_FORMAT"}},
		},
		Before: func(c *cli.Context) error {
			return setupLogging(c.App.ErrWriter, c.String("log-level"), c.String("log-format"))
		},
		Action: unknownCommand,
		Commands: []*cli.Command{
			serveCommand(),
			tokenCommand(),
			peerCommand(),
			testnetCommand(),
			exportCommand(),
			importCommand(),
			benchCommand(),
			{
				Name:  "version",
				Usage: "print the version",
				Action: func(c *cli.Context) error {
					if _, err := positional(c, 0); err != nil { // a stray word would end the flags unseen
						return err
					}
					printVersion(c)
					return nil
				},
			},
		},
	}
	app.OnUsageError = usageError("relay")
	for _, c := range app.Commands {
		setUsageError(c, "relay "+c.Name)
	}
	return app
}

// usageError reports a mistyped flag or value in one line that points to the
// command's help, rather than printing the whole help before it.
func usageError(cmd string) cli.OnUsageErrorFunc {
	return func(_ *cli.Context, err error, _ bool) error {
		return fmt.Errorf("%w (see %s --help)", err, cmd)
	}
}

func setUsageError(c *cli.Command, name string) {
	if c.OnUsageError == nil {
		c.OnUsageError = usageError(name)
	}
	// urfave/cli prints the whole help before a missing required flag's
	// error, not through OnUsageError: the check is made here instead.
	var required []string
	for _, f := range c.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Required {
			sf.Required = false
			required = append(required, sf.Name)
		}
	}
	if len(required) > 0 {
		before := c.Before
		c.Before = func(cc *cli.Context) error {
			for _, f := range required {
				if !cc.IsSet(f) {
					return fmt.Errorf("the flag --%s is required (see %s --help)", f, name)
				}
			}
			if before != nil {
				return before(cc)
			}
			return nil
		}
	}
	for _, sub := range c.Subcommands {
		setUsageError(sub, name+" "+sub.Name)
	}
}

func setupLogging(w io.Writer, level, format string) error {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch strings.ToLower(format) {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return fmt.Errorf("--log-format: want text or json, have %q", format)
	}
	slog.SetDefault(slog.New(h))
	return nil
}

// unknownCommand is the action of a command that takes subcommands: with
// none it shows its help, with an argument that names none it says so
// (and exits 1, as every error), rather than looking for a help topic.
func unknownCommand(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("unknown command %q: see %s --help", c.Args().First(), c.Command.HelpName)
	}
	if c.Command.Name == "" || c.Command.HelpName == c.App.Name {
		return cli.ShowAppHelp(c)
	}
	return cli.ShowSubcommandHelp(c)
}
