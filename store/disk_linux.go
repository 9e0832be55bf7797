package store

import (
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// freeBytes is the space an unprivileged writer may still use on the file
// system holding dir.
func freeBytes(dir string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * st.Bsize, true
}

// memtableBytes is the disk space Badger's memtable logs (*.mem in dir)
// take: about what flushing them writes out as tables.
func memtableBytes(dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".mem") {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join(dir, e.Name()), &st) == nil {
			n += st.Blocks * 512
		}
	}
	return n
}
