package corpus_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"relay/realm"
	"relay/store"
)

// relNode is a real node on a loopback server.
type relNode struct {
	n   *realm.Node
	url string
}

func startRelNode(t *testing.T) *relNode {
	t.Helper()
	cfg := realm.DefaultConfig()
	cfg.P2PAddrs = nil // no federation here
	cfg.Realm = "ainotes"
	cfg.DataDir = t.TempDir()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.RateLimit = 1 << 20
	n, err := realm.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() {
		srv.Close()
		n.Close()
	})
	return &relNode{n: n, url: srv.URL}
}

type relAgent struct{ id, endpoint, author string }

type answer struct {
	status int
	body   map[string]any
	header http.Header
}

func (a answer) code() any { return pick(a.body, "error", "code") }

// pick walks nested objects.
func pick(m any, path ...string) any {
	for _, p := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[p]
	}
	return m
}

func (rn *relNode) do(t *testing.T, method, path, bearer, opToken string, body any) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, rn.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if opToken != "" {
		req.Header.Set("Operation-Token", opToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	raw, _ := io.ReadAll(resp.Body)
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &a.body); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return a
}

func (rn *relNode) get(t *testing.T, path string) answer {
	t.Helper()
	return rn.do(t, "GET", path, "", "", nil)
}

func (rn *relNode) register(t *testing.T, onboard bool) relAgent {
	t.Helper()
	r := rn.do(t, "POST", "/register", "", "", nil)
	if r.status != 201 {
		t.Fatalf("register: %d %v", r.status, r.body)
	}
	a := relAgent{r.body["agent_id"].(string), r.body["endpoint_id"].(string), r.body["author_id"].(string)}
	if onboard {
		rn.onboard(t, a)
	}
	return a
}

func (rn *relNode) onboard(t *testing.T, a relAgent) {
	t.Helper()
	req, _ := http.NewRequest("GET", rn.url+"/auth.md", nil)
	req.Header.Set("Authorization", "Bearer "+a.id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("guide: %d", resp.StatusCode)
	}
}

// post writes through the agent's endpoint with an Operation-Token.
func (rn *relNode) post(t *testing.T, a relAgent, path, token string, body any) answer {
	t.Helper()
	return rn.do(t, "POST", "/"+a.endpoint+path, a.id, token, body)
}

var tokenN int

func nextToken() string { tokenN++; return fmt.Sprintf("tok-%d", tokenN) }

// message creates a conversation (conv == "") or appends; it returns the
// message id and conversation id.
func (rn *relNode) message(t *testing.T, a relAgent, conv string, kind ...string) (string, string) {
	t.Helper()
	body := map[string]any{"content": "text"}
	if kind != nil {
		body["kind"] = kind
	}
	path := "/appendToConversation/" + conv
	if conv == "" {
		body["subject"] = "subject"
		path = "/createConversation"
	}
	r := rn.post(t, a, path, nextToken(), body)
	if r.status != 201 {
		t.Fatalf("message: %d %v", r.status, r.body)
	}
	return r.body["message_id"].(string), r.body["conversation_id"].(string)
}

func rel(src, tgt, typ string) map[string]any {
	return map[string]any{"source_message_id": src, "target_message_id": tgt, "relationship_type": typ}
}

// assert creates a relationship that must succeed and returns it.
func (rn *relNode) assert(t *testing.T, a relAgent, src, tgt, typ string) map[string]any {
	t.Helper()
	r := rn.post(t, a, "/createRelationship", nextToken(), rel(src, tgt, typ))
	if r.status != 201 {
		t.Fatalf("assert %s: %d %v", typ, r.status, r.body)
	}
	return r.body["relationship"].(map[string]any)
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestRelationshipCatalogue(t *testing.T) {
	rn := startRelNode(t)
	a, b := rn.get(t, "/relationships"), rn.get(t, "/relationship-types")
	if a.status != 200 || toJSON(a.body) != toJSON(b.body) || a.body["version"] != float64(2) {
		t.Fatalf("catalogue: %d %v / %v", a.status, a.body, b.body)
	}
	var types []string
	for _, e := range a.body["relationship_types"].([]any) {
		m := e.(map[string]any)
		if m["description"] == "" {
			t.Fatalf("no description: %v", m)
		}
		types = append(types, m["relationship_type"].(string))
	}
	if strings.Join(types, ",") != "replies-to,supports,contradicts,extends,retracts,supersedes" {
		t.Fatalf("types: %v", types)
	}
	tools := map[string]string{
		"list_relationship_types": "list_relationship_types", "get_relationship_types": "",
		"create_relationship": "create_relationship", "retract_relationship": "retract_relationship",
		"list_relationships":                          "list_relationships",
		"get_relationship_assertions_relationship_id": "", "get_relationship_retractions_retraction_id": "",
	}
	for key, tool := range tools {
		op, ok := rn.n.Registry().Lookup(key)
		if !ok || op.ToolName() != tool {
			t.Fatalf("operation %s: %v tool %q", key, ok, tool)
		}
	}
}

func TestCreateRelationshipRefusals(t *testing.T) {
	rn := startRelNode(t)
	a, b := rn.register(t, true), rn.register(t, true)
	claimA, convA := rn.message(t, a, "", "claim")
	postA, _ := rn.message(t, a, convA)
	verB, convB := rn.message(t, b, "", "verification")
	claimB, _ := rn.message(t, b, convB, "claim")

	refusals := []struct {
		name   string
		who    relAgent
		token  string
		body   any
		status int
		code   string
	}{
		{"no token", a, "", rel(postA, claimA, "supports"), 400, "invalid_request"},
		{"unknown type", a, "t", rel(postA, claimA, "refutes"), 400, "invalid_request"},
		{"self reference", a, "t", rel(postA, postA, "replies-to"), 400, "invalid_request"},
		{"missing field", a, "t", map[string]any{"source_message_id": postA, "relationship_type": "extends"}, 400, "invalid_request"},
		{"indicator in request", a, "t", map[string]any{"source_message_id": postA, "target_message_id": claimA,
			"relationship_type": "supersedes", "author_is_target_author": true}, 400, "invalid_request"},
		{"missing source", a, "t", rel("00000000-0000-0000-0000-000000000000", claimA, "extends"), 404, "not_found"},
		{"missing target", a, "t", rel(postA, "00000000-0000-0000-0000-000000000000", "extends"), 404, "not_found"},
		{"retracts another's message", b, "t", rel(verB, postA, "retracts"), 403, "retraction_author_mismatch"},
		{"verification of a non-claim", b, "t", rel(verB, postA, "supports"), 422, "invalid_verification_target"},
		{"self verification", b, "t", rel(verB, claimB, "supports"), 422, "self_verification"},
		{"self verification by a third party's source", a, "t", rel(verB, claimA, "supports"), 422, "self_verification"},
	}
	for _, tc := range refusals {
		for range 2 { // an unchanged rejected request gives the same error
			r := rn.post(t, tc.who, "/createRelationship", tc.token, tc.body)
			if r.status != tc.status || r.code() != tc.code || pick(r.body, "error", "how_to_proceed") == "" {
				t.Fatalf("%s: %d %v", tc.name, r.status, r.body)
			}
		}
	}
	// Rejected attempts reserved nothing: the token is free, and no edge or
	// change was recorded.
	seq := rn.n.Store().Sequence()
	if r := rn.post(t, b, "/createRelationship", "t", rel(verB, claimA, "supports")); r.status != 201 {
		t.Fatalf("verification after refusals: %d %v", r.status, r.body)
	}
	if got := rn.n.Store().Sequence(); got != seq+1 {
		t.Fatalf("sequence %d after refusals, want %d", got, seq+1)
	}
	// retracts on one's own message is allowed.
	rn.assert(t, a, postA, claimA, "retracts")
	// supports from a source without kind verification keeps its ordinary
	// meaning: one's own claim, a non-claim.
	rn.assert(t, a, postA, claimA, "supports")
	rn.assert(t, b, claimB, postA, "supports")

	// An identical active assertion by the same author: 409; another author
	// may assert it independently.
	rn.assert(t, a, postA, claimA, "replies-to")
	r := rn.post(t, a, "/createRelationship", nextToken(), rel(postA, claimA, "replies-to"))
	if r.status != 409 || r.code() != "relationship_already_asserted" {
		t.Fatalf("duplicate: %d %v", r.status, r.body)
	}
	rn.assert(t, b, postA, claimA, "replies-to")
	// Cross-conversation edges, cycles and multiple parents are permitted.
	rn.assert(t, a, claimA, claimB, "replies-to")
	rn.assert(t, b, claimB, claimA, "replies-to")
	rn.assert(t, b, claimB, postA, "replies-to")

	// Onboarding applies as for message writes, and reserves nothing.
	c := rn.register(t, false)
	r = rn.post(t, c, "/createRelationship", "c-1", rel(postA, claimA, "extends"))
	if r.status != 428 || r.code() != "onboarding_required" {
		t.Fatalf("not onboarded: %d %v", r.status, r.body)
	}
	rn.onboard(t, c)
	if r = rn.post(t, c, "/createRelationship", "c-1", rel(postA, claimA, "extends")); r.status != 201 {
		t.Fatalf("onboarded: %d %v", r.status, r.body)
	}
	// Another agent's endpoint, and no credential.
	d := a
	d.endpoint = b.endpoint
	if r = rn.post(t, d, "/createRelationship", nextToken(), rel(postA, claimA, "extends")); r.status != 404 || r.code() != "not_found" {
		t.Fatalf("foreign endpoint: %d %v", r.status, r.body)
	}
	if r = rn.do(t, "POST", "/"+a.endpoint+"/createRelationship", "", "x", rel(postA, claimA, "extends")); r.status != 401 || r.code() != "unauthorized" {
		t.Fatalf("anonymous: %d %v", r.status, r.body)
	}
}

func TestRelationshipIdempotencyAndRetraction(t *testing.T) {
	rn := startRelNode(t)
	a, b := rn.register(t, true), rn.register(t, true)
	m1, conv := rn.message(t, a, "")
	m2, _ := rn.message(t, a, conv)
	m3, _ := rn.message(t, b, conv)

	first := rn.post(t, a, "/createRelationship", "k-1", rel(m2, m1, "supersedes"))
	relA := first.body["relationship"].(map[string]any)
	if first.status != 201 || relA["state"] != "active" || relA["author_is_target_author"] != true || relA["author_id"] != a.author ||
		relA["realm"] != "ainotes" || relA["cid"] == "" || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("create: %d %v", first.status, first.body)
	}
	id := relA["relationship_id"].(string)
	again := rn.post(t, a, "/createRelationship", "k-1", rel(m2, m1, "supersedes"))
	if again.status != 201 || toJSON(again.body) != toJSON(first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %v", again.status, again.body)
	}
	if r := rn.post(t, a, "/createRelationship", "k-1", rel(m2, m1, "extends")); r.status != 409 || r.code() != "idempotency_conflict" {
		t.Fatalf("token reuse: %d %v", r.status, r.body)
	}
	// Another agent's supersession: author_is_target_author false; other
	// types carry no indicator.
	relB := rn.assert(t, b, m3, m1, "supersedes")
	if relB["author_is_target_author"] != false {
		t.Fatalf("third-party supersedes: %v", relB)
	}
	if r := rn.assert(t, a, m2, m1, "extends"); r["author_is_target_author"] != nil {
		t.Fatalf("extends has the indicator: %v", r)
	}

	// Only the asserting author retracts.
	if r := rn.post(t, b, "/retractRelationship/"+id, "x-1", map[string]any{}); r.status != 403 || r.code() != "forbidden" {
		t.Fatalf("foreign retraction: %d %v", r.status, r.body)
	}
	if r := rn.post(t, a, "/retractRelationship/"+id, "", map[string]any{}); r.status != 400 || r.code() != "invalid_request" {
		t.Fatalf("retraction without a token: %d %v", r.status, r.body)
	}
	if r := rn.post(t, a, "/retractRelationship/nope", "x-1", map[string]any{}); r.status != 404 || r.code() != "not_found" {
		t.Fatalf("unknown relationship: %d %v", r.status, r.body)
	}
	x := rn.post(t, a, "/retractRelationship/"+id, "x-1", map[string]any{})
	xid, _ := pick(x.body, "retraction", "retraction_id").(string)
	if x.status != 201 || xid == "" || pick(x.body, "retraction", "relationship_id") != id || pick(x.body, "retraction", "author_id") != a.author ||
		pick(x.body, "relationship", "state") != "retracted" || pick(x.body, "relationship", "retraction_id") != xid {
		t.Fatalf("retract: %d %v", x.status, x.body)
	}
	if r := rn.post(t, a, "/retractRelationship/"+id, "x-1", map[string]any{}); r.status != 201 || toJSON(r.body) != toJSON(x.body) || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retraction retry: %d %v", r.status, r.body)
	}
	if r := rn.post(t, a, "/retractRelationship/"+id, "x-2", map[string]any{}); r.status != 409 || r.code() != "conflict" {
		t.Fatalf("second retraction: %d %v", r.status, r.body)
	}
	// The creation's retry still answers the original result.
	if r := rn.post(t, a, "/createRelationship", "k-1", rel(m2, m1, "supersedes")); r.status != 201 || toJSON(r.body) != toJSON(first.body) {
		t.Fatalf("retry after retraction: %d %v", r.status, r.body)
	}
	// Detail reads: the relationship retracted, the indicator unchanged.
	d := rn.get(t, "/relationship-assertions/"+id)
	if d.status != 200 || pick(d.body, "relationship", "state") != "retracted" || pick(d.body, "relationship", "retraction_id") != xid ||
		pick(d.body, "relationship", "author_is_target_author") != true {
		t.Fatalf("detail: %d %v", d.status, d.body)
	}
	if r := rn.get(t, "/relationship-retractions/"+xid); r.status != 200 || toJSON(r.body["retraction"]) != toJSON(x.body["retraction"]) {
		t.Fatalf("retraction detail: %d %v", r.status, r.body)
	}
	if r := rn.get(t, "/relationship-assertions/nope"); r.status != 404 || r.code() != "not_found" {
		t.Fatalf("unknown detail: %d %v", r.status, r.body)
	}
	if r := rn.get(t, "/relationship-retractions/nope"); r.status != 404 || r.code() != "not_found" {
		t.Fatalf("unknown retraction: %d %v", r.status, r.body)
	}
	// Reassertion creates a new id.
	re := rn.assert(t, a, m2, m1, "supersedes")
	if re["relationship_id"] == id || re["state"] != "active" {
		t.Fatalf("reassertion: %v", re)
	}

	// The change envelopes: the event's fields, nothing read-derived.
	asserted := rn.change(t, uint64(relA["sequence"].(float64)))
	if asserted["event_type"] != "relationship.asserted" || asserted["resource_id"] != id || asserted["schema_version"] != float64(1) {
		t.Fatalf("asserted envelope: %v", asserted)
	}
	want := map[string]any{}
	for k, v := range relA {
		want[k] = v
	}
	delete(want, "state")
	delete(want, "author_is_target_author")
	if toJSON(asserted["data"]) != toJSON(want) {
		t.Fatalf("asserted data:\n%s\nwant\n%s", toJSON(asserted["data"]), toJSON(want))
	}
	retracted := rn.change(t, uint64(pick(x.body, "retraction", "sequence").(float64)))
	if retracted["event_type"] != "relationship.retracted" || retracted["resource_id"] != xid || toJSON(retracted["data"]) != toJSON(x.body["retraction"]) {
		t.Fatalf("retracted envelope: %v", retracted)
	}

	// A rebuild from the log gives the same projections.
	before := rn.get(t, "/relationship-assertions?message_id="+m1+"&direction=incoming&state=all")
	if err := rn.n.Store().Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := rn.get(t, "/relationship-assertions?message_id="+m1+"&direction=incoming&state=all")
	if before.status != 200 || toJSON(before.body) != toJSON(after.body) || len(after.body["relationships"].([]any)) != 4 {
		t.Fatalf("rebuild:\n%v\n%v", before.body, after.body)
	}
}

// change reads the canonical change envelope at seq.
func (rn *relNode) change(t *testing.T, seq uint64) map[string]any {
	t.Helper()
	var out map[string]any
	err := rn.n.Store().View(func(tx *store.Tx) error {
		b, err := tx.Get(binary.BigEndian.AppendUint64([]byte("p/co/ch/"), seq))
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &out)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRelationshipQueries(t *testing.T) {
	rn := startRelNode(t)
	a, b := rn.register(t, true), rn.register(t, true)
	root, conv := rn.message(t, a, "")
	m2, _ := rn.message(t, b, conv)
	m3, _ := rn.message(t, a, conv)
	other, conv2 := rn.message(t, b, "")

	r1 := rn.assert(t, b, m2, root, "replies-to")
	r2 := rn.assert(t, a, m3, root, "replies-to")
	r3 := rn.assert(t, a, m3, m2, "supports")
	r4 := rn.assert(t, b, other, m3, "contradicts") // from another conversation
	r5 := rn.assert(t, b, root, other, "extends")   // into another conversation
	ids := func(a answer) string {
		var out []string
		for _, r := range a.body["relationships"].([]any) {
			out = append(out, r.(map[string]any)["relationship_id"].(string))
		}
		return strings.Join(out, ",")
	}
	idsOf := func(rs ...map[string]any) string {
		var out []string
		for _, r := range rs {
			out = append(out, r["relationship_id"].(string))
		}
		return strings.Join(out, ",")
	}
	q := func(params ...string) answer {
		t.Helper()
		v := url.Values{}
		for i := 0; i+1 < len(params); i += 2 {
			v.Add(params[i], params[i+1])
		}
		return rn.get(t, "/relationship-assertions?"+v.Encode())
	}

	cases := []struct {
		params []string
		want   string
	}{
		{[]string{"message_id", root}, idsOf(r5)}, // outgoing by default
		{[]string{"message_id", root, "direction", "incoming"}, idsOf(r1, r2)},
		{[]string{"message_id", root, "direction", "both"}, idsOf(r1, r2, r5)},
		{[]string{"message_id", m3, "direction", "both", "relationship_type", "supports"}, idsOf(r3)},
		{[]string{"message_id", root, "direction", "incoming", "author_id", a.author}, idsOf(r2)},
		{[]string{"conversation_id", conv}, idsOf(r1, r2, r3, r5)},
		{[]string{"conversation_id", conv, "direction", "incoming"}, idsOf(r1, r2, r3, r4)},
		{[]string{"conversation_id", conv2, "direction", "both"}, idsOf(r4, r5)},
		{[]string{"message_id", "unknown"}, ""},
	}
	for _, tc := range cases {
		r := q(tc.params...)
		if r.status != 200 || ids(r) != tc.want || r.body["at"] != float64(rn.n.Store().Sequence()) {
			t.Fatalf("%v: %d %v, want %s", tc.params, r.status, r.body, tc.want)
		}
	}
	for _, bad := range [][]string{
		{},
		{"message_id", root, "conversation_id", conv},
		{"message_id", root, "direction", "sideways"},
		{"message_id", root, "state", "retracted"},
		{"message_id", root, "relationship_type", "refutes"},
		{"message_id", root, "limit", "0"},
		{"message_id", root, "limit", "1001"},
	} {
		if r := q(bad...); r.status != 400 || r.code() != "invalid_request" {
			t.Fatalf("%v: %d %v", bad, r.status, r.body)
		}
	}

	// State and at: a retraction after at does not show at at.
	at := rn.n.Store().Sequence()
	x := rn.post(t, a, "/retractRelationship/"+r2["relationship_id"].(string), nextToken(), map[string]any{})
	if x.status != 201 {
		t.Fatalf("retract: %d %v", x.status, x.body)
	}
	if r := q("message_id", root, "direction", "incoming"); ids(r) != idsOf(r1) {
		t.Fatalf("active: %v", r.body)
	}
	all := q("message_id", root, "direction", "incoming", "state", "all")
	if ids(all) != idsOf(r1, r2) || pick(all.body["relationships"].([]any)[1], "state") != "retracted" {
		t.Fatalf("all: %v", all.body)
	}
	then := q("message_id", root, "direction", "incoming", "at", fmt.Sprint(at))
	if ids(then) != idsOf(r1, r2) || then.body["at"] != float64(at) || pick(then.body["relationships"].([]any)[1], "state") != "active" {
		t.Fatalf("at %d: %v", at, then.body)
	}
	// at is inclusive; assertions after it are not shown.
	r1seq := uint64(r1["sequence"].(float64))
	if r := q("message_id", root, "direction", "incoming", "at", fmt.Sprint(r1seq)); ids(r) != idsOf(r1) {
		t.Fatalf("at %d: %v", r1seq, r.body)
	}

	// Pagination by sequence with after=next_cursor and a fixed at.
	at = rn.n.Store().Sequence()
	var got []string
	var after string
	for i := range 10 {
		params := []string{"conversation_id", conv, "direction", "both", "state", "all", "limit", "2", "at", fmt.Sprint(at)}
		if after != "" {
			params = append(params, "after", after)
		}
		r := q(params...)
		if r.status != 200 {
			t.Fatalf("page: %d %v", r.status, r.body)
		}
		if s := ids(r); s != "" {
			got = append(got, s)
		}
		if r.body["has_more"] != true {
			if r.body["next_cursor"] != nil {
				t.Fatalf("last page has a cursor: %v", r.body)
			}
			break
		}
		after = fmt.Sprint(uint64(r.body["next_cursor"].(float64)))
		if r.header.Get("X-Next-Cursor") != after {
			t.Fatalf("cursor header %q, body %s", r.header.Get("X-Next-Cursor"), after)
		}
		// Writes while paging do not move a fixed at.
		rn.assert(t, b, m2, m3, []string{"extends", "contradicts", "supports"}[i])
	}
	if strings.Join(got, ",") != idsOf(r1, r2, r3, r4, r5) {
		t.Fatalf("pages %v, want %s", got, idsOf(r1, r2, r3, r4, r5))
	}
}
