package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"relay/realm"
)

// relay runs the command line with args and returns its stdout and stderr.
func relay(t *testing.T, stdin []byte, args ...string) (string, string, error) {
	t.Helper()
	var out, errw bytes.Buffer
	app := newApp(&out, &errw)
	app.Reader = bytes.NewReader(stdin)
	err := app.Run(append([]string{"relay", "--log-level", "warn"}, args...))
	return out.String(), errw.String(), err
}

// stoppedNode makes a data directory as a node leaves it.
func stoppedNode(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := realm.DefaultConfig()
	cfg.P2PAddrs = nil // no federation here
	cfg.Realm, cfg.DataDir, cfg.Logger = name, dir, slog.New(slog.DiscardHandler)
	n, err := realm.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestExportImportCommands(t *testing.T) {
	src := stoppedNode(t, "ainotes")
	work := t.TempDir()
	file := filepath.Join(work, "ainotes.relay.gz")

	_, stderr, err := relay(t, nil, "export", "--data", src, "--output", file, "--with-key")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stderr, "exported realm ainotes: 1 event of 1 realm") || !strings.Contains(stderr, "private key") {
		t.Fatalf("export said %q", stderr)
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("export file: %v %v", st.Mode(), err)
	}
	if b, _ := os.ReadFile(file); len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatal("a .gz export is not gzip")
	}
	if _, err := os.Stat(file + ".partial"); !os.IsNotExist(err) {
		t.Fatalf("partial file left: %v", err)
	}
	if _, _, err := relay(t, nil, "export", "--data", src, "--output", file); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("export over an existing file: %v", err)
	}

	_, stderr, err = relay(t, nil, "import", "--check", "--input", file)
	if err != nil || !strings.Contains(stderr, "verifies: realm ainotes") || !strings.Contains(stderr, "with the realm key") || strings.Contains(stderr, "warning") {
		t.Fatalf("check: %q %v", stderr, err)
	}
	// What a check does not use is said, not silently dropped.
	_, stderr, err = relay(t, nil, "import", "--check", "--input", file, "--data", filepath.Join(work, "unused"))
	if err != nil || !strings.Contains(stderr, "--data is not used") || !strings.Contains(stderr, "verifies") {
		t.Fatalf("check with --data: %q %v", stderr, err)
	}
	dst := filepath.Join(work, "restored")
	_, stderr, err = relay(t, nil, "import", "--data", dst, "--input", file)
	if err != nil || !strings.HasPrefix(stderr, "imported realm ainotes") || !strings.Contains(stderr, filepath.Join(dst, "operator.token")) {
		t.Fatalf("import: %q %v", stderr, err)
	}

	// Without the key in the file, --key gives it; stdin and stdout work.
	plain, _, err := relay(t, nil, "export", "--data", src, "--output", "-")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = relay(t, []byte(plain), "import", "--data", filepath.Join(work, "nokey"), "--input", "-")
	if err == nil || !strings.Contains(err.Error(), "--key") {
		t.Fatalf("import without a key: %v", err)
	}
	_, stderr, err = relay(t, []byte(plain), "import", "--data", filepath.Join(work, "withkey"), "--input", "-", "--key", filepath.Join(src, "realm.key"))
	if err != nil || !strings.HasPrefix(stderr, "imported realm ainotes") {
		t.Fatalf("import with --key: %q %v", stderr, err)
	}
	// A file with the key and another --key: refused, not ignored; the
	// same key given again is taken.
	other := stoppedNode(t, "other")
	if _, _, err := relay(t, nil, "import", "--data", filepath.Join(work, "twokeys"), "--input", file, "--key", filepath.Join(other, "realm.key")); err == nil || !strings.Contains(err.Error(), "--key") {
		t.Fatalf("import with the file's key and another --key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(work, "twokeys")); !os.IsNotExist(err) {
		t.Fatalf("a refused import left its directory: %v", err)
	}
	if _, _, err := relay(t, nil, "import", "--data", filepath.Join(work, "samekey"), "--input", file, "--key", filepath.Join(src, "realm.key")); err != nil {
		t.Fatalf("import with the file's key given again: %v", err)
	}
}
