package session

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/store"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	cfg := store.DefaultConfig("")
	cfg.InMemory = true
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Realm = "home"
	cfg.Key = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// clock is a settable now for the manager.
type clock struct{ t time.Time }

func (c *clock) now() time.Time               { return c.t }
func (c *clock) add(d time.Duration)          { c.t = c.t.Add(d) }
func newClock() *clock                        { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func withClock(m *Manager, c *clock) *Manager { m.now = c.now; return m }

func TestSessionLifecycle(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	m := withClock(New(openStore(t), Config{TTL: time.Hour, MaxAge: 3 * time.Hour}), c)

	cookie, s, err := m.Create(ctx, ViaSecret)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cookie, "rls_") || strings.Contains(string(s.Hash), cookie) {
		t.Fatalf("cookie %q", cookie)
	}
	got, err := m.Resolve(ctx, cookie)
	if err != nil || got.ID != s.ID || got.Via != ViaSecret {
		t.Fatalf("resolve: %v %+v", err, got)
	}

	// A wrong secret with the right id, a malformed value: no session.
	forged := cookie[:len(cookie)-4] + "AAAA"
	for _, bad := range []string{forged, "", "rls_1", "rlt_1_" + strings.Repeat("a", 43)} {
		if _, err := m.Resolve(ctx, bad); !errors.Is(err, ErrNoSession) {
			t.Errorf("resolve(%q) = %v, want ErrNoSession", bad, err)
		}
	}

	// Use slides the expiry, never past MaxAge.
	for range 5 {
		c.add(50 * time.Minute)
		if _, err := m.Resolve(ctx, cookie); err != nil {
			if c.t.Sub(s.CreatedAt) < 3*time.Hour {
				t.Fatalf("at +%v: %v", c.t.Sub(s.CreatedAt), err)
			}
		}
	}
	if _, err := m.Resolve(ctx, cookie); !errors.Is(err, ErrNoSession) {
		t.Fatalf("past MaxAge: %v", err)
	}

	// Idle past TTL ends it.
	cookie2, _, _ := m.Create(ctx, ViaPassword)
	c.add(61 * time.Minute)
	if _, err := m.Resolve(ctx, cookie2); !errors.Is(err, ErrNoSession) {
		t.Fatalf("idle: %v", err)
	}

	// End ends it at once; List no longer shows it.
	cookie3, _, _ := m.Create(ctx, ViaSecret)
	if err := m.End(ctx, cookie3); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Resolve(ctx, cookie3); !errors.Is(err, ErrNoSession) {
		t.Fatalf("after End: %v", err)
	}
	if list, _ := m.List(); len(list) != 0 {
		t.Fatalf("live sessions: %+v", list)
	}
}

func TestCSRF(t *testing.T) {
	ctx := context.Background()
	m := New(openStore(t), DefaultConfig())
	a, _, _ := m.Create(ctx, ViaSecret)
	b, _, _ := m.Create(ctx, ViaSecret)
	ta, tb := CSRFToken(a), CSRFToken(b)
	if ta == "" || ta == tb {
		t.Fatalf("tokens %q %q", ta, tb)
	}
	if !CheckCSRF(a, ta) || CheckCSRF(a, tb) || CheckCSRF(a, "") || CheckCSRF("", "") {
		t.Fatal("CheckCSRF accepts what it must refuse")
	}
}

func TestPassword(t *testing.T) {
	ctx := context.Background()
	m := New(openStore(t), DefaultConfig())
	check := func(pw string) bool {
		t.Helper()
		ok, err := m.CheckPassword(ctx, pw)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if check("") || check("anything at all") {
		t.Fatal("a password matched before one was set")
	}
	if err := m.SetPassword(ctx, "short"); err == nil {
		t.Fatal("a short password was accepted")
	}
	if err := m.SetPassword(ctx, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	if !check("correct horse battery") || check("correct horse batterY") {
		t.Fatal("password check")
	}
	if _, ok := m.PasswordSetAt(); !ok {
		t.Fatal("PasswordSetAt")
	}
}

// TestPasswordOneAtATime: passwords are hashed one at a time (each takes
// 64 MiB), so logins arriving at once cannot multiply the memory; a check
// whose turn does not come in time says so rather than waiting on.
func TestPasswordOneAtATime(t *testing.T) {
	defer func(d time.Duration) { hashWait = d }(hashWait)
	hashWait = 50 * time.Millisecond
	ctx := context.Background()
	m := New(openStore(t), DefaultConfig())
	done, err := m.hashTurn(ctx) // another check holds the turn
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CheckPassword(ctx, "anything at all"); !errors.Is(err, ErrBusy) {
		t.Fatalf("check while another runs: %v, want ErrBusy", err)
	}
	if err := m.SetPassword(ctx, "correct horse battery"); !errors.Is(err, ErrBusy) {
		t.Fatalf("set while another runs: %v, want ErrBusy", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.CheckPassword(cctx, "anything at all"); !errors.Is(err, context.Canceled) {
		t.Fatalf("check of a gone request: %v", err)
	}
	done()
	if ok, err := m.CheckPassword(ctx, "anything at all"); ok || err != nil {
		t.Fatalf("check after the turn ended: %v, %v", ok, err)
	}

	// Many at once: they take turns, and all of them are answered.
	hashWait = time.Minute
	var wg sync.WaitGroup
	var running, most atomic.Int32
	for range 4 {
		wg.Go(func() {
			done, err := m.hashTurn(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			n := running.Add(1)
			for {
				if old := most.Load(); n <= old || most.CompareAndSwap(old, n) {
					break
				}
			}
			time.Sleep(5 * time.Millisecond)
			running.Add(-1)
			done()
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d hashed at once", most.Load())
	}
}
