package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

func tokenCommand() *cli.Command {
	return &cli.Command{
		Name:   "token",
		Usage:  "manage agent tokens through a running node",
		Action: unknownCommand,
		Subcommands: []*cli.Command{{
			Name:  "issue",
			Usage: "issue an agent token and print its secret",
			Flags: append(nodeFlags(),
				&cli.StringFlag{Name: "label", Required: true, Usage: "the agent's name; its identity line is derived from it", EnvVars: []string{"RELAY_TOKEN_LABEL"}},
				&cli.StringFlag{Name: "rights", Usage: "rights beyond read, comma-separated: write,pin,lock,verify,grant", EnvVars: []string{"RELAY_TOKEN_RIGHTS"}},
				&cli.BoolFlag{Name: "json", Usage: "print the whole answer as JSON"},
			),
			Action: func(c *cli.Context) error {
				if _, err := positional(c, 0); err != nil { // a stray word would end the flags unseen
					return err
				}
				var rights []string
				for _, r := range strings.Split(c.String("rights"), ",") {
					if r = strings.TrimSpace(r); r != "" {
						rights = append(rights, r)
					}
				}
				var out struct {
					Token    string   `json:"token"`
					Identity string   `json:"identity"`
					Rights   []string `json:"rights"`
				}
				raw, err := callNode(c, http.MethodPost, "/api/v1/tokens", map[string]any{"label": c.String("label"), "rights": rights}, &out)
				if err != nil {
					return err
				}
				if c.Bool("json") {
					_, err := c.App.Writer.Write(raw)
					return err
				}
				fmt.Fprintln(c.App.Writer, out.Token)
				fmt.Fprintf(c.App.ErrWriter, "identity %s, rights %s\n", out.Identity, strings.Join(out.Rights, ","))
				return nil
			},
		}},
	}
}

// nodeFlags say how to reach a running node as its human.
func nodeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "node", Value: "http://127.0.0.1:8080", Usage: "the node's base URL", EnvVars: []string{"RELAY_NODE"}},
		&cli.StringFlag{Name: "operator-token-file", Value: defaultOperatorTokenFile(), Usage: "file holding the operator secret, where relay serve writes it: in $RELAY_DATA, else ./data", EnvVars: []string{"RELAY_OPERATOR_TOKEN_FILE"}},
		&cli.StringFlag{Name: "operator-token", Usage: "the operator secret itself (overrides the file)", EnvVars: []string{"RELAY_OPERATOR_TOKEN"}},
	}
}

// defaultOperatorTokenFile is where `relay serve` writes the secret when
// run with the same environment: in $RELAY_DATA, else in ./data.
func defaultOperatorTokenFile() string {
	if dir := os.Getenv("RELAY_DATA"); dir != "" {
		return filepath.Join(dir, "operator.token")
	}
	return "./data/operator.token"
}

// callNode sends one JSON request to the node as its human and decodes the
// answer into out; a refusal becomes an error naming its reason.
func callNode(c *cli.Context, method, path string, in, out any) ([]byte, error) {
	secret := c.String("operator-token")
	if secret == "" {
		b, err := os.ReadFile(c.String("operator-token-file"))
		if err != nil {
			return nil, fmt.Errorf("operator secret: %w", err)
		}
		secret = strings.TrimSpace(string(b))
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	node := strings.TrimRight(c.String("node"), "/")
	if u, err := url.Parse(node); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--node %q: want the node's URL, such as http://127.0.0.1:8080", c.String("node"))
	}
	req, err := http.NewRequestWithContext(c.Context, method, node+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w (is the node running? see --node)", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	// Some other web server (a wrong port, a proxy's error page): say so
	// in one line rather than print its page or a JSON syntax error.
	if !json.Valid(raw) {
		what := resp.Header.Get("Content-Type")
		if what == "" {
			what = "no JSON"
		}
		return nil, fmt.Errorf("%s answered HTTP %d with %s, not a relay node's JSON: is --node a relay node's URL?", node, resp.StatusCode, what)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var ref struct {
			Reason string `json:"reason"`
			Error  string `json:"error"`
		}
		if json.Unmarshal(raw, &ref) == nil && ref.Reason != "" {
			return nil, fmt.Errorf("%s: %s (HTTP %d)", ref.Reason, ref.Error, resp.StatusCode)
		}
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(raw))
	}
	return raw, json.Unmarshal(raw, out)
}
