//go:build !linux

package store

import "os"

// fsync makes f's data durable (on macOS, File.Sync asks the drive to
// flush its cache too).
func fsync(f *os.File) error { return f.Sync() }
