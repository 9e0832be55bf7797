package store

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"relay/protocol"
)

// TestDiskFull: while the disk holds less than MinFreeBytes free, every
// write is refused with ErrDiskFull and reads go on; writes are taken
// again once twice the floor is free, not as soon as the floor is crossed.
func TestDiskFull(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 30)
	defer func(f func(string) (int64, bool)) { readFree = f }(readFree)
	readFree = func(string) (int64, bool) { return free.Load(), true }
	defer func(f func(string) int64) { readMemtables = f }(readMemtables)
	readMemtables = func(string) int64 { return 0 }
	cfg := testConfig(t.TempDir())
	cfg.MinFreeBytes = 10 << 20
	s := openTest(t, cfg, counter{})
	ctx := context.Background()
	note := func(*Tx) (*protocol.Draft, error) {
		return &protocol.Draft{Type: "test.note", Author: "home:a", Data: benchPayload}, nil
	}
	if _, err := s.Submit(ctx, note); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		free    int64
		refused bool
	}{
		{5 << 20, true},   // under the floor
		{15 << 20, true},  // over it, under twice it: still refused
		{25 << 20, false}, // room again
		{12 << 20, false}, // over the floor: taken
	} {
		free.Store(step.free)
		s.checkDisk()
		_, err := s.Submit(ctx, note)
		if refused := errors.Is(err, ErrDiskFull); refused != step.refused || (!refused && err != nil) {
			t.Fatalf("%d MiB free: %v, want refused %v", step.free>>20, err, step.refused)
		}
		if low, got := s.DiskLow(); low != step.refused || got != step.free {
			t.Fatalf("%d MiB free: DiskLow %v, %d", step.free>>20, low, got)
		}
		if _, err := s.Heads(); err != nil {
			t.Fatalf("a read while the disk is low: %v", err)
		}
	}
	// An op that writes nothing (a retry answered from what is stored) is
	// answered while writes are refused.
	free.Store(1 << 20)
	s.checkDisk()
	if _, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) { _, _ = tx.Get([]byte("l/none")); return nil, nil }); err != nil {
		t.Fatalf("an op writing nothing while the disk is low: %v", err)
	}
	if _, err := s.Submit(ctx, func(tx *Tx) (*protocol.Draft, error) { return nil, tx.Set([]byte("l/x"), []byte("1")) }); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("a local write while the disk is low: %v", err)
	}
	if err := s.exclusive(ctx, func() error { return nil }); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("an exclusive op (a rebuild's step) while the disk is low: %v", err)
	}
	if h, _ := s.Heads(); h[s.cfg.Realm].Seq != 3 {
		t.Fatalf("head %d, want 3 events taken", h[s.cfg.Realm].Seq)
	}
	// The memtables' logs count against the free space: their flush needs it.
	free.Store(25 << 20)
	readMemtables = func(string) int64 { return 20 << 20 }
	s.checkDisk()
	if low, _ := s.DiskLow(); !low {
		t.Fatal("25 MiB free with 20 MiB of memtables to flush and a 10 MiB floor: not low")
	}
	if h, _ := s.Heads(); h[s.cfg.Realm].Seq != 3 {
		t.Fatalf("head %d, want 3 events taken", h[s.cfg.Realm].Seq)
	}
}
