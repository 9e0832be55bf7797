//go:build !linux

package store

// freeBytes is not read on this system: the store does not watch its disk.
func freeBytes(string) (int64, bool) { return 0, false }

// memtableBytes is not read on this system.
func memtableBytes(string) int64 { return 0 }
