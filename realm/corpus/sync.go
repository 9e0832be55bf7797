package corpus

// Sync: the corpus index, the snapshot, the message export, the change feed
// (this file) and the live stream (stream.go) of the corpus seed.
//
// # Cursors
//
// Every cursor is the node's store sequence (DESIGN.md, "Two sequences"):
// after and before are exclusive, at is inclusive, and sequences have gaps
// (Parley events take some). A read first takes upTo = Store.Sequence(),
// which advances only after a commit, then reads in a View opened after
// that: everything at or below upTo is committed and visible, so a page
// never passes over a sequence that a later read would still find below it.
// An empty page keeps the requested cursor.
//
// # The snapshot
//
// S is the node's sequence at the first page (or at=S on any page). Every
// export lists the records with a sequence at or below S, as they stood at
// S: a conversation that gained messages after S is recounted (count,
// updated_at, last_sequence), a relationship retracted after S is active.
// Every change envelope's sequence is either at or below S (its record is
// in the snapshot) or above it (changes.jsonl?after=S has it), never both,
// so snapshot(S) + changes after S is exactly the corpus: no duplicate, no
// gap.
//
// # Seeking
//
// Tx.Iterate has no seek, and skipping from the start of an index to a
// cursor would make every page cost the whole index (and every wake of
// every stream, the whole feed). scanSeq seeks by narrowing the prefix
// instead; see there.
//
// # Transports
//
// The NDJSON and SSE results implement WriteHTTP: the registry still routes,
// authorizes, rate-limits and catalogs them, and the result writes its own
// body. JSON transports (call_api_operation) get the same result as JSON.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/internal/accept"
	"relay/store"
)

const (
	// syncLimit is the default page of the NDJSON exports, the seed's
	// default for collection reads; a sync reader asks for up to 1000.
	syncLimit = 100
	// snapshotLimit is the default page of each snapshot export, the seed's
	// collection default: the first page carries four exports.
	snapshotLimit = 100
	// pageBudget bounds the bytes of records in one page (one export): a
	// page may stop before its limit, always after at least one record, and
	// says has_more. Events are up to 100 KiB, so 1000 of them would be
	// 100 MiB in memory.
	pageBudget = 4 << 20

	ndjsonType = "application/x-ndjson"
)

// ndjsonAliases name the same body as application/x-ndjson.
var ndjsonAliases = []string{"application/ndjson", "application/jsonl", "application/x-jsonlines"}

// ChangeEventTypes are the event_type values of the change feed.
var ChangeEventTypes = []string{"message.created", "relationship.asserted", "relationship.retracted"}

// registerSync adds the sync operations. None is an MCP tool.
func (s *Service) registerSync(reg *api.Registry) {
	changes := corpusOp(api.Define("get_corpus_changes_jsonl", http.MethodGet, "/corpus/changes.jsonl",
		"The change feed as NDJSON, one schema_version 1 envelope a line by sequence; after and before exclusive, at inclusive, limit 1..1000 (default 100); X-Next-Cursor is the last sequence returned (the requested after on an empty page).",
		api.Public, s.changesPage), "-")
	changes.Output.Properties["changes"].Items = changeSchema()
	export := corpusOp(api.Define("get_corpus_messages_jsonl", http.MethodGet, "/corpus/messages.jsonl",
		"Messages as NDJSON by sequence, with every filter of GET /messages; limit 1..1000 (default 100); X-Next-Cursor.",
		api.Public, s.messagesJSONL), "-")
	export.Input.Properties["limit"].Description = "1..1000, default 100"
	export.Output.Properties["messages"].Items = mustSchemaOf[Message]()
	stream := corpusOp(api.Define("get_corpus_stream", http.MethodGet, "/corpus/stream",
		"Server-Sent Events of the change feed: event change, id the sequence, data the envelope. Resumes after Last-Event-ID unless after is given; without either it starts at the current sequence. A comment line every 15 s keeps it open.",
		api.Public, s.openStream), "-")
	stream.Headers = map[string]string{"Last-Event-ID": "last_event_id"}
	reg.Add(
		corpusOp(api.Define("get_corpus_index_json", http.MethodGet, "/corpus/index.json",
			"Discovery of the corpus: service metadata, vocabulary, snapshot, message export, changes, stream, conversations, messages, search, and the current sequence.",
			api.Public, s.corpusIndex), "-"),
		corpusOp(api.Define("get_corpus_snapshot_json", http.MethodGet, "/corpus/snapshot.json",
			"The corpus at a fixed sequence S: pages of conversations, messages, relationships and relationship retractions as they stood at S; then follow /corpus/changes.jsonl?after=S.",
			api.Public, s.snapshot), "-"),
		export, changes, stream,
	)
}

func mustSchemaOf[T any]() *jsonschema.Schema {
	sc, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err)
	}
	return sc
}

// changeSchema is an envelope's schema; data is an object (the schema
// generator takes json.RawMessage for bytes).
func changeSchema() *jsonschema.Schema {
	sc := mustSchemaOf[Change]()
	sc.Properties["data"] = &jsonschema.Schema{Type: "object", Description: "the record as the event says it, without read-derived fields"}
	return sc
}

// ---------------------------------------------------------------------------
// Seeking

// scanSeq calls fn for every key prefix‖<sequence 8> with a sequence in
// (after, upTo], ascending, until fn returns store.ErrStop (a quiet end) or
// another error. val is the stored value.
//
// It seeks where Tx.Iterate cannot: the sequences up to the next multiple of
// 256 are point reads, then each Iterate covers one aligned block —
// prefix‖the leading bytes of the position — the largest the position is
// aligned to, so a dense index costs one Iterate per 256 keys read (fewer as
// blocks grow), a sparse one about one per 256 sequences passed, and no
// stored value is ever copied only to be skipped.
func scanSeq(tx *store.Tx, prefix []byte, after, upTo uint64, fn func(seq uint64, val []byte) error) error {
	err := scanSeqErr(tx, prefix, after, upTo, func(seq uint64, val []byte) error {
		// Iterate takes ErrStop for the end of one block; fn's must end
		// the whole scan.
		if err := fn(seq, val); errors.Is(err, store.ErrStop) {
			return errScanDone
		} else {
			return err
		}
	})
	if errors.Is(err, errScanDone) {
		return nil
	}
	return err
}

// errScanDone ends a scan: fn asked to stop, or a block passed upTo.
var errScanDone = errors.New("corpus: scan done")

func scanSeqErr(tx *store.Tx, prefix []byte, after, upTo uint64, fn func(seq uint64, val []byte) error) error {
	if after >= upTo {
		return nil
	}
	pos := after + 1
	key := make([]byte, len(prefix)+8)
	copy(key, prefix)
	for ; pos%256 != 0; pos++ {
		binary.BigEndian.PutUint64(key[len(prefix):], pos)
		v, err := tx.Get(key)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		default:
			if err := fn(pos, v); err != nil {
				return err
			}
		}
		if pos == upTo {
			return nil
		}
	}
	for {
		free := 1 // low bytes the block leaves free: pos is a multiple of 256^free
		for free < 7 && pos>>(8*free)&0xff == 0 {
			free++
		}
		binary.BigEndian.PutUint64(key[len(prefix):], pos)
		err := tx.Iterate(key[:len(key)-free], false, func(k, v []byte) error {
			seq := binary.BigEndian.Uint64(k[len(prefix):])
			if seq > upTo {
				return errScanDone
			}
			return fn(seq, v)
		})
		if err != nil {
			return err
		}
		last := pos | (1<<(8*free) - 1) // the block's last sequence
		if last >= upTo {
			return nil
		}
		pos = last + 1
	}
}

// upperBound is the last sequence a read may return: the committed
// sequence, lowered by at (inclusive) and before (exclusive).
func upperBound(committed uint64, at, before *uint64) uint64 {
	upTo := committed
	if at != nil && *at < upTo {
		upTo = *at
	}
	if before != nil {
		if *before == 0 {
			return 0
		}
		upTo = min(upTo, *before-1)
	}
	return upTo
}

func syncLimitOf(n *int, def int) (int, error) {
	if n == nil {
		return def, nil
	}
	return limitOf(n)
}

func seqOrZero(n *uint64) uint64 {
	if n == nil {
		return 0
	}
	return *n
}

// ---------------------------------------------------------------------------
// NDJSON

// writeNDJSON writes lines as NDJSON with the cursor headers, or returns a
// refusal when Accept rules NDJSON out (then nothing is written).
func writeNDJSON(w http.ResponseWriter, r *http.Request, lines []json.RawMessage, cursor uint64, more bool, next string) error {
	if !accepts(r.Header.Get("Accept"), ndjsonType, ndjsonAliases...) {
		return notAcceptable(ndjsonType)
	}
	n := 0
	for _, l := range lines {
		n += len(l) + 1
	}
	h := w.Header()
	h.Set("Content-Type", ndjsonType)
	h.Set("Content-Length", strconv.Itoa(n))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Next-Cursor", strconv.FormatUint(cursor, 10))
	h.Set("X-Has-More", strconv.FormatBool(more))
	if next != "" {
		h.Set("Link", "<"+next+">; rel=\"next\"")
	}
	w.WriteHeader(http.StatusOK)
	for _, l := range lines { // the ResponseWriter buffers
		if _, err := w.Write(l); err != nil {
			return nil // the client left; the status is written
		}
		w.Write([]byte{'\n'})
	}
	return nil
}

// accepts reports whether an Accept header admits the media type typ:
// the most specific range matching it must have q > 0; an alias (a
// synonym the body is equally valid as) counts only when named. No header,
// or one without a valid media range, admits everything, as the negotiated
// resources take it (realm/negotiate.go): a range that is not type/subtype,
// or whose q is not a number in 0..1, is dropped.
func accepts(header, typ string, aliases ...string) bool {
	ranges := accept.Parse(header)
	if len(ranges) == 0 {
		return true
	}
	if q, spec := accept.Quality(ranges, typ); spec != accept.None && q > 0 {
		return true
	}
	for _, a := range aliases {
		if q, spec := accept.Quality(ranges, a); spec == accept.Exact && q > 0 {
			return true
		}
	}
	return false
}

func notAcceptable(offered string) error {
	return protocol.Refusef(protocol.ReasonNotAcceptable, "This resource is %s only; accept it (or */*).", offered).With("offered", offered)
}

// ---------------------------------------------------------------------------
// /corpus/changes.jsonl

type changesIn struct {
	After  *uint64 `json:"after,omitempty" jsonschema:"exclusive sequence cursor (a snapshot's S, or X-Next-Cursor)"`
	Before *uint64 `json:"before,omitempty" jsonschema:"exclusive upper bound"`
	At     *uint64 `json:"at,omitempty" jsonschema:"inclusive upper bound"`
	Limit  *int    `json:"limit,omitempty" jsonschema:"1..1000, default 100"`
}

// ChangesOut is a page of the change feed. Over HTTP it is NDJSON, each
// envelope exactly as stored; a JSON transport gets this object.
type ChangesOut struct {
	Changes    []json.RawMessage `json:"changes"`
	NextCursor uint64            `json:"next_cursor" jsonschema:"the last sequence returned; the requested after on an empty page"`
	HasMore    bool              `json:"has_more" jsonschema:"more changes up to the page's bound were there; follow after=next_cursor"`
	next       string
}

// WriteHTTP writes the page as NDJSON.
func (o ChangesOut) WriteHTTP(w http.ResponseWriter, r *http.Request) error {
	return writeNDJSON(w, r, o.Changes, o.NextCursor, o.HasMore, o.next)
}

func (s *Service) changesPage(ctx context.Context, c *api.Call, in changesIn) (ChangesOut, error) {
	limit, err := syncLimitOf(in.Limit, syncLimit)
	if err != nil {
		return ChangesOut{}, err
	}
	after := seqOrZero(in.After)
	upTo := upperBound(s.st.Sequence(), in.At, in.Before)
	out := ChangesOut{Changes: []json.RawMessage{}, NextCursor: after}
	size := 0
	err = s.st.View(func(tx *store.Tx) error {
		return scanSeq(tx, pfxChange, after, upTo, func(seq uint64, v []byte) error {
			if len(out.Changes) == limit || size >= pageBudget {
				out.HasMore = true
				return store.ErrStop
			}
			out.Changes = append(out.Changes, v)
			out.NextCursor, size = seq, size+len(v)
			return nil
		})
	})
	if out.HasMore {
		q := url.Values{"after": {strconv.FormatUint(out.NextCursor, 10)}}
		setUint(q, "before", in.Before)
		setUint(q, "at", in.At)
		if in.Limit != nil {
			q.Set("limit", strconv.Itoa(*in.Limit))
		}
		out.next = "/corpus/changes.jsonl?" + q.Encode()
	}
	return out, err
}

func setUint(q url.Values, name string, v *uint64) {
	if v != nil {
		q.Set(name, strconv.FormatUint(*v, 10))
	}
}

// ---------------------------------------------------------------------------
// /corpus/messages.jsonl

// MessagesJSONLOut is a page of the message export: NDJSON over HTTP, this
// object over a JSON transport.
type MessagesJSONLOut struct {
	Messages   []json.RawMessage `json:"messages"`
	NextCursor uint64            `json:"next_cursor" jsonschema:"the last sequence returned; the requested after on an empty page"`
	HasMore    bool              `json:"has_more"`
	next       string
}

// WriteHTTP writes the page as NDJSON.
func (o MessagesJSONLOut) WriteHTTP(w http.ResponseWriter, r *http.Request) error {
	return writeNDJSON(w, r, o.Messages, o.NextCursor, o.HasMore, o.next)
}

func (s *Service) messagesJSONL(ctx context.Context, c *api.Call, in messagesIn) (MessagesJSONLOut, error) {
	limit, err := syncLimitOf(in.Limit, syncLimit)
	if err != nil {
		return MessagesJSONLOut{}, err
	}
	if in.Kinds, err = in.filters(); err != nil {
		return MessagesJSONLOut{}, err
	}
	after := seqOrZero(in.After)
	upTo := upperBound(s.st.Sequence(), nil, in.Before)
	out := MessagesJSONLOut{Messages: []json.RawMessage{}, NextCursor: after}
	size := 0
	err = s.st.View(func(tx *store.Tx) error {
		// The indexes of the most selective filter are read
		// (messagesIndexes).
		ixs, err := in.messagesIndexes(tx)
		if err != nil {
			return err
		}
		return scanSeqs(tx, ixs, after, upTo, func(seq uint64, id []byte) error {
			var m Message
			if ok, err := readMessage(tx, id, &m); err != nil || !ok {
				return err
			}
			if !in.match(&m) {
				return nil
			}
			if len(out.Messages) == limit || size >= pageBudget {
				out.HasMore = true
				return store.ErrStop
			}
			b, err := marshal(&m)
			if err != nil {
				return err
			}
			out.Messages = append(out.Messages, b)
			out.NextCursor, size = seq, size+len(b)
			return nil
		})
	})
	if out.HasMore {
		out.next = "/corpus/messages.jsonl?" + messagesQuery(&in, out.NextCursor).Encode()
	}
	return out, err
}

// messagesQuery is in as a query string, continuing after next.
func messagesQuery(in *messagesIn, next uint64) url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("conversation_id", in.ConversationID)
	set("author_id", in.AuthorID)
	set("tag", in.Tag)
	for _, k := range in.Kinds {
		q.Add("kinds", k)
	}
	set("mentioned_agent", in.MentionedAgent)
	if in.HasPayload != nil {
		q.Set("has_payload", strconv.FormatBool(*in.HasPayload))
	}
	set("schema_name", in.SchemaName)
	if in.SchemaVersion != nil {
		q.Set("schema_version", strconv.Itoa(*in.SchemaVersion))
	}
	if in.SchemaValidated != nil {
		q.Set("schema_validated", strconv.FormatBool(*in.SchemaValidated))
	}
	set("realm", in.Realm)
	setUint(q, "before", in.Before)
	if in.Limit != nil {
		q.Set("limit", strconv.Itoa(*in.Limit))
	}
	q.Set("after", strconv.FormatUint(next, 10))
	return q
}

// ---------------------------------------------------------------------------
// /corpus/snapshot.json

type snapshotIn struct {
	At     *uint64    `json:"at,omitempty" jsonschema:"the snapshot's sequence S from its first page; omitted on the first page, which takes the current sequence"`
	Export exportName `json:"export,omitempty" jsonschema:"one export's next page: conversations, messages, relationships or relationship_retractions (with at and after)"`
	After  *uint64    `json:"after,omitempty" jsonschema:"exclusive sequence cursor within the export"`
	Limit  *int       `json:"limit,omitempty" jsonschema:"records per export page, 1..1000, default 100"`
}

// Export names of a snapshot.
const (
	exportConversations = "conversations"
	exportMessages      = "messages"
	exportRelationships = "relationships"
	exportRetractions   = "relationship_retractions"
)

var exportNames = []string{exportConversations, exportMessages, exportRelationships, exportRetractions}

// exportName names a snapshot's export in a request: one of exportNames,
// which its input schema lists (api.InputEnum).
type exportName string

var _ = api.InputEnum([]exportName{exportConversations, exportMessages, exportRelationships, exportRetractions})

// SnapshotOut is one page of a snapshot: on the first page every export's
// first page, on later pages the one export asked for.
type SnapshotOut struct {
	SchemaVersion    int    `json:"schema_version"`
	Realm            string `json:"realm"`
	SnapshotSequence uint64 `json:"snapshot_sequence" jsonschema:"S: every export is the corpus as it stood at S"`
	Changes          string `json:"changes" jsonschema:"once every export page is read, follow the change feed after S"`
	Stream           string `json:"stream" jsonschema:"or the live stream after S"`

	Conversations           *ExportPage[Conversation] `json:"conversations,omitempty"`
	Messages                *ExportPage[Message]      `json:"messages,omitempty"`
	Relationships           *ExportPage[Relationship] `json:"relationships,omitempty"`
	RelationshipRetractions *ExportPage[Retraction]   `json:"relationship_retractions,omitempty"`
}

// ExportPage is a page of one export of a snapshot, by sequence.
type ExportPage[T any] struct {
	Items      []T     `json:"items"`
	HasMore    bool    `json:"has_more"`
	NextCursor *uint64 `json:"next_cursor" jsonschema:"the highest sequence returned, when there is more; the requested after on an empty page"`
	Next       string  `json:"next,omitempty" jsonschema:"the export's next page: the same at, after=next_cursor"`
}

func (s *Service) snapshot(ctx context.Context, c *api.Call, in snapshotIn) (SnapshotOut, error) {
	limit, err := syncLimitOf(in.Limit, snapshotLimit)
	if err != nil {
		return SnapshotOut{}, err
	}
	cur := s.st.Sequence()
	at := cur
	if in.At != nil {
		if *in.At > cur {
			return SnapshotOut{}, invalid("at=%d is past the node's sequence %d: take at from a snapshot's first page.", *in.At, cur).With("field", "at")
		}
		at = *in.At
	}
	names := exportNames
	switch {
	case in.Export != "":
		if !slices.Contains(exportNames, string(in.Export)) {
			return SnapshotOut{}, invalid("export is one of %s.", strings.Join(exportNames, ", ")).With("field", "export")
		}
		if in.At == nil {
			return SnapshotOut{}, invalid("An export's next page keeps the snapshot's at: pass at=S.").With("field", "at")
		}
		names = []string{string(in.Export)}
	case in.After != nil:
		return SnapshotOut{}, invalid("after pages one export: pass export too.").With("field", "export")
	}
	after := seqOrZero(in.After)
	out := SnapshotOut{SchemaVersion: 1, Realm: string(s.realm), SnapshotSequence: at,
		Changes: "/corpus/changes.jsonl?after=" + strconv.FormatUint(at, 10),
		Stream:  "/corpus/stream?after=" + strconv.FormatUint(at, 10)}
	err = s.st.View(func(tx *store.Tx) error {
		var err error
		for _, name := range names {
			switch name {
			case exportConversations:
				out.Conversations, err = exportPage(tx, pfxConvSeq, after, in.After != nil, at, limit,
					func(tx *store.Tx, v []byte, at uint64) (Conversation, int, bool, error) {
						id, _, _ := parseConvSeq(v)
						return snapConversation(tx, id, at)
					})
			case exportMessages:
				out.Messages, err = exportPage(tx, pfxMsgSeq, after, in.After != nil, at, limit, snapMessage)
			case exportRelationships:
				out.Relationships, err = exportPage(tx, pfxRelSeq, after, in.After != nil, at, limit, snapRelationship)
			case exportRetractions:
				out.RelationshipRetractions, err = exportPage(tx, pfxRetrSeq, after, in.After != nil, at, limit, snapRetraction)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return SnapshotOut{}, err
	}
	link := func(name string, more bool, next *uint64) string {
		if !more {
			return ""
		}
		q := url.Values{"at": {strconv.FormatUint(at, 10)}, "export": {name}, "after": {strconv.FormatUint(*next, 10)}}
		if in.Limit != nil {
			q.Set("limit", strconv.Itoa(limit))
		}
		return "/corpus/snapshot.json?" + q.Encode()
	}
	if p := out.Conversations; p != nil {
		p.Next = link(exportConversations, p.HasMore, p.NextCursor)
	}
	if p := out.Messages; p != nil {
		p.Next = link(exportMessages, p.HasMore, p.NextCursor)
	}
	if p := out.Relationships; p != nil {
		p.Next = link(exportRelationships, p.HasMore, p.NextCursor)
	}
	if p := out.RelationshipRetractions; p != nil {
		p.Next = link(exportRetractions, p.HasMore, p.NextCursor)
	}
	return out, nil
}

// exportPage reads one page of an export through its by-sequence index
// (sequence → id): the records in (after, at], as load renders them at at.
// load answers ok false for a record it does not hold, and the record's
// stored size, which the page budget counts.
func exportPage[T any](tx *store.Tx, bySeq []byte, after uint64, keepAfter bool, at uint64, limit int,
	load func(tx *store.Tx, id []byte, at uint64) (T, int, bool, error)) (*ExportPage[T], error) {
	p := &ExportPage[T]{Items: []T{}}
	var last uint64
	size := 0
	err := scanSeq(tx, bySeq, after, at, func(seq uint64, id []byte) error {
		v, n, ok, err := load(tx, id, at)
		if err != nil || !ok {
			return err
		}
		if len(p.Items) == limit || size >= pageBudget {
			p.HasMore = true
			return store.ErrStop
		}
		p.Items = append(p.Items, v)
		last, size = seq, size+n
		return nil
	})
	switch {
	case p.HasMore:
		p.NextCursor = &last
	case len(p.Items) == 0 && keepAfter:
		p.NextCursor = &after
	}
	return p, err
}

// getRaw reads the JSON record under k into v, with its size.
func getRaw(tx *store.Tx, k []byte, v any) (int, bool, error) {
	b, err := tx.Get(k)
	if errors.Is(err, store.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return len(b), true, json.Unmarshal(b, v)
}

func snapMessage(tx *store.Tx, id []byte, _ uint64) (Message, int, bool, error) {
	var m Message
	n, ok, err := readMessageSized(tx, id, &m)
	return m, n, ok, err
}

// snapConversation is a conversation as it stood at at: when messages came
// after at, its count, updated_at (the latest created_at of its messages)
// and last_sequence are recounted from its message index.
func snapConversation(tx *store.Tx, id []byte, at uint64) (Conversation, int, bool, error) {
	var c Conversation
	n, ok, err := readConversationSized(tx, id, &c)
	if err != nil || !ok || c.LastSequence <= at {
		return c, n, ok, err
	}
	c.MessageCount, c.LastSequence, c.UpdatedAt = 0, 0, time.Time{}
	pfx := cat(pfxConvMsgs, id)
	err = tx.Iterate(pfx, false, func(k, v []byte) error {
		seq := binary.BigEndian.Uint64(k[len(pfx):])
		if seq > at {
			return store.ErrStop
		}
		c.MessageCount++
		c.LastSequence = seq
		var m Message
		if _, err := readMessage(tx, v, &m); err != nil {
			return err
		}
		if m.CreatedAt.After(c.UpdatedAt) {
			c.UpdatedAt = m.CreatedAt
		}
		return nil
	})
	return c, n, ok, err
}

// snapRelationship is a relationship as it stood at at: active unless
// its retraction is at or before at.
func snapRelationship(tx *store.Tx, id []byte, at uint64) (Relationship, int, bool, error) {
	var r relRec
	n, ok, err := getRaw(tx, cat(pfxRel, id), &r)
	if err != nil || !ok {
		return Relationship{}, n, ok, err
	}
	rel, err := relationshipAt(tx, &r, at)
	return rel, n, true, err
}

func snapRetraction(tx *store.Tx, id []byte, _ uint64) (Retraction, int, bool, error) {
	var x Retraction
	n, ok, err := getRaw(tx, cat(pfxRetr, id), &x)
	return x, n, ok, err
}

// ---------------------------------------------------------------------------
// /corpus/index.json

// IndexOut is the corpus index: where every corpus resource is.
type IndexOut struct {
	SchemaVersion int           `json:"schema_version"`
	Realm         string        `json:"realm"`
	Sequence      uint64        `json:"sequence" jsonschema:"the node's current corpus sequence (the cursor of changes, the stream and snapshots)"`
	Service       IndexService  `json:"service"`
	Vocabulary    IndexVocab    `json:"vocabulary"`
	Snapshot      IndexResource `json:"snapshot"`
	MessageCorpus IndexResource `json:"message_corpus" jsonschema:"the complete message corpus, NDJSON"`
	Changes       IndexResource `json:"changes" jsonschema:"incremental changes, NDJSON"`
	Stream        IndexResource `json:"stream" jsonschema:"live changes, Server-Sent Events"`
	Conversations IndexResource `json:"conversations"`
	Messages      IndexResource `json:"messages"`
	Search        IndexResource `json:"search"`
}

// IndexService is the service's metadata.
type IndexService struct {
	Name          string `json:"name"`
	Realm         string `json:"realm"`
	Documentation string `json:"documentation"`
	Auth          string `json:"auth"`
	Register      string `json:"register"`
	Agents        string `json:"agents"`
	Tags          string `json:"tags"`
	Description   string `json:"description" jsonschema:"the service description, JSON-LD"`
	OpenAPI       string `json:"openapi"`
	APICatalog    string `json:"api_catalog"`
	MCP           string `json:"mcp" jsonschema:"the corpus's MCP endpoint (OAuth 2.1)"`
}

// IndexVocab is the corpus's vocabulary.
type IndexVocab struct {
	Kinds             string   `json:"kinds" jsonschema:"the message kinds"`
	RelationshipTypes string   `json:"relationship_types" jsonschema:"the relationship type catalogue"`
	Terms             string   `json:"terms" jsonschema:"the vocabulary of the corpus's terms, JSON-LD"`
	EventTypes        []string `json:"event_types" jsonschema:"event_type values of changes and the stream"`
	ChangeSchema      int      `json:"change_schema_version"`
}

// IndexResource is one resource of the index.
type IndexResource struct {
	URL         string `json:"url"`
	MediaType   string `json:"media_type"`
	Description string `json:"description"`
}

func (s *Service) corpusIndex(ctx context.Context, c *api.Call, _ api.NoInput) (IndexOut, error) {
	realm := string(s.realm)
	return IndexOut{
		SchemaVersion: 1, Realm: realm, Sequence: s.st.Sequence(),
		Service: IndexService{Name: "relay corpus", Realm: realm, Documentation: "/llms.txt", Auth: GuidePath, Register: "/register",
			Agents: "/agents", Tags: "/tags", Description: "/service.jsonld", OpenAPI: "/openapi.json", APICatalog: "/.well-known/api-catalog", MCP: "/mcp"},
		Vocabulary: IndexVocab{Kinds: "/kind", RelationshipTypes: "/relationships", Terms: "/vocab.jsonld", EventTypes: ChangeEventTypes, ChangeSchema: 1},
		Snapshot: IndexResource{"/corpus/snapshot.json", "application/json",
			"Every page of the conversations, messages, relationships and relationship_retractions exports at a fixed sequence S, then changes after S."},
		MessageCorpus: IndexResource{"/corpus/messages.jsonl", ndjsonType,
			"Every message by sequence, one a line; the filters of /messages; after, before, limit; X-Next-Cursor."},
		Changes: IndexResource{"/corpus/changes.jsonl", ndjsonType,
			"Change envelopes (schema_version 1) by sequence; after and before exclusive, at inclusive; sequence gaps are valid; an empty page keeps the cursor."},
		Stream: IndexResource{"/corpus/stream", "text/event-stream",
			"event: change, id: sequence, data: the envelope; resume with Last-Event-ID or after. Deduplicate by sequence."},
		Conversations: IndexResource{"/conversations", "application/json", "Conversations by created_sequence; q, tag, kinds, after, limit."},
		Messages:      IndexResource{"/messages", "application/json", "Messages by sequence with every filter; after, before, limit."},
		Search:        IndexResource{"/search?q=", "application/json", "Lexical search, relevance ordered."},
	}, nil
}
