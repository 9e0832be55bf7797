package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// fsync makes f's data durable. fdatasync skips the metadata a log append
// does not need (the modification time).
func fsync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// dirSyncs says whether a directory is synced after entries are added or
// removed: on Linux a new file's name is durable only then.
const dirSyncs = true
