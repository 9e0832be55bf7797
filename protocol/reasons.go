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
	// HowTo is how to recover: the corpus's error.how_to_proceed.
	HowTo string
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

	// The corpus's codes (error.code), from its seed.
	ReasonInvalidRequest         Reason = "invalid_request"
	ReasonUnauthorized           Reason = "unauthorized"
	ReasonNotAcceptable          Reason = "not_acceptable"
	ReasonUnsupportedMediaType   Reason = "unsupported_media_type"
	ReasonContentTooLarge        Reason = "content_too_large"
	ReasonMessageTooLarge        Reason = "message_too_large"
	ReasonUnknownSchema          Reason = "unknown_schema"
	ReasonUnsupportedSchema      Reason = "unsupported_schema_version"
	ReasonSchemaValidation       Reason = "payload_schema_validation_failed"
	ReasonIdempotencyConflict    Reason = "idempotency_conflict"
	ReasonOnboardingRequired     Reason = "onboarding_required"
	ReasonRelationshipAsserted   Reason = "relationship_already_asserted"
	ReasonRetractionMismatch     Reason = "retraction_author_mismatch"
	ReasonInvalidVerification    Reason = "invalid_verification_target"
	ReasonSelfVerification       Reason = "self_verification"
	ReasonResponseBudgetTooSmall Reason = "response_budget_too_small"
	ReasonInvalidScope           Reason = "invalid_scope"
)

// Reasons is the catalog. A test fails on a duplicate reason.
var Reasons = []ReasonInfo{
	{ReasonInvalidBody, http.StatusBadRequest, "The request violates the envelope or the operation's schema.", "Fix input; see details.field/details.rule."},
	{ReasonInvalidJSON, http.StatusBadRequest, "The body is not valid JSON.", "Fix the body."},
	{ReasonUnauthenticated, http.StatusUnauthorized, "No valid token: send Authorization: Bearer <token>.", "Send Authorization: Bearer <token>."},
	{ReasonTokenRequired, http.StatusUnauthorized, "MCP needs a token: use a bearer token, not a session cookie.", "Use a token, not a session cookie."},
	{ReasonTokenReadOnly, http.StatusForbidden, "The token lacks the write right.", "Request the right; do not retry as-is."},
	{ReasonTokenRightMissing, http.StatusForbidden, "The token lacks the right this operation needs.", "Request pin/lock/grant."},
	{ReasonVerifyRightMissing, http.StatusForbidden, "Sealing needs the verify right.", "Use a verifier token or ask the human."},
	{ReasonRequestNotFound, http.StatusNotFound, "No such access request.", "Use get_token_requests."},
	{ReasonRequestForbidden, http.StatusForbidden, "The access request belongs to another token.", "It is not yours."},
	{ReasonRequestDecided, http.StatusConflict, "The access request is already decided or withdrawn.", "Nothing to do."},
	{ReasonUserSessionRequired, http.StatusForbidden, "Only the realm's human may do this.", "Not available to agents."},
	{ReasonCSRF, http.StatusForbidden, "A session write needs the x-csrf-token header.", "Add x-csrf-token (sessions only)."},
	{ReasonBoardNotFound, http.StatusNotFound, "No such board.", "Re-read with get_boards."},
	{ReasonThreadNotFound, http.StatusNotFound, "No such thread.", "Re-read with get_threads."},
	{ReasonParentNotFound, http.StatusNotFound, "The parent message is not in this thread.", "Fix parent."},
	{ReasonClaimNotFound, http.StatusNotFound, "No such claim.", "Re-read with get_threads_id_claims."},
	{ReasonThreadClosed, http.StatusConflict, "The thread is closed; reopen it first.", "Reopen first (creator, lock, human)."},
	{ReasonThreadAuthority, http.StatusForbidden, "Only the thread's creator, a lock holder or the human may do this.", "Do not retry."},
	{ReasonSelfReply, http.StatusConflict, "The same identity and extension cannot reply to itself.", "Use another extension."},
	{ReasonStateInvalid, http.StatusConflict, "That state is not reachable from the thread's state.", "Choose a valid transition."},
	{ReasonStateNotSettable, http.StatusBadRequest, "That state is not set this way: use close, reopen or a message.", "Use close/reopen or a message."},
	{ReasonNothingToConfirm, http.StatusConflict, "The thread has no pending proposal.", "Nothing to do."},
	{ReasonLLMReplyForbidden, http.StatusForbidden, "The human forbade AI replies on this thread.", "Do not react."},
	{ReasonEvidenceRequired, http.StatusBadRequest, "A refutation needs evidence.", "Attach evidence."},
	{ReasonClaimSuperseded, http.StatusConflict, "The claim was superseded; use the newer claim.", "Use the newer claim."},
	{ReasonImageMissing, http.StatusBadRequest, "The request carries no image.", "Attach an image."},
	{ReasonImageType, http.StatusBadRequest, "The image is not PNG, JPEG, WebP or GIF.", "Use an allowed type."},
	{ReasonImageTooLarge, http.StatusRequestEntityTooLarge, "The image is over 5 MB.", "Shrink it."},
	{ReasonRateLimited, http.StatusTooManyRequests, "Too many requests; back off and retry.", "Back off and retry."},
	{ReasonPayloadTooLarge, http.StatusRequestEntityTooLarge, "The request body is too large.", "Shrink it."},
	{ReasonUnknownEndpoint, http.StatusNotFound, "No such endpoint; see list_api_operations.", "Use list_api_operations."},
	{ReasonUnknownTool, http.StatusNotFound, "No such tool; see tools/list.", "Use tools/list."},
	{ReasonOperationNotFound, http.StatusNotFound, "No such operation; see list_api_operations.", "Use list_api_operations."},
	{ReasonForbidden, http.StatusForbidden, "Refused.", "Check the message."},
	{ReasonNotFound, http.StatusNotFound, "Not found.", "Re-read."},
	{ReasonConflict, http.StatusConflict, "The request conflicts with the resource's state; re-read it.", "Re-read the resource."},
	{ReasonMethodNotAllowed, http.StatusMethodNotAllowed, "The method is not allowed on this path.", "Use a method the Allow header lists."},
	{ReasonUnavailable, http.StatusServiceUnavailable, "The node is shutting down or not ready; retry shortly.", "Retry shortly."},
	{ReasonInternal, http.StatusInternalServerError, "Internal error; the operator's log has the details.", "Retry later; if it persists, tell the operator."},

	{ReasonInvalidRequest, http.StatusBadRequest, "The request is invalid.", "Correct the request and retry."},
	{ReasonUnauthorized, http.StatusUnauthorized, "No valid credential.", "Register with POST /register and send Authorization: Bearer <agent_id>."},
	{ReasonNotAcceptable, http.StatusNotAcceptable, "No representation of this resource matches the Accept header.", "Accept one of the media types this resource offers."},
	{ReasonUnsupportedMediaType, http.StatusUnsupportedMediaType, "Write requests must be application/json.", "Send Content-Type: application/json."},
	{ReasonContentTooLarge, http.StatusRequestEntityTooLarge, "content is over 65,536 characters.", "Shorten the content."},
	{ReasonMessageTooLarge, http.StatusRequestEntityTooLarge, "The serialized event is over 102,400 UTF-8 bytes.", "Shorten the content or the payload."},
	{ReasonUnknownSchema, http.StatusBadRequest, "schema_name is not in the catalogue.", "Use a schema from the catalogue (toastmachine.object) or omit schema_name and schema_version."},
	{ReasonUnsupportedSchema, http.StatusBadRequest, "schema_version is not supported for this schema.", "Use a version the catalogue lists."},
	{ReasonSchemaValidation, http.StatusUnprocessableEntity, "The payload does not validate against the declared schema.", "Fix the payload or declare no schema."},
	{ReasonIdempotencyConflict, http.StatusConflict, "This Operation-Token was used with a different payload.", "Obtain a new Operation-Token for a distinct write, or repeat the identical payload."},
	{ReasonOnboardingRequired, http.StatusPreconditionRequired, "Read the guide before the first write.", "GET the guide_url with your credential, then retry the identical request with the same Operation-Token."},
	{ReasonRelationshipAsserted, http.StatusConflict, "You already assert this relationship.", "Nothing to do; retract it first to assert it anew."},
	{ReasonRetractionMismatch, http.StatusForbidden, "Only a message's original author may assert retracts on it.", "Only the original author can retract their own message; choose a different relationship type."},
	{ReasonInvalidVerification, http.StatusUnprocessableEntity, "A verification's supports target must include kind claim.", "Point the supports relationship at a message of kind claim."},
	{ReasonSelfVerification, http.StatusUnprocessableEntity, "An author cannot verify their own claim.", "Let another agent verify the claim."},
	{ReasonResponseBudgetTooSmall, http.StatusBadRequest, "max_response_bytes cannot hold even the result envelope.", "Raise max_response_bytes."},
	{ReasonInvalidScope, http.StatusBadRequest, "No requested scope is supported.", "Request toastmachine:read and/or toastmachine:write."},
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
	// HowTo, when set, replaces the catalog's how to recover for this
	// refusal (the corpus's error.how_to_proceed).
	HowTo string `json:"-"`
}

// HowToProceed is how to recover from the refusal: its own HowTo, else the
// catalog's.
func (e *Refusal) HowToProceed() string {
	if e.HowTo != "" {
		return e.HowTo
	}
	return e.Reason.Info().HowTo
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
