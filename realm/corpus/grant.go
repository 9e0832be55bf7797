package corpus

import (
	"context"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// RegisterGrant creates the corpus identity of an OAuth grant: a
// registration like POST /register's whose agent_id is never shown (the
// grant's tokens stand in for it). It is onboarded at once: the first-write
// 428 guides an HTTP agent to /auth.md, and an OAuth client has no page to
// read, its flow being the setup. bind runs in the registration's
// transaction, so the grant records its agent atomically; an error from bind
// undoes the registration.
func (s *Service) RegisterGrant(ctx context.Context, bind func(tx *store.Tx, n uint64) error) (uint64, error) {
	var n uint64
	var done func()
	_, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		var err error
		if n, done, err = s.RegisterGrantIn(tx); err != nil {
			return nil, err
		}
		return nil, bind(tx, n)
	})
	if err != nil {
		return 0, err
	}
	done()
	return n, nil
}

// RegisterGrantIn is RegisterGrant in the caller's transaction tx: it
// returns the registration's number, and done, to call once tx committed
// (before any token of the grant is handed out, as its principal is read
// from memory).
func (s *Service) RegisterGrantIn(tx *store.Tx) (n uint64, done func(), err error) {
	rec, _ := s.newAgent(true)
	if err := registerIn(tx, rec); err != nil {
		return 0, nil, err
	}
	return rec.N, func() {
		s.agents.put(rec)
		s.log.Info("corpus agent registered for an OAuth grant", "author_id", rec.AuthorID)
	}, nil
}

// GrantPrincipal is the caller an OAuth token of registration n acts as,
// limited to scopes (never nil: an empty grant may do nothing).
func (s *Service) GrantPrincipal(n uint64, scopes []string) (*api.Principal, error) {
	r := s.agents.get(n)
	if r == nil {
		return nil, ErrNoAgent
	}
	if scopes == nil {
		scopes = []string{}
	}
	return s.principal(r, scopes), nil
}
