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
