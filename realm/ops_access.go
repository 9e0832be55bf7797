package realm

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/parley"
	"relay/store"
)

// Access is by token, and every token starts as an application: the
// applicant gets a read-only token and a request id, and a grant holder
// reviews the request.
func (n *Node) registerAccess() {
	n.reg.Add(
		api.Define("post_tokens_request", http.MethodPost, "/api/v1/tokens/request",
			"Apply for access: all fields required. Returns a read-only token and a request id to poll.", api.Public, n.applyToken),
		api.Define("get_token_requests", http.MethodGet, "/api/v1/token-requests", "Access requests: your own, or all with the grant right; a page at a time, in the order they came (after, limit).", api.NeedRight(protocol.RightRead), n.listTokenRequests),
		api.Define("get_token_requests_id", http.MethodGet, "/api/v1/token-requests/{id}", "One access request and its status.", api.NeedRight(protocol.RightRead), n.getTokenRequest),
		api.Define("post_token_requests_id_review", http.MethodPost, "/api/v1/token-requests/{id}/review",
			"Review an access request (grant): approve (write+pin; lock only if justified), reject with a reason, defer, or mark in review.", api.NeedRight(protocol.RightGrant), n.reviewTokenRequest),
		api.Define("post_token_requests_id_withdraw", http.MethodPost, "/api/v1/token-requests/{id}/withdraw", "Withdraw your own access request.", api.NeedRight(protocol.RightRead), n.withdrawTokenRequest),
		api.Define("get_me", http.MethodGet, "/api/v1/me", "Who the token is: identity, rights, remembered extensions.", api.NeedRight(protocol.RightRead), n.me),
	)
}

// Request statuses.
const (
	reqPending   = "pending"
	reqInReview  = "in_review"
	reqApproved  = "approved"
	reqRejected  = "rejected"
	reqDeferred  = "deferred"
	reqWithdrawn = "withdrawn"
)

// RequestStatus is a status of an access request, as a filter names it.
type RequestStatus string

// RequestStatuses are the statuses of an access request.
var RequestStatuses = []RequestStatus{reqPending, reqInReview, reqApproved, reqRejected, reqDeferred, reqWithdrawn}

// Decision is what a review of an access request decides.
type Decision string

// Decisions are what a review may decide.
var Decisions = []Decision{"approve", "reject", "defer", "in_review"}

// The filter and the review list their words in their input schemas; a
// request as stored and shown keeps a plain string status, so that a
// record stays valid if the set grows.
var (
	_ = api.InputEnum(RequestStatuses)
	_ = api.InputEnum(Decisions)
)

// TokenRequest is an application for access.
type TokenRequest struct {
	ID            uint64     `json:"id"`
	Status        string     `json:"status" jsonschema:"pending, in_review, approved, rejected, deferred or withdrawn"`
	Reason        string     `json:"reason,omitempty" jsonschema:"why it was rejected or deferred"`
	Identity      string     `json:"identity"`
	Label         string     `json:"label"`
	Purpose       string     `json:"purpose"`
	Model         string     `json:"model"`
	Client        string     `json:"client"`
	Provider      string     `json:"provider"`
	Contact       string     `json:"contact"`
	Rights        []string   `json:"rights" jsonschema:"the token's rights now"`
	Justification string     `json:"justification,omitempty" jsonschema:"why lock was granted"`
	ReviewedBy    string     `json:"reviewed_by,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	DecidedAt     *time.Time `json:"decided_at,omitempty"`
}

// tokenRequestRec is a request as stored (the token id stays inside).
type tokenRequestRec struct {
	TokenRequest
	Token uint64 `json:"token"`
}

var keyRequestPrefix = []byte("l/treq/")

func requestKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), keyRequestPrefix...), id)
}

// Two indexes of the requests, kept with them, so that a listing of one
// status (the work queue's undecided requests among every decided one) or
// of one token's requests reads those only:
//
//	l/treqs/<status>\0<id 8>  → nil
//	l/treqt/<token 8><id 8>   → nil
//
// l/ix/token-requests marks a store whose requests are all indexed (indexRequests).
var (
	keyRequestByStatus = []byte("l/treqs/")
	keyRequestByToken  = []byte("l/treqt/")
	keyRequestIndexed  = []byte("l/ix/token-requests")
)

func requestStatusPrefix(status string) []byte {
	return append(append(append([]byte(nil), keyRequestByStatus...), status...), 0)
}

func requestTokenPrefix(token uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), keyRequestByToken...), token)
}

type applyIn struct {
	Label    string `json:"label" jsonschema:"the agent's name; its identity line is derived from it"`
	Purpose  string `json:"purpose" jsonschema:"what the agent will do here"`
	Model    string `json:"model" jsonschema:"the model behind the agent"`
	Client   string `json:"client" jsonschema:"the client software"`
	Provider string `json:"provider" jsonschema:"who runs the model"`
	Contact  string `json:"contact" jsonschema:"how the operator reaches the agent's owner"`
}

// ApplyOut is the answer to an application.
type ApplyOut struct {
	RequestID uint64   `json:"request_id"`
	Status    string   `json:"status"`
	Token     string   `json:"token" jsonschema:"read-only until the request is approved; shown once"`
	Identity  string   `json:"identity"`
	Rights    []string `json:"rights"`
	Poll      string   `json:"poll" jsonschema:"GET this path (or the MCP tool get_token_requests_id) for the decision"`
}

func (n *Node) applyToken(ctx context.Context, c *api.Call, in applyIn) (ApplyOut, error) {
	fields := []struct {
		name, val string
		max       int
	}{{"label", in.Label, 100}, {"purpose", in.Purpose, 1000}, {"model", in.Model, 200}, {"client", in.Client, 200}, {"provider", in.Provider, 200}, {"contact", in.Contact, 200}}
	for _, f := range fields {
		v := strings.TrimSpace(f.val)
		if v == "" {
			return ApplyOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "%s is required: all of label, purpose, model, client, provider and contact are.", f.name).With("field", f.name).With("rule", "required")
		}
		if protocol.CodePoints(v) > f.max {
			return ApplyOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "%s holds at most %d characters.", f.name, f.max).With("field", f.name).With("rule", "max_length")
		}
		if ref := protocol.CheckControl(f.name, v); ref != nil {
			return ApplyOut{}, ref
		}
	}
	tok, err := n.auth.Issue(ctx, strings.TrimSpace(in.Label), nil, false)
	if err != nil {
		return ApplyOut{}, err
	}
	rec := tokenRequestRec{Token: tok.ID, TokenRequest: TokenRequest{
		Status: reqPending, Identity: tok.Identity, Label: strings.TrimSpace(in.Label), Purpose: strings.TrimSpace(in.Purpose),
		Model: strings.TrimSpace(in.Model), Client: strings.TrimSpace(in.Client), Provider: strings.TrimSpace(in.Provider),
		Contact: strings.TrimSpace(in.Contact), Rights: tok.Rights, CreatedAt: protocol.Now(),
	}}
	_, err = n.store.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		id, err := tx.NextID("token_request")
		if err != nil {
			return nil, err
		}
		rec.ID = id
		return nil, putRequest(tx, &rec, "")
	})
	if err != nil {
		return ApplyOut{}, err
	}
	n.log.Warn("access requested", "request", rec.ID, "identity", rec.Identity, "model", rec.Model, "client", rec.Client)
	return ApplyOut{RequestID: rec.ID, Status: rec.Status, Token: tok.Token, Identity: tok.Identity, Rights: tok.Rights,
		Poll: "/api/v1/token-requests/" + strconv.FormatUint(rec.ID, 10)}, nil
}

// putRequest stores rec, whose status was was ("" for a new request), and
// moves it in the indexes.
func putRequest(tx *store.Tx, rec *tokenRequestRec, was string) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := tx.Set(requestKey(rec.ID), b); err != nil {
		return err
	}
	switch was {
	case "":
		return indexRequest(tx, rec)
	case rec.Status:
		return nil
	}
	if err := tx.Delete(binary.BigEndian.AppendUint64(requestStatusPrefix(was), rec.ID)); err != nil {
		return err
	}
	return tx.Set(binary.BigEndian.AppendUint64(requestStatusPrefix(rec.Status), rec.ID), nil)
}

// indexRequest writes rec's keys in the indexes.
func indexRequest(tx *store.Tx, rec *tokenRequestRec) error {
	if err := tx.Set(binary.BigEndian.AppendUint64(requestTokenPrefix(rec.Token), rec.ID), nil); err != nil {
		return err
	}
	return tx.Set(binary.BigEndian.AppendUint64(requestStatusPrefix(rec.Status), rec.ID), nil)
}

// indexRequests indexes the requests of a store written before the
// indexes were, once.
func indexRequests(ctx context.Context, st *store.Store) error {
	return st.IndexOnce(ctx, keyRequestPrefix, keyRequestIndexed, func(tx *store.Tx, _, v []byte) error {
		var rec tokenRequestRec
		if err := json.Unmarshal(v, &rec); err != nil {
			return err
		}
		return indexRequest(tx, &rec)
	})
}

func getRequest(tx *store.Tx, id uint64) (*tokenRequestRec, error) {
	b, err := tx.Get(requestKey(id))
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, protocol.Refusef(protocol.ReasonRequestNotFound, "No access request %d; see get_token_requests.", id)
		}
		return nil, err
	}
	var rec tokenRequestRec
	return &rec, json.Unmarshal(b, &rec)
}

// view is the request as its reader sees it, with the token's rights now.
func (n *Node) view(rec *tokenRequestRec) TokenRequest {
	out := rec.TokenRequest
	if t := n.auth.record(rec.Token); t != nil {
		out.Rights = rightNames(t.Rights)
	}
	return out
}

// mayRead: the applicant's own token, or the human or a grant holder.
func mayRead(p *api.Principal, rec *tokenRequestRec) error {
	if p.TokenID == rec.Token || p.Rights.Has(protocol.RightGrant) {
		return nil
	}
	return protocol.Refusef(protocol.ReasonRequestForbidden, "Access request %d belongs to another token.", rec.ID)
}

type requestIDIn struct {
	ID uint64 `json:"id"`
}

// TokenRequestOut is one request.
type TokenRequestOut struct {
	Request TokenRequest `json:"request"`
}

func (n *Node) getTokenRequest(ctx context.Context, c *api.Call, in requestIDIn) (TokenRequestOut, error) {
	var out TokenRequestOut
	err := n.store.View(func(tx *store.Tx) error {
		rec, err := getRequest(tx, in.ID)
		if err != nil {
			return err
		}
		if err := mayRead(c.Principal, rec); err != nil {
			return err
		}
		out.Request = n.view(rec)
		return nil
	})
	return out, err
}

type listRequestsIn struct {
	Status RequestStatus `json:"status,omitempty" jsonschema:"only requests in this status"`
	After  uint64        `json:"after,omitempty" jsonschema:"a cursor: only requests after this id (next_cursor of the page before)"`
	Limit  int           `json:"limit,omitempty" jsonschema:"at most this many (default 50, at most 200)"`
}

// TokenRequestsOut lists requests, in the order they came, a page at a
// time.
type TokenRequestsOut struct {
	Requests   []TokenRequest `json:"requests"`
	HasMore    bool           `json:"has_more" jsonschema:"more requests follow: ask again with after=next_cursor"`
	NextCursor *uint64        `json:"next_cursor,omitempty" jsonschema:"the last id listed, when more follow"`
}

// listTokenRequests reads a page: a grant holder's of every request (or
// of a status, from its index), another token's of its own (from the
// token's index), from the cursor until the page is full.
func (n *Node) listTokenRequests(ctx context.Context, c *api.Call, in listRequestsIn) (TokenRequestsOut, error) {
	limit := parley.ClampLimit(in.Limit)
	out := TokenRequestsOut{Requests: []TokenRequest{}}
	err := n.store.View(func(tx *store.Tx) error {
		add := func(rec *tokenRequestRec) error {
			if mayRead(c.Principal, rec) != nil || in.Status != "" && rec.Status != string(in.Status) {
				return nil
			}
			if len(out.Requests) == limit {
				out.HasMore = true
				last := out.Requests[limit-1].ID
				out.NextCursor = &last
				return store.ErrStop
			}
			out.Requests = append(out.Requests, n.view(rec))
			return nil
		}
		var index []byte
		switch {
		case !c.Principal.Rights.Has(protocol.RightGrant):
			index = requestTokenPrefix(c.Principal.TokenID)
		case in.Status != "":
			index = requestStatusPrefix(string(in.Status))
		default:
			from := requestKey(in.After + 1)
			if in.After == math.MaxUint64 {
				return nil
			}
			return tx.IterateFrom(keyRequestPrefix, from, func(_, v []byte) error {
				var rec tokenRequestRec
				if err := json.Unmarshal(v, &rec); err != nil {
					return err
				}
				return add(&rec)
			})
		}
		if in.After == math.MaxUint64 {
			return nil
		}
		from := binary.BigEndian.AppendUint64(bytes.Clone(index), in.After+1)
		return tx.IterateFrom(index, from, func(k, _ []byte) error {
			if len(k) != len(index)+8 {
				return fmt.Errorf("realm: request index key %q", k)
			}
			rec, err := getRequest(tx, binary.BigEndian.Uint64(k[len(index):]))
			if err != nil {
				return err
			}
			return add(rec)
		})
	})
	return out, err
}

type reviewIn struct {
	ID            uint64   `json:"id"`
	Decision      Decision `json:"decision" jsonschema:"approve, reject, defer or in_review"`
	Rights        []string `json:"rights,omitempty" jsonschema:"rights granted on approval; default write and pin"`
	Reason        string   `json:"reason,omitempty" jsonschema:"required to reject; optional otherwise"`
	Justification string   `json:"justification,omitempty" jsonschema:"required when granting lock"`
}

func (n *Node) reviewTokenRequest(ctx context.Context, c *api.Call, in reviewIn) (TokenRequestOut, error) {
	status := map[Decision]string{"approve": reqApproved, "reject": reqRejected, "defer": reqDeferred, "in_review": reqInReview}[in.Decision]
	if status == "" {
		return TokenRequestOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "decision: approve, reject, defer or in_review.").With("field", "decision").With("rule", "enum")
	}
	if status == reqRejected && strings.TrimSpace(in.Reason) == "" {
		return TokenRequestOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "A rejection needs a reason.").With("field", "reason").With("rule", "required")
	}
	if protocol.CodePoints(in.Reason) > 1000 || protocol.CodePoints(in.Justification) > 1000 {
		return TokenRequestOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "reason and justification hold at most 1000 characters.").With("rule", "max_length")
	}
	if ref := protocol.CheckControl("reason", in.Reason, "justification", in.Justification); ref != nil {
		return TokenRequestOut{}, ref
	}
	var rights protocol.Rights
	if status == reqApproved {
		names := in.Rights
		if len(names) == 0 {
			names = []string{"write", "pin"}
		}
		var err error
		if rights, err = protocol.NewRights(names...); err != nil {
			return TokenRequestOut{}, rightsRefusal(err)
		}
		if rights.Has(protocol.RightLock) && strings.TrimSpace(in.Justification) == "" {
			return TokenRequestOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "lock is granted only with a justification.").With("field", "justification").With("rule", "required")
		}
		if (rights.Has(protocol.RightGrant) || rights.Has(protocol.RightVerify)) && !c.Principal.Human {
			return TokenRequestOut{}, protocol.Refusef(protocol.ReasonUserSessionRequired, "Only the human grants verify or grant.")
		}
	}
	var rec *tokenRequestRec
	_, err := n.store.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		var err error
		if rec, err = getRequest(tx, in.ID); err != nil {
			return nil, err
		}
		// The reviewer is independent of the applicant: a token given
		// grant while its own request waits does not decide it (and so
		// give itself write, pin or lock).
		if rec.Token == c.Principal.TokenID {
			return nil, protocol.Refusef(protocol.ReasonRequestForbidden, "Access request %d is your own: another grant holder or the human reviews it.", rec.ID)
		}
		if final(rec.Status) {
			return nil, protocol.Refusef(protocol.ReasonRequestDecided, "Access request %d is already %s.", rec.ID, rec.Status)
		}
		was := rec.Status
		rec.Status, rec.Reason, rec.ReviewedBy = status, strings.TrimSpace(in.Reason), c.Principal.Identity.String()
		if status == reqApproved {
			rec.Justification = strings.TrimSpace(in.Justification)
			if err := n.auth.setRightsTx(tx, rec.Token, rights); err != nil {
				return nil, err
			}
		}
		if final(status) {
			now := protocol.Now()
			rec.DecidedAt = &now
		}
		return nil, putRequest(tx, rec, was)
	})
	if err != nil {
		return TokenRequestOut{}, err
	}
	if status == reqApproved {
		n.auth.reload(rec.Token)
	}
	n.log.Info("access request reviewed", "request", rec.ID, "status", status, "by", c.Principal.Identity.String())
	return TokenRequestOut{Request: n.view(rec)}, nil
}

func final(status string) bool {
	return status == reqApproved || status == reqRejected || status == reqWithdrawn
}

func (n *Node) withdrawTokenRequest(ctx context.Context, c *api.Call, in requestIDIn) (TokenRequestOut, error) {
	var rec *tokenRequestRec
	_, err := n.store.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		var err error
		if rec, err = getRequest(tx, in.ID); err != nil {
			return nil, err
		}
		if rec.Token != c.Principal.TokenID {
			return nil, protocol.Refusef(protocol.ReasonRequestForbidden, "Access request %d belongs to another token.", rec.ID)
		}
		if final(rec.Status) {
			return nil, protocol.Refusef(protocol.ReasonRequestDecided, "Access request %d is already %s.", rec.ID, rec.Status)
		}
		now := protocol.Now()
		was := rec.Status
		rec.Status, rec.DecidedAt = reqWithdrawn, &now
		return nil, putRequest(tx, rec, was)
	})
	if err != nil {
		return TokenRequestOut{}, err
	}
	return TokenRequestOut{Request: n.view(rec)}, nil
}

// MeOut is who a token is.
type MeOut struct {
	Identity   string   `json:"identity"`
	Realm      string   `json:"realm"`
	Human      bool     `json:"human"`
	Rights     []string `json:"rights"`
	Extensions []string `json:"extensions" jsonschema:"the extensions this line used, newest first"`
}

func (n *Node) me(ctx context.Context, c *api.Call, _ api.NoInput) (MeOut, error) {
	exts, err := n.parley.Extensions(c.Principal.Identity.String())
	return MeOut{Identity: c.Principal.Identity.String(), Realm: string(n.realm), Human: c.Principal.Human,
		Rights: rightNames(c.Principal.Rights), Extensions: exts}, err
}
