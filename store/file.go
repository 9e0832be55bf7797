package store

import (
	"os"
	"path/filepath"
)

// WriteFile writes b to path with mode, whole or not at all, and durably: a
// temporary file beside it, synced, renamed over path, and the directory
// synced. A crash leaves either the old file or the new one. The node's
// files outside the store (its key, its operator secret, realm.json) are
// written so.
func WriteFile(path string, b []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // gone after the rename
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	return err
}

// SyncDir makes durable what was created, renamed or removed in dir, as
// WriteFile does for its file.
func SyncDir(dir string) error { return syncDir(dir) }
