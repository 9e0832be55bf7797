package parley

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

func (s *Service) registerInbox(reg *api.Registry) {
	inbox := api.Define("get_inbox", http.MethodGet, "/api/v1/inbox", "Threads awaiting my reply; since (a cursor) and extension supported.", api.NeedRight(protocol.RightRead), s.inbox)
	// since takes a cursor as every answer gives it, a number, or its
	// digits as text (a URL's), or a time.
	inbox.Input.Properties["since"].Type = ""
	inbox.Input.Properties["since"].Types = []string{"string", "integer"}
	reg.Add(
		inbox,
		api.Define("post_inbox_ack", http.MethodPost, "/api/v1/inbox/ack", "Remember the inbox cursor: later get_inbox calls start after it.", api.NeedRight(protocol.RightRead), s.ack),
	)
}

// sinceArg is get_inbox's since: text as it is, or a number as its
// digits, for the handler to read as a cursor or refuse.
type sinceArg string

// UnmarshalJSON takes a string, or a number (the schema admits integers)
// as it is written.
func (a *sinceArg) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = sinceArg(s)
		return nil
	}
	if string(b) != "null" {
		*a = sinceArg(b)
	}
	return nil
}

type inboxIn struct {
	Since     sinceArg `json:"since,omitempty" jsonschema:"a cursor from an earlier answer (or an RFC 3339 time); default: the acknowledged cursor"`
	Extension string   `json:"extension,omitempty" jsonschema:"the sub-line asking; its own messages do not await it"`
	Limit     int      `json:"limit,omitempty" jsonschema:"at most this many (default 50, at most 200)"`
}

// InboxOut lists the threads awaiting the caller's reply, oldest first.
type InboxOut struct {
	Identity  string      `json:"identity"`
	Extension string      `json:"extension,omitempty"`
	Since     uint64      `json:"since" jsonschema:"the cursor this answer starts after"`
	Cursor    uint64      `json:"cursor" jsonschema:"pass as since, or acknowledge with post_inbox_ack"`
	Threads   []ThreadOut `json:"threads"`
	// Replies are the caller's replies into other realms' threads that
	// those realms accepted or refused since the cursor.
	Replies []MessageOut `json:"replies" jsonschema:"my replies into other realms' threads, decided since the cursor: status accepted or refused (with the reason)"`
}

func inboxKey(identity, ext string) []byte {
	return key(pfxInbox, []byte(identity), []byte{0}, []byte(ext))
}

func (s *Service) inbox(ctx context.Context, c *api.Call, in inboxIn) (InboxOut, error) {
	if ref := s.checkInboxExtension(in.Extension); ref != nil {
		return InboxOut{}, ref
	}
	me := c.Principal.Identity.String()
	out := InboxOut{Identity: me, Extension: in.Extension, Threads: []ThreadOut{}, Replies: []MessageOut{}}
	var sinceTime time.Time
	err := s.st.View(func(tx *store.Tx) error {
		switch {
		case in.Since == "":
			b, err := tx.Get(inboxKey(me, in.Extension))
			if err == nil && len(b) == 8 {
				out.Since = binary.BigEndian.Uint64(b)
			} else if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		default:
			if n, err := strconv.ParseUint(string(in.Since), 10, 64); err == nil {
				out.Since = n
			} else if t, err := time.Parse(time.RFC3339, string(in.Since)); err == nil {
				sinceTime = t
			} else {
				return protocol.Refusef(protocol.ReasonInvalidBody, "since: a cursor (a number) or an RFC 3339 time.").With("field", "since").With("rule", "format")
			}
		}
		var ts []*threadRec
		err := tx.Iterate(key(pfxPart, []byte(me), []byte{0}), false, func(k, _ []byte) error {
			var t threadRec
			ok, err := tx.GetJSON(key(pfxThread, k[len(pfxPart)+len(me)+1:]), &t)
			if err != nil || !ok {
				return err
			}
			if awaits(&t, s.realm, me, in.Extension, c.Principal.Human) && t.Last.Sequence > out.Since && t.Last.At.After(sinceTime) {
				ts = append(ts, &t)
			}
			return nil
		})
		if err != nil {
			return err
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].Last.Sequence < ts[j].Last.Sequence })
		out.Cursor = out.Since
		for i, t := range ts {
			if i == clampLimit(in.Limit) {
				break
			}
			out.Threads = append(out.Threads, s.threadOut(t))
			out.Cursor = t.Last.Sequence
		}
		pre := key(pfxDecided, []byte(me), []byte{0})
		return tx.Iterate(pre, false, func(k, v []byte) error {
			seq := binary.BigEndian.Uint64(k[len(pre):])
			switch {
			case len(out.Replies) == clampLimit(in.Limit):
				return store.ErrStop // in sequence order: the rest come later
			case seq <= out.Since:
				return nil
			}
			var m messageRec
			if ok, err := tx.GetJSON(key(pfxMessage, v), &m); err != nil || !ok || !m.CreatedAt.After(sinceTime) {
				return err
			}
			out.Replies = append(out.Replies, s.messageOut(&m))
			out.Cursor = max(out.Cursor, seq)
			return nil
		})
	})
	return out, err
}

// awaits reports whether a thread awaits a reply from identity of realm
// (and, when given, its extension): the last act expects a reply, the
// thread is not locked or set aside, a model is not forbidden to reply
// there, and the last message is not the caller's own.
func awaits(t *threadRec, realm protocol.Realm, identity, ext string, human bool) bool {
	if !t.Awaiting || t.locked() || protocol.IsSide(t.State.State) || (t.NoLLM && !human) {
		return false
	}
	if t.Last.Realm != realm || t.Last.Identity != identity {
		return true
	}
	return ext != "" && t.Last.Extension != ext
}

type ackIn struct {
	Cursor    *uint64 `json:"cursor,omitempty" jsonschema:"the cursor to remember; default: everything up to now"`
	Extension string  `json:"extension,omitempty"`
}

// AckOut is the remembered cursor.
type AckOut struct {
	Cursor uint64 `json:"cursor"`
}

// checkInboxExtension checks the sub-line an inbox is asked or acknowledged
// for, as a message's: none ("", also an empty query parameter) is the
// identity's own inbox.
func (s *Service) checkInboxExtension(ext string) *protocol.Refusal {
	if ext == "" {
		return nil
	}
	return protocol.CheckExtension("extension", ext, s.cfg.Limits.Extension)
}

func (s *Service) ack(ctx context.Context, c *api.Call, in ackIn) (AckOut, error) {
	if ref := s.checkInboxExtension(in.Extension); ref != nil {
		return AckOut{}, ref
	}
	cursor := s.st.Sequence()
	if in.Cursor != nil {
		// A cursor beyond what the node holds would hide every entry
		// still to come; an earlier one reads again what came since.
		if *in.Cursor > cursor {
			return AckOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "cursor: at most %d, the node's sequence now.", cursor).With("field", "cursor").With("rule", "maximum")
		}
		cursor = *in.Cursor
	}
	me := c.Principal.Identity.String()
	_, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		return nil, tx.Set(inboxKey(me, in.Extension), u64(cursor))
	})
	return AckOut{Cursor: cursor}, err
}
