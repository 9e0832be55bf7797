package federation

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"testing"

	"relay/protocol"
	"relay/store"
)

// TestRefusedAgainKeepsALiftedQuarantine: a refused parked event
// quarantines its realm once; refused again (the store tries it again
// after an upgrade) it does not lay again a quarantine the operator
// lifted. Another refused event of the realm does.
func TestRefusedAgainKeepsALiftedQuarantine(t *testing.T) {
	st := memStore(t)
	s := &Service{log: quietLog, st: st, stats: newStats(), ctx: context.Background(), quarantined: map[protocol.Realm]Quarantine{}}
	quarantined := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, ok := s.quarantined["b"]
		return ok
	}
	s.refusedParked("b", 1, "breaks a rule")
	if !quarantined() {
		t.Fatal("the first refusal did not quarantine b")
	}
	s.mu.Lock()
	delete(s.quarantined, "b") // the operator lifts it
	s.mu.Unlock()
	s.refusedParked("b", 1, "breaks a rule")
	if quarantined() {
		t.Fatal("the same event refused again quarantined b again")
	}
	s.refusedParked("b", 2, "breaks another")
	if !quarantined() {
		t.Fatal("another refused event did not quarantine b")
	}
}

var quietLog = slog.New(slog.DiscardHandler)

// memStore opens an in-memory store of realm "home", closed when the test
// ends.
func memStore(t *testing.T) *store.Store {
	t.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := store.DefaultConfig("")
	cfg.InMemory, cfg.Realm, cfg.Key = true, "home", key
	cfg.Logger = quietLog
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
