package corpus

import (
	"cmp"
	"context"
	"encoding/binary"
	"net/http"
	"slices"

	"github.com/google/uuid"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// The two operations the seed names only as MCP tools. They are registry
// operations all the same, with HTTP routes of their own, so that one row
// still drives HTTP, MCP and the catalog: GET /operation-token hands out what
// an HTTP client may also choose itself, and GET
// /conversations/{conversation_id}/graph is the conversation graph, its byte
// budget measuring the HTTP body there and the whole tool result over MCP.

// Limits of pull_conversation.
const (
	DefaultPullBudget = 131072  // max_response_bytes when omitted
	MaxPullBudget     = 8 << 20 // the largest max_response_bytes accepted
)

func (s *Service) registerPull(reg *api.Registry) {
	tok := corpusOp(api.Define("get_operation_token", http.MethodGet, "/operation-token",
		"A fresh Operation-Token for one logical write: persist it before the write, pass it to the write, reuse it only to retry that identical write.",
		api.Public, s.operationToken), "get_operation_token")
	pull := corpusOp(api.Define("pull_conversation", http.MethodGet, "/conversations/{conversation_id}/graph",
		"A conversation as a bounded graph at snapshot_sequence: its messages and incident relationship edges by sequence, within max_response_bytes; complete=false with next to continue. Not a canonical tree nor a corpus synchronization proof.",
		api.Public, s.pullConversation), "pull_conversation")
	reg.Add(tok, pull)
}

// OperationTokenOut is a fresh Operation-Token.
type OperationTokenOut struct {
	OperationToken string `json:"operation_token" jsonschema:"pass it as operation_token (MCP) or the Operation-Token header (HTTP)"`
	Usage          string `json:"usage"`
}

// HTTPHeaders keeps caches from handing one token to two writers.
func (OperationTokenOut) HTTPHeaders() http.Header { return http.Header{"Cache-Control": {"no-store"}} }

func (s *Service) operationToken(ctx context.Context, c *api.Call, _ api.NoInput) (OperationTokenOut, error) {
	return OperationTokenOut{
		OperationToken: uuid.NewString(),
		Usage: "Persist this token before the write, then pass it to one write. After an uncertain outcome repeat the identical write with the same token; " +
			"a distinct write needs a new token. Tokens do not expire; they give idempotency, not authentication.",
	}, nil
}

type pullIn struct {
	ConversationID   string    `json:"conversation_id"`
	After            *uint64   `json:"after,omitempty" jsonschema:"exclusive sequence cursor over the graph's records (messages and relationship assertions together): next.after of the previous call"`
	At               *uint64   `json:"at,omitempty" jsonschema:"the snapshot sequence, inclusive; default the node's current sequence; keep next.at fixed while continuing"`
	State            edgeState `json:"state,omitempty" jsonschema:"relationship edges as they stood at the snapshot: active (default) or all"`
	Limit            *int      `json:"limit,omitempty" jsonschema:"records (messages plus edges) per call, 1..1000, default 100"`
	MaxResponseBytes *int      `json:"max_response_bytes,omitempty" jsonschema:"byte budget of the whole serialized result (over MCP: the tool result with both copies, size metadata and SDK fields; over HTTP: the body); default 131072, 1..8388608"`
}

// PullOut is a conversation graph, or a part of it, at a snapshot.
type PullOut struct {
	Conversation     Conversation   `json:"conversation" jsonschema:"the conversation's metadata now; message_count may count messages after the snapshot"`
	SnapshotSequence uint64         `json:"snapshot_sequence" jsonschema:"every record returned is at or before it; edges show their state then"`
	Messages         []Message      `json:"messages" jsonschema:"whole messages by sequence"`
	Relationships    []Relationship `json:"relationships" jsonschema:"relationship edges incident to the conversation's messages, by sequence; an edge may point outside the conversation"`
	Complete         bool           `json:"complete" jsonschema:"true when no record after these remains at the snapshot"`
	Next             *PullNext      `json:"next" jsonschema:"how to continue when complete is false; null otherwise"`
}

// PullNext is the continuation of an incomplete pull.
type PullNext struct {
	After         uint64 `json:"after"`
	At            uint64 `json:"at"`
	HowToContinue string `json:"how_to_continue"`
}

type resultSizeKey struct{}

// WithResultSize returns a context in which pull_conversation measures a
// candidate result with size instead of as compact JSON: the MCP transport
// passes the size of the whole tool result it would send.
func WithResultSize(ctx context.Context, size func(out any) (int, error)) context.Context {
	return context.WithValue(ctx, resultSizeKey{}, size)
}

func resultSize(ctx context.Context) func(any) (int, error) {
	if f, ok := ctx.Value(resultSizeKey{}).(func(any) (int, error)); ok {
		return f
	}
	return func(out any) (int, error) {
		b, err := marshal(out)
		return len(b), err
	}
}

// graphRecord is a message or an edge, in the graph's one sequence order.
type graphRecord struct {
	seq  uint64
	msg  *Message
	rel  *Relationship
	size int // its compact JSON, to stop reading what cannot fit
}

func (s *Service) pullConversation(ctx context.Context, c *api.Call, in pullIn) (PullOut, error) {
	limit, err := limitOf(in.Limit)
	if err != nil {
		return PullOut{}, err
	}
	budget := DefaultPullBudget
	if in.MaxResponseBytes != nil {
		if budget = *in.MaxResponseBytes; budget < 1 || budget > MaxPullBudget {
			return PullOut{}, invalid("max_response_bytes must be 1..%d.", MaxPullBudget).With("field", "max_response_bytes")
		}
	}
	at, after, err := s.window(&in.State, in.At, in.After)
	if err != nil {
		return PullOut{}, err
	}
	out := PullOut{SnapshotSequence: at, Messages: []Message{}, Relationships: []Relationship{}}
	var msgs, rels []graphRecord
	var cut uint64 // the sequence past which a stream stopped reading; 0: none did
	err = s.st.View(func(tx *store.Tx) error {
		ok, err := readConversation(tx, []byte(in.ConversationID), &out.Conversation)
		if err == nil && !ok {
			err = protocol.Refusef(protocol.ReasonNotFound, "No conversation %q.", in.ConversationID)
		}
		if err != nil {
			return err
		}
		// Each stream reads at most limit+1 records, and no further than
		// its own records alone could fill the budget.
		read := func(pfx []byte, load func(v []byte) (*graphRecord, error)) ([]graphRecord, error) {
			var recs []graphRecord
			total := 0
			err := tx.Iterate(pfx, false, func(k, v []byte) error {
				seq := binary.BigEndian.Uint64(k[len(pfx):])
				if seq <= after {
					return nil
				}
				if seq > at {
					return store.ErrStop
				}
				r, err := load(v)
				if err != nil || r == nil {
					return err
				}
				r.seq = seq
				recs = append(recs, *r)
				if total += r.size; len(recs) > limit || total > budget {
					if cut == 0 || seq < cut {
						cut = seq
					}
					return store.ErrStop
				}
				return nil
			})
			return recs, err
		}
		if msgs, err = read(cat(pfxConvMsgs, []byte(in.ConversationID)), func(v []byte) (*graphRecord, error) {
			var m Message
			if _, err := readMessage(tx, v, &m); err != nil || m.ConversationID != in.ConversationID {
				return nil, err
			}
			b, err := marshal(m)
			return &graphRecord{msg: &m, size: len(b)}, err
		}); err != nil {
			return err
		}
		rels, err = read(cat(pfxRelConv, []byte(in.ConversationID), []byte{0}), func(v []byte) (*graphRecord, error) {
			r, err := loadRel(tx, string(v))
			if err != nil {
				return nil, err
			}
			if in.State == "active" && r.RetractionID != "" && r.RetractionSequence <= at {
				return nil, nil
			}
			rel, err := relationshipAt(tx, r, at)
			if err != nil {
				return nil, err
			}
			b, err := marshal(rel)
			return &graphRecord{rel: &rel, size: len(b)}, err
		})
		return err
	})
	if err != nil {
		return PullOut{}, err
	}
	recs := append(msgs, rels...)
	slices.SortFunc(recs, func(a, b graphRecord) int { return cmp.Compare(a.seq, b.seq) })
	if cut != 0 { // past a stream's cut the other stream's records would leave a gap
		recs = slices.DeleteFunc(recs, func(r graphRecord) bool { return r.seq > cut })
	}
	more := cut != 0 || len(recs) > limit
	recs = recs[:min(len(recs), limit)]

	candidate := func(k int) PullOut {
		o := out
		o.Messages, o.Relationships = []Message{}, []Relationship{}
		for _, r := range recs[:k] {
			if r.msg != nil {
				o.Messages = append(o.Messages, *r.msg)
			} else {
				o.Relationships = append(o.Relationships, *r.rel)
			}
		}
		o.Complete = k == len(recs) && !more
		if !o.Complete {
			next := after
			if k > 0 {
				next = recs[k-1].seq
			}
			o.Next = &PullNext{After: next, At: at, HowToContinue: "Call pull_conversation again with the same conversation_id, state and max_response_bytes, after=next.after and at=next.at."}
		}
		return o
	}
	size := resultSize(ctx)
	fits := func(k int) (bool, int, error) {
		n, err := size(candidate(k))
		return n <= budget, n, err
	}
	// Sizes grow with k, except that the last candidate may drop next.
	ok, n, err := fits(len(recs))
	if err != nil || ok {
		return candidate(len(recs)), err
	}
	if len(recs) == 0 {
		return PullOut{}, budgetTooSmall(budget, n)
	}
	ok, n, err = fits(1)
	if err != nil {
		return PullOut{}, err
	}
	if !ok {
		return PullOut{}, budgetTooSmall(budget, n)
	}
	lo, hi := 1, len(recs)-1 // fits(lo); the answer is in [lo, hi]
	for lo < hi {
		mid := (lo + hi + 1) / 2
		ok, _, err := fits(mid)
		if err != nil {
			return PullOut{}, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return candidate(lo), nil
}

// budgetTooSmall refuses a budget that cannot hold the envelope with one
// whole record (or, when nothing remains, the envelope alone).
func budgetTooSmall(budget, needed int) *protocol.Refusal {
	return protocol.Refusef(protocol.ReasonResponseBudgetTooSmall,
		"max_response_bytes %d cannot hold the result envelope with the next whole record (%d bytes).", budget, needed).
		With("max_response_bytes", budget).With("needed_bytes", needed)
}
