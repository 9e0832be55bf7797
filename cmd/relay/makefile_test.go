package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMakeRunData: `make run` serves the data directory RELAY_DATA names,
// as every other serve setting follows its RELAY_* variable, and ./data
// without it (DATA=DIR still wins).
func TestMakeRunData(t *testing.T) {
	makePath, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make")
	}
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, nil, "serve --data ./data"},
		{[]string{"RELAY_DATA=/srv/relay"}, nil, "serve --data /srv/relay"},
		{[]string{"RELAY_DATA=/srv/relay"}, []string{"DATA=/srv/other"}, "serve --data /srv/other"},
	} {
		cmd := exec.Command(makePath, append([]string{"-n", "run"}, tc.args...)...)
		cmd.Dir = "../.."
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "RELAY_DATA=") && !strings.HasPrefix(kv, "DATA=") && !strings.HasPrefix(kv, "MAKEFLAGS=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, tc.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n run: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("%v make run %v runs:\n%s\nwant %q", tc.env, tc.args, out, tc.want)
		}
	}
}
