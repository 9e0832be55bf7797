//go:build !linux

package store

import (
	"os"
	"runtime"
)

// fsync makes f's data durable (on macOS, File.Sync asks the drive to
// flush its cache too).
func fsync(f *os.File) error { return f.Sync() }

// dirSyncs says whether a directory is synced after entries are added or
// removed. Windows cannot flush a directory handle (NTFS journals names);
// elsewhere fsync of the directory is how a name becomes durable.
const dirSyncs = runtime.GOOS != "windows"
