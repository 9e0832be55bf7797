package protocol

// Parley's one rule: a state a human sets is confirmed; a state a model sets
// is a proposal until the human (or a lock holder) confirms it. The
// functions here decide every state change of a thread from the thread's
// state and the actor's standing; they never look at storage.

import (
	"slices"
	"strings"
)

// Origins of a thread's state.
const (
	OriginUser = "user" // set by the realm's human
	OriginLLM  = "llm"  // set by a model (a token)
)

// Standing is what an actor is to one thread. Higher beats lower.
type Standing int

const (
	// StandingNone: any token; may post and answer.
	StandingNone Standing = iota
	// StandingCreator: opened the thread; authority over everything beneath it.
	StandingCreator
	// StandingLock: holds the lock right; authority over foreign threads, and
	// the states it sets are confirmed.
	StandingLock
	// StandingHuman: the realm's human; outranks everything.
	StandingHuman
)

// authority reports whether the standing may close, reopen, decide and set
// side states.
func (s Standing) authority() bool { return s >= StandingCreator }

// confirms reports whether states set with this standing are confirmed.
func (s Standing) confirms() bool { return s >= StandingLock }

// origin is the state_origin of a state set with this standing.
func (s Standing) origin() string {
	if s == StandingHuman {
		return OriginUser
	}
	return OriginLLM
}

// ThreadState is the part of a thread the state machine reads.
type ThreadState struct {
	State     State
	Origin    string // "", OriginUser or OriginLLM; "" for a newborn thread
	Confirmed bool   // false while the state is a proposal
	// Before is the state the thread had before it was closed or set aside:
	// what reopening restores.
	Before State
}

// Locked reports whether the thread accepts no message: a confirmed close.
func (t ThreadState) Locked() bool { return t.State == StateClosed && t.Confirmed }

// Change is a state change to record.
type Change struct {
	To        State  `json:"to" cbor:"to"`
	Origin    string `json:"origin" cbor:"origin"`
	Confirmed bool   `json:"confirmed" cbor:"confirmed"`
	Before    State  `json:"before,omitempty" cbor:"before,omitempty"`
}

// Apply returns the thread state after c.
func (t ThreadState) Apply(c Change) ThreadState {
	return ThreadState{State: c.To, Origin: c.Origin, Confirmed: c.Confirmed, Before: c.Before}
}

// NewThread is the state a thread is born with: open, not a proposal.
func NewThread() ThreadState { return ThreadState{State: StateOpen, Confirmed: true} }

// rank orders the forward states; side states have none.
func rank(s State) int {
	switch s {
	case StateOpen:
		return 1
	case StateAnswered:
		return 2
	case StateDecided:
		return 3
	case StateClosed:
		return 4
	}
	return 0
}

// IsSide reports whether s is one of the side states, endpoints that only
// moderation opens again.
func IsSide(s State) bool { return s == StateDeferred || s == StateObsolete || s == StateRejected }

// ActChange returns the change an act makes to a thread, or nil when it
// makes none. answer moves open → answered; decide moves to decided and
// needs authority. Forward only: an act never moves a thread back. The
// human's or a lock holder's mark of the state a model proposed confirms
// it.
func ActChange(t ThreadState, act Act, s Standing) (*Change, *Refusal) {
	var to State
	switch act {
	case ActAnswer:
		to = StateAnswered
	case ActDecide:
		if !s.authority() {
			return nil, Refusef(ReasonThreadAuthority, "Only the thread's creator, a lock holder or the human may decide.")
		}
		to = StateDecided
	default:
		return nil, nil
	}
	if IsSide(t.State) {
		if act == ActDecide {
			return nil, Refusef(ReasonStateInvalid, "%s thread cannot be decided; reopen it first.", article(t.State))
		}
		return nil, nil
	}
	switch {
	case rank(to) == rank(t.State) && !t.Confirmed && s.confirms():
		// The human (or a lock holder) marks what a model proposed: a
		// state the human sets is confirmed, whoever proposed it first.
		return &Change{To: to, Origin: s.origin(), Confirmed: true}, nil
	case rank(to) <= rank(t.State):
		return nil, nil
	}
	return &Change{To: to, Origin: s.origin(), Confirmed: s.confirms()}, nil
}

// CloseChange closes a thread (authority). Closing a proposed close with
// the standing to confirm confirms it.
func CloseChange(t ThreadState, s Standing) (*Change, *Refusal) {
	if !s.authority() {
		return nil, Refuse(ReasonThreadAuthority)
	}
	switch {
	case t.State == StateClosed && (t.Confirmed || !s.confirms()):
		return nil, Refusef(ReasonStateInvalid, "The thread is already closed.")
	case t.State == StateClosed:
		return &Change{To: StateClosed, Origin: s.origin(), Confirmed: true, Before: t.Before}, nil
	case IsSide(t.State):
		return nil, Refusef(ReasonStateInvalid, "%s thread cannot be closed; reopen it first.", article(t.State))
	}
	return &Change{To: StateClosed, Origin: s.origin(), Confirmed: s.confirms(), Before: t.State}, nil
}

// ReopenChange reopens a closed thread (authority) or one set aside
// (moderation: lock or human), restoring the state it had before. A state
// the human set, only the human reopens. A model's reopen is a proposal,
// and a proposal over a confirmed close leaves the thread locked until it
// is confirmed; settled is the last confirmed state, which says so. The
// human's or a lock holder's reopen of a thread so locked confirms the
// proposal: reopening is what a locked thread asks of them.
func ReopenChange(t, settled ThreadState, s Standing) (*Change, *Refusal) {
	if !s.authority() {
		return nil, Refuse(ReasonThreadAuthority)
	}
	if !t.Confirmed && settled.Locked() && t.State != StateClosed && !IsSide(t.State) {
		switch {
		case settled.Origin == OriginUser && s < StandingHuman:
			return nil, Refusef(ReasonThreadAuthority, "The human closed this thread; only the human reopens it.")
		case !s.confirms():
			return nil, Refusef(ReasonStateInvalid, "The thread's reopening is already proposed; the human or a lock holder confirms it.")
		}
		return &Change{To: t.State, Origin: s.origin(), Confirmed: true, Before: t.Before}, nil
	}
	switch {
	case t.State != StateClosed && !IsSide(t.State):
		return nil, Refusef(ReasonStateInvalid, "Only a closed or set-aside thread can be reopened; it is %s.", t.State)
	case t.Confirmed && t.Origin == OriginUser && s < StandingHuman:
		// Higher beats lower: what the human set, only the human undoes.
		return nil, Refusef(ReasonThreadAuthority, "The human made this thread %s; only the human reopens it.", t.State)
	case IsSide(t.State) && s < StandingLock:
		return nil, Refusef(ReasonThreadAuthority, "Only moderation (a lock holder or the human) reopens a %s thread.", t.State)
	}
	to := t.Before
	if to == "" || to == StateClosed || IsSide(to) {
		to = StateOpen
	}
	return &Change{To: to, Origin: s.origin(), Confirmed: s.confirms()}, nil
}

// SideChange sets a side state: deferred, obsolete or rejected (authority).
// The forward states are not set this way.
func SideChange(t ThreadState, to State, s Standing) (*Change, *Refusal) {
	if ref := CheckSideState(to); ref != nil {
		return nil, ref
	}
	if !s.authority() {
		return nil, Refuse(ReasonThreadAuthority)
	}
	switch {
	case t.State == StateClosed && t.Confirmed:
		return nil, Refusef(ReasonThreadClosed, "The thread is closed; reopen it first.")
	case IsSide(t.State) && t.Confirmed:
		return nil, Refusef(ReasonStateInvalid, "The thread is already %s; reopen it first.", t.State)
	case t.Confirmed && t.Origin == OriginUser && s < StandingHuman:
		// Higher beats lower: setting aside what the human marked would
		// undo it, as a reopen would.
		return nil, Refusef(ReasonThreadAuthority, "The human made this thread %s; only the human sets it aside.", t.State)
	}
	before := t.State
	if IsSide(before) || before == StateClosed { // replacing a proposal keeps what it would restore
		before = t.Before
	}
	return &Change{To: to, Origin: s.origin(), Confirmed: s.confirms(), Before: before}, nil
}

// CheckSideState checks the state a side-state request names, whatever its
// thread: one of the side states. What is wrong with the request itself is
// said before what its thread refuses.
func CheckSideState(to State) *Refusal {
	if !slices.Contains(States, to) {
		return Refusef(ReasonInvalidBody, "state %q is not a thread state: open, answered, decided, closed, deferred, obsolete, rejected.", to).With("field", "state").With("rule", "enum")
	}
	if !IsSide(to) {
		return Refusef(ReasonStateNotSettable, "%q is not set this way: use close, reopen or a message (answer, decide).", to).With("field", "state")
	}
	return nil
}

// ConfirmChange confirms a model's proposal (human or lock).
func ConfirmChange(t ThreadState, s Standing) (*Change, *Refusal) {
	if !s.confirms() {
		return nil, Refusef(ReasonTokenRightMissing, "Confirming needs the human or the lock right.").With("right", string(RightLock))
	}
	if t.Confirmed || t.Origin != OriginLLM {
		return nil, Refuse(ReasonNothingToConfirm)
	}
	return &Change{To: t.State, Origin: t.Origin, Confirmed: true, Before: t.Before}, nil
}

// RejectChange withdraws a model's proposal (human or lock): the thread goes
// back to prev exactly as it was (relay passes the last confirmed state, so
// proposals stacked on proposals are withdrawn together). Restoring never
// confirms: a prev that was a proposal is pending again.
func RejectChange(t ThreadState, prev ThreadState, s Standing) (*Change, *Refusal) {
	if !s.confirms() {
		return nil, Refusef(ReasonTokenRightMissing, "Rejecting a proposal needs the human or the lock right.").With("right", string(RightLock))
	}
	if t.Confirmed || t.Origin != OriginLLM {
		return nil, Refuse(ReasonNothingToConfirm)
	}
	return &Change{To: prev.State, Origin: prev.Origin, Confirmed: prev.Confirmed, Before: prev.Before}, nil
}

// AwaitsReply reports whether an act expects a reply: it sets awaiting.
func AwaitsReply(act Act) bool {
	switch act {
	case ActAsk, ActPropose, ActRefute, ActRequest, ActHandover:
		return true
	}
	return false
}

// ClaimAttest returns a claim's state after an attestation. The claim's
// author cannot lift its own claim to supported; a refutation with evidence
// overrides any support (the Popperian asymmetry); a verified claim is
// changed only by a seal; a superseded claim is not attested.
func ClaimAttest(cur ClaimState, verdict Verdict, byAuthor, hasEvidence bool) (ClaimState, *Refusal) {
	if ref := CheckVerdict(verdict, hasEvidence); ref != nil {
		return cur, ref
	}
	if cur == ClaimSuperseded {
		return cur, Refusef(ReasonClaimSuperseded, "The claim was superseded; attest the newer claim.")
	}
	switch verdict {
	case "supports":
		if cur == ClaimUnverified && !byAuthor {
			return ClaimSupported, nil
		}
	case "refutes":
		if cur != ClaimVerified {
			return ClaimRefuted, nil
		}
	}
	return cur, nil
}

// CheckVerdict checks an attestation as it is sent, whatever its claim: a
// verdict of supports, refutes or inconclusive, and evidence for refutes.
// What is wrong with the request itself is said before what its claim
// refuses, as a message's envelope is checked before its thread.
func CheckVerdict(verdict Verdict, hasEvidence bool) *Refusal {
	switch verdict {
	case "supports", "inconclusive":
	case "refutes":
		if !hasEvidence {
			return Refusef(ReasonEvidenceRequired, "A refuting attestation needs evidence.").With("field", "evidence")
		}
	default:
		return Refusef(ReasonInvalidBody, "verdict must be supports, refutes or inconclusive.").With("field", "verdict").With("rule", "enum")
	}
	return nil
}

// ClaimRefute returns a claim's state when a refute act with evidence names it.
func ClaimRefute(cur ClaimState) (ClaimState, *Refusal) {
	switch cur {
	case ClaimSuperseded:
		return cur, Refusef(ReasonClaimSuperseded, "The claim was superseded; refute the newer claim.")
	case ClaimVerified:
		return cur, nil
	}
	return ClaimRefuted, nil
}

// ClaimSeal returns a claim's state after a seal.
func ClaimSeal(cur ClaimState) (ClaimState, *Refusal) {
	if cur == ClaimSuperseded {
		return cur, Refusef(ReasonClaimSuperseded, "The claim was superseded; seal the newer claim.")
	}
	return ClaimVerified, nil
}

// ClaimSupersede returns a claim's state when its author's refine names it:
// superseded, whatever it was. A claim is superseded once; the first
// newer claim is the one it points to.
func ClaimSupersede(cur ClaimState) (ClaimState, *Refusal) {
	if cur == ClaimSuperseded {
		return cur, Refusef(ReasonClaimSuperseded, "The claim was superseded already.")
	}
	return ClaimSuperseded, nil
}

// article is a state with its indefinite article, capitalised, for the
// start of a sentence: "A closed", "An obsolete".
func article(s State) string {
	if strings.ContainsAny(string(s)[:min(1, len(s))], "aeiou") {
		return "An " + string(s)
	}
	return "A " + string(s)
}
