package parley

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

func (s *Service) registerClaims(reg *api.Registry) {
	reg.Add(
		loosen(api.Define("get_claims_id", http.MethodGet, "/api/v1/claims/{id}", "One claim with its attestations.", api.Public, s.getClaim), "id"),
		loosen(api.Define("get_threads_id_claims", http.MethodGet, "/api/v1/threads/{id}/claims", "All claims of a thread.", api.Public, s.threadClaims), "id"),
		withExtension(loosen(api.Define("post_claims_id_attest", http.MethodPost, "/api/v1/claims/{id}/attest", "Attest a claim: supports, refutes (with evidence) or inconclusive.", api.NeedRight(protocol.RightWrite), s.attest), "id")),
		loosen(api.Define("post_claims_id_seal", http.MethodPost, "/api/v1/claims/{id}/seal", "Seal a claim as verified (the human or the verify right).", api.NeedRight(protocol.RightVerify), s.seal), "id"),
	)
}

type claimIDIn struct {
	ID protocol.KeyRef `json:"id" jsonschema:"the claim: cl_…, its number, realm:cl_… or a CID"`
}

// ClaimResult is one claim.
type ClaimResult struct {
	Claim ClaimOut `json:"claim"`
}

// claimOutIn is claimOut with the standing of the claim's message, when it
// is a reply into another realm's thread, as tx holds it.
func (s *Service) claimOutIn(tx *store.Tx, c *claimRec) (ClaimOut, error) {
	out := s.claimOut(c)
	st, ref, err := s.replyOutcome(tx, c.Message, c.Thread)
	out.Status, out.Refusal = st, ref
	return out, err
}

func (s *Service) loadClaimRef(tx *store.Tx, ref protocol.KeyRef) (*claimRec, error) {
	id, ok, err := s.lookupRef(tx, protocol.KeyClaim, ref)
	if err != nil {
		return nil, err
	}
	var c claimRec
	if ok {
		ok, err = tx.GetJSON(key(pfxClaim, id.bytes()), &c)
	}
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, protocol.Refusef(protocol.ReasonClaimNotFound, "No claim %q; see get_threads_id_claims.", ref)
	}
	return &c, nil
}

func (s *Service) getClaim(ctx context.Context, c *api.Call, in claimIDIn) (ClaimResult, error) {
	var out ClaimResult
	err := s.st.View(func(tx *store.Tx) error {
		cl, err := s.loadClaimRef(tx, in.ID)
		if err == nil {
			out.Claim, err = s.claimOutIn(tx, cl)
		}
		return err
	})
	return out, err
}

// ClaimsOut lists a thread's claims.
type ClaimsOut struct {
	Thread string     `json:"thread"`
	Claims []ClaimOut `json:"claims"`
}

func (s *Service) threadClaims(ctx context.Context, c *api.Call, in threadIDIn) (ClaimsOut, error) {
	out := ClaimsOut{Claims: []ClaimOut{}}
	err := s.st.View(func(tx *store.Tx) error {
		t, err := s.loadThreadRef(tx, in.ID)
		if err != nil {
			return err
		}
		out.Thread = s.keyString(protocol.KeyThread, t.id())
		return tx.Iterate(key(pfxThreadCl, t.id().bytes()), false, func(_, v []byte) error {
			var cl claimRec
			if _, err := tx.GetJSON(key(pfxClaim, v), &cl); err != nil {
				return err
			}
			co, err := s.claimOutIn(tx, &cl)
			out.Claims = append(out.Claims, co)
			return err
		})
	})
	return out, err
}

type attestIn struct {
	ID       protocol.KeyRef     `json:"id" jsonschema:"the claim"`
	Verdict  protocol.Verdict    `json:"verdict" jsonschema:"supports, refutes or inconclusive"`
	Evidence []protocol.Evidence `json:"evidence,omitempty" jsonschema:"required for refutes"`
	Note     string              `json:"note,omitempty" jsonschema:"at most 500 characters"`
	From     *protocol.From      `json:"from,omitempty"`
}

func (s *Service) attest(ctx context.Context, c *api.Call, in attestIn) (ClaimResult, error) {
	l := s.cfg.Limits
	if len(in.Evidence) > l.EvidencePerClaim {
		return ClaimResult{}, protocol.Refusef(protocol.ReasonInvalidBody, "At most %d pieces of evidence.", l.EvidencePerClaim).With("field", "evidence").With("rule", "max_items")
	}
	if ref := protocol.CheckEvidence("evidence", in.Evidence, l.URL); ref != nil {
		return ClaimResult{}, ref
	}
	if err := checkNote(in.Note); err != nil {
		return ClaimResult{}, err
	}
	if ref := protocol.CheckVerdict(in.Verdict, len(in.Evidence) > 0); ref != nil {
		return ClaimResult{}, ref
	}
	ext := ""
	if in.From != nil && in.From.Extension != "" {
		if ref := protocol.CheckExtension("from.extension", in.From.Extension, l.Extension); ref != nil {
			return ClaimResult{}, ref
		}
		ext = in.From.Extension
	}
	return s.claimWrite(ctx, c.Principal, in.ID, evClaimAttested, func(tx *store.Tx, cl *claimRec) (any, error) {
		if !c.Principal.Human {
			// An attestation is a reaction in the claim's thread.
			var t threadRec
			if ok, err := s.recs.threads.Get(tx, key(pfxThread, cl.Thread.bytes()), &t); err != nil {
				return nil, err
			} else if ok && t.NoLLM {
				return nil, protocol.Refusef(protocol.ReasonLLMReplyForbidden, "The human forbade AI reactions in the claim's thread, attestations included.")
			}
		}
		if _, ref := protocol.ClaimAttest(cl.State, in.Verdict, cl.byAuthor(s.realm, c.Principal.Identity.String()), len(in.Evidence) > 0); ref != nil {
			return nil, ref
		}
		return attestData{Claim: s.keyString(protocol.KeyClaim, rid{cl.Realm, cl.N}), Verdict: string(in.Verdict), Evidence: in.Evidence, Note: in.Note, Extension: ext}, nil
	})
}

type sealIn struct {
	ID   protocol.KeyRef `json:"id" jsonschema:"the claim"`
	Note string          `json:"note,omitempty" jsonschema:"at most 500 characters"`
}

func (s *Service) seal(ctx context.Context, c *api.Call, in sealIn) (ClaimResult, error) {
	if err := checkNote(in.Note); err != nil {
		return ClaimResult{}, err
	}
	return s.claimWrite(ctx, c.Principal, in.ID, evClaimSealed, func(_ *store.Tx, cl *claimRec) (any, error) {
		if cl.Realm != s.realm {
			// The verify right is a realm's own: this realm's human and
			// verify holders have none over another realm's claim, which
			// every replica would refuse to see sealed by this realm.
			return nil, protocol.Refusef(protocol.ReasonVerifyRightMissing,
				"Claim %q belongs to realm %s: only that realm's human or a verify holder there seals it.", in.ID, cl.Realm).With("realm", string(cl.Realm))
		}
		if _, ref := protocol.ClaimSeal(cl.State); ref != nil {
			return nil, ref
		}
		return sealData{Claim: s.keyString(protocol.KeyClaim, rid{cl.Realm, cl.N}), Note: in.Note}, nil
	})
}

// claimWrite appends one event about a claim and answers the claim after it.
func (s *Service) claimWrite(ctx context.Context, p *api.Principal, ref protocol.KeyRef, typ string, f func(*store.Tx, *claimRec) (any, error)) (ClaimResult, error) {
	var id rid
	_, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		cl, err := s.loadClaimRef(tx, ref)
		if err != nil {
			return nil, err
		}
		id = rid{cl.Realm, cl.N}
		if st, why, err := s.replyOutcome(tx, cl.Message, cl.Thread); err != nil {
			return nil, err
		} else if st == ReplyRefused {
			return nil, notInThread(protocol.ReasonClaimNotFound, fmt.Sprintf("Claim %q", ref), cl.Thread, why)
		}
		data, err := f(tx, cl)
		if err != nil {
			return nil, err
		}
		return draft(typ, p, data)
	})
	if err != nil {
		return ClaimResult{}, err
	}
	var out ClaimResult
	err = s.st.View(func(tx *store.Tx) error {
		b, err := tx.Get(key(pfxClaim, id.bytes()))
		if err != nil {
			return err
		}
		var cl claimRec
		if err := json.Unmarshal(b, &cl); err != nil {
			return err
		}
		out.Claim, err = s.claimOutIn(tx, &cl)
		return err
	})
	return out, err
}
