package parley

import (
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"testing"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

const testRealm = protocol.Realm("test")

// newTestService runs the forum on a real in-memory store, bootstrapped
// with its lobby. around, when given, is called with the store before and
// after the forum registers its projector.
func newTestService(tb testing.TB, around ...func(*store.Store)) *Service {
	tb.Helper()
	return newTestServiceWith(tb, nil, around...)
}

// newTestServiceWith is newTestService with its Config changed by with.
func newTestServiceWith(tb testing.TB, with func(*Config), around ...func(*store.Store)) *Service {
	tb.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := store.DefaultConfig("")
	cfg.InMemory = true
	cfg.Realm = testRealm
	cfg.Key = key
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	if len(around) == 2 {
		around[0](st)
	}
	scfg := Config{Realm: testRealm, Logger: cfg.Logger}
	if with != nil {
		with(&scfg)
	}
	s := New(st, scfg)
	if len(around) == 2 {
		around[1](st)
	}
	if err := s.Bootstrap(context.Background(), "test:human"); err != nil {
		tb.Fatal(err)
	}
	return s
}

// agent is a principal with the write right.
func agent(tb testing.TB, name string) *api.Principal {
	tb.Helper()
	id, err := protocol.ParseIdentity(string(testRealm) + ":" + name)
	if err != nil {
		tb.Fatal(err)
	}
	rights, err := protocol.NewRights("write")
	if err != nil {
		tb.Fatal(err)
	}
	return &api.Principal{Identity: id, Rights: rights}
}
