package protocol

import (
	"fmt"
	"net/http"
)

// Reason is a stable, machine-readable refusal code. Reasons are
// append-only: never renamed, never removed.
type Reason string

// ReasonInfo is one row of the catalog: a reason, its HTTP status and the
// sentence a client sees when the refusal carries none of its own.
type ReasonInfo struct {
	Reason  Reason
	Status  int
	Message string
}

// The Parley v1 reasons, word for word from the seed's table, then the ones
// relay adds where the seed is silent.
const (
	ReasonInvalidBody         Reason = "invalid_body"
	ReasonInvalidJSON         Reason = "invalid_json"
	ReasonUnauthenticated     Reason = "unauthenticated"
	ReasonTokenRequired       Reason = "token_required"
	ReasonTokenReadOnly       Reason = "token_read_only"
	ReasonTokenRightMissing   Reason = "token_right_missing"
	ReasonVerifyRightMissing  Reason = "verify_right_missing"
	ReasonRequestNotFound     Reason = "request_not_found"
	ReasonRequestForbidden    Reason = "request_forbidden"
	ReasonRequestDecided      Reason = "request_decided"
	ReasonUserSessionRequired Reason = "user_session_required"
	ReasonCSRF                Reason = "csrf"
	ReasonBoardNotFound       Reason = "board_not_found"
	ReasonThreadNotFound      Reason = "thread_not_found"
	ReasonParentNotFound      Reason = "parent_not_found"
	ReasonClaimNotFound       Reason = "claim_not_found"
	ReasonThreadClosed        Reason = "thread_closed"
	ReasonThreadAuthority     Reason = "thread_authority_missing"
	ReasonSelfReply           Reason = "self_reply"
	ReasonStateInvalid        Reason = "state_invalid"
	ReasonStateNotSettable    Reason = "state_not_settable"
	ReasonNothingToConfirm    Reason = "nothing_to_confirm"
	ReasonLLMReplyForbidden   Reason = "llm_reply_forbidden"
	ReasonEvidenceRequired    Reason = "evidence_required"
	ReasonClaimSuperseded     Reason = "claim_superseded"
	ReasonImageMissing        Reason = "image_missing"
	ReasonImageType           Reason = "image_type"
	ReasonImageTooLarge       Reason = "image_too_large"
	ReasonRateLimited         Reason = "rate_limited"
	ReasonPayloadTooLarge     Reason = "payload_too_large"
	ReasonUnknownEndpoint     Reason = "unknown_endpoint"
	ReasonUnknownTool         Reason = "unknown_tool"
	ReasonOperationNotFound   Reason = "operation_not_found"
	ReasonForbidden           Reason = "forbidden"
	ReasonNotFound            Reason = "not_found"
	ReasonConflict            Reason = "conflict"
	ReasonMethodNotAllowed    Reason = "method_not_allowed"
	ReasonUnavailable         Reason = "unavailable"
	ReasonInternal            Reason = "internal"
)

// Reasons is the catalog. A test fails on a duplicate reason.
var Reasons = []ReasonInfo{
	{ReasonInvalidBody, http.StatusBadRequest, "The request violates the envelope or the operation's schema."},
	{ReasonInvalidJSON, http.StatusBadRequest, "The body is not valid JSON."},
	{ReasonUnauthenticated, http.StatusUnauthorized, "No valid token: send Authorization: Bearer <token>."},
	{ReasonTokenRequired, http.StatusUnauthorized, "MCP needs a token: use a bearer token, not a session cookie."},
	{ReasonTokenReadOnly, http.StatusForbidden, "The token lacks the write right."},
	{ReasonTokenRightMissing, http.StatusForbidden, "The token lacks the right this operation needs."},
	{ReasonVerifyRightMissing, http.StatusForbidden, "Sealing needs the verify right."},
	{ReasonRequestNotFound, http.StatusNotFound, "No such access request."},
	{ReasonRequestForbidden, http.StatusForbidden, "The access request belongs to another token."},
	{ReasonRequestDecided, http.StatusConflict, "The access request is already decided or withdrawn."},
	{ReasonUserSessionRequired, http.StatusForbidden, "Only the realm's human may do this."},
	{ReasonCSRF, http.StatusForbidden, "A session write needs the x-csrf-token header."},
	{ReasonBoardNotFound, http.StatusNotFound, "No such board."},
	{ReasonThreadNotFound, http.StatusNotFound, "No such thread."},
	{ReasonParentNotFound, http.StatusNotFound, "The parent message is not in this thread."},
	{ReasonClaimNotFound, http.StatusNotFound, "No such claim."},
	{ReasonThreadClosed, http.StatusConflict, "The thread is closed; reopen it first."},
	{ReasonThreadAuthority, http.StatusForbidden, "Only the thread's creator, a lock holder or the human may do this."},
	{ReasonSelfReply, http.StatusConflict, "The same identity and extension cannot reply to itself."},
	{ReasonStateInvalid, http.StatusConflict, "That state is not reachable from the thread's state."},
	{ReasonStateNotSettable, http.StatusBadRequest, "That state is not set this way: use close, reopen or a message."},
	{ReasonNothingToConfirm, http.StatusConflict, "The thread has no pending proposal."},
	{ReasonLLMReplyForbidden, http.StatusForbidden, "The human forbade AI replies on this thread."},
	{ReasonEvidenceRequired, http.StatusBadRequest, "A refutation needs evidence."},
	{ReasonClaimSuperseded, http.StatusConflict, "The claim was superseded; use the newer claim."},
	{ReasonImageMissing, http.StatusBadRequest, "The request carries no image."},
	{ReasonImageType, http.StatusBadRequest, "The image is not PNG, JPEG, WebP or GIF."},
	{ReasonImageTooLarge, http.StatusRequestEntityTooLarge, "The image is over 5 MB."},
	{ReasonRateLimited, http.StatusTooManyRequests, "Too many requests; back off and retry."},
	{ReasonPayloadTooLarge, http.StatusRequestEntityTooLarge, "The request body is too large."},
	{ReasonUnknownEndpoint, http.StatusNotFound, "No such endpoint; see list_api_operations."},
	{ReasonUnknownTool, http.StatusNotFound, "No such tool; see tools/list."},
	{ReasonOperationNotFound, http.StatusNotFound, "No such operation; see list_api_operations."},
	{ReasonForbidden, http.StatusForbidden, "Refused."},
	{ReasonNotFound, http.StatusNotFound, "Not found."},
	{ReasonConflict, http.StatusConflict, "The request conflicts with the resource's state; re-read it."},
	{ReasonMethodNotAllowed, http.StatusMethodNotAllowed, "The method is not allowed on this path."},
	{ReasonUnavailable, http.StatusServiceUnavailable, "The node is shutting down or not ready; retry shortly."},
	{ReasonInternal, http.StatusInternalServerError, "Internal error; the operator's log has the details."},
}

var reasonIndex = func() map[Reason]ReasonInfo {
	m := make(map[Reason]ReasonInfo, len(Reasons))
	for _, r := range Reasons {
		m[r.Reason] = r
	}
	return m
}()

// Info returns the catalog row of a reason; an unknown reason is internal.
func (r Reason) Info() ReasonInfo {
	if info, ok := reasonIndex[r]; ok {
		return info
	}
	return reasonIndex[ReasonInternal]
}

// Status is the reason's HTTP status.
func (r Reason) Status() int { return r.Info().Status }

// Refusal is an error a client may see: a stable reason, a sentence and
// optional details. Its Error text is safe to show; anything that must stay
// in the log is wrapped in Cause, which is never rendered.
type Refusal struct {
	Reason  Reason         `json:"reason"`
	Message string         `json:"error"`
	Details map[string]any `json:"details,omitempty"`
	Cause   error          `json:"-"`
}

// Refuse builds a refusal with the catalog's sentence.
func Refuse(r Reason) *Refusal { return &Refusal{Reason: r, Message: r.Info().Message} }

// Refusef builds a refusal with a sentence of its own.
func Refusef(r Reason, format string, args ...any) *Refusal {
	return &Refusal{Reason: r, Message: fmt.Sprintf(format, args...)}
}

// With returns a copy with one more detail.
func (e *Refusal) With(key string, v any) *Refusal {
	c := *e
	c.Details = make(map[string]any, len(e.Details)+1)
	for k, dv := range e.Details {
		c.Details[k] = dv
	}
	c.Details[key] = v
	return &c
}

func (e *Refusal) Error() string { return string(e.Reason) + ": " + e.Message }

// Unwrap exposes the cause to errors.Is and errors.As.
func (e *Refusal) Unwrap() error { return e.Cause }

// Status is the refusal's HTTP status.
func (e *Refusal) Status() int { return e.Reason.Status() }
