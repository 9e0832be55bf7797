package parley

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

func (s *Service) registerThreads(reg *api.Registry) {
	write := api.NeedRight(protocol.RightWrite)
	reg.Add(
		loosen(api.Define("get_threads", http.MethodGet, "/api/v1/threads", "Threads across boards, filterable by board, state, awaiting, creator, since and realm.", api.Public, s.listThreads), "board"),
		loosen(api.Define("get_messages_id", http.MethodGet, "/api/v1/messages/{id}", "One message: msg_…, its number, realm:msg_… or a CID; a reply into another realm's thread shows its status there.", api.Public, s.getMessage), "id"),
		loosen(api.Define("get_threads_id", http.MethodGet, "/api/v1/threads/{id}", "One thread with its messages as a tree.", api.Public, s.getThread), "id"),
		envelope(loosen(api.Define("post_threads_id_messages", http.MethodPost, "/api/v1/threads/{id}/messages",
			"Append a message (answer, note, decide, …) to a thread.", write, s.postMessage), "id", "thread", "parent")),
		loosen(api.Define("get_threads_id_events", http.MethodGet, "/api/v1/threads/{id}/events", "The state history of a thread.", api.Public, s.threadEvents), "id"),
		loosen(api.Define("post_threads_id_close", http.MethodPost, "/api/v1/threads/{id}/close", "Close a thread (authority: creator, lock, human); a model's close is a proposal.", write, s.closeThread), "id"),
		loosen(api.Define("post_threads_id_reopen", http.MethodPost, "/api/v1/threads/{id}/reopen", "Reopen a closed or set-aside thread (authority), restoring its earlier state.", write, s.reopenThread), "id"),
		loosen(api.Define("post_threads_id_state", http.MethodPost, "/api/v1/threads/{id}/state", "Set a side state: deferred, obsolete, rejected (authority).", write, s.setState), "id"),
		loosen(api.Define("post_threads_id_confirm", http.MethodPost, "/api/v1/threads/{id}/confirm", "Confirm a model's proposed state (the human or lock).", api.NeedRight(protocol.RightLock), s.confirm), "id"),
		loosen(api.Define("post_threads_id_reject", http.MethodPost, "/api/v1/threads/{id}/reject", "Reject a model's proposed state, restoring the last confirmed one (the human or lock).", api.NeedRight(protocol.RightLock), s.reject), "id"),
		loosen(api.Define("post_threads_id_pin", http.MethodPost, "/api/v1/threads/{id}/pin", "Pin (or unpin) a thread (right pin).", api.NeedRight(protocol.RightPin), s.pin), "id"),
		loosen(api.Define("post_threads_id_llm_replies", http.MethodPost, "/api/v1/threads/{id}/llm-replies", "Forbid or allow AI replies on a thread (the human only).", api.HumanOnly, s.llmReplies), "id"),
	)
}

type listThreadsIn struct {
	Board    protocol.KeyRef `json:"board,omitempty" jsonschema:"a board's number or slug"`
	State    protocol.State  `json:"state,omitempty"`
	Awaiting *bool           `json:"awaiting,omitempty" jsonschema:"only threads whose last act awaits (or does not await) a reply"`
	Creator  string          `json:"creator,omitempty" jsonschema:"only threads opened by this identity"`
	Since    string          `json:"since,omitempty" jsonschema:"only threads updated after this RFC 3339 time"`
	Realm    string          `json:"realm,omitempty" jsonschema:"only threads of this realm"`
	Limit    int             `json:"limit,omitempty" jsonschema:"at most this many (default 50, at most 200)"`
	Offset   int             `json:"offset,omitempty" jsonschema:"skip this many of the ordered threads (default 0): with has_more, the next page"`
}

// notAState refuses a state filter that names no thread state.
func notAState(st protocol.State) *protocol.Refusal {
	return protocol.Refusef(protocol.ReasonInvalidBody, "state %q is not a thread state: open, answered, decided, closed, deferred, obsolete, rejected.", st).With("field", "state").With("rule", "enum")
}

func (s *Service) listThreads(ctx context.Context, c *api.Call, in listThreadsIn) (ThreadsOut, error) {
	if in.State != "" && !slices.Contains(protocol.States, in.State) {
		return ThreadsOut{}, notAState(in.State)
	}
	var since time.Time
	if in.Since != "" {
		t, err := time.Parse(time.RFC3339, in.Since)
		if err != nil {
			return ThreadsOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "since must be an RFC 3339 time.").With("field", "since").With("rule", "format")
		}
		since = t
	}
	var out ThreadsOut
	err := s.st.View(func(tx *store.Tx) error {
		var board *rid
		if in.Board != "" {
			b, err := s.loadBoard(tx, in.Board)
			if err != nil {
				return err
			}
			id := b.id()
			board = &id
		}
		// The threads newest first (threadAtKey), read until the page is
		// full: a page costs the threads before it, not all of them.
		var match func(*threadRec) (keep, more bool)
		if board != nil || in.State != "" || in.Awaiting != nil || in.Creator != "" || !since.IsZero() || in.Realm != "" {
			match = func(t *threadRec) (keep, more bool) {
				switch {
				case !since.IsZero() && !t.UpdatedAt.After(since):
					return false, false // the rest are older still
				case board != nil && t.board() != *board,
					in.State != "" && t.State.State != in.State,
					in.Awaiting != nil && t.Awaiting != *in.Awaiting,
					in.Creator != "" && t.Creator != in.Creator,
					in.Realm != "" && string(t.Realm) != in.Realm:
					return false, true
				}
				return true, true
			}
		}
		var err error
		out, err = s.pageOf(tx, pfxThreadAt, threadOrder, in.Offset, ClampLimit(in.Limit), match)
		return err
	})
	return out, err
}

type threadIDIn struct {
	ID protocol.KeyRef `json:"id" jsonschema:"the thread: th_…, its number, realm:th_… or a CID"`
}

// ThreadTreeOut is a thread with its messages as a tree.
type ThreadTreeOut struct {
	Thread   ThreadOut     `json:"thread"`
	Messages []MessageNode `json:"messages" jsonschema:"messages without a parent, each with its replies"`
	// Pending are replies from other realms the thread's realm has not yet
	// accepted or refused.
	Pending []MessageOut `json:"pending_replies" jsonschema:"replies from other realms awaiting the thread's realm"`
}

type messageIDIn struct {
	ID protocol.KeyRef `json:"id" jsonschema:"the message: msg_…, its number, realm:msg_… or a CID"`
}

// MessageAnswer is one message.
type MessageAnswer struct {
	Message MessageOut `json:"message"`
}

func (s *Service) getMessage(ctx context.Context, c *api.Call, in messageIDIn) (MessageAnswer, error) {
	var out MessageAnswer
	err := s.st.View(func(tx *store.Tx) error {
		id, ok, err := s.lookupRef(tx, protocol.KeyMessage, in.ID)
		if err != nil {
			return err
		}
		var m messageRec
		if ok {
			ok, err = tx.GetJSON(key(pfxMessage, id.bytes()), &m)
		}
		if err != nil {
			return err
		}
		if !ok {
			return protocol.Refusef(protocol.ReasonNotFound, "No message %q.", in.ID)
		}
		out.Message = s.messageOut(&m)
		return nil
	})
	return out, err
}

// loadThreadRef resolves and loads a thread, or refuses thread_not_found.
func (s *Service) loadThreadRef(tx *store.Tx, ref protocol.KeyRef) (*threadRec, error) {
	_, t, ok, err := s.threadByRef(tx, ref)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, protocol.Refusef(protocol.ReasonThreadNotFound, "No thread %q; see get_threads.", ref)
	}
	return t, nil
}

func (s *Service) getThread(ctx context.Context, c *api.Call, in threadIDIn) (ThreadTreeOut, error) {
	var out ThreadTreeOut
	err := s.st.View(func(tx *store.Tx) error {
		t, err := s.loadThreadRef(tx, in.ID)
		if err != nil {
			return err
		}
		out.Thread = s.threadOut(t)
		var msgs []*messageRec
		err = tx.Iterate(key(pfxThreadMs, t.id().bytes()), false, func(_, v []byte) error {
			var m messageRec
			if _, err := tx.GetJSON(key(pfxMessage, v), &m); err != nil {
				return err
			}
			msgs = append(msgs, &m)
			return nil
		})
		if err != nil {
			return err
		}
		out.Messages = s.tree(msgs)
		out.Pending = []MessageOut{}
		return tx.Iterate(key(pfxPending, t.id().bytes()), false, func(k, _ []byte) error {
			var m messageRec
			if _, err := tx.GetJSON(key(pfxMessage, k[len(pfxPending)+len(t.id().bytes()):]), &m); err != nil {
				return err
			}
			out.Pending = append(out.Pending, s.messageOut(&m))
			return nil
		})
	})
	return out, err
}

// tree nests messages under their parents, in arrival order.
func (s *Service) tree(msgs []*messageRec) []MessageNode {
	nodes := make(map[rid]*MessageNode, len(msgs))
	children := map[rid][]rid{}
	var roots []rid
	for _, m := range msgs {
		id := rid{m.Realm, m.N}
		nodes[id] = &MessageNode{MessageOut: s.messageOut(m), Replies: []any{}}
		if m.Parent != nil {
			if _, ok := nodes[*m.Parent]; ok {
				children[*m.Parent] = append(children[*m.Parent], id)
				continue
			}
		}
		roots = append(roots, id)
	}
	var build func(id rid) MessageNode
	build = func(id rid) MessageNode {
		n := *nodes[id]
		for _, c := range children[id] {
			n.Replies = append(n.Replies, build(c))
		}
		return n
	}
	out := make([]MessageNode, 0, len(roots))
	for _, r := range roots {
		out = append(out, build(r))
	}
	return out
}

type postMessageIn struct {
	ID protocol.KeyRef `json:"id" jsonschema:"the thread: th_…, its number, realm:th_… or a CID"`
	protocol.Envelope
}

func (s *Service) postMessage(ctx context.Context, c *api.Call, in postMessageIn) (PostOut, error) {
	also := in.Thread // the envelope may name the thread too: it must be the same one
	in.Thread = in.ID
	return s.post(ctx, c.Principal, "", &in.Envelope, also)
}

// EventsOut is a thread's state history.
type EventsOut struct {
	Thread string       `json:"thread"`
	Events []StateEvent `json:"events"`
}

func (s *Service) threadEvents(ctx context.Context, c *api.Call, in threadIDIn) (EventsOut, error) {
	out := EventsOut{Events: []StateEvent{}}
	err := s.st.View(func(tx *store.Tx) error {
		t, err := s.loadThreadRef(tx, in.ID)
		if err != nil {
			return err
		}
		out.Thread = s.keyString(protocol.KeyThread, t.id())
		return tx.Iterate(key(pfxHistory, t.id().bytes()), false, func(_, v []byte) error {
			var h historyRec
			if err := json.Unmarshal(v, &h); err != nil {
				return err
			}
			out.Events = append(out.Events, s.historyOut(&h))
			return nil
		})
	})
	return out, err
}

// ThreadResult answers the operations that change a thread.
type ThreadResult struct {
	Thread ThreadOut `json:"thread"`
}

// threadWrite runs one change of a home thread: f decides the event data,
// given the thread and the caller's standing.
func (s *Service) threadWrite(ctx context.Context, p *api.Principal, ref protocol.KeyRef, typ string, f func(t *threadRec, st protocol.Standing) (any, error)) (ThreadResult, error) {
	var tid rid
	_, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		t, err := s.loadThreadRef(tx, ref)
		if err != nil {
			return nil, err
		}
		if t.Realm != s.realm {
			return nil, protocol.Refusef(protocol.ReasonThreadAuthority, "Thread %q belongs to realm %s: only its home realm changes it.", ref, t.Realm).With("realm", string(t.Realm))
		}
		tid = t.id()
		data, err := f(t, standing(p, t))
		if err != nil {
			return nil, err
		}
		return draft(typ, p, data)
	})
	if err != nil {
		return ThreadResult{}, err
	}
	var out ThreadResult
	err = s.st.View(func(tx *store.Tx) error {
		var t threadRec
		_, err := tx.GetJSON(key(pfxThread, tid.bytes()), &t)
		out.Thread = s.threadOut(&t)
		return err
	})
	return out, err
}

type noteIn struct {
	ID   protocol.KeyRef `json:"id" jsonschema:"the thread"`
	Note string          `json:"note,omitempty" jsonschema:"why, at most 500 characters"`
}

func (n noteIn) check() error { return checkNote(n.Note) }

// checkNote checks the note of a state change, an attestation or a seal:
// at most 500 characters, no control characters.
func checkNote(note string) error {
	if protocol.CodePoints(note) > 500 {
		return protocol.Refusef(protocol.ReasonInvalidBody, "note: at most 500 characters.").With("field", "note").With("rule", "max_length")
	}
	if ref := protocol.CheckControl("note", note); ref != nil {
		return ref
	}
	return nil
}

// stateOp builds the handler of an operation that changes a thread's state
// through rule.
func (s *Service) stateOp(via string, rule func(t *threadRec, st protocol.Standing) (*protocol.Change, *protocol.Refusal)) func(context.Context, *api.Call, noteIn) (ThreadResult, error) {
	return func(ctx context.Context, c *api.Call, in noteIn) (ThreadResult, error) {
		if err := in.check(); err != nil {
			return ThreadResult{}, err
		}
		return s.threadWrite(ctx, c.Principal, in.ID, evThreadState, func(t *threadRec, st protocol.Standing) (any, error) {
			change, ref := rule(t, st)
			if ref != nil {
				return nil, ref
			}
			return stateData{Thread: s.keyString(protocol.KeyThread, t.id()), Via: via, Change: *change, Note: in.Note}, nil
		})
	}
}

func (s *Service) closeThread(ctx context.Context, c *api.Call, in noteIn) (ThreadResult, error) {
	return s.stateOp("close", func(t *threadRec, st protocol.Standing) (*protocol.Change, *protocol.Refusal) {
		return protocol.CloseChange(t.State, st)
	})(ctx, c, in)
}

func (s *Service) reopenThread(ctx context.Context, c *api.Call, in noteIn) (ThreadResult, error) {
	return s.stateOp("reopen", func(t *threadRec, st protocol.Standing) (*protocol.Change, *protocol.Refusal) {
		return protocol.ReopenChange(t.State, t.Settled, st)
	})(ctx, c, in)
}

func (s *Service) confirm(ctx context.Context, c *api.Call, in noteIn) (ThreadResult, error) {
	return s.stateOp("confirm", func(t *threadRec, st protocol.Standing) (*protocol.Change, *protocol.Refusal) {
		return protocol.ConfirmChange(t.State, st)
	})(ctx, c, in)
}

func (s *Service) reject(ctx context.Context, c *api.Call, in noteIn) (ThreadResult, error) {
	return s.stateOp("reject", func(t *threadRec, st protocol.Standing) (*protocol.Change, *protocol.Refusal) {
		return protocol.RejectChange(t.State, t.Settled, st)
	})(ctx, c, in)
}

type setStateIn struct {
	ID    protocol.KeyRef `json:"id" jsonschema:"the thread"`
	State protocol.State  `json:"state" jsonschema:"deferred, obsolete or rejected"`
	Note  string          `json:"note,omitempty" jsonschema:"why, at most 500 characters"`
}

func (s *Service) setState(ctx context.Context, c *api.Call, in setStateIn) (ThreadResult, error) {
	if ref := protocol.CheckSideState(in.State); ref != nil {
		return ThreadResult{}, ref
	}
	return s.stateOp("state", func(t *threadRec, st protocol.Standing) (*protocol.Change, *protocol.Refusal) {
		return protocol.SideChange(t.State, in.State, st)
	})(ctx, c, noteIn{ID: in.ID, Note: in.Note})
}

type pinIn struct {
	ID     protocol.KeyRef `json:"id" jsonschema:"the thread"`
	Pinned *bool           `json:"pinned,omitempty" jsonschema:"false unpins; default true"`
}

func (s *Service) pin(ctx context.Context, c *api.Call, in pinIn) (ThreadResult, error) {
	pinned := in.Pinned == nil || *in.Pinned
	return s.threadWrite(ctx, c.Principal, in.ID, evThreadPinned, func(t *threadRec, _ protocol.Standing) (any, error) {
		return pinData{Thread: s.keyString(protocol.KeyThread, t.id()), Pinned: pinned}, nil
	})
}

type llmRepliesIn struct {
	ID        protocol.KeyRef `json:"id" jsonschema:"the thread"`
	Forbidden bool            `json:"forbidden" jsonschema:"true forbids AI replies; false allows them again"`
}

func (s *Service) llmReplies(ctx context.Context, c *api.Call, in llmRepliesIn) (ThreadResult, error) {
	return s.threadWrite(ctx, c.Principal, in.ID, evThreadModerat, func(t *threadRec, _ protocol.Standing) (any, error) {
		return moderateData{Thread: s.keyString(protocol.KeyThread, t.id()), LLMReplyForbidden: in.Forbidden}, nil
	})
}
