package realm

import (
	"context"
	"net/http"
	"strings"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/parley"
)

// Tokens are the realm human's to issue, re-right and revoke (DESIGN.md:
// human-only routes).
func (n *Node) registerTokens() {
	n.reg.Add(
		api.Define("post_tokens", http.MethodPost, "/api/v1/tokens", "Issue an agent token with rights (the realm's human only). The secret is shown once.", api.HumanOnly, n.issueToken),
		api.Define("get_tokens", http.MethodGet, "/api/v1/tokens", "List the realm's tokens, without secrets (the realm's human only); a page at a time, in the order they were issued (after, limit).", api.HumanOnly, n.listTokens),
		api.Define("post_tokens_id_rights", http.MethodPost, "/api/v1/tokens/{id}/rights", "Change a token's rights (the realm's human only).", api.HumanOnly, n.setTokenRights),
		api.Define("post_tokens_id_revoke", http.MethodPost, "/api/v1/tokens/{id}/revoke", "Revoke a token at once (the realm's human only).", api.HumanOnly, n.revokeToken),
	)
}

type issueTokenIn struct {
	Label  string   `json:"label" jsonschema:"a name for the agent; its identity's line is derived from it"`
	Rights []string `json:"rights,omitempty" jsonschema:"rights beyond read: write, pin, lock, verify, grant"`
}

func (n *Node) issueToken(ctx context.Context, c *api.Call, in issueTokenIn) (IssuedToken, error) {
	label := strings.TrimSpace(in.Label)
	if label == "" || len([]rune(label)) > 100 {
		return IssuedToken{}, protocol.Refusef(protocol.ReasonInvalidBody, "label: 1 to 100 characters.").With("field", "label").With("rule", "length")
	}
	if ref := protocol.CheckControl("label", label); ref != nil {
		return IssuedToken{}, ref
	}
	rights, err := protocol.NewRights(in.Rights...)
	if err != nil {
		return IssuedToken{}, rightsRefusal(err)
	}
	tok, err := n.auth.Issue(ctx, label, rights, false)
	if err != nil {
		return IssuedToken{}, err
	}
	n.log.Info("token issued", "id", tok.ID, "identity", tok.Identity, "rights", rights.String(), "by", c.Principal.Identity.String())
	return *tok, nil
}

// TokenOut is a token as listed: never its secret.
type TokenOut struct {
	ID        uint64     `json:"id"`
	Label     string     `json:"label"`
	Identity  string     `json:"identity"`
	Rights    []string   `json:"rights"`
	Human     bool       `json:"human"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

func (n *Node) tokenOut(rec *tokenRecord) TokenOut {
	p := n.auth.principal(rec)
	return TokenOut{ID: rec.ID, Label: rec.Label, Identity: p.Identity.String(), Rights: rightNames(p.Rights), Human: rec.Human, CreatedAt: rec.CreatedAt, RevokedAt: rec.RevokedAt}
}

type listTokensIn struct {
	After uint64 `json:"after,omitempty" jsonschema:"a cursor: only tokens after this id (next_cursor of the page before)"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many (default 50, at most 200)"`
}

// TokensOut is the answer of get_tokens: a page of tokens, in the order
// they were issued.
type TokensOut struct {
	Tokens     []TokenOut `json:"tokens"`
	HasMore    bool       `json:"has_more" jsonschema:"more tokens follow: ask again with after=next_cursor"`
	NextCursor *uint64    `json:"next_cursor,omitempty" jsonschema:"the last id listed, when more follow"`
}

func (n *Node) listTokens(ctx context.Context, c *api.Call, in listTokensIn) (TokensOut, error) {
	limit := parley.ClampLimit(in.Limit)
	recs := n.auth.page(in.After, limit+1)
	out := TokensOut{Tokens: []TokenOut{}}
	for i := range recs[:min(len(recs), limit)] {
		out.Tokens = append(out.Tokens, n.tokenOut(&recs[i]))
	}
	if len(recs) > limit {
		last := recs[limit-1].ID
		out.HasMore, out.NextCursor = true, &last
	}
	return out, nil
}

type tokenRightsIn struct {
	ID     uint64   `json:"id"`
	Rights []string `json:"rights" jsonschema:"the new rights beyond read"`
}

func (n *Node) setTokenRights(ctx context.Context, c *api.Call, in tokenRightsIn) (TokenOut, error) {
	rights, err := protocol.NewRights(in.Rights...)
	if err != nil {
		return TokenOut{}, rightsRefusal(err)
	}
	rec, err := n.auth.update(ctx, in.ID, func(rec *tokenRecord) error { return rec.setRights(rights) })
	if err != nil {
		return TokenOut{}, err
	}
	return n.tokenOut(rec), nil
}

type tokenIDIn struct {
	ID uint64 `json:"id"`
}

func (n *Node) revokeToken(ctx context.Context, c *api.Call, in tokenIDIn) (TokenOut, error) {
	rec, err := n.auth.update(ctx, in.ID, func(rec *tokenRecord) error {
		if rec.ID == c.Principal.TokenID {
			return protocol.Refusef(protocol.ReasonConflict, "A credential cannot revoke itself.")
		}
		if rec.RevokedAt == nil {
			now := protocol.Now()
			rec.RevokedAt = &now
		}
		return nil
	})
	if err != nil {
		return TokenOut{}, err
	}
	return n.tokenOut(rec), nil
}

// rightsRefusal refuses rights protocol.NewRights did not take, in words
// for the client: the sentence without the Go error's package prefix.
func rightsRefusal(err error) *protocol.Refusal {
	msg := strings.TrimPrefix(err.Error(), protocol.ErrInvalidName.Error()+": ")
	return protocol.Refusef(protocol.ReasonInvalidBody, "rights: %s.", msg).With("field", "rights").With("rule", "enum")
}
