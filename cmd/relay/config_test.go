package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"relay/federation"
	"relay/realm"
	"relay/realm/corpus"
	"relay/store"
)

const testPeer = "/ip4/192.0.2.7/tcp/4001/p2p/12D3KooWGdHCXUa9WDFtg5aJRkm1vUiSgkxwxK7za5D3XtzNswxy"

// serveConfigOf runs `relay serve args…` up to the point where the node
// would start, and returns the config it would start with.
func serveConfigOf(t *testing.T, args ...string) (realm.Config, error) {
	t.Helper()
	var got realm.Config
	app := &cli.App{Name: "relay", Writer: io.Discard, ErrWriter: io.Discard,
		Commands: []*cli.Command{serveCommandWith(func(_ context.Context, cfg realm.Config, _ io.Writer) error {
			got = cfg
			return nil
		})}}
	err := app.Run(append([]string{"relay", "serve"}, args...))
	return got, err
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// want is the part of realm.Config the serve flags set.
type want struct {
	realm, data, http, human string
	p2p, peers               []string
	open                     bool
	sync                     time.Duration
	rate                     int
}

func check(t *testing.T, cfg realm.Config, w want) {
	t.Helper()
	have := want{cfg.Realm, cfg.DataDir, cfg.HTTPAddr, cfg.HumanName, cfg.P2PAddrs, cfg.Peers, cfg.OpenFederation, cfg.SyncInterval, cfg.RateLimit}
	if !reflect.DeepEqual(have, w) {
		t.Fatalf("config\nhave %+v\nwant %+v", have, w)
	}
}

var configTOML = `# relay serve --config relay.toml
realm = "ainotes"
http = "127.0.0.1:1"
human = "file"
p2p = ["/ip4/0.0.0.0/tcp/4101"]
peer = "` + testPeer + `"
open-federation = true
sync-interval = "45s"
rate-limit = 7
`

var configJSON = `{"realm": "ainotes", "http": "127.0.0.1:1", "human": "file", "p2p": ["/ip4/0.0.0.0/tcp/4101"],
 "peer": ["` + testPeer + `"], "open-federation": true, "sync-interval": "45s", "rate-limit": 7}`

// TestServeConfigPrecedence: a flag beats the environment, which beats the
// config file, which beats the default; TOML and JSON say the same.
func TestServeConfigPrecedence(t *testing.T) {
	def := realm.DefaultConfig()
	t.Run("defaults", func(t *testing.T) {
		cfg, err := serveConfigOf(t)
		if err != nil {
			t.Fatal(err)
		}
		check(t, cfg, want{"", def.DataDir, def.HTTPAddr, def.HumanName, def.P2PAddrs, nil, false, federation.DefaultConfig().SyncInterval, def.RateLimit})
	})
	fromFile := want{"ainotes", def.DataDir, "127.0.0.1:1", "file", []string{"/ip4/0.0.0.0/tcp/4101"}, []string{testPeer}, true, 45 * time.Second, 7}
	for _, f := range []struct{ name, text string }{{"relay.toml", configTOML}, {"relay.json", configJSON}} {
		t.Run(f.name, func(t *testing.T) {
			path := writeFile(t, f.name, f.text)
			cfg, err := serveConfigOf(t, "--config", path)
			if err != nil {
				t.Fatal(err)
			}
			check(t, cfg, fromFile)

			t.Setenv("RELAY_HUMAN", "env")
			t.Setenv("RELAY_HTTP", "127.0.0.1:2")
			t.Setenv("RELAY_P2P", "/ip4/127.0.0.1/tcp/4102")
			cfg, err = serveConfigOf(t, "--config", path, "--http", "127.0.0.1:3")
			if err != nil {
				t.Fatal(err)
			}
			w := fromFile
			w.human, w.http, w.p2p = "env", "127.0.0.1:3", []string{"/ip4/127.0.0.1/tcp/4102"}
			check(t, cfg, w)
		})
	}
	t.Run("RELAY_CONFIG", func(t *testing.T) {
		t.Setenv("RELAY_CONFIG", writeFile(t, "relay.toml", configTOML))
		cfg, err := serveConfigOf(t)
		if err != nil {
			t.Fatal(err)
		}
		check(t, cfg, fromFile)
	})
}

var badServeTests = []struct {
	name, file, text string
	args             []string
	err              string
}{
	{"unknown key", "relay.toml", `port = 80`, nil, `unknown key "port"`},
	{"config names itself", "relay.toml", `config = "other.toml"`, nil, `unknown key "config"`},
	{"wrong type", "relay.toml", `rate-limit = "many"`, nil, `rate-limit: want a whole number`},
	{"bad duration", "relay.json", `{"sync-interval": "soon"}`, nil, `sync-interval: want a duration`},
	{"list of numbers", "relay.json", `{"peer": [1]}`, nil, `peer: want a list of strings`},
	{"not TOML", "relay.toml", `realm: x`, nil, `TOML`},
	{"not JSON", "relay.json", `realm = "x"`, nil, `JSON`},
	{"peer without p2p", "relay.toml", `no-p2p = true` + "\n" + `peer = "` + testPeer + `"`, nil, `--peer needs federation`},
	{"open without p2p", "", "", []string{"--no-p2p", "--open-federation"}, `--open-federation needs federation`},
	{"negative sync", "", "", []string{"--sync-interval", "-1s"}, `--sync-interval`},
	{"no clock ahead", "", "", []string{"--max-clock-ahead", "0s"}, `--max-clock-ahead`},
	{"clock ahead in a file", "relay.toml", `max-clock-ahead = "soon"`, nil, `max-clock-ahead: want a duration`},
	{"negative search cache", "", "", []string{"--search-cache", "-1"}, `--search-cache`},
	{"search cache past the bytes an int counts", "", "", []string{"--search-cache", "9000000000000"}, `--search-cache`},
}

// TestServeMaxClockAhead: --max-clock-ahead reaches the node's config,
// from the flag or the environment, and defaults to federation's.
func TestServeMaxClockAhead(t *testing.T) {
	cfg, err := serveConfigOf(t)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxClockAhead != federation.DefaultConfig().MaxAhead {
		t.Errorf("default: %v, want %v", cfg.MaxClockAhead, federation.DefaultConfig().MaxAhead)
	}
	if cfg, err = serveConfigOf(t, "--max-clock-ahead", "5m"); err != nil || cfg.MaxClockAhead != 5*time.Minute {
		t.Errorf("flag: %v, %v", cfg.MaxClockAhead, err)
	}
	t.Setenv("RELAY_MAX_CLOCK_AHEAD", "90s")
	if cfg, err = serveConfigOf(t); err != nil || cfg.MaxClockAhead != 90*time.Second {
		t.Errorf("environment: %v, %v", cfg.MaxClockAhead, err)
	}
}

// TestServeMinFreeDisk: --min-free-disk is in MiB, 0 turns the check off,
// and the default is the store's.
func TestServeMinFreeDisk(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int64
	}{
		{nil, store.DefaultMinFreeBytes},
		{[]string{"--min-free-disk", "256"}, 256 << 20},
		{[]string{"--min-free-disk", "0"}, -1},
	} {
		cfg, err := serveConfigOf(t, c.args...)
		if err != nil || cfg.MinFreeBytes != c.want {
			t.Errorf("%v: %d, %v; want %d", c.args, cfg.MinFreeBytes, err, c.want)
		}
	}
	if _, err := serveConfigOf(t, "--min-free-disk", "-1"); err == nil || !strings.Contains(err.Error(), "--min-free-disk") {
		t.Errorf("a negative floor: %v", err)
	}
}

// TestServeRestoredIsLatest: the flag reaches the node's config.
func TestServeRestoredIsLatest(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"--restored-is-latest"}, true}} {
		cfg, err := serveConfigOf(t, c.args...)
		if err != nil || cfg.RestoredIsLatest != c.want {
			t.Errorf("%v: %v, %v", c.args, cfg.RestoredIsLatest, err)
		}
	}
}

// TestServeSearchCache: --search-cache is in MiB, 0 keeps no cache, and
// the default is the corpus's.
func TestServeSearchCache(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, corpus.DefaultMessageCacheBytes},
		{[]string{"--search-cache", "32"}, 32 << 20},
		{[]string{"--search-cache", "0"}, -1},
	} {
		cfg, err := serveConfigOf(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.SearchCacheBytes != tc.want {
			t.Errorf("%v: %d bytes, want %d", tc.args, cfg.SearchCacheBytes, tc.want)
		}
	}
}

func TestServeConfigRefused(t *testing.T) {
	for _, tc := range badServeTests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, tc.file, tc.text))
			}
			_, err := serveConfigOf(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("want an error with %q, have %v", tc.err, err)
			}
		})
	}
}

// TestServeNoP2PFlag: --no-p2p, from a flag or a file, and an empty --p2p
// leave the node without listen addresses.
func TestServeNoP2PFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--no-p2p"},
		{"--p2p", ""},
		{"--config", writeFile(t, "relay.toml", "no-p2p = true\n")},
	} {
		cfg, err := serveConfigOf(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.P2PAddrs) != 0 {
			t.Fatalf("%v: p2p %v, want none", args, cfg.P2PAddrs)
		}
	}
}

// FuzzParseConfig: a config file of any bytes, TOML or JSON, is refused
// with an error or gives only values of the types altsrc reads for flags
// that serve has.
func FuzzParseConfig(f *testing.F) {
	for _, tc := range badServeTests {
		f.Add([]byte(tc.text), strings.HasSuffix(tc.file, ".json"))
	}
	f.Add([]byte(`realm = "a"`+"\n"+`peer = ["x", "y"]`+"\n"+`rate-limit = 5`+"\n"+`no-p2p = true`), false)
	f.Add([]byte(`{"realm": "a", "sync-interval": "3s", "rate-limit": 1e3}`), true)
	flags := serveFlags()
	f.Fuzz(func(t *testing.T, b []byte, isJSON bool) {
		values, err := parseConfig(b, isJSON, flags)
		if err != nil {
			return
		}
		for k, v := range values {
			var flag cli.Flag
			for _, fl := range flags {
				if slices.Contains(fl.Names(), k.(string)) {
					flag = fl
				}
			}
			if flag == nil {
				t.Fatalf("%q: key %q is no flag", b, k)
			}
			switch v.(type) {
			case string, bool, int, []any:
			default:
				t.Fatalf("%q: %s = %T", b, k, v)
			}
		}
	})
}
