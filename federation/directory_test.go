package federation

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"

	"relay/protocol"
	"relay/store"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	cfg := store.DefaultConfig("")
	cfg.InMemory = true
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func descriptor(t *testing.T, realm string, seed byte, at int64) []byte {
	t.Helper()
	key := ed25519.NewKeyFromSeed(append(make([]byte, 31), seed))
	raw, err := protocol.SignDescriptor(&protocol.Descriptor{Realm: realm, Addrs: []string{"/ip4/127.0.0.1/tcp/1"}, At: at}, key)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestDirectory: the first key for a name is pinned; a newer descriptor
// with that key replaces the old; another key is refused, recorded, and
// survives a reopen, as does the pin.
func TestDirectory(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	d, err := openDirectory(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Learn(ctx, descriptor(t, "ainotes", 1, 100)); err != nil {
		t.Fatal(err)
	}
	if e, err := d.Learn(ctx, descriptor(t, "ainotes", 1, 200)); err != nil || e.At.UnixMilli() != 200 {
		t.Fatalf("newer descriptor: %+v %v", e, err)
	}
	if e, _ := d.Learn(ctx, descriptor(t, "ainotes", 1, 150)); e.At.UnixMilli() != 200 {
		t.Fatalf("an older descriptor replaced a newer one: %v", e.At)
	}
	if _, err := d.Learn(ctx, descriptor(t, "ainotes", 2, 300)); !errors.Is(err, ErrKeyConflict) {
		t.Fatalf("another key: %v", err)
	}
	if _, err := d.Learn(ctx, []byte("junk")); !errors.Is(err, protocol.ErrBadDescriptor) {
		t.Fatalf("junk: %v", err)
	}
	again, err := openDirectory(st)
	if err != nil {
		t.Fatal(err)
	}
	k, ok := again.Key("ainotes")
	want := ed25519.NewKeyFromSeed(append(make([]byte, 31), 1)).Public().(ed25519.PublicKey)
	if !ok || !k.Equal(want) || len(again.Conflicts()) != 1 {
		t.Fatalf("after reopen: key %v %v, conflicts %v", ok, k, again.Conflicts())
	}
	pinned, err := PinnedKeys(st)
	if err != nil || !pinned["ainotes"].Equal(want) {
		t.Fatalf("PinnedKeys: %v %v", pinned, err)
	}
}

// TestDirectoryHolds: only the descriptor held for a realm is held; the one
// it replaced, and any other, are not.
func TestDirectoryHolds(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	d, err := openDirectory(st)
	if err != nil {
		t.Fatal(err)
	}
	first, second := descriptor(t, "ainotes", 1, 100), descriptor(t, "ainotes", 1, 200)
	if _, err := d.Learn(ctx, first); err != nil {
		t.Fatal(err)
	}
	if !d.Holds(first) || d.Holds(second) {
		t.Fatal("after the first descriptor")
	}
	if _, err := d.Learn(ctx, second); err != nil {
		t.Fatal(err)
	}
	if d.Holds(first) || !d.Holds(second) {
		t.Fatal("after the second descriptor")
	}
	if d.Holds(descriptor(t, "ainotes", 2, 300)) {
		t.Fatal("a conflicting descriptor held")
	}
	again, err := openDirectory(st)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Holds(second) {
		t.Fatal("after reopen")
	}
}
