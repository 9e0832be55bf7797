package parley

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
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
		ts, err := s.awaitingMe(tx, me, in.Extension, c.Principal.Human, out.Since, sinceTime, ClampLimit(in.Limit))
		if err != nil {
			return err
		}
		out.Cursor = out.Since
		for _, t := range ts {
			out.Threads = append(out.Threads, s.threadOut(t))
			out.Cursor = t.Last.Sequence
		}
		pre := key(pfxDecided, []byte(me), []byte{0})
		return tx.Iterate(pre, false, func(k, v []byte) error {
			seq := binary.BigEndian.Uint64(k[len(pre):])
			switch {
			case len(out.Replies) == ClampLimit(in.Limit):
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

// The inbox reads the threads an identity took part in by one of two
// paths. Either it decodes each of them (the participation index holds
// only their keys), or it reads the keys of every board's order index
// (boardAtKey), which say, without a decode, each thread's last sequence and
// whether it waits for anyone: it then decodes only the threads of the
// identity that wait, after the cursor, in sequence order, until the page
// is full. A key costs about a twentieth of a decode, so the second path
// is taken when the forum holds fewer than inboxScanRatio threads for each
// the identity took part in.
var (
	inboxScanRatio = 16
	inboxScanMin   = 64 // below, decoding them all is cheap anyway
)

// awaitingMe returns the threads awaiting identity me (ext, human: as for
// awaits) whose last message came after since and sinceTime, in the order
// of that message's sequence, at most limit.
func (s *Service) awaitingMe(tx *store.Tx, me, ext string, human bool, since uint64, sinceTime time.Time, limit int) ([]*threadRec, error) {
	pre := key(pfxPart, []byte(me), []byte{0})
	part := make(map[string]bool)
	err := tx.IterateKeys(pre, func(k []byte) error {
		part[string(k[len(pre):])] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	keep := func(t *threadRec) bool {
		return awaits(t, s.realm, me, ext, human) && t.Last.Sequence > since && t.Last.At.After(sinceTime)
	}
	var ts []*threadRec
	scan := len(part) >= inboxScanMin
	if scan {
		n, err := s.countThreads(tx)
		if err != nil {
			return nil, err
		}
		scan = n <= inboxScanRatio*len(part)
	}
	if !scan {
		for tk := range part {
			var t threadRec
			ok, err := tx.GetJSON(key(pfxThread, []byte(tk)), &t)
			if err != nil {
				return nil, err
			}
			if ok && keep(&t) {
				ts = append(ts, &t)
			}
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].Last.Sequence < ts[j].Last.Sequence })
		return ts[:min(len(ts), limit)], nil
	}
	type candidate struct {
		seq uint64
		tk  string
	}
	var cands []candidate
	err = tx.IterateKeys(pfxBoardAt, func(k []byte) error {
		rank, seq, tk, err := parseBoardAtKey(k)
		if err != nil {
			return err
		}
		// Rank 2 is a thread that is neither pinned nor waiting: it
		// awaits no one.
		if rank != 2 && seq > since && part[string(tk)] {
			cands = append(cands, candidate{seq, string(tk)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].seq < cands[j].seq })
	for _, c := range cands {
		if len(ts) == limit {
			break
		}
		var t threadRec
		ok, err := tx.GetJSON(key(pfxThread, []byte(c.tk)), &t)
		if err != nil {
			return nil, err
		}
		if !ok || t.Last.Sequence != c.seq {
			return nil, fmt.Errorf("parley: order key of thread %q disagrees with its record", c.tk)
		}
		if keep(&t) {
			ts = append(ts, &t)
		}
	}
	return ts, nil
}

// parseBoardAtKey reads a key of pfxBoardAt (boardAtKey): the thread's
// rank on its board, its last message's sequence, and its key.
func parseBoardAtKey(k []byte) (rank byte, seq uint64, thread []byte, err error) {
	rest := k[len(pfxBoardAt):]
	// The board's key: its realm, NUL, its number.
	if i := bytes.IndexByte(rest, 0); i >= 0 && len(rest) > i+9+boardOrder {
		rest = rest[i+9:]
		return rest[0], ^binary.BigEndian.Uint64(rest[9:17]), rest[boardOrder:], nil
	}
	return 0, 0, nil, fmt.Errorf("parley: board order key %q is short", k)
}

// countThreads is how many threads the forum's boards hold.
func (s *Service) countThreads(tx *store.Tx) (int, error) {
	n := 0
	err := tx.Iterate(pfxBoard, false, func(_, v []byte) error {
		var b struct {
			Threads int `json:"threads"`
		}
		if err := json.Unmarshal(v, &b); err != nil {
			return err
		}
		n += b.Threads
		return nil
	})
	return n, err
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
