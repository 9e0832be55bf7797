package realm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ---------------------------------------------------------------------------
// Helpers: NDJSON pages, polling.

// eventually polls cond until it holds or wait passes.
func eventually(t *testing.T, wait time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// get sends a GET and returns status, body and headers.
func (tn *testNode) get(t *testing.T, path string, header http.Header) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest("GET", tn.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}

// ndjson reads an NDJSON page: every line one JSON object.
func (tn *testNode) ndjson(t *testing.T, path string) ([]map[string]any, http.Header) {
	t.Helper()
	status, body, hdr := tn.get(t, path, nil)
	if status != 200 {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	if hdr.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("GET %s: Content-Type %q", path, hdr.Get("Content-Type"))
	}
	var out []map[string]any
	for _, line := range bytes.Split(body, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("GET %s: line %q: %v", path, line, err)
		}
		out = append(out, m)
	}
	if len(body) > 0 && body[len(body)-1] != '\n' {
		t.Fatalf("GET %s: the last line is not terminated", path)
	}
	return out, hdr
}

// allChanges reads the whole change feed after a cursor, page by page.
func (tn *testNode) allChanges(t *testing.T, after uint64, limit int) []map[string]any {
	t.Helper()
	var all []map[string]any
	for {
		page, hdr := tn.ndjson(t, fmt.Sprintf("/corpus/changes.jsonl?after=%d&limit=%d", after, limit))
		if len(page) == 0 {
			if hdr.Get("X-Next-Cursor") != strconv.FormatUint(after, 10) {
				t.Fatalf("empty page after %d: X-Next-Cursor %q", after, hdr.Get("X-Next-Cursor"))
			}
			return all
		}
		all = append(all, page...)
		after = seqOf(page[len(page)-1])
		if hdr.Get("X-Next-Cursor") != strconv.FormatUint(after, 10) {
			t.Fatalf("X-Next-Cursor %q, last sequence %d", hdr.Get("X-Next-Cursor"), after)
		}
	}
}

func seqOf(m map[string]any) uint64 { return uint64(m["sequence"].(float64)) }

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

// ---------------------------------------------------------------------------
// A reader's copy of the corpus, built from a snapshot and changes.

type mirror struct {
	conversations, messages, relationships, retractions map[string]map[string]any
	applied                                             []uint64
}

func newMirror() *mirror {
	return &mirror{conversations: map[string]map[string]any{}, messages: map[string]map[string]any{},
		relationships: map[string]map[string]any{}, retractions: map[string]map[string]any{}}
}

var exportKeys = []string{"conversations", "messages", "relationships", "relationship_retractions"}

func (m *mirror) table(export string) (map[string]map[string]any, string) {
	switch export {
	case "conversations":
		return m.conversations, "conversation_id"
	case "messages":
		return m.messages, "message_id"
	case "relationships":
		return m.relationships, "relationship_id"
	}
	return m.retractions, "retraction_id"
}

// readSnapshot reads every page of every export of the snapshot whose
// first page is first, checking each record stood at S. between runs
// between pages.
func (tn *testNode) readSnapshot(t *testing.T, first map[string]any, between func()) *mirror {
	t.Helper()
	m := newMirror()
	s := first["snapshot_sequence"].(float64)
	for _, export := range exportKeys {
		page := asMap(first[export])
		if page == nil {
			t.Fatalf("first page lacks %s: %v", export, first)
		}
		for {
			tbl, idKey := m.table(export)
			for _, v := range page["items"].([]any) {
				rec := asMap(v)
				for _, k := range []string{"sequence", "created_sequence", "last_sequence"} {
					if n, ok := rec[k].(float64); ok && n > s {
						t.Fatalf("%s record with %s %v past S=%v", export, k, n, s)
					}
				}
				id := rec[idKey].(string)
				if tbl[id] != nil {
					t.Fatalf("%s %s twice in the snapshot", export, id)
				}
				tbl[id] = rec
			}
			if page["has_more"] != true {
				break
			}
			next, _ := page["next"].(string)
			if next == "" || !strings.Contains(next, "at="+strconv.FormatFloat(s, 'f', -1, 64)) {
				t.Fatalf("next page %q does not keep at", next)
			}
			if between != nil {
				between()
			}
			status, out := tn.do(t, "GET", next, "", nil)
			if status != 200 || out["snapshot_sequence"] != s {
				t.Fatalf("GET %s: %d %v", next, status, out)
			}
			for _, other := range exportKeys {
				if other != export && out[other] != nil {
					t.Fatalf("an export page carries %s too", other)
				}
			}
			page = asMap(out[export])
		}
	}
	return m
}

// apply applies one change envelope, refusing duplicates and disorder.
func (m *mirror) apply(t testing.TB, env map[string]any) {
	t.Helper()
	seq := seqOf(env)
	if n := len(m.applied); n > 0 && seq <= m.applied[n-1] {
		t.Fatalf("change %d after %d: duplicate or out of order", seq, m.applied[n-1])
	}
	m.applied = append(m.applied, seq)
	if env["schema_version"] != float64(1) || env["recorded_at"] == nil {
		t.Fatalf("envelope %v", env)
	}
	d := asMap(env["data"])
	switch env["event_type"] {
	case "message.created":
		id := d["message_id"].(string)
		if m.messages[id] != nil || env["resource_id"] != id {
			t.Fatalf("message %s: duplicate or wrong resource_id", id)
		}
		msg := map[string]any{}
		for k, v := range d {
			if k != "subject" {
				msg[k] = v
			}
		}
		m.messages[id] = msg
		conv := d["conversation_id"].(string)
		if subj, ok := d["subject"]; ok {
			if m.conversations[conv] != nil {
				t.Fatalf("conversation %s created twice", conv)
			}
			m.conversations[conv] = map[string]any{"conversation_id": conv, "subject": subj, "root_message_id": id, "author_id": d["author_id"],
				"created_at": d["created_at"], "updated_at": d["created_at"], "message_count": float64(1), "created_sequence": d["sequence"],
				"last_sequence": d["sequence"], "realm": d["realm"], "cid": d["cid"]}
			return
		}
		c := m.conversations[conv]
		if c == nil {
			t.Fatalf("message %s appends to unknown conversation %s", id, conv)
		}
		c["message_count"] = c["message_count"].(float64) + 1
		c["updated_at"], c["last_sequence"] = d["created_at"], d["sequence"]
	case "relationship.asserted":
		if _, ok := d["author_is_target_author"]; ok {
			t.Fatal("a change carries a read-derived field")
		}
		id := d["relationship_id"].(string)
		if m.relationships[id] != nil {
			t.Fatalf("relationship %s twice", id)
		}
		r := map[string]any{"state": "active"}
		for k, v := range d {
			r[k] = v
		}
		if d["relationship_type"] == "supersedes" {
			r["author_is_target_author"] = asMap(m.messages[d["target_message_id"].(string)])["author_id"] == d["author_id"]
		}
		m.relationships[id] = r
	case "relationship.retracted":
		id := d["retraction_id"].(string)
		r := m.relationships[d["relationship_id"].(string)]
		if m.retractions[id] != nil || r == nil || r["state"] != "active" {
			t.Fatalf("retraction %s: duplicate or of an unknown or retracted relationship", id)
		}
		m.retractions[id] = d
		r["state"], r["retraction_id"] = "retracted", id
	default:
		t.Fatalf("event_type %v", env["event_type"])
	}
}

// diff reports the first difference between two mirrors.
func (m *mirror) diff(o *mirror) string {
	for _, export := range exportKeys {
		a, _ := m.table(export)
		b, _ := o.table(export)
		if len(a) != len(b) {
			return fmt.Sprintf("%s: %d records, want %d", export, len(a), len(b))
		}
		for id, rec := range b {
			if toJSON(a[id]) != toJSON(rec) {
				return fmt.Sprintf("%s %s:\n got %s\nwant %s", export, id, toJSON(a[id]), toJSON(rec))
			}
		}
	}
	return ""
}

// ---------------------------------------------------------------------------
// Writers that keep writing while a reader syncs.

type corpusLoad struct {
	tn     *testNode
	mu     sync.Mutex
	convs  []string
	msgs   []string
	rels   map[string][]string // by author: active relationships
	writes atomic.Int64
	errs   chan error
}

func (l *corpusLoad) post(a corpusAgent, path, token string, body any) (int, map[string]any, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", l.tn.srv.URL+"/"+a.endpoint+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+a.id)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Operation-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, nil
}

func (l *corpusLoad) pick(s []string, r *rand.Rand) string { return s[r.Intn(len(s))] }

// writer writes until stop closes or it has written max times.
func (l *corpusLoad) writer(a corpusAgent, seed int64, max int, stop <-chan struct{}) {
	r := rand.New(rand.NewSource(seed))
	types := []string{"replies-to", "contradicts", "extends", "supersedes", "supports"}
	for i := 0; i < max; i++ {
		select {
		case <-stop:
			return
		default:
		}
		tok := fmt.Sprintf("%s-%d-%d", a.author, seed, i)
		l.mu.Lock()
		nConvs, nMsgs, own := len(l.convs), len(l.msgs), l.rels[a.author]
		var conv, src, tgt, rel string
		if nConvs > 0 {
			conv = l.pick(l.convs, r)
		}
		if nMsgs > 1 {
			src, tgt = l.pick(l.msgs, r), l.pick(l.msgs, r)
		}
		if len(own) > 0 {
			rel = own[r.Intn(len(own))]
		}
		l.mu.Unlock()
		var path string
		var body any
		switch p := r.Intn(100); {
		case p < 15 || conv == "":
			path, body = "/createConversation", map[string]any{"subject": "s " + tok, "content": "first " + tok, "kind": []string{"claim"}}
		case p < 65 || src == tgt:
			path, body = "/appendToConversation/"+conv, map[string]any{"content": "reply " + tok, "tags": []string{"t" + strconv.Itoa(r.Intn(3))}}
		case p < 90 || rel == "":
			path, body = "/createRelationship", map[string]any{"source_message_id": src, "target_message_id": tgt, "relationship_type": types[r.Intn(len(types))]}
		default:
			path, body = "/retractRelationship/"+rel, map[string]any{}
		}
		status, out, err := l.post(a, path, tok, body)
		switch {
		case err != nil:
			l.errs <- err
			return
		case status == 409 && strings.HasPrefix(path, "/createRelationship"):
			continue // the same author's identical active assertion
		case status != 201:
			l.errs <- fmt.Errorf("%s: %d %v", path, status, out)
			return
		}
		l.mu.Lock()
		switch {
		case path == "/createConversation":
			l.convs = append(l.convs, out["conversation_id"].(string))
			l.msgs = append(l.msgs, out["message_id"].(string))
		case strings.HasPrefix(path, "/appendToConversation/"):
			l.msgs = append(l.msgs, out["message_id"].(string))
		case path == "/createRelationship":
			l.rels[a.author] = append(l.rels[a.author], field(out, "relationship", "relationship_id").(string))
		default:
			rs := l.rels[a.author]
			for i, id := range rs {
				if id == rel {
					l.rels[a.author] = append(rs[:i:i], rs[i+1:]...)
					break
				}
			}
		}
		l.mu.Unlock()
		l.writes.Add(1)
	}
}

// ---------------------------------------------------------------------------
// The sync contract: snapshot at S while writers write, then changes after S
// and the stream (killed and resumed with Last-Event-ID), ends with exactly
// the node's corpus, with no duplicate and no gap.

func TestCorpusSyncWhileWriting(t *testing.T) {
	tn := startNode(t, "ainotes")
	load := &corpusLoad{tn: tn, rels: map[string][]string{}, errs: make(chan error, 16)}
	var agents []corpusAgent
	for range 4 {
		agents = append(agents, tn.registerAgent(t, true))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Some corpus before the reader comes, then writers that keep going.
	for i, a := range agents {
		load.writer(a, int64(100+i), 6, stop)
	}
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			load.writer(a, int64(i), 250, stop)
		}()
	}
	stopWriters := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopWriters()
	moreWrites := func(n int64) {
		t.Helper()
		want := load.writes.Load() + n
		eventually(t, 20*time.Second, "writes", func() bool {
			select {
			case err := <-load.errs:
				t.Fatalf("writer: %v", err)
			default:
			}
			return load.writes.Load() >= want
		})
	}

	// The snapshot, with writes between its pages.
	status, first := tn.do(t, "GET", "/corpus/snapshot.json?limit=5", "", nil)
	if status != 200 {
		t.Fatalf("snapshot: %d %v", status, first)
	}
	s := uint64(first["snapshot_sequence"].(float64))
	if first["changes"] != "/corpus/changes.jsonl?after="+strconv.FormatUint(s, 10) {
		t.Fatalf("changes link %v", first["changes"])
	}
	m := tn.readSnapshot(t, first, func() { moreWrites(2) })
	if len(m.messages) == 0 || len(m.conversations) == 0 || len(m.relationships) == 0 {
		t.Fatalf("a thin snapshot: %d conversations, %d messages, %d relationships", len(m.conversations), len(m.messages), len(m.relationships))
	}
	if tn.Store().Sequence() <= s {
		t.Fatal("nothing was written while the snapshot was read")
	}

	// The change feed after S, in small pages, until an empty page.
	moreWrites(10)
	after := s
	for {
		page, hdr := tn.ndjson(t, fmt.Sprintf("/corpus/changes.jsonl?after=%d&limit=7", after))
		if len(page) == 0 {
			if hdr.Get("X-Next-Cursor") != strconv.FormatUint(after, 10) {
				t.Fatalf("empty page: X-Next-Cursor %q, want %d", hdr.Get("X-Next-Cursor"), after)
			}
			break
		}
		for _, env := range page {
			m.apply(t, env)
		}
		after = seqOf(page[len(page)-1])
	}

	// The stream from there, killed mid-way and resumed with Last-Event-ID
	// while writers went on.
	c := tn.openStream(t, "?after="+strconv.FormatUint(after, 10), nil)
	var lastID string
	for range 15 {
		ev := c.next(t, 10*time.Second)
		m.apply(t, ev.envelope(t))
		lastID = ev.id
	}
	c.close()
	moreWrites(15)
	c = tn.openStream(t, "", http.Header{"Last-Event-ID": {lastID}})
	for range 10 {
		m.apply(t, c.next(t, 10*time.Second).envelope(t))
	}
	stopWriters()
	select {
	case err := <-load.errs:
		t.Fatalf("writer: %v", err)
	default:
	}

	// Every change after S, once and in order; then exactly the corpus.
	want := tn.allChanges(t, s, 1000)
	last := seqOf(want[len(want)-1])
	for m.applied[len(m.applied)-1] < last {
		m.apply(t, c.next(t, 10*time.Second).envelope(t))
	}
	if len(m.applied) != len(want) {
		t.Fatalf("applied %d changes after S, the feed has %d", len(m.applied), len(want))
	}
	for i, env := range want {
		if m.applied[i] != seqOf(env) {
			t.Fatalf("change %d: applied %d, the feed has %d", i, m.applied[i], seqOf(env))
		}
	}
	status, final := tn.do(t, "GET", "/corpus/snapshot.json?limit=1000", "", nil)
	if status != 200 || uint64(final["snapshot_sequence"].(float64)) < last {
		t.Fatalf("final snapshot: %d %v", status, final["snapshot_sequence"])
	}
	if d := m.diff(tn.readSnapshot(t, final, nil)); d != "" {
		t.Fatalf("snapshot at S + changes after S is not the corpus: %s", d)
	}
	var retracted int
	for _, r := range m.relationships {
		if r["state"] == "retracted" {
			retracted++
		}
	}
	t.Logf("S=%d, %d changes after S; %d conversations, %d messages, %d relationships (%d retracted)",
		s, len(want), len(m.conversations), len(m.messages), len(m.relationships), retracted)
}

// ---------------------------------------------------------------------------
// Cursors of the change feed.

func TestCorpusChangesCursors(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	_, c1, _ := tn.write(t, a, "/createConversation", "1", map[string]any{"subject": "S", "content": "<first> & co"})
	conv := c1["conversation_id"].(string)
	// A Parley event between corpus changes leaves a gap in their sequences.
	tn.post(t, tn.issue(t, "parley", "write"), "/api/v1/boards/1/threads", map[string]any{"kind": "note", "body": "a gap"})
	_, m2, _ := tn.write(t, a, "/appendToConversation/"+conv, "2", map[string]any{"content": "second"})
	_, r3, _ := tn.write(t, a, "/createRelationship", "3", map[string]any{"source_message_id": m2["message_id"], "target_message_id": c1["message_id"], "relationship_type": "supersedes"})
	rel := field(r3, "relationship", "relationship_id").(string)
	_, x4, _ := tn.write(t, a, "/retractRelationship/"+rel, "4", map[string]any{})
	s1, s2 := uint64(c1["sequence"].(float64)), uint64(m2["sequence"].(float64))
	s3, s4 := uint64(field(r3, "relationship", "sequence").(float64)), uint64(field(x4, "retraction", "sequence").(float64))
	if s2 != s1+2 {
		t.Fatalf("sequences %d, %d: no gap for the Parley event", s1, s2)
	}

	all, hdr := tn.ndjson(t, "/corpus/changes.jsonl")
	if len(all) != 4 || hdr.Get("X-Next-Cursor") != strconv.FormatUint(s4, 10) || hdr.Get("X-Has-More") != "false" || hdr.Get("Link") != "" {
		t.Fatalf("whole feed: %d changes, %v", len(all), hdr)
	}
	types := []string{"message.created", "message.created", "relationship.asserted", "relationship.retracted"}
	ids := []any{c1["message_id"], m2["message_id"], rel, field(x4, "retraction", "retraction_id")}
	for i, env := range all {
		if env["event_type"] != types[i] || env["resource_id"] != ids[i] || env["schema_version"] != float64(1) || env["recorded_at"] == nil {
			t.Fatalf("change %d: %v", i, env)
		}
		if _, ok := asMap(env["data"])["author_is_target_author"]; ok {
			t.Fatal("a change carries author_is_target_author")
		}
	}
	if field(all[0], "data", "subject") != "S" || field(all[0], "data", "content") != "<first> & co" {
		t.Fatalf("first change: %v", all[0])
	}
	// The envelope is written as stored, without HTML escapes.
	_, raw, _ := tn.get(t, "/corpus/changes.jsonl?limit=1", nil)
	if !bytes.Contains(raw, []byte("<first> & co")) {
		t.Fatalf("escaped: %s", raw)
	}

	seqs := func(path string) (string, http.Header) {
		page, hdr := tn.ndjson(t, path)
		var out []string
		for _, env := range page {
			out = append(out, strconv.FormatUint(seqOf(env), 10))
		}
		return strings.Join(out, ","), hdr
	}
	u := func(n uint64) string { return strconv.FormatUint(n, 10) }
	for _, tc := range []struct{ query, want, cursor string }{
		{"?after=" + u(s1), u(s2) + "," + u(s3) + "," + u(s4), u(s4)},   // after is exclusive
		{"?after=" + u(s1+1), u(s2) + "," + u(s3) + "," + u(s4), u(s4)}, // a cursor in a gap
		{"?before=" + u(s3), u(s1) + "," + u(s2), u(s2)},                // before is exclusive
		{"?at=" + u(s3), u(s1) + "," + u(s2) + "," + u(s3), u(s3)},      // at is inclusive
		{"?after=" + u(s1) + "&at=" + u(s2), u(s2), u(s2)},              // after and at
		{"?after=" + u(s2) + "&before=" + u(s3), "", u(s2)},             // empty: keeps the cursor
		{"?after=" + u(s4), "", u(s4)},                                  // at the end
		{"?after=" + u(s4+1000), "", u(s4 + 1000)},                      // past the end
		{"?before=0", "", "0"},                                          // nothing before 0
		{"?at=" + u(s1) + "&before=" + u(s4), u(s1), u(s1)},             // the lower bound wins
		{"?after=" + u(s1) + "&limit=2", u(s2) + "," + u(s3), u(s3)},    // a full page
	} {
		got, hdr := seqs("/corpus/changes.jsonl" + tc.query)
		if got != tc.want || hdr.Get("X-Next-Cursor") != tc.cursor {
			t.Errorf("%s: %q cursor %q, want %q cursor %q", tc.query, got, hdr.Get("X-Next-Cursor"), tc.want, tc.cursor)
		}
	}
	// Pages of one follow Link to the end, through the gap.
	var chain []string
	next := "/corpus/changes.jsonl?limit=1&at=" + u(s3)
	for next != "" {
		got, hdr := seqs(next)
		chain = append(chain, got)
		next = ""
		if l := hdr.Get("Link"); l != "" {
			next = strings.TrimSuffix(strings.TrimPrefix(l, "<"), `>; rel="next"`)
			if hdr.Get("X-Has-More") != "true" || !strings.Contains(next, "at="+u(s3)) {
				t.Fatalf("Link %q with X-Has-More %q", l, hdr.Get("X-Has-More"))
			}
		}
	}
	if strings.Join(chain, ",") != u(s1)+","+u(s2)+","+u(s3) {
		t.Fatalf("the Link chain: %v", chain)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?after=-1", "?after=x", "?at=1.5"} {
		status, body, _ := tn.get(t, "/corpus/changes.jsonl"+q, nil)
		if status != 400 || !bytes.Contains(body, []byte(`"code":"invalid_request"`)) {
			t.Errorf("%s: %d %s", q, status, body)
		}
	}
	// NDJSON is a native format: incompatible Accept headers are refused.
	for accept, want := range map[string]int{
		"": 200, "*/*": 200, "application/x-ndjson": 200, "application/*": 200, "application/jsonl": 200,
		"text/html, */*;q=0.1": 200, "application/json": 406, "text/markdown": 406, "application/x-ndjson;q=0, */*": 406,
	} {
		status, body, _ := tn.get(t, "/corpus/changes.jsonl", http.Header{"Accept": {accept}})
		if status != want || (want == 406 && !bytes.Contains(body, []byte(`"code":"not_acceptable"`))) {
			t.Errorf("Accept %q: %d %s", accept, status, body)
		}
	}
	if status, body, _ := tn.get(t, "/corpus/changes.jsonl", http.Header{"Authorization": {"Bearer rla_1_nope"}}); status != 401 {
		t.Errorf("a bad credential: %d %s", status, body)
	}
	// The catalog runs it too, as JSON.
	_, out := tn.do(t, "POST", "/api/v1/operations/get_corpus_changes_jsonl", tn.operator, map[string]any{"arguments": map[string]any{"after": s3}})
	if res := asMap(out["result"]); len(res["changes"].([]any)) != 1 || res["next_cursor"] != float64(s4) {
		t.Fatalf("call_api_operation: %v", out)
	}
}

// ---------------------------------------------------------------------------
// The snapshot at a fixed S.

func TestCorpusSnapshotAtS(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	b := tn.registerAgent(t, true)
	_, c1, _ := tn.write(t, a, "/createConversation", "1", map[string]any{"subject": "S", "content": "one", "kind": []string{"claim"}})
	conv := c1["conversation_id"].(string)
	_, m2, _ := tn.write(t, b, "/appendToConversation/"+conv, "1", map[string]any{"content": "two"})
	_, r, _ := tn.write(t, b, "/createRelationship", "2", map[string]any{"source_message_id": m2["message_id"], "target_message_id": c1["message_id"], "relationship_type": "supersedes"})
	rel := field(r, "relationship", "relationship_id").(string)

	_, first := tn.do(t, "GET", "/corpus/snapshot.json", "", nil)
	s := uint64(first["snapshot_sequence"].(float64))
	if s != tn.Store().Sequence() || first["realm"] != "ainotes" || first["schema_version"] != float64(1) || first["stream"] != "/corpus/stream?after="+strconv.FormatUint(s, 10) {
		t.Fatalf("first page: %v", first)
	}
	// After S: more messages, a new conversation, the retraction.
	tn.write(t, a, "/appendToConversation/"+conv, "3", map[string]any{"content": "three"})
	tn.write(t, b, "/retractRelationship/"+rel, "4", map[string]any{})
	tn.write(t, a, "/createConversation", "5", map[string]any{"subject": "later", "content": "after S"})

	at := func(export string) []any {
		status, out := tn.do(t, "GET", fmt.Sprintf("/corpus/snapshot.json?at=%d&export=%s", s, export), "", nil)
		if status != 200 || out["snapshot_sequence"] != float64(s) {
			t.Fatalf("%s at S: %d %v", export, status, out)
		}
		return asMap(out[export])["items"].([]any)
	}
	convs := at("conversations")
	if len(convs) != 1 || asMap(convs[0])["message_count"] != float64(2) || asMap(convs[0])["last_sequence"] != m2["sequence"] ||
		asMap(convs[0])["updated_at"] != field(m2, "message", "created_at") {
		t.Fatalf("conversations at S: %v", convs)
	}
	if toJSON(convs) != toJSON(asMap(first["conversations"])["items"]) {
		t.Fatalf("the conversation changed under S:\n%v\n%v", convs, asMap(first["conversations"])["items"])
	}
	if msgs := at("messages"); len(msgs) != 2 {
		t.Fatalf("messages at S: %v", msgs)
	}
	rels := at("relationships")
	if len(rels) != 1 || asMap(rels[0])["state"] != "active" || asMap(rels[0])["retraction_id"] != nil || asMap(rels[0])["author_is_target_author"] != false {
		t.Fatalf("relationships at S: %v", rels)
	}
	if xs := at("relationship_retractions"); len(xs) != 0 {
		t.Fatalf("retractions at S: %v", xs)
	}
	// Now: what came after S is there.
	_, now := tn.do(t, "GET", "/corpus/snapshot.json", "", nil)
	if n := len(asMap(now["conversations"])["items"].([]any)); n != 2 {
		t.Fatalf("conversations now: %d", n)
	}
	if r := asMap(asMap(now["relationships"])["items"].([]any)[0]); r["state"] != "retracted" || len(asMap(now["relationship_retractions"])["items"].([]any)) != 1 {
		t.Fatalf("relationships now: %v", now)
	}
	// Pages of one: next links keep S and limit.
	_, p := tn.do(t, "GET", fmt.Sprintf("/corpus/snapshot.json?at=%d&export=messages&limit=1", s), "", nil)
	mp := asMap(p["messages"])
	if mp["has_more"] != true || mp["next_cursor"] != c1["sequence"] ||
		mp["next"] != fmt.Sprintf("/corpus/snapshot.json?after=%d&at=%d&export=messages&limit=1", uint64(c1["sequence"].(float64)), s) {
		t.Fatalf("a page of one: %v", mp)
	}
	_, p = tn.do(t, "GET", mp["next"].(string), "", nil)
	if mp = asMap(p["messages"]); mp["has_more"] != false || mp["next_cursor"] != nil || len(mp["items"].([]any)) != 1 {
		t.Fatalf("the last page: %v", mp)
	}
	for _, q := range []string{
		fmt.Sprintf("?at=%d", tn.Store().Sequence()+1), "?export=messages", "?after=3", fmt.Sprintf("?at=%d&export=topics", s), "?limit=0",
	} {
		if status, out := tn.do(t, "GET", "/corpus/snapshot.json"+q, "", nil); status != 400 || corpusCode(out) != "invalid_request" {
			t.Errorf("%s: %d %v", q, status, out)
		}
	}
	if status, out := tn.do(t, "GET", "/corpus/snapshot.json?at=0", "", nil); status != 200 || len(asMap(out["messages"])["items"].([]any)) != 0 {
		t.Fatalf("at=0: %d %v", status, out)
	}
}

// ---------------------------------------------------------------------------
// The message export and its filters.

func TestCorpusMessagesJSONL(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	b := tn.registerAgent(t, true)
	_, c1, _ := tn.write(t, a, "/createConversation", "1", map[string]any{"subject": "Latency", "content": "Caching lowers latency.", "kind": []string{"proposal", "claim"}, "tags": []string{"performance"}})
	conv := c1["conversation_id"].(string)
	tn.write(t, b, "/appendToConversation/"+conv, "1", map[string]any{"content": "How did you measure?", "kind": []string{"question"}, "mentions": []string{a.author}})
	tn.write(t, b, "/appendToConversation/"+conv, "2", map[string]any{"payload": nil})
	_, c2, _ := tn.write(t, a, "/createConversation", "2", map[string]any{"subject": "Objects", "payload": map[string]any{"b": 1, "a": 2}, "schema_name": "toastmachine.object", "schema_version": 1})
	after1 := strconv.FormatUint(uint64(c1["sequence"].(float64)), 10)
	for q, want := range map[string]int{
		"": 4, "?conversation_id=" + conv: 3, "?author_id=" + b.author: 2, "?tag=performance": 1,
		"?kinds=question&kinds=claim": 2, "?mentioned_agent=" + a.author: 1, "?has_payload=true": 2, "?has_payload=false": 2,
		"?schema_name=toastmachine.object": 1, "?schema_validated=true": 1, "?schema_validated=false": 3, "?schema_version=1": 1,
		"?limit=2": 2, "?after=" + after1: 3, "?before=" + after1: 0, "?conversation_id=" + conv + "&after=" + after1: 2,
		"?kinds=question&conversation_id=" + conv: 1, "?conversation_id=" + c2["conversation_id"].(string): 1,
	} {
		lines, _ := tn.ndjson(t, "/corpus/messages.jsonl"+q)
		// Each line is the message as GET /messages answers it.
		_, page := tn.do(t, "GET", "/messages"+q, "", nil)
		if len(lines) != want || toJSON(lines) != toJSON(page["messages"]) && len(lines) > 0 {
			t.Errorf("messages.jsonl%s: %d lines, want %d (and the same as /messages)", q, len(lines), want)
		}
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?kinds=rant", "?kinds=", "?after=-2", "?schema_version=0", "?schema_version=-1"} {
		for _, path := range []string{"/corpus/messages.jsonl", "/messages"} {
			status, body, _ := tn.get(t, path+q, nil)
			if status != 400 || !bytes.Contains(body, []byte(`"code":"invalid_request"`)) {
				t.Errorf("%s%s: %d %s", path, q, status, body)
			}
		}
	}
	// Pages keep the filters and move the cursor; an empty page keeps it.
	lines, hdr := tn.ndjson(t, "/corpus/messages.jsonl?kinds=question&kinds=post&limit=2")
	link := hdr.Get("Link")
	if len(lines) != 2 || hdr.Get("X-Has-More") != "true" || !strings.Contains(link, "kinds=post&kinds=question") || !strings.Contains(link, "after="+hdr.Get("X-Next-Cursor")) {
		t.Fatalf("first page: %d lines, %v", len(lines), hdr)
	}
	next := strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
	lines, hdr = tn.ndjson(t, next)
	if len(lines) != 1 || hdr.Get("X-Has-More") != "false" || hdr.Get("Link") != "" {
		t.Fatalf("second page: %d lines, %v", len(lines), hdr)
	}
	cursor := hdr.Get("X-Next-Cursor")
	lines, hdr = tn.ndjson(t, "/corpus/messages.jsonl?kinds=question&kinds=post&after="+cursor)
	if len(lines) != 0 || hdr.Get("X-Next-Cursor") != cursor {
		t.Fatalf("empty page: %d lines, cursor %q, want %q", len(lines), hdr.Get("X-Next-Cursor"), cursor)
	}
	if status, _, _ := tn.get(t, "/corpus/messages.jsonl", http.Header{"Accept": {"application/json"}}); status != 406 {
		t.Fatalf("Accept application/json: %d", status)
	}
}

// TestCorpusMessagesJSONLLinkKeepsFilters follows the export's Link with
// every filter /corpus/messages.jsonl takes: the next page keeps each one.
func TestCorpusMessagesJSONLLinkKeepsFilters(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	b := tn.registerAgent(t, true)
	msg := map[string]any{"content": "Caching lowers latency.", "kind": []string{"claim"}, "tags": []string{"performance"},
		"mentions": []string{b.author}, "payload": map[string]any{"ms": 3}, "schema_name": "toastmachine.object", "schema_version": 1}
	msg["subject"] = "Latency"
	_, c, _ := tn.write(t, a, "/createConversation", "1", msg)
	conv := c["conversation_id"].(string)
	delete(msg, "subject")
	for _, tok := range []string{"2", "3"} {
		if status, _, _ := tn.write(t, a, "/appendToConversation/"+conv, tok, msg); status != 201 {
			t.Fatalf("append: %d", status)
		}
	}
	want := url.Values{"conversation_id": {conv}, "author_id": {a.author}, "tag": {"performance"}, "kinds": {"claim"},
		"mentioned_agent": {b.author}, "has_payload": {"true"}, "schema_name": {"toastmachine.object"}, "schema_version": {"1"},
		"schema_validated": {"true"}, "realm": {"ainotes"}, "before": {"1000000"}, "limit": {"1"}}
	path := "/corpus/messages.jsonl?" + want.Encode()
	for page := 1; page <= 3; page++ {
		lines, hdr := tn.ndjson(t, path)
		if len(lines) != 1 {
			t.Fatalf("page %d: %d lines", page, len(lines))
		}
		if path = followNext(t, page, hdr, "/corpus/messages.jsonl", want, page == 3); path == "" {
			break
		}
	}
}

// followNext checks the Link rel="next" of a page of a listing at base
// asked with the query want: on the last page none; else one to base,
// continuing after X-Next-Cursor with every other parameter of want. It
// returns the link ("" on the last page).
func followNext(t *testing.T, page int, hdr http.Header, base string, want url.Values, last bool) string {
	t.Helper()
	link := hdr.Get("Link")
	if last {
		if link != "" {
			t.Fatalf("the last page links to %s", link)
		}
		return ""
	}
	next := strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
	u, err := url.Parse(next)
	if err != nil || u.Path != base {
		t.Fatalf("page %d: Link %q", page, link)
	}
	got := u.Query()
	if got.Get("after") != hdr.Get("X-Next-Cursor") {
		t.Fatalf("page %d: the link continues after %q, X-Next-Cursor %q", page, got.Get("after"), hdr.Get("X-Next-Cursor"))
	}
	got.Del("after")
	if got.Encode() != want.Encode() {
		t.Fatalf("page %d: the link's filters\n%s\nwant\n%s", page, got.Encode(), want.Encode())
	}
	return next
}

// TestCorpusListingLinks: /messages and /conversations link their next
// page with every filter kept (the seed: "Continuation links preserve
// kinds"), continuing after X-Next-Cursor; the last page links nowhere.
func TestCorpusListingLinks(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	msg := map[string]any{"subject": "Latency", "content": "Why is it slow?", "kind": []string{"question"}, "tags": []string{"perf"}}
	for _, tok := range []string{"1", "2", "3"} {
		if status, _, _ := tn.write(t, a, "/createConversation", tok, msg); status != 201 {
			t.Fatalf("create: %d", status)
		}
	}
	for _, tc := range []struct {
		path string
		want url.Values
		list string
	}{
		{"/messages", url.Values{"kinds": {"question"}, "tag": {"perf"}, "author_id": {a.author}, "limit": {"1"}}, "messages"},
		{"/conversations", url.Values{"kinds": {"question"}, "tag": {"perf"}, "q": {"latency"}, "limit": {"1"}}, "conversations"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			path := tc.path + "?" + tc.want.Encode()
			for page := 1; page <= 3; page++ {
				status, body, hdr := tn.get(t, path, nil)
				var out map[string]any
				if err := json.Unmarshal(body, &out); status != 200 || err != nil || len(out[tc.list].([]any)) != 1 {
					t.Fatalf("page %d: %d %s", page, status, body)
				}
				if path = followNext(t, page, hdr, tc.path, tc.want, page == 3); path == "" {
					return
				}
			}
		})
	}
}

// ---------------------------------------------------------------------------
// The index.

func TestCorpusIndex(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	tn.write(t, a, "/createConversation", "1", map[string]any{"subject": "S", "content": "x"})
	status, idx := tn.do(t, "GET", "/corpus/index.json", "", nil)
	if status != 200 || idx["sequence"] != float64(tn.Store().Sequence()) || idx["realm"] != "ainotes" {
		t.Fatalf("index: %d %v", status, idx)
	}
	for name, url := range map[string]string{
		"snapshot": "/corpus/snapshot.json", "message_corpus": "/corpus/messages.jsonl", "changes": "/corpus/changes.jsonl",
		"stream": "/corpus/stream", "conversations": "/conversations", "messages": "/messages", "search": "/search?q=",
	} {
		if field(idx, name, "url") != url || field(idx, name, "media_type") == "" {
			t.Errorf("%s: %v", name, idx[name])
		}
	}
	if field(idx, "vocabulary", "kinds") != "/kind" || len(field(idx, "vocabulary", "event_types").([]any)) != 3 || field(idx, "service", "auth") != "/auth.md" {
		t.Fatalf("vocabulary, service: %v %v", idx["vocabulary"], idx["service"])
	}
	// Every URL it names answers.
	for _, name := range []string{"snapshot", "message_corpus", "changes", "conversations", "messages"} {
		if status, body, _ := tn.get(t, field(idx, name, "url").(string), nil); status != 200 {
			t.Errorf("%s: %d %s", name, status, body)
		}
	}
	for _, p := range []string{"/kind", "/relationships", "/llms.txt", "/auth.md", "/agents", "/tags"} {
		if status, _, _ := tn.get(t, p, nil); status != 200 {
			t.Errorf("%s: %d", p, status)
		}
	}
	// The service's description and vocabulary, its API's descriptions.
	for _, f := range [][2]string{{"service", "description"}, {"service", "openapi"}, {"service", "api_catalog"}, {"vocabulary", "terms"}} {
		p, _ := field(idx, f[0], f[1]).(string)
		if status, body, _ := tn.get(t, p, nil); p == "" || status != 200 {
			t.Errorf("%s.%s %q: %d %.100s", f[0], f[1], p, status, body)
		}
	}
	if field(idx, "service", "mcp") != "/mcp" {
		t.Errorf("service.mcp: %v", idx["service"])
	}
}

// TestCorpusEmptyPagesKeepTheCursor: an empty page of a snapshot export,
// of /messages and /relationship-assertions answers the requested after as
// its next_cursor (X-Next-Cursor too), as the change feed does, with no
// next link; a page without after has none, nor has an empty page of
// /conversations, whose X-Next-Cursor is "the highest created_sequence
// actually returned".
func TestCorpusEmptyPagesKeepTheCursor(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	_, c1, _ := tn.write(t, a, "/createConversation", "1", map[string]any{"subject": "S", "content": "first"})
	at := strconv.FormatUint(tn.Store().Sequence(), 10)
	for _, tc := range []struct{ path, cursor string }{
		{"/corpus/snapshot.json?at=" + at + "&export=relationship_retractions&after=42", "relationship_retractions.next_cursor"},
		{"/corpus/snapshot.json?at=" + at + "&export=messages&after=" + at, "messages.next_cursor"},
		{"/messages?after=500", "next_cursor"},
		{"/relationship-assertions?message_id=" + c1["message_id"].(string) + "&after=77", "next_cursor"},
	} {
		st, body, hdr := tn.get(t, tc.path, nil)
		var out map[string]any
		if err := json.Unmarshal(body, &out); err != nil || st != 200 {
			t.Fatalf("%s: %d %s", tc.path, st, body)
		}
		want, _ := url.ParseQuery(tc.path[strings.Index(tc.path, "?")+1:])
		path := strings.Split(tc.cursor, ".")
		var got any = out
		for _, f := range path {
			got = asMap(got)[f]
		}
		if got != mustFloat(t, want.Get("after")) {
			t.Errorf("%s: next_cursor %v, want %s: %s", tc.path, got, want.Get("after"), body)
		}
		if len(path) == 1 && hdr.Get("X-Next-Cursor") != want.Get("after") {
			t.Errorf("%s: X-Next-Cursor %q", tc.path, hdr.Get("X-Next-Cursor"))
		}
		if len(path) == 2 && asMap(out[path[0]])["next"] != nil {
			t.Errorf("%s: an empty page links a next one: %s", tc.path, body)
		}
	}
	for _, p := range []string{"/messages?before=1", "/conversations?after=500"} {
		_, body, hdr := tn.get(t, p, nil)
		if !bytes.Contains(body, []byte(`"next_cursor":null`)) || hdr.Get("X-Next-Cursor") != "" {
			t.Errorf("%s: %s %v", p, body, hdr)
		}
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
