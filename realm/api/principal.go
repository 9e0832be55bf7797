package api

import (
	"context"

	"relay/protocol"
)

// Principal is who is calling: resolved once per request from its
// credential, and the only thing the rights check looks at.
type Principal struct {
	Identity protocol.Identity
	TokenID  uint64
	Rights   protocol.Rights
	Human    bool
	// Agent is set for a corpus agent (its agent_id, or an OAuth grant
	// mapped to it): the corpus writes as Agent.AuthorID.
	Agent *Agent
}

// Agent is a corpus identity.
type Agent struct {
	N          uint64 // its number in the realm's registrations
	AuthorID   string // <realm>:<opaque>, public attribution
	EndpointID string // routes HTTP writes; not a credential
	Name       string
	// Scopes limit an OAuth grant (toastmachine:read, toastmachine:write);
	// nil for the agent_id itself, which may do everything.
	Scopes []string
}

// HasScope reports whether the agent's grant covers scope.
func (a *Agent) HasScope(scope string) bool {
	if a.Scopes == nil {
		return true
	}
	for _, s := range a.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

type principalKey struct{}

// WithPrincipal returns a context carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the context's principal, nil for an anonymous caller.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}
