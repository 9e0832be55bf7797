package parley

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// PostOut is what posting answers: the message and its thread after it.
type PostOut struct {
	Message MessageOut `json:"message"`
	Thread  ThreadOut  `json:"thread"`
}

// post appends an envelope: into the thread it names, or, when it names
// none, as the opening of a new thread on board. also, when set, is a second
// reference to the thread (the envelope's, beside the path's) that must name
// the same one.
func (s *Service) post(ctx context.Context, p *api.Principal, board protocol.KeyRef, env *protocol.Envelope, also protocol.KeyRef) (PostOut, error) {
	if ref := env.Validate(s.cfg.Limits); ref != nil {
		return PostOut{}, ref
	}
	img, err := s.prepareImage(env.Image)
	if err != nil {
		return PostOut{}, err
	}
	ext := ""
	if env.From != nil {
		ext = env.From.Extension
	}
	var mid, tid rid
	var h *posted
	se, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		d := messageData{Kind: string(env.Kind), Body: env.Body, Extension: ext, AuthorKind: authorKind(p),
			RelatesTo: env.RelatesTo, Evidence: env.Evidence}
		if env.Provenance != nil {
			d.Provenance = normalizeJSON(env.Provenance).(map[string]any)
		}
		var t *threadRec
		typ := evMessagePosted
		if env.Thread == "" {
			b, ok, err := s.boardRef(tx, board)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, protocol.Refusef(protocol.ReasonBoardNotFound, "No board %q; see get_boards.", board)
			}
			if b.Realm != s.realm {
				return nil, protocol.Refusef(protocol.ReasonForbidden, "Board %q belongs to realm %s: threads open at home; reply into that realm's threads instead.", board, b.Realm)
			}
			bid := b.N
			n, err := tx.NextID("thread")
			if err != nil {
				return nil, err
			}
			tid = rid{s.realm, n}
			born := protocol.NewThread()
			t = &threadRec{Realm: s.realm, N: n, Board: bid, Creator: p.Identity.String(), State: born}
			d.Board = bid
			typ = evThreadOpened
		} else {
			id, held, ok, err := s.threadByRef(tx, env.Thread)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, protocol.Refusef(protocol.ReasonThreadNotFound, "No thread %q; see get_threads.", env.Thread)
			}
			if also != "" {
				other, _, err := s.lookupRef(tx, protocol.KeyThread, also)
				if err != nil {
					return nil, err
				}
				if other != id {
					return nil, protocol.Refusef(protocol.ReasonInvalidBody, "thread %q differs from the thread of the path, %q.", also, env.Thread).With("field", "thread").With("rule", "conflict")
				}
			}
			tid, t = id, held
			if board != "" {
				bid, ok, err := s.boardRef(tx, board)
				switch {
				case err != nil:
					return nil, err
				case !ok:
					return nil, protocol.Refusef(protocol.ReasonBoardNotFound, "No board %q; see get_boards.", board)
				case bid != t.board():
					return nil, protocol.Refusef(protocol.ReasonThreadNotFound, "Thread %q is not on board %q.", env.Thread, board)
				}
			}
			// A thread of another realm is checked as this replica sees it;
			// its own realm has the last word (reply.go).
			if t.locked() {
				return nil, t.closedRefusal()
			}
			if t.NoLLM && !p.Human {
				return nil, protocol.Refuse(protocol.ReasonLLMReplyForbidden)
			}
		}
		if env.Parent != "" {
			if env.Thread == "" {
				return nil, protocol.Refusef(protocol.ReasonParentNotFound, "A new thread has no message to answer yet.").With("field", "parent")
			}
			pid, pm, ok, err := s.messageHeadByRef(tx, env.Parent)
			if err != nil {
				return nil, err
			}
			if !ok || pm.Thread != tid {
				return nil, protocol.Refusef(protocol.ReasonParentNotFound, "Message %q is not in this thread.", env.Parent).With("field", "parent")
			}
			if st, why, err := s.replyOutcome(tx, pid, tid); err != nil {
				return nil, err
			} else if st == ReplyRefused {
				return nil, notInThread(protocol.ReasonParentNotFound, fmt.Sprintf("Message %q", env.Parent), tid, why).With("field", "parent")
			}
			if pid.Realm == s.realm && pm.Identity == p.Identity.String() && pm.Extension == ext {
				return nil, protocol.Refusef(protocol.ReasonSelfReply, "%s (extension %q) cannot reply to its own message; use another extension.", pm.Identity, ext)
			}
			d.Parent = s.keyString(protocol.KeyMessage, pid)
		} else if env.Kind == protocol.ActAnswer && t.Awaiting && t.Last.Realm == s.realm && t.Last.Identity == p.Identity.String() && t.Last.Extension == ext {
			// An answer without a parent answers the message the thread
			// awaits a reply to, its last: a line's own, here. Its realm
			// counts: every realm's human is human:<name>.
			return nil, protocol.Refusef(protocol.ReasonSelfReply, "%s (extension %q) cannot answer its own %s; use another extension.", t.Last.Identity, ext, t.Last.Kind)
		}
		for i, r := range env.RelatesTo {
			ref, _ := protocol.ParseRef(r)
			if ref.CID != "" || (ref.Key.Realm != "" && ref.Key.Realm != s.realm) {
				continue // resolves wherever the target is held
			}
			kr := protocol.KeyRef(ref.Key.Local())
			if _, ok, err := s.lookupRef(tx, ref.Key.Kind, kr); err != nil {
				return nil, err
			} else if !ok {
				return nil, protocol.Refusef(protocol.ReasonInvalidBody, "relates_to[%d]: no record %q here.", i, r).With("field", fmt.Sprintf("relates_to[%d]", i)).With("rule", "not_found")
			}
		}
		for _, r := range env.Refutes {
			cid, ok, err := s.lookupRef(tx, protocol.KeyClaim, protocol.KeyRef(r))
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, protocol.Refusef(protocol.ReasonClaimNotFound, "No claim %q; see get_threads_id_claims.", r).With("field", "refutes")
			}
			var c claimRec
			if _, err := tx.GetJSON(key(pfxClaim, cid.bytes()), &c); err != nil {
				return nil, err
			}
			if st, why, err := s.replyOutcome(tx, c.Message, c.Thread); err != nil {
				return nil, err
			} else if st == ReplyRefused {
				return nil, notInThread(protocol.ReasonClaimNotFound, fmt.Sprintf("Claim %q", r), c.Thread, why).With("field", "refutes")
			}
			if !p.Human {
				// Refuting is a reaction in the claim's thread, as an
				// attestation is (ops_claims.go).
				var ct threadRec
				if ok, err := s.recs.threads.Get(tx, key(pfxThread, c.Thread.bytes()), &ct); err != nil {
					return nil, err
				} else if ok && ct.NoLLM {
					return nil, protocol.Refusef(protocol.ReasonLLMReplyForbidden, "The human forbade AI reactions in the thread of claim %q, refutations included.", r).With("field", "refutes")
				}
			}
			if _, ref := protocol.ClaimRefute(c.State); ref != nil {
				return nil, ref
			}
			d.Refutes = append(d.Refutes, s.keyString(protocol.KeyClaim, cid))
		}
		remote := t.Realm != s.realm
		st := standing(p, t)
		if remote {
			st = protocol.StandingNone // standing is the thread's realm's to give
		}
		change, ref := protocol.ActChange(t.State, env.Kind, st)
		if ref != nil {
			return nil, ref
		}
		if !remote {
			d.Change = change
		}
		for _, c := range env.Claims {
			n, err := tx.NextID("claim")
			if err != nil {
				return nil, err
			}
			d.Claims = append(d.Claims, claimData{N: n, Statement: c.Statement, Evidence: c.Evidence})
		}
		if img != nil {
			if err := s.storeImage(tx, img); err != nil {
				return nil, err
			}
			d.Image = &img.data
		}
		n, err := tx.NextID("msg")
		if err != nil {
			return nil, err
		}
		d.N = n
		mid = rid{s.realm, n}
		d.Thread = s.keyString(protocol.KeyThread, tid)
		if ext != "" {
			if err := s.rememberExtension(tx, p.Identity.String(), ext); err != nil {
				return nil, err
			}
		}
		dr, err := draft(typ, p, d)
		if err == nil {
			h = s.recs.expect(tx)
			if typ == evMessagePosted {
				h.read = t
			}
		}
		return dr, err
	})
	if h != nil {
		s.recs.forget(h)
	}
	if err != nil {
		return PostOut{}, err
	}
	if tid.Realm != s.realm {
		return s.replyOut(ctx, se.CID.String(), mid, tid)
	}
	if h != nil && h.ok {
		return s.postedOut(h, se.Sequence, mid, tid)
	}
	return s.postOut(mid, tid)
}

// postedOut answers a post from the records its op wrote. A message's
// provenance is what a read of it gives: JSON's numbers, as stored.
func (s *Service) postedOut(h *posted, seq uint64, mid, tid rid) (PostOut, error) {
	m := h.msg
	if m.Provenance != nil {
		b, err := json.Marshal(m.Provenance)
		if err != nil {
			return PostOut{}, err
		}
		m.Provenance = nil
		if err := json.Unmarshal(b, &m.Provenance); err != nil {
			return PostOut{}, err
		}
	}
	out := PostOut{Message: s.messageOut(&m), Thread: s.threadOut(&h.thread)}
	if verifyCache {
		if err := s.checkPosted(out, seq, mid, tid); err != nil {
			return PostOut{}, err
		}
	}
	return out, nil
}

// checkPosted compares an answer built from the op's records with one read
// back from the store, as it was built before, in test binaries: the thread
// only while nothing was committed after the post.
func (s *Service) checkPosted(out PostOut, seq uint64, mid, tid rid) error {
	before := s.st.Sequence()
	back, err := s.postOut(mid, tid)
	if err != nil {
		return err
	}
	if before != seq || s.st.Sequence() != seq || back.Thread.LastMessage == nil ||
		back.Thread.LastMessage.ID != out.Thread.LastMessage.ID || !back.Thread.UpdatedAt.Equal(out.Thread.UpdatedAt) {
		back.Thread = out.Thread // something was committed since: the thread may have moved on
	}
	got, _ := json.Marshal(out)
	want, _ := json.Marshal(back)
	if !bytes.Equal(got, want) {
		return fmt.Errorf("parley: the answer of a post differs from its records read back:\n%s\n%s", got, want)
	}
	return nil
}

// replyWait is how long a post into another realm's thread waits for that
// realm's word before it answers with the reply still pending.
const replyWait = 3 * time.Second

// replyOut answers a post into another realm's thread: accepted, refused
// with the thread realm's reason, or still pending (the outcome then shows
// on the message and in the author's inbox).
func (s *Service) replyOut(ctx context.Context, c string, mid, tid rid) (PostOut, error) {
	s.awaitDecision(ctx, c, replyWait)
	out, err := s.postOut(mid, tid)
	if err != nil {
		return out, err
	}
	if r := out.Message.Refusal; r != nil {
		reason := protocol.Reason(r.Reason)
		if reason.Info().Reason != reason {
			reason = protocol.ReasonForbidden // a reason this node does not know
		}
		return PostOut{}, protocol.Refusef(reason, "Realm %s refused the reply: %s", tid.Realm, r.Error).
			With("message", out.Message.ID).With("cid", c).With("thread", out.Message.Thread)
	}
	return out, nil
}

func (s *Service) postOut(mid, tid rid) (PostOut, error) {
	var out PostOut
	err := s.st.View(func(tx *store.Tx) error {
		var m messageRec
		var t threadRec
		if _, err := tx.GetJSON(key(pfxMessage, mid.bytes()), &m); err != nil {
			return err
		}
		if _, err := tx.GetJSON(key(pfxThread, tid.bytes()), &t); err != nil {
			return err
		}
		out = PostOut{Message: s.messageOut(&m), Thread: s.threadOut(&t)}
		return nil
	})
	return out, err
}

// maxExtensions is how many extensions a line's memory keeps.
const maxExtensions = 16

// rememberExtension keeps the extensions a line used, newest first.
func (s *Service) rememberExtension(tx *store.Tx, identity, ext string) error {
	k := key(pfxExt, []byte(identity))
	var list []string
	if _, err := s.recs.exts.Get(tx, k, &list); err != nil {
		return err
	}
	if len(list) > 0 && list[0] == ext {
		return nil
	}
	out := []string{ext}
	for _, e := range list {
		if e != ext && len(out) < maxExtensions {
			out = append(out, e)
		}
	}
	return s.recs.exts.set(tx, k, &out)
}

// Extensions returns the extensions an identity used, newest first.
func (s *Service) Extensions(identity string) ([]string, error) {
	var list []string
	err := s.st.View(func(tx *store.Tx) error {
		_, err := tx.GetJSON(key(pfxExt, []byte(identity)), &list)
		return err
	})
	return nonNil(list), err
}
