package realm

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
)

// searchGet is GET /search with its status, body and headers.
func searchGet(t *testing.T, tn *testNode, query string) (int, map[string]any, http.Header) {
	t.Helper()
	resp, err := http.Get(tn.srv.URL + "/search" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GET /search%s: decode: %v", query, err)
	}
	return resp.StatusCode, out, resp.Header
}

func searchMessageIDs(out map[string]any) []string {
	var ids []string
	for _, r := range out["results"].([]any) {
		ids = append(ids, field(r.(map[string]any), "message", "message_id").(string))
	}
	return ids
}

func TestCorpusSearch(t *testing.T) {
	tn := startNode(t, "ainotes")
	a := tn.registerAgent(t, true)
	b := tn.registerAgent(t, true)
	_, c1, _ := tn.write(t, a, "/createConversation", "s1", map[string]any{"subject": "Cache latency", "content": "Caching lowers latency latency.", "kind": []string{"claim"}, "tags": []string{"performance"}})
	conv := c1["conversation_id"].(string)
	_, q1, _ := tn.write(t, b, "/appendToConversation/"+conv, "s2", map[string]any{"content": "How did you measure the latency of this setup?", "kind": []string{"question"}, "mentions": []string{a.author}})
	_, p1, _ := tn.write(t, a, "/createConversation", "s3", map[string]any{"subject": "Plans", "content": "I propose a warm-cache latency run for the benchmark suite next week.", "kind": []string{"proposal"}})
	tn.write(t, b, "/appendToConversation/"+conv, "s4", map[string]any{"content": "Unrelated words only."})
	id := func(m map[string]any) string { return field(m, "message", "message_id").(string) }

	status, out, hdr := searchGet(t, tn, "?q=latency")
	got := searchMessageIDs(out)
	if status != 200 || out["total"] != float64(3) || len(got) != 3 || got[0] != id(c1) || out["limit"] != float64(100) || out["offset"] != float64(0) {
		t.Fatalf("search: %d %v", status, out)
	}
	results := out["results"].([]any)
	for i := 1; i < len(results); i++ {
		if field(results[i-1].(map[string]any), "score").(float64) > field(results[i].(map[string]any), "score").(float64) {
			t.Fatalf("scores do not ascend: %v", results)
		}
	}
	last := field(results[2].(map[string]any), "message", "sequence").(float64)
	if out["next_cursor"] != last || hdr.Get("X-Next-Cursor") != strconv.Itoa(int(last)) || out["next"] != nil || hdr.Get("Link") != "" {
		t.Fatalf("cursor: %v %v %v", out["next_cursor"], hdr, out["next"])
	}

	// Kinds are OR, other filters AND; the text within questions or proposals.
	_, out, _ = searchGet(t, tn, "?q=latency&kinds=question&kinds=proposal")
	if got := searchMessageIDs(out); len(got) != 2 || out["total"] != float64(2) {
		t.Fatalf("kinds: %v", got)
	}
	for query, want := range map[string][]string{
		"?q=latency&conversation_id=" + conv:                               {id(c1), id(q1)},
		"?q=latency&author_id=" + url.QueryEscape(b.author):                {id(q1)},
		"?q=latency&tag=performance":                                       {id(c1)},
		"?q=latency&mentioned_agent=" + url.QueryEscape(a.author):          {id(q1)},
		"?q=latency&after=" + strconv.Itoa(int(q1["sequence"].(float64))):  {id(p1)},
		"?q=latency&before=" + strconv.Itoa(int(q1["sequence"].(float64))): {id(c1)},
		"?q=plans":             {id(p1)}, // the subject, on the conversation's first message
		"?q=nothingmatches":    nil,
		"?q=latency&tag=other": nil,
	} {
		status, out, _ := searchGet(t, tn, query)
		if got := searchMessageIDs(out); status != 200 || len(got) != len(want) || len(want) > 0 && !searchSameSet(got, want) {
			t.Errorf("GET /search%s: %d %v, want %v", query, status, got, want)
		}
	}

	// Pages: offset and next; the cursor is the last result's sequence.
	status, out, hdr = searchGet(t, tn, "?q=latency&limit=2")
	if status != 200 || len(out["results"].([]any)) != 2 || out["next"] == nil || out["next_offset"] != float64(2) {
		t.Fatalf("page 1: %v", out)
	}
	lastSeq := field(out["results"].([]any)[1].(map[string]any), "message", "sequence").(float64)
	if out["next_cursor"] != lastSeq || hdr.Get("X-Next-Cursor") != strconv.Itoa(int(lastSeq)) || hdr.Get("Link") == "" {
		t.Fatalf("page 1 cursor: %v %v", out["next_cursor"], hdr)
	}
	_, page2, _ := searchGet(t, tn, out["next"].(string)[len("/search"):])
	if got := searchMessageIDs(page2); len(got) != 1 || page2["offset"] != float64(2) || page2["next"] != nil || page2["total"] != float64(3) {
		t.Fatalf("page 2: %v", page2)
	}

	for _, query := range []string{"", "?q=", "?q=%20%20", "?q=x&kinds=rant", "?q=x&kinds=", "?q=x&kinds=claim&kinds=claim",
		"?q=x&limit=0", "?q=x&limit=1001", "?q=x&limit=many", "?q=x&offset=-1", "?q=x&after=-3"} {
		if status, out, _ := searchGet(t, tn, query); status != 400 || corpusCode(out) != "invalid_request" {
			t.Errorf("GET /search%s: %d %v", query, status, out)
		}
	}

	// MCP's search tool takes query and a kinds array.
	op, ok := tn.reg.Lookup("search")
	if !ok || op.ToolName() != "search" {
		t.Fatal("no search tool")
	}
	res, err := tn.reg.Invoke(context.Background(), nil, op, json.RawMessage(`{"query":"latency","kinds":["question","proposal"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var mcpOut map[string]any
	if err := json.Unmarshal(mustJSON(res), &mcpOut); err != nil || mcpOut["total"] != float64(2) {
		t.Fatalf("MCP search: %v %v", err, mcpOut)
	}
}

func searchSameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[string]int{}
	for _, s := range a {
		in[s]++
	}
	for _, s := range b {
		in[s]--
	}
	for _, n := range in {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestCorpusSearchRestart: the index is rebuilt from the store when the node
// opens again on its data directory, and keeps following new writes.
func TestCorpusSearchRestart(t *testing.T) {
	dir := t.TempDir()
	tn, closeNode := forumOpenAt(t, dir)
	a := tn.registerAgent(t, true)
	_, c1, _ := tn.write(t, a, "/createConversation", "r1", map[string]any{"subject": "Restart", "content": "durable marmalade"})
	tn.write(t, a, "/appendToConversation/"+c1["conversation_id"].(string), "r2", map[string]any{"content": "more marmalade here"})
	_, before, _ := searchGet(t, tn, "?q=marmalade")
	closeNode()

	tn, _ = forumOpenAt(t, dir)
	_, after, _ := searchGet(t, tn, "?q=marmalade")
	if after["total"] != float64(2) || !searchSameSet(searchMessageIDs(after), searchMessageIDs(before)) || toJSON(after["results"]) != toJSON(before["results"]) {
		t.Fatalf("after restart: %v\nbefore: %v", after, before)
	}
	status, m3, _ := tn.write(t, a, "/appendToConversation/"+c1["conversation_id"].(string), "r3", map[string]any{"content": "marmalade after the restart"})
	if status != 201 {
		t.Fatalf("write after restart: %d %v", status, m3)
	}
	_, out, _ := searchGet(t, tn, "?q=marmalade")
	if out["total"] != float64(3) || !slices.Contains(searchMessageIDs(out), field(m3, "message", "message_id").(string)) {
		t.Fatalf("after restart and a write: %v", out)
	}
	if err := tn.Store().Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, again, _ := searchGet(t, tn, "?q=marmalade"); toJSON(again["results"]) != toJSON(out["results"]) {
		t.Fatalf("after rebuild: %v", again)
	}
}
