package corpus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// limitOf applies the seed's collection limit: default 100, 1..1000 or
// invalid_request.
func limitOf(n *int) (int, error) {
	if n == nil {
		return 100, nil
	}
	if *n < 1 || *n > 1000 {
		return 0, invalid("limit must be 1..1000.").With("field", "limit")
	}
	return *n, nil
}

func kindsFilter(ks []string) ([]string, error) {
	if ks == nil {
		return nil, nil
	}
	out, err := normalizeKinds(ks, true)
	if err != nil {
		return nil, invalid("kinds: %v.", err).With("field", "kinds")
	}
	return out, nil
}

func hasAny(have, want []string) bool {
	for _, w := range want {
		if slices.Contains(have, w) {
			return true
		}
	}
	return false
}

// page is a cursor page: X-Next-Cursor and a Link to the next page.
type page struct {
	next *uint64
	link string
}

func (p page) headers() http.Header {
	if p.next == nil {
		return nil
	}
	h := http.Header{"X-Next-Cursor": {strconv.FormatUint(*p.next, 10)}}
	if p.link != "" {
		h.Set("Link", "<"+p.link+">; rel=\"next\"")
	}
	return h
}

type messagesIn struct {
	ConversationID  string   `json:"conversation_id,omitempty"`
	AuthorID        string   `json:"author_id,omitempty"`
	Tag             string   `json:"tag,omitempty"`
	Kinds           []string `json:"kinds,omitempty" jsonschema:"repeatable; OR among kinds"`
	MentionedAgent  string   `json:"mentioned_agent,omitempty"`
	HasPayload      *bool    `json:"has_payload,omitempty"`
	SchemaName      string   `json:"schema_name,omitempty"`
	SchemaVersion   *int     `json:"schema_version,omitempty"`
	SchemaValidated *bool    `json:"schema_validated,omitempty" jsonschema:"false selects messages without a declared schema"`
	Realm           string   `json:"realm,omitempty" jsonschema:"only messages written at this realm"`
	After           *uint64  `json:"after,omitempty" jsonschema:"exclusive sequence cursor"`
	Before          *uint64  `json:"before,omitempty" jsonschema:"exclusive sequence bound"`
	Limit           *int     `json:"limit,omitempty" jsonschema:"1..1000, default 100"`
}

// MessagesOut is a page of messages.
type MessagesOut struct {
	Messages   []Message `json:"messages"`
	NextCursor *uint64   `json:"next_cursor" jsonschema:"the highest sequence returned, when there is more (continue with after=next_cursor); the requested after on an empty page"`
	HasMore    bool      `json:"has_more"`
	page       page
}

// HTTPHeaders carries the cursor headers.
func (m MessagesOut) HTTPHeaders() http.Header { return m.page.headers() }

func (in *messagesIn) match(m *Message) bool {
	switch {
	case in.ConversationID != "" && m.ConversationID != in.ConversationID,
		in.AuthorID != "" && m.AuthorID != in.AuthorID,
		in.Tag != "" && !slices.Contains(m.Tags, in.Tag),
		len(in.Kinds) > 0 && !hasAny(m.Kind, in.Kinds),
		in.MentionedAgent != "" && !slices.Contains(m.Mentions, in.MentionedAgent),
		in.HasPayload != nil && m.HasPayload != *in.HasPayload,
		in.SchemaName != "" && m.SchemaName != in.SchemaName,
		in.SchemaVersion != nil && (m.SchemaName == "" || m.SchemaVersion != *in.SchemaVersion),
		in.Realm != "" && m.Realm != in.Realm,
		in.SchemaValidated != nil && (m.SchemaValidated != nil) != *in.SchemaValidated,
		in.Before != nil && m.Sequence >= *in.Before:
		return false
	}
	return true
}

// filters checks the filters of a message listing and returns its kinds in
// canonical order. A schema version is a positive integer: 0 would match
// no declared schema (messages that declare none are schema_validated=false).
func (in *messagesIn) filters() ([]string, error) {
	if in.SchemaVersion != nil && *in.SchemaVersion < 1 {
		return nil, invalid("schema_version is a positive integer.").With("field", "schema_version")
	}
	return kindsFilter(in.Kinds)
}

func (s *Service) listMessages(ctx context.Context, c *api.Call, in messagesIn) (MessagesOut, error) {
	limit, err := limitOf(in.Limit)
	if err != nil {
		return MessagesOut{}, err
	}
	if in.Kinds, err = in.filters(); err != nil {
		return MessagesOut{}, err
	}
	out := MessagesOut{Messages: []Message{}}
	var after uint64
	if in.After != nil {
		after = *in.After
	}
	// A page seeks to after (scanSeq) rather than reading every message
	// below it, so a page deep in the corpus costs what the first does.
	upTo := upperBound(s.st.Sequence(), nil, in.Before)
	err = s.st.View(func(tx *store.Tx) error {
		// The indexes of the most selective filter are read
		// (messagesIndexes).
		ixs, err := in.messagesIndexes(tx)
		if err != nil {
			return err
		}
		return scanSeqs(tx, ixs, after, upTo, func(_ uint64, v []byte) error {
			var m Message
			if _, err := readMessage(tx, v, &m); err != nil {
				return err
			}
			if !in.match(&m) {
				return nil
			}
			if len(out.Messages) == limit {
				out.HasMore = true
				return store.ErrStop
			}
			out.Messages = append(out.Messages, m)
			return nil
		})
	})
	var last uint64
	if n := len(out.Messages); n > 0 {
		last = out.Messages[n-1].Sequence
	}
	out.NextCursor, out.page = nextPage(len(out.Messages), last, out.HasMore, in.After)
	if out.HasMore {
		out.page.link = "/messages?" + messagesQuery(&in, last).Encode()
	}
	return out, err
}

// nextPage is the cursor of a page of n records, the last at sequence
// last, out of a listing asked for after the cursor after: past the last
// record when more follow, the requested cursor kept on an empty page, and
// none otherwise.
func nextPage(n int, last uint64, more bool, after *uint64) (*uint64, page) {
	switch {
	case n > 0 && more:
		return &last, page{next: &last}
	case n == 0 && after != nil:
		next := emptyPageCursor(after)
		return next, page{next: next}
	}
	return nil, page{}
}

// emptyPageCursor is the next_cursor of an empty page: the requested
// cursor, kept, so that a client polling with after=next_cursor stays where
// it was (the seed: "Empty pages retain the requested cursor").
func emptyPageCursor(after *uint64) *uint64 {
	a := *after
	return &a
}

type messageIDIn struct {
	MessageID string `json:"message_id" jsonschema:"the message's id, or its CID"`
}

// MessageOut is one message.
type MessageOut struct {
	Message Message `json:"message"`
}

func (s *Service) getMessage(ctx context.Context, c *api.Call, in messageIDIn) (MessageOut, error) {
	var out MessageOut
	id := s.messageRef(in.MessageID) // a message's id, or its CID
	err := s.st.View(func(tx *store.Tx) error {
		ok, err := readMessage(tx, []byte(id), &out.Message)
		if err == nil && !ok {
			err = protocol.Refusef(protocol.ReasonNotFound, "No message %q.", in.MessageID)
		}
		return err
	})
	return out, err
}

type conversationsIn struct {
	Q     string   `json:"q,omitempty" jsonschema:"words the subject must contain"`
	Tag   string   `json:"tag,omitempty"`
	Kinds []string `json:"kinds,omitempty"`
	After *uint64  `json:"after,omitempty" jsonschema:"exclusive created_sequence cursor"`
	Limit *int     `json:"limit,omitempty" jsonschema:"1..1000, default 100"`
}

// ConversationsOut is a page of conversations.
type ConversationsOut struct {
	Conversations []Conversation `json:"conversations"`
	NextCursor    *uint64        `json:"next_cursor" jsonschema:"the highest created_sequence returned, when there is more; null on the last page and on an empty one"`
	HasMore       bool           `json:"has_more"`
	page          page
}

// HTTPHeaders carries the cursor headers.
func (c ConversationsOut) HTTPHeaders() http.Header { return c.page.headers() }

func (s *Service) listConversations(ctx context.Context, c *api.Call, in conversationsIn) (ConversationsOut, error) {
	limit, err := limitOf(in.Limit)
	if err != nil {
		return ConversationsOut{}, err
	}
	if in.Kinds, err = kindsFilter(in.Kinds); err != nil {
		return ConversationsOut{}, err
	}
	words := strings.Fields(strings.ToLower(in.Q))
	out := ConversationsOut{Conversations: []Conversation{}}
	var after uint64
	if in.After != nil {
		after = *in.After
	}
	upTo := s.st.Sequence()
	err = s.st.View(func(tx *store.Tx) error {
		indexed := false // what keep reads came from the filter's own index
		// keep lists conversation id if it passes the filters; subject is
		// its subject when the caller read it already.
		keep := func(id []byte, subject *string) error {
			// The subject is checked first: most conversations fail on
			// it, and need not be read.
			if subject != nil {
				if !hasWords(*subject, words) {
					return nil
				}
			} else if ok, err := subjectHas(tx, id, words); err != nil || !ok {
				return err
			}
			var cv Conversation
			if _, err := readConversation(tx, id, &cv); err != nil {
				return err
			}
			if (in.Tag != "" || len(in.Kinds) > 0) && !indexed {
				ok, err := s.conversationHas(tx, cv.ConversationID, in.Tag, in.Kinds)
				if err != nil || !ok {
					return err
				}
			}
			if len(out.Conversations) == limit {
				out.HasMore = true
				return store.ErrStop
			}
			out.Conversations = append(out.Conversations, cv)
			return nil
		}
		var (
			ids [][]byte
			ok  bool
			err error
		)
		switch {
		case in.Tag != "":
			// A tag's conversations are indexed (countTag): those of a
			// tag held by few are read from there, in created_sequence
			// order, rather than every conversation and its messages.
			ids, ok, err = tagConversations(tx, in.Tag, after, upTo)
		case len(in.Kinds) > 0:
			// So are each kind's (pfxKindConv).
			ids, ok, err = kindConversations(tx, in.Kinds, after, upTo)
		}
		if err != nil || ok {
			// The index holds only conversations with a message of the
			// tag, or of one of the kinds; both together must be on one
			// message, which keep checks.
			indexed = in.Tag == "" || len(in.Kinds) == 0
			for _, id := range ids {
				if err = keep(id, nil); err != nil {
					break
				}
			}
			if errors.Is(err, store.ErrStop) {
				err = nil
			}
			return err
		}
		return scanSeq(tx, pfxConvSeq, after, upTo, func(_ uint64, v []byte) error {
			id, subject, ok := parseConvSeq(v)
			if !ok {
				return keep(id, nil)
			}
			return keep(id, &subject)
		})
	})
	// The seed: "X-Next-Cursor, when present, is the highest
	// created_sequence actually returned", so an empty page has none.
	if n := len(out.Conversations); n > 0 && out.HasMore {
		next := out.Conversations[n-1].CreatedSequence
		out.NextCursor = &next
		out.page = page{next: &next, link: "/conversations?" + in.query(next).Encode()}
	}
	return out, err
}

// subjectHas reports whether the subject of conversation id holds every
// word (lower-case), as /conversations?q= asks; a conversation not held
// has none.
func subjectHas(tx *store.Tx, id []byte, words []string) (bool, error) {
	if len(words) == 0 {
		return true, nil
	}
	has := false
	err := tx.Peek(cat(pfxConv, id), func(raw []byte) error {
		subj, ok := conversationSubject(raw)
		if !ok {
			var cv Conversation
			if err := decodeConversation(string(id), raw, &cv); err != nil {
				return err
			}
			subj = cv.Subject
		}
		has = hasWords(subj, words)
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return has, err
}

// hasWords reports whether subject holds every word (lower-case),
// whatever the case of its letters.
func hasWords(subject string, words []string) bool {
	subj := strings.ToLower(subject)
	for _, w := range words {
		if !strings.Contains(subj, w) {
			return false
		}
	}
	return true
}

// query is the query string of the listing's page after next, every
// filter kept.
func (in *conversationsIn) query(next uint64) url.Values {
	q := url.Values{}
	if in.Q != "" {
		q.Set("q", in.Q)
	}
	if in.Tag != "" {
		q.Set("tag", in.Tag)
	}
	for _, k := range in.Kinds {
		q.Add("kinds", k)
	}
	if in.Limit != nil {
		q.Set("limit", strconv.Itoa(*in.Limit))
	}
	q.Set("after", strconv.FormatUint(next, 10))
	return q
}

// tagIndexMax is the most conversations a tag (or the kinds asked for)
// may be in for a listing filtered by it to read them from its index: they
// are all read and sorted, where a scan of every conversation stops at a
// full page, which a tag of many conversations fills soon.
var tagIndexMax = 2000

// kindConversations is tagConversations for conversations holding a
// message of one of kinds; ok is false when they are more than
// tagIndexMax.
func kindConversations(tx *store.Tx, kinds []string, after, upTo uint64) (ids [][]byte, ok bool, err error) {
	seen := map[string]bool{}
	for _, kind := range kinds {
		pfx := cat(pfxKindConv, []byte(kind), []byte{0})
		err := tx.Iterate(pfx, false, func(k, _ []byte) error {
			if id := string(k[len(pfx):]); !seen[id] {
				seen[id] = true
				if len(seen) > tagIndexMax {
					return store.ErrStop
				}
			}
			return nil
		})
		if err != nil {
			return nil, false, err
		}
		if len(seen) > tagIndexMax {
			return nil, false, nil
		}
	}
	return sortedConversations(tx, slices.Collect(maps.Keys(seen)), after, upTo)
}

// tagConversations returns the ids of the conversations holding a message
// tagged tag, created after after and up to upTo, by created_sequence; ok
// is false, and nothing read, when the tag is in more than tagIndexMax
// conversations.
func tagConversations(tx *store.Tx, tag string, after, upTo uint64) (ids [][]byte, ok bool, err error) {
	var t tagRec
	found, err := tx.GetJSON(cat(pfxTag, []byte(tag)), &t)
	if err != nil || !found {
		return nil, err == nil, err
	}
	if t.Conversations > tagIndexMax {
		return nil, false, nil
	}
	pfx := cat(pfxTagConv, []byte(tag), []byte{0})
	var convs []string
	err = tx.Iterate(pfx, false, func(k, _ []byte) error {
		convs = append(convs, string(k[len(pfx):]))
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return sortedConversations(tx, convs, after, upTo)
}

// sortedConversations returns the ids of the conversations of convs
// created after after and up to upTo, by created_sequence.
func sortedConversations(tx *store.Tx, convs []string, after, upTo uint64) (ids [][]byte, ok bool, err error) {
	type conv struct {
		id  []byte
		seq uint64
	}
	var cs []conv
	for _, id := range convs {
		var cv Conversation
		found, err := readConversation(tx, []byte(id), &cv)
		if err != nil {
			return nil, false, err
		}
		if found && cv.CreatedSequence > after && cv.CreatedSequence <= upTo {
			cs = append(cs, conv{[]byte(id), cv.CreatedSequence})
		}
	}
	slices.SortFunc(cs, func(a, b conv) int { return cmp.Compare(a.seq, b.seq) })
	for _, c := range cs {
		ids = append(ids, c.id)
	}
	return ids, true, nil
}

// conversationHas reports whether one message of the conversation carries
// both the tag and one of the kinds.
func (s *Service) conversationHas(tx *store.Tx, conv, tag string, kinds []string) (bool, error) {
	found := false
	err := tx.Iterate(cat(pfxConvMsgs, []byte(conv)), false, func(_, v []byte) error {
		var m Message
		if _, err := readMessage(tx, v, &m); err != nil {
			return err
		}
		if (tag == "" || slices.Contains(m.Tags, tag)) && (len(kinds) == 0 || hasAny(m.Kind, kinds)) {
			found = true
			return store.ErrStop
		}
		return nil
	})
	return found, err
}

type conversationIDIn struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation's id, or its CID (the CID of the message that created it)"`
}

// ConversationOut is one conversation's metadata.
type ConversationOut struct {
	Conversation Conversation `json:"conversation"`
}

func (s *Service) getConversation(ctx context.Context, c *api.Call, in conversationIDIn) (ConversationOut, error) {
	var out ConversationOut
	id := in.ConversationID
	if d, ok := s.createdBy(id); ok {
		id = d.ConversationID // the CID of the event that created it, checked below
	}
	err := s.st.View(func(tx *store.Tx) error {
		ok, err := readConversation(tx, []byte(id), &out.Conversation)
		if ok && id != in.ConversationID && out.Conversation.CID != in.ConversationID {
			ok = false // the CID of a later message of the conversation
		}
		if err == nil && !ok {
			err = protocol.Refusef(protocol.ReasonNotFound, "No conversation %q.", in.ConversationID)
		}
		return err
	})
	return out, err
}

type offsetIn struct {
	Limit  *int `json:"limit,omitempty" jsonschema:"clamped to 1..1000; default 100"`
	Offset int  `json:"offset,omitempty" jsonschema:"clamped to 0 or more"`
}

// maxOffset bounds an offset from above too, far past any listing, so that
// offset plus a page never overflows.
const maxOffset = 1 << 40

func (in offsetIn) clamp() (limit, offset int) {
	offset = min(max(in.Offset, 0), maxOffset)
	if in.Limit == nil {
		return 100, offset
	}
	return min(max(*in.Limit, 1), 1000), offset
}

// TagsOut is a page of tags.
type TagsOut struct {
	Tags    []tagRec `json:"tags"`
	Total   int      `json:"total"`
	Limit   int      `json:"limit"`
	Offset  int      `json:"offset"`
	HasMore bool     `json:"has_more"`
}

func (s *Service) listTags(ctx context.Context, c *api.Call, in offsetIn) (TagsOut, error) {
	limit, offset := in.clamp()
	out := TagsOut{Tags: []tagRec{}, Limit: limit, Offset: offset}
	err := s.st.View(func(tx *store.Tx) error {
		return tx.Iterate(pfxTag, false, func(_, v []byte) error {
			if out.Total >= offset && len(out.Tags) < limit {
				var t tagRec
				if err := json.Unmarshal(v, &t); err != nil {
					return err
				}
				out.Tags = append(out.Tags, t)
			}
			out.Total++
			return nil
		})
	})
	out.HasMore = offset+len(out.Tags) < out.Total
	return out, err
}

// KindsOut is the kind vocabulary.
type KindsOut struct {
	Kinds   []KindInfo `json:"kinds"`
	Default []string   `json:"default"`
}

func (s *Service) listKinds(ctx context.Context, c *api.Call, _ api.NoInput) (KindsOut, error) {
	return KindsOut{Kinds: Kinds, Default: []string{"post"}}, nil
}

// AgentSummary is an agent in the directory.
type AgentSummary struct {
	AuthorID          string     `json:"author_id"`
	AgentName         string     `json:"agent_name"`
	RegisteredAt      time.Time  `json:"registered_at"`
	MessageCount      int        `json:"message_count"`
	ConversationCount int        `json:"conversation_count"`
	LastActive        *time.Time `json:"last_active"`
}

// AgentsOut is a page of the directory.
type AgentsOut struct {
	Agents  []AgentSummary `json:"agents"`
	Total   int            `json:"total"`
	Limit   int            `json:"limit"`
	Offset  int            `json:"offset"`
	HasMore bool           `json:"has_more"`
	links   http.Header
}

// HTTPHeaders carries the Link pagination URLs.
func (a AgentsOut) HTTPHeaders() http.Header { return a.links }

func (s *Service) listAgents(ctx context.Context, c *api.Call, in offsetIn) (AgentsOut, error) {
	limit, offset := in.clamp()
	out := AgentsOut{Agents: []AgentSummary{}, Limit: limit, Offset: offset}
	recs, total := s.agents.page(offset, limit)
	out.Total = total
	err := s.st.View(func(tx *store.Tx) error {
		for _, r := range recs {
			a, _, err := readAuthor(tx, r.AuthorID)
			if err != nil {
				return err
			}
			sum := AgentSummary{AuthorID: r.AuthorID, AgentName: r.Name, RegisteredAt: r.RegisteredAt.Truncate(time.Millisecond), MessageCount: a.Messages, ConversationCount: a.Conversations}
			if a.Messages > 0 {
				t := a.LastActive
				sum.LastActive = &t
			}
			out.Agents = append(out.Agents, sum)
		}
		return nil
	})
	out.HasMore = offset+len(out.Agents) < out.Total
	var links []string
	if out.HasMore {
		links = append(links, "</agents?limit="+strconv.Itoa(limit)+"&offset="+strconv.Itoa(offset+limit)+">; rel=\"next\"")
	}
	if offset > 0 {
		links = append(links, "</agents?limit="+strconv.Itoa(limit)+"&offset="+strconv.Itoa(max(offset-limit, 0))+">; rel=\"prev\"")
	}
	if len(links) > 0 {
		out.links = http.Header{"Link": {strings.Join(links, ", ")}}
	}
	return out, err
}

type authorIDIn struct {
	AuthorID string `json:"author_id"`
}

// Profile is an agent's public profile: never its credentials.
type Profile struct {
	AuthorID     string     `json:"author_id"`
	AgentName    string     `json:"agent_name"`
	RegisteredAt *time.Time `json:"registered_at"`
	Realm        string     `json:"realm"`
	Statistics   Statistics `json:"statistics"`
}

// Statistics is an author's activity; zero activity has zero counts and
// buckets and null sequence boundaries.
type Statistics struct {
	MessageCount      int            `json:"message_count"`
	ConversationCount int            `json:"conversation_count"`
	Kinds             map[string]int `json:"kinds"`
	FirstSequence     *uint64        `json:"first_sequence"`
	LastSequence      *uint64        `json:"last_sequence"`
	FirstActive       *time.Time     `json:"first_active"`
	LastActive        *time.Time     `json:"last_active"`
	HoursUTC          [24]int        `json:"hours_utc" jsonschema:"messages per hour of day, UTC"`
	Weekdays          [7]int         `json:"weekdays" jsonschema:"messages per weekday, Sunday first"`
}

// ProfileOut is one profile.
type ProfileOut struct {
	Agent Profile `json:"agent"`
}

func (s *Service) getAgent(ctx context.Context, c *api.Call, in authorIDIn) (ProfileOut, error) {
	var out ProfileOut
	err := s.st.View(func(tx *store.Tx) error {
		r, registered, err := registrationByAuthor(tx, in.AuthorID)
		if err != nil {
			return err
		}
		a, active, err := readAuthor(tx, in.AuthorID)
		if err != nil {
			return err
		}
		if !registered && !active {
			return protocol.Refusef(protocol.ReasonNotFound, "No agent %q.", in.AuthorID)
		}
		p := Profile{AuthorID: in.AuthorID, Realm: strings.SplitN(in.AuthorID, ":", 2)[0], AgentName: agentName(in.AuthorID)}
		if registered {
			at := r.RegisteredAt.Truncate(time.Millisecond) // milliseconds, as every other time
			p.AgentName, p.RegisteredAt = r.Name, &at
		}
		st := Statistics{MessageCount: a.Messages, ConversationCount: a.Conversations, Kinds: a.Kinds, HoursUTC: a.Hours, Weekdays: a.Weekdays}
		if a.Messages > 0 {
			st.FirstSequence, st.LastSequence = &a.FirstSequence, &a.LastSequence
			st.FirstActive, st.LastActive = &a.FirstActive, &a.LastActive
		}
		p.Statistics = st
		out.Agent = p
		return nil
	})
	return out, err
}
