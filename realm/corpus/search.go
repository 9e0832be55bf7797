package corpus

// Search: GET /search and the MCP tool search, a lexical, relevance-ranked
// (BM25) index of the corpus's messages.
//
// # What is indexed
//
// A message's content; for a conversation's first message also the
// conversation's subject, since the subject is part of that message's
// created event (the change feed carries it there too). Indexing the subject
// with every message of the conversation would rank a long conversation's
// hundred replies alike for a subject word and bury everything else; on the
// first message it finds the conversation where it starts. Payloads are not
// indexed (the seed: no payload full-text search).
//
// # How the index follows the store
//
// The index is in memory and follows the event log, not the projections:
// syncIndex takes the events after the index's mark up to the committed
// sequence (Store.Sequence) and indexes every corpus.message.created among
// them. It takes them from the tail (indextail.go), the committed batches
// the store reported through Watch, already decoded, or, when the tail does
// not cover them, reads them from the log (Store.Since). So:
//
//   - it holds exactly the committed messages: Sequence advances only after a
//     commit, and an op that failed left no event; a projector's Apply may
//     still fail after it ran, which is why the index is never touched there;
//   - every path that stores a message is covered, local writes, events
//     ingested from peers, whatever comes later, with no hook in it: each
//     committed batch starts a sync in the background (indexAhead), so
//     writers do not wait for the index, and every search syncs first
//     (usually one atomic load), so a writer's next search finds its
//     message;
//   - a Rebuild does not disturb it (the log is never rewritten, and readers
//     see projections part-way rebuilt meanwhile), and a restart rebuilds it
//     from the log in New;
//   - the mark only moves forward, and only syncIndex (one at a time, under
//     syncMu) writes the index, so no message is indexed twice or skipped.
//
// Results are read from a cache of decoded messages (msgcache.go) that the
// index fills as it takes messages, or else from the projection p/co/m/; a
// message the projection lacks for the moment (a Rebuild in progress) is
// derived from its event.
//
// # Ranking
//
// Okapi BM25 (k1 1.2, b 0.75, Lucene's always-positive idf) summed over the
// query's distinct terms; a message matches when it holds at least one.
// score is the negated BM25 value, so results ascend by score as the seed
// says; ties go to the lower sequence. Filters decide eligibility only:
// idf and the average length are over the whole corpus, so a message's score
// does not depend on the filters. New messages shift idf, so offset pages
// over a growing corpus may overlap or skip; that is what relevance
// pagination means, and the seed warns it is no incremental feed.
//
// # Tokens
//
// Maximal runs of letters, digits and combining marks, lower-cased
// (Unicode simple case mapping); each Han, Hiragana or Katakana character is
// a token of its own, as those scripts do not separate words. A token is cut
// at 64 characters (the query is cut the same way). No stop words (idf makes
// them cheap and phrases like "to be or not to be" stay searchable) and no
// stemming.

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// maxTermRunes cuts longer tokens: hashes and base64 stay searchable by
	// their first 64 characters without bloating the dictionary.
	maxTermRunes = 64
	// maxQueryTerms bounds a query's cost; later distinct terms are ignored.
	maxQueryTerms = 64
	// syncChunk is how many events syncIndex reads at once.
	syncChunk = 512
	// maxTF saturates a term's count in one message (BM25 is flat there).
	maxTF = math.MaxUint8
)

// ---------------------------------------------------------------------------
// Tokens

func isIdeograph(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r)
}

// tokenize calls emit with each token of s, lower-cased, in a buffer emit
// must not keep.
func tokenize(s string, emit func(tok []byte)) {
	var buf [maxTermRunes * utf8.UTFMax]byte
	tok, n := buf[:0], 0
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf && ('a' <= r && r <= 'z' || '0' <= r && r <= '9'):
		case r < utf8.RuneSelf && 'A' <= r && r <= 'Z':
			r += 'a' - 'A'
		case r >= utf8.RuneSelf && isIdeograph(r):
			if len(tok) > 0 {
				emit(tok)
			}
			emit(utf8.AppendRune(buf[:0], r))
			tok, n = buf[:0], 0
			continue
		case r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) && n > 0):
			r = unicode.ToLower(r)
			if r == 'ς' {
				r = 'σ' // final sigma
			}
		default:
			if len(tok) > 0 {
				emit(tok)
				tok, n = buf[:0], 0
			}
			continue
		}
		if n < maxTermRunes {
			tok = utf8.AppendRune(tok, r)
			n++
		}
	}
	if len(tok) > 0 {
		emit(tok)
	}
}

// queryTerms is a query's distinct tokens, in order, at most maxQueryTerms.
func queryTerms(q string) []string {
	var out []string
	tokenize(q, func(tok []byte) {
		if len(out) < maxQueryTerms && !slices.Contains(out, string(tok)) {
			out = append(out, string(tok))
		}
	})
	return out
}

// ---------------------------------------------------------------------------
// The index

// postings are one term's messages, by ascending doc number.
type postings struct {
	docs []uint32
	tfs  []uint8
}

// searchDoc is what filters need of a message. Strings are interned: 0 is
// "none".
type searchDoc struct {
	seq      uint64
	id       string
	conv     uint32
	author   uint32
	kinds    uint8 // bit kindRank(k) per kind
	tags     []uint32
	mentions []uint32
}

// searchIndex is the in-memory inverted index. Searches hold mu for reading;
// syncIndex, the only writer, holds syncMu throughout and mu for writing
// only while it adds what it prepared (lock order: syncMu, then mu). So
// syncIndex may read the maps without mu: nobody else writes them.
type searchIndex struct {
	syncMu sync.Mutex

	mu     sync.RWMutex
	upTo   uint64 // every message with sequence <= upTo is indexed; written under both locks
	terms  map[string]uint32
	lists  []postings
	docs   []searchDoc
	lens   []uint32 // tokens per doc, apart from docs for the scoring loop's cache
	tokens uint64   // sum of lens
	names  map[string]uint32

	scratch sync.Pool // *searchScratch
}

func newSearchIndex() *searchIndex {
	return &searchIndex{terms: map[string]uint32{}, names: map[string]uint32{}}
}

// indexable is a message as the index takes it.
type indexable struct {
	seq                   uint64
	id, conv, author      string
	subject, content      string
	kinds, tags, mentions []string
}

// termFreq is a term of one message and its count there.
type termFreq struct {
	term uint32
	tf   uint8
}

// preparedDoc is a message analysed, ready to add.
type preparedDoc struct {
	m     *indexable
	terms []termFreq
	n     uint32
}

// prepare analyses messages outside mu. New terms get ids in fresh, in
// order after the existing ones.
func (x *searchIndex) prepare(ms []indexable, fresh map[string]uint32, freshOrder *[]string) []preparedDoc {
	out := make([]preparedDoc, 0, len(ms))
	var ids []uint32
	for i := range ms {
		m := &ms[i]
		ids = ids[:0]
		add := func(tok []byte) {
			id, ok := x.terms[string(tok)]
			if !ok {
				if id, ok = fresh[string(tok)]; !ok {
					id = uint32(len(x.lists) + len(fresh))
					fresh[string(tok)] = id
					*freshOrder = append(*freshOrder, string(tok))
				}
			}
			ids = append(ids, id)
		}
		tokenize(m.subject, add)
		tokenize(m.content, add)
		slices.Sort(ids)
		d := preparedDoc{m: m, n: uint32(len(ids))}
		for j := 0; j < len(ids); {
			k := j + 1
			for k < len(ids) && ids[k] == ids[j] {
				k++
			}
			d.terms = append(d.terms, termFreq{ids[j], uint8(min(k-j, maxTF))})
			j = k
		}
		out = append(out, d)
	}
	return out
}

// intern returns the number of a name, adding it; under mu.
func (x *searchIndex) intern(s string) uint32 {
	if n, ok := x.names[s]; ok {
		return n
	}
	n := uint32(len(x.names) + 1)
	x.names[s] = n
	return n
}

func (x *searchIndex) internAll(ss []string) []uint32 {
	if len(ss) == 0 {
		return nil
	}
	out := make([]uint32, len(ss))
	for i, s := range ss {
		out[i] = x.intern(s)
	}
	return out
}

// add indexes messages and moves the mark to upTo.
func (x *searchIndex) add(ms []indexable, upTo uint64) {
	fresh := map[string]uint32{}
	var order []string
	docs := x.prepare(ms, fresh, &order)
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, t := range order {
		x.terms[t] = fresh[t]
	}
	x.lists = append(x.lists, make([]postings, len(order))...)
	for _, d := range docs {
		no := uint32(len(x.docs))
		var kinds uint8
		for _, k := range d.m.kinds {
			if r := kindRank(k); r >= 0 {
				kinds |= 1 << r
			}
		}
		x.docs = append(x.docs, searchDoc{seq: d.m.seq, id: d.m.id, conv: x.intern(d.m.conv), author: x.intern(d.m.author),
			kinds: kinds, tags: x.internAll(d.m.tags), mentions: x.internAll(d.m.mentions)})
		x.lens = append(x.lens, d.n)
		x.tokens += uint64(d.n)
		for _, t := range d.terms {
			p := &x.lists[t.term]
			p.docs = append(p.docs, no)
			p.tfs = append(p.tfs, t.tf)
		}
	}
	x.upTo = max(x.upTo, upTo)
}

// searchFilter is the eligibility of a message; zero fields match all.
type searchFilter struct {
	conv, author, tag, mention uint32
	kinds                      uint8
	after                      uint64
	before                     uint64
	hasBefore                  bool
	none                       bool // a named filter value the corpus does not hold
}

func (f *searchFilter) active() bool {
	return f.conv != 0 || f.author != 0 || f.tag != 0 || f.mention != 0 || f.kinds != 0 || f.after != 0 || f.hasBefore
}

func (f *searchFilter) match(d *searchDoc) bool {
	return d.seq > f.after && (!f.hasBefore || d.seq < f.before) &&
		(f.conv == 0 || d.conv == f.conv) && (f.author == 0 || d.author == f.author) &&
		(f.kinds == 0 || d.kinds&f.kinds != 0) &&
		(f.tag == 0 || slices.Contains(d.tags, f.tag)) && (f.mention == 0 || slices.Contains(d.mentions, f.mention))
}

// searchQuery is a query as the index runs it.
type searchQuery struct {
	terms                      []string
	conv, author, tag, mention string
	kinds                      []string
	after, before              *uint64
}

// filter resolves the query's names; under mu.
func (x *searchIndex) filter(q *searchQuery) searchFilter {
	var f searchFilter
	name := func(s string) uint32 {
		if s == "" {
			return 0
		}
		n, ok := x.names[s]
		if !ok {
			f.none = true
		}
		return n
	}
	f.conv, f.author, f.tag, f.mention = name(q.conv), name(q.author), name(q.tag), name(q.mention)
	for _, k := range q.kinds {
		if r := kindRank(k); r >= 0 {
			f.kinds |= 1 << r
		}
	}
	if q.after != nil {
		f.after = *q.after
	}
	if q.before != nil {
		f.before, f.hasBefore = *q.before, true
	}
	return f
}

// hit is a scored message.
type hit struct {
	score float64 // BM25, higher is better
	seq   uint64
	doc   uint32
	id    string
}

// worse reports whether a ranks below b.
func worse(a, b *hit) bool { return a.score < b.score || a.score == b.score && a.seq > b.seq }

// topK keeps the k best hits in a heap whose root is the worst kept.
type topK struct {
	k int
	h []hit
}

func (t *topK) push(c hit) {
	if len(t.h) < t.k {
		t.h = append(t.h, c)
		for i := len(t.h) - 1; i > 0; {
			p := (i - 1) / 2
			if !worse(&t.h[i], &t.h[p]) {
				break
			}
			t.h[i], t.h[p] = t.h[p], t.h[i]
			i = p
		}
		return
	}
	if !worse(&t.h[0], &c) {
		return
	}
	t.h[0] = c
	for i, n := 0, len(t.h); ; {
		w, l, r := i, 2*i+1, 2*i+2
		if l < n && worse(&t.h[l], &t.h[w]) {
			w = l
		}
		if r < n && worse(&t.h[r], &t.h[w]) {
			w = r
		}
		if w == i {
			break
		}
		t.h[i], t.h[w] = t.h[w], t.h[i]
		i = w
	}
}

// best returns the kept hits, best first.
func (t *topK) best() []hit {
	slices.SortFunc(t.h, func(a, b hit) int {
		switch {
		case worse(&b, &a):
			return -1
		case worse(&a, &b):
			return 1
		}
		return 0
	})
	return t.h
}

// searchScratch is one search's accumulator: acc[doc] is the doc's score so
// far, 0 when untouched, negative when the filters refused it.
type searchScratch struct {
	acc     []float64
	touched []uint32
}

// run scores the eligible messages holding a query term and returns the
// best k, best first, and how many there are.
func (x *searchIndex) run(q *searchQuery, k int) (hits []hit, total int) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	f := x.filter(q)
	if f.none || len(x.docs) == 0 {
		return nil, 0
	}
	filtered := f.active()
	sc, _ := x.scratch.Get().(*searchScratch)
	if sc == nil {
		sc = &searchScratch{}
	}
	if len(sc.acc) < len(x.docs) {
		sc.acc = make([]float64, len(x.docs)+len(x.docs)/8)
	}
	acc, touched := sc.acc, sc.touched[:0]
	n := float64(len(x.docs))
	avg := float64(x.tokens) / n
	if avg == 0 {
		avg = 1
	}
	c1, c2 := bm25K1*(1-bm25B), bm25K1*bm25B/avg
	for _, t := range q.terms {
		id, ok := x.terms[t]
		if !ok {
			continue
		}
		p := &x.lists[id]
		df := float64(len(p.docs))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		w := idf * (bm25K1 + 1)
		for i, d := range p.docs {
			a := acc[d]
			if a < 0 {
				continue
			}
			if a == 0 {
				touched = append(touched, d)
				if filtered && !f.match(&x.docs[d]) {
					acc[d] = -1
					continue
				}
			}
			tf := float64(p.tfs[i])
			acc[d] = a + w*tf/(tf+c1+c2*float64(x.lens[d]))
		}
	}
	top := topK{k: k, h: make([]hit, 0, min(k, len(touched), 1024))}
	for _, d := range touched {
		s := acc[d]
		acc[d] = 0
		if s <= 0 {
			continue
		}
		total++
		// A full heap takes only a hit at least as good as its worst; test
		// the score before reading the doc's sequence (needed for ties
		// only), since for a common term that read is a cache miss for
		// nearly every message of the corpus, most of a query's time.
		if len(top.h) == top.k && len(top.h) > 0 && s < top.h[0].score {
			continue
		}
		top.push(hit{score: s, seq: x.docs[d].seq, doc: d})
	}
	sc.touched = touched
	x.scratch.Put(sc)
	hits = top.best()
	for i := range hits {
		hits[i].id = x.docs[hits[i].doc].id
	}
	return hits, total
}

// ---------------------------------------------------------------------------
// Following the store

// syncIndex indexes the messages committed since the index's mark; see the
// comment at the top of this file.
func (s *Service) syncIndex() error {
	x := s.index
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	for {
		target := s.st.Sequence()
		if x.upTo >= target {
			return nil
		}
		if evs, mark, ok := s.tail.take(x.upTo, target); ok {
			x.add(s.indexables(evs), mark)
			continue
		}
		evs, err := s.st.Since(x.upTo, syncChunk)
		if err != nil {
			return err
		}
		mark := target
		if len(evs) == syncChunk && evs[len(evs)-1].Sequence < target {
			mark = evs[len(evs)-1].Sequence // more to read
		}
		for i, se := range evs {
			if se.Sequence > mark {
				evs = evs[:i]
				break
			}
		}
		x.add(s.indexables(evs), mark)
	}
}

// indexables is the messages among evs, as the index takes them; the
// message cache takes them too.
func (s *Service) indexables(evs []*store.StoredEvent) []indexable {
	var ms []indexable
	var cached []*cachedMessage
	for _, se := range evs {
		m, d, ok := s.indexableOf(se)
		if !ok {
			continue
		}
		ms = append(ms, m)
		if s.msgs != nil {
			if dm, ok := derivedMessage(se, d); ok {
				cached = append(cached, &cachedMessage{m: dm})
			}
		}
	}
	s.msgs.setMany(cached)
	return ms
}

func (s *Service) indexableOf(se *store.StoredEvent) (indexable, messageData, bool) {
	var d messageData
	if se.Event.Type != evMessageCreated {
		return indexable{}, d, false
	}
	if err := protocol.DecodeData(se.Event.Data, &d); err != nil {
		// The projector refuses what does not decode, and with it the event.
		s.log.Error("corpus search: undecodable message event", "sequence", se.Sequence, "err", err)
		return indexable{}, d, false
	}
	m := indexable{seq: se.Sequence, id: d.MessageID, conv: d.ConversationID, author: se.Event.Author,
		subject: d.Subject, kinds: d.Kind, tags: d.Tags, mentions: d.Mentions}
	if d.Content != nil {
		m.content = *d.Content
	}
	return m, d, true
}

// ---------------------------------------------------------------------------
// The operation

type searchIn struct {
	Q              string   `json:"q,omitempty" jsonschema:"the words to look for; required and non-empty (query is accepted as its alias)"`
	Query          string   `json:"query,omitempty" jsonschema:"alias of q"`
	ConversationID string   `json:"conversation_id,omitempty"`
	AuthorID       string   `json:"author_id,omitempty"`
	Tag            string   `json:"tag,omitempty"`
	Kinds          []string `json:"kinds,omitempty" jsonschema:"repeatable; OR among kinds"`
	MentionedAgent string   `json:"mentioned_agent,omitempty"`
	After          *uint64  `json:"after,omitempty" jsonschema:"exclusive lower sequence bound on eligible messages; does not change the order"`
	Before         *uint64  `json:"before,omitempty" jsonschema:"exclusive upper sequence bound on eligible messages"`
	Limit          *int     `json:"limit,omitempty" jsonschema:"1..1000, default 100"`
	Offset         *int     `json:"offset,omitempty" jsonschema:"results to skip in relevance order; 0 or more, default 0"`
}

// SearchResult is one message found, with its relevance.
type SearchResult struct {
	Message Message `json:"message"`
	Score   float64 `json:"score" jsonschema:"the negated BM25 relevance: smaller is more relevant; results ascend by score, ties by sequence"`
}

// SearchOut is a page of search results.
type SearchOut struct {
	Results    []SearchResult `json:"results" jsonschema:"in relevance order (score ascending), not by sequence"`
	Total      int            `json:"total" jsonschema:"eligible messages holding at least one of the query's terms"`
	Limit      int            `json:"limit"`
	Offset     int            `json:"offset"`
	NextCursor *uint64        `json:"next_cursor" jsonschema:"the sequence of the last result of this page, not the page's highest; null on an empty page. Not an offset: page with next"`
	Next       *string        `json:"next" jsonschema:"the next page in relevance order: the same query with offset advanced; null on the last page"`
	NextOffset *int           `json:"next_offset" jsonschema:"the offset of the next page; null on the last page"`
	page       page
}

// HTTPHeaders carries X-Next-Cursor and the Link to the next page.
func (o SearchOut) HTTPHeaders() http.Header { return o.page.headers() }

func (s *Service) registerSearch(reg *api.Registry) {
	reg.Add(corpusOp(api.Define("search", http.MethodGet, "/search",
		"Lexical search of messages (content, and the subject on a conversation's first message), by BM25 relevance, score ascending; filters and offset pages.",
		api.Public, s.search), "search"))
}

func (s *Service) search(ctx context.Context, c *api.Call, in searchIn) (SearchOut, error) {
	text := in.Q
	if strings.TrimSpace(text) == "" {
		text = in.Query
	}
	if strings.TrimSpace(text) == "" {
		return SearchOut{}, invalid("q is required and must be non-empty.").With("field", "q")
	}
	limit, err := limitOf(in.Limit)
	if err != nil {
		return SearchOut{}, err
	}
	offset := 0
	if in.Offset != nil {
		if offset = *in.Offset; offset < 0 {
			return SearchOut{}, invalid("offset must be 0 or more.").With("field", "offset")
		}
	}
	if in.Kinds, err = kindsFilter(in.Kinds); err != nil {
		return SearchOut{}, err
	}
	if err := s.syncIndex(); err != nil {
		return SearchOut{}, err
	}
	q := searchQuery{terms: queryTerms(text), conv: in.ConversationID, author: in.AuthorID, tag: in.Tag,
		mention: in.MentionedAgent, kinds: in.Kinds, after: in.After, before: in.Before}
	k := limit + min(offset, math.MaxInt-limit)
	hits, total := s.index.run(&q, k)
	out := SearchOut{Results: []SearchResult{}, Total: total, Limit: limit, Offset: offset}
	if offset < len(hits) {
		hits = hits[offset:]
	} else {
		hits = nil
	}
	ms, err := s.resultMessages(hits)
	if err != nil {
		return SearchOut{}, err
	}
	out.Results = make([]SearchResult, len(hits))
	for i, h := range hits {
		out.Results[i] = SearchResult{Message: ms[i].m, Score: -h.score}
	}
	if n := len(out.Results); n > 0 {
		last := out.Results[n-1].Message.Sequence
		out.NextCursor = &last
		out.page.next = &last
	}
	if offset < total-limit {
		next := offset + limit
		link := searchLink(text, &in, limit, next)
		out.NextOffset, out.Next, out.page.link = &next, &link, link
	}
	return out, nil
}

// resultMessages reads the messages of hits: those the cache holds, then
// the others in one View, which the cache keeps for later searches.
func (s *Service) resultMessages(hits []hit) ([]*cachedMessage, error) {
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.id
	}
	ms := make([]*cachedMessage, len(hits))
	if s.msgs.getMany(ids, ms) == len(hits) {
		return ms, nil
	}
	var read []*cachedMessage
	err := s.st.View(func(tx *store.Tx) error {
		for i, h := range hits {
			if ms[i] != nil {
				continue
			}
			c := new(cachedMessage)
			ok, err := readMessage(tx, []byte(h.id), &c.m)
			if err != nil {
				return err
			}
			if !ok {
				if c.m, err = s.messageAt(h.seq); err != nil {
					return err
				}
			}
			ms[i] = c
			read = append(read, c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.msgs.addMany(read)
	return ms, nil
}

// messageAt derives the message of the event at sequence seq, for a result
// the projection does not hold while a Rebuild runs.
func (s *Service) messageAt(seq uint64) (Message, error) {
	evs, err := s.st.Since(seq-1, 1)
	if err != nil {
		return Message{}, err
	}
	if len(evs) == 0 || evs[0].Sequence != seq {
		return Message{}, errors.New("corpus search: indexed event not in the log")
	}
	var d messageData
	if err := protocol.DecodeData(evs[0].Event.Data, &d); err != nil {
		return Message{}, err
	}
	return messageOf(evs[0], d), nil
}

// searchLink is the URL of another page of the same search.
func searchLink(q string, in *searchIn, limit, offset int) string {
	v := url.Values{"q": {q}}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("conversation_id", in.ConversationID)
	set("author_id", in.AuthorID)
	set("tag", in.Tag)
	set("mentioned_agent", in.MentionedAgent)
	if in.After != nil {
		v.Set("after", strconv.FormatUint(*in.After, 10))
	}
	if in.Before != nil {
		v.Set("before", strconv.FormatUint(*in.Before, 10))
	}
	v["kinds"] = in.Kinds
	v.Set("limit", strconv.Itoa(limit))
	v.Set("offset", strconv.Itoa(offset))
	return "/search?" + v.Encode()
}
