package protocol

// ParleyVersion is the version of the Parley language a realm speaks.
const ParleyVersion = "1"

// Act is a Parley speech act: the kind of a message.
type Act string

// The nine speech acts, exactly: no others in the core.
const (
	ActAsk      Act = "ask"
	ActAnswer   Act = "answer"
	ActPropose  Act = "propose"
	ActDecide   Act = "decide"
	ActNote     Act = "note"
	ActRefine   Act = "refine"
	ActRefute   Act = "refute"
	ActRequest  Act = "request"
	ActHandover Act = "handover"
)

// Acts lists the speech acts in the seed's order.
var Acts = []Act{ActAsk, ActAnswer, ActPropose, ActDecide, ActNote, ActRefine, ActRefute, ActRequest, ActHandover}

// State is a thread's state; it belongs to the whole thread.
type State string

// The seven thread states.
const (
	StateOpen     State = "open"
	StateAnswered State = "answered"
	StateDecided  State = "decided"
	StateClosed   State = "closed"
	StateDeferred State = "deferred"
	StateObsolete State = "obsolete"
	StateRejected State = "rejected"
)

// States lists the thread states in the seed's order.
var States = []State{StateOpen, StateAnswered, StateDecided, StateClosed, StateDeferred, StateObsolete, StateRejected}

// ClaimState is a claim's state in the dialectic profile.
type ClaimState string

// The claim states.
const (
	ClaimUnverified ClaimState = "unverified"
	ClaimSupported  ClaimState = "supported"
	ClaimVerified   ClaimState = "verified"
	ClaimRefuted    ClaimState = "refuted"
	ClaimSuperseded ClaimState = "superseded"
)

// ClaimStates lists the claim states.
var ClaimStates = []ClaimState{ClaimUnverified, ClaimSupported, ClaimVerified, ClaimRefuted, ClaimSuperseded}

// Verdict is what an attestation says of a claim.
type Verdict string

// The three verdicts.
const (
	VerdictSupports     Verdict = "supports"
	VerdictRefutes      Verdict = "refutes"
	VerdictInconclusive Verdict = "inconclusive"
)

// Verdicts are what an attestation may say of a claim, in the seed's order.
var Verdicts = []Verdict{VerdictSupports, VerdictRefutes, VerdictInconclusive}

// EvidenceKind is the kind of a piece of evidence.
type EvidenceKind string

// EvidenceKinds are the kinds of evidence a claim may carry, in the seed's
// order.
var EvidenceKinds = []EvidenceKind{"url", "hash", "artifact", "commit", "log", "reproducer", "note", "other"}

// ParleyLimits are the seed's limits. Lengths are Unicode code points.
type ParleyLimits struct {
	Body              int `json:"body"`
	URL               int `json:"url"`
	ImageBytes        int `json:"image_bytes"`
	RelatesTo         int `json:"relates_to"`
	Extension         int `json:"extension"`
	ClaimsPerMessage  int `json:"claims_per_message"`
	ClaimStatement    int `json:"claim_statement"`
	EvidencePerClaim  int `json:"evidence_per_claim"`
	RequestsPerMinute int `json:"requests_per_minute"`
}

// DefaultParleyLimits are the seed's values.
var DefaultParleyLimits = ParleyLimits{
	Body:              500,
	URL:               2000,
	ImageBytes:        5 << 20,
	RelatesTo:         8,
	Extension:         40,
	ClaimsPerMessage:  10,
	ClaimStatement:    500,
	EvidencePerClaim:  16,
	RequestsPerMinute: 600,
}
