//go:build !linux

package main

import "os/exec"

// dieWithParent is Linux's only: elsewhere a child outlives a test binary
// that dies without its cleanup.
func dieWithParent(*exec.Cmd) {}
