package parley

import (
	"slices"
	"sort"
	"time"

	"relay/protocol"
)

// A claim's facts (attestations, refute acts naming it, its seal, its
// supersession) come from many realms, and replicas receive them in
// different orders. A claim record therefore keeps every fact it was given
// and derives what it shows by folding them in one canonical order: the
// event's time, then its realm and its seq there (so that facts of one
// millisecond keep their chain's order), then the fact's kind, each step
// decided by the protocol.Claim* rules. Two replicas that hold the same
// facts show the same claim, whatever order the facts came in; a fact
// refused where it falls in that order (an attestation after the
// supersede) is kept and shown with the rule that refused it, not counted,
// and counts again if an earlier fact arrives later.

// Kinds of claim facts. One event makes at most a refute and a supersede
// of one claim (a refine that also refutes it); they fold in this order, the
// order the projector has always applied them in.
const (
	factAttest    = "attest"
	factRefute    = "refute"
	factSupersede = "supersede"
	factSeal      = "seal"
)

func factRank(kind string) int {
	switch kind {
	case factAttest:
		return 0
	case factRefute:
		return 1
	case factSupersede:
		return 2
	}
	return 3
}

// claimFact is one fact about a claim, as the projector accepted it.
type claimFact struct {
	Kind string    `json:"kind"`
	At   time.Time `json:"at"`  // the event's author time
	CID  string    `json:"cid"` // the event's CID
	// By attested, sealed, or (supersede) wrote the refine, in Realm, the
	// event's realm: every realm's operator is human:<name>, so an identity
	// names one speaker only together with its realm.
	By        string              `json:"by,omitempty"`
	Realm     protocol.Realm      `json:"realm"`
	Seq       uint64              `json:"seq"` // the event's seq in Realm's chain
	Verdict   string              `json:"verdict,omitempty"`
	Extension string              `json:"extension,omitempty"`
	Evidence  []protocol.Evidence `json:"evidence,omitempty"`
	Note      string              `json:"note,omitempty"`
	Message   *rid                `json:"message,omitempty"` // refute: the refuting message
	Claim     *rid                `json:"claim,omitempty"`   // supersede: the newer claim
}

// before orders facts canonically.
func (f *claimFact) before(g *claimFact) bool {
	if !f.At.Equal(g.At) {
		return f.At.Before(g.At)
	}
	if f.Realm != g.Realm {
		return f.Realm < g.Realm
	}
	if f.Seq != g.Seq {
		return f.Seq < g.Seq
	}
	return factRank(f.Kind) < factRank(g.Kind)
}

// attestation is an attest fact as the claim shows it; refused is the rule
// that kept it from counting, if one did.
func (f *claimFact) attestation(refused protocol.Reason) attestation {
	return attestation{Verdict: f.Verdict, By: f.By, Realm: f.Realm, Extension: f.Extension, Evidence: f.Evidence, Note: f.Note, At: f.At, CID: f.CID, Refused: refused}
}

// claimBase is what a claim record written before facts were kept had
// derived from the facts it was given then. Those facts are gone; later
// ones fold onto it.
type claimBase struct {
	State        protocol.ClaimState `json:"state"`
	Attestations []attestation       `json:"attestations,omitempty"`
	RefutedBy    []rid               `json:"refuted_by,omitempty"`
	SealedBy     string              `json:"sealed_by,omitempty"`
	SealedAt     *time.Time          `json:"sealed_at,omitempty"`
	SupersededBy *rid                `json:"superseded_by,omitempty"`
	UpdatedAt    time.Time           `json:"updated_at"`
}

// add keeps fact f and derives the claim again. It reports false, and
// changes nothing, when the claim holds f already (the same event's fact
// of the same kind).
func (c *claimRec) add(f claimFact) bool {
	if len(c.Facts) == 0 && c.Base == nil && !c.asAsserted() {
		// Written before facts were kept: what it derived is the start.
		d := c.derived()
		c.Base = &d
	}
	i := sort.Search(len(c.Facts), func(i int) bool { return f.before(&c.Facts[i]) })
	for j := i - 1; j >= 0 && c.Facts[j].At.Equal(f.At) && c.Facts[j].CID == f.CID; j-- {
		if c.Facts[j].Kind == f.Kind {
			return false
		}
	}
	c.Facts = slices.Insert(c.Facts, i, f)
	c.fold()
	return true
}

// byAuthor reports whether identity of realm wrote the claim.
func (c *claimRec) byAuthor(realm protocol.Realm, identity string) bool {
	return realm == c.Realm && identity == c.Author
}

// derived is the claim's derived fields.
func (c *claimRec) derived() claimBase {
	return claimBase{State: c.State, Attestations: c.Attestations, RefutedBy: c.RefutedBy, SealedBy: c.SealedBy,
		SealedAt: c.SealedAt, SupersededBy: c.SupersededBy, UpdatedAt: c.UpdatedAt}
}

// setDerived sets the claim's derived fields to d.
func (c *claimRec) setDerived(d claimBase) {
	c.State, c.Attestations, c.RefutedBy = d.State, d.Attestations, d.RefutedBy
	c.SealedBy, c.SealedAt, c.SupersededBy, c.UpdatedAt = d.SealedBy, d.SealedAt, d.SupersededBy, d.UpdatedAt
}

// asAsserted reports whether the claim's derived fields are still those it
// was asserted with.
func (c *claimRec) asAsserted() bool {
	d := c.derived()
	return d.State == protocol.ClaimUnverified && len(d.Attestations) == 0 && len(d.RefutedBy) == 0 && d.SealedBy == "" &&
		d.SealedAt == nil && d.SupersededBy == nil && d.UpdatedAt.Equal(c.CreatedAt)
}

// fold derives the claim's state and what it shows from its base and its
// facts, in canonical order. A fact a rule refuses where it falls changes
// nothing.
func (c *claimRec) fold() {
	d := claimBase{State: protocol.ClaimUnverified, UpdatedAt: c.CreatedAt}
	if c.Base != nil {
		d = *c.Base
		d.RefutedBy = slices.Clone(d.RefutedBy)
	}
	d.Attestations = append([]attestation{}, d.Attestations...) // never nil: shown as []
	c.setDerived(d)
	c.RefutesRefused = nil
	for i := range c.Facts {
		f := &c.Facts[i]
		if f.At.After(c.UpdatedAt) {
			c.UpdatedAt = f.At
		}
		var next protocol.ClaimState
		var ref *protocol.Refusal
		switch f.Kind {
		case factAttest:
			next, ref = protocol.ClaimAttest(c.State, protocol.Verdict(f.Verdict), c.byAuthor(f.Realm, f.By), len(f.Evidence) > 0)
		case factRefute:
			next, ref = protocol.ClaimRefute(c.State)
		case factSeal:
			next, ref = protocol.ClaimSeal(c.State)
		case factSupersede:
			next, ref = protocol.ClaimSupersede(c.State)
		default:
			continue
		}
		if ref != nil {
			// An acknowledged write stays in sight: shown, not counted.
			switch {
			case f.Kind == factAttest:
				c.Attestations = append(c.Attestations, f.attestation(ref.Reason))
			case f.Kind == factRefute && f.Message != nil:
				c.RefutesRefused = append(c.RefutesRefused, refusedRefute{Message: *f.Message, Refused: ref.Reason})
			}
			continue
		}
		c.State = next
		switch f.Kind {
		case factAttest:
			c.Attestations = append(c.Attestations, f.attestation(""))
		case factRefute:
			c.RefutedBy = append(c.RefutedBy, *f.Message)
		case factSeal:
			at := f.At
			c.SealedAt, c.SealedBy = &at, f.By
		case factSupersede:
			newer := *f.Claim
			c.SupersededBy = &newer
		}
	}
}
