package corpus

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"relay/realm/api"
	"relay/store"
)

// changeDataMap is the change data as the projector first encoded it, a
// map: the reference the struct's encoding must equal byte for byte.
func changeDataMap(m *Message, subject string) map[string]any {
	d := map[string]any{
		"message_id": m.MessageID, "conversation_id": m.ConversationID, "content": m.Content, "author_id": m.AuthorID,
		"created_at": m.CreatedAt, "sequence": m.Sequence, "kind": m.Kind, "tags": m.Tags, "mentions": m.Mentions,
		"has_payload": m.HasPayload, "realm": m.Realm, "cid": m.CID,
	}
	if m.HasPayload {
		d["payload"] = m.Payload
	}
	if m.SchemaName != "" {
		d["schema_name"], d["schema_version"] = m.SchemaName, m.SchemaVersion
	}
	if m.SchemaValidated != nil {
		d["schema_validated"] = true
	}
	if subject != "" {
		d["subject"] = subject
	}
	return d
}

// unescapeHTMLRef is unescapeHTML as first written, byte by byte.
func unescapeHTMLRef(b []byte) []byte {
	out := b[:0:0]
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+5 < len(b) && b[i+1] == 'u' && b[i+2] == '0' && b[i+3] == '0' {
			switch string(b[i+4 : i+6]) {
			case "3c":
				out = append(out, '<')
				i += 5
				continue
			case "3e":
				out = append(out, '>')
				i += 5
				continue
			case "26":
				out = append(out, '&')
				i += 5
				continue
			}
		}
		if b[i] == '\\' && i+1 < len(b) {
			out = append(out, b[i], b[i+1])
			i++
			continue
		}
		out = append(out, b[i])
	}
	return out
}

var changeDataMessages = func() []Message {
	html := `<a href="x">&amp;</a> \u003c \\u003c` + "\u2028\u2029\x01"
	plain := "How should autonomous agents communicate?"
	empty := ""
	yes := true
	return []Message{
		{MessageID: "m1", ConversationID: "c1", AuthorID: "ainotes:a", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
			Sequence: 7, Kind: []string{"post"}, Tags: []string{}, Mentions: []string{}, Realm: "ainotes", CID: "bafy"},
		{MessageID: "m<2>", ConversationID: "c&2", Content: &html, AuthorID: "ainotes:<b>", CreatedAt: time.Unix(1, 0).UTC(),
			Sequence: 1 << 53, Kind: []string{"claim", "question"}, Tags: []string{html, "t"}, Mentions: []string{"ainotes:x"},
			Payload: json.RawMessage(`{"a":"<&>","b":[1,2.5,null],"c":"\u003c\u2028"}`), HasPayload: true,
			SchemaName: "toastmachine.object", SchemaVersion: 1, SchemaValidated: &yes, Realm: "ainotes", CID: "bafy2"},
		{MessageID: "m3", Content: &empty, Payload: json.RawMessage(`null`), HasPayload: true, SchemaName: "s", Realm: "r"},
		{MessageID: "m4", Content: &plain, Kind: nil, Tags: nil, Mentions: nil, CreatedAt: time.Date(2026, 11, 29, 0, 0, 0, 0, time.FixedZone("x", 3600))},
		{MessageID: "m5", Content: &html, Payload: json.RawMessage("[\"\u2028<\u2029>&\", \"\\\\u003c\"]"), HasPayload: true, Kind: []string{"post"}},
	}
}()

// TestChangeDataEncoding: the change data and its envelope encode exactly
// as the map and marshal(Change) did, for every optional field, HTML
// characters, line separators and escapes in strings and payloads.
func TestChangeDataEncoding(t *testing.T) {
	for i, m := range changeDataMessages {
		for _, subject := range []string{"", "A <subject> & more\u2028"} {
			want, err := marshal(changeDataMap(&m, subject))
			if err != nil {
				t.Fatal(err)
			}
			got, err := marshal(changeData(&m, subject))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("message %d data:\ngot  %s\nwant %s", i, got, want)
			}
			c := Change{SchemaVersion: 1, Sequence: m.Sequence, EventType: "message.created", ResourceID: m.MessageID, RecordedAt: m.CreatedAt, Data: got}
			wantEnv, err := marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			gotEnv, err := encodeChange(&c)
			if err != nil {
				t.Fatal(err)
			}
			if string(gotEnv) != string(wantEnv) {
				t.Fatalf("message %d envelope:\ngot  %s\nwant %s", i, gotEnv, wantEnv)
			}
		}
	}
	// A payload encoding/json refuses is refused by both.
	m := Message{MessageID: "m", HasPayload: true, Payload: json.RawMessage{}}
	if _, err := marshal(changeDataMap(&m, "")); err == nil {
		t.Fatal("the map encoded an empty payload")
	}
	if _, err := marshal(changeData(&m, "")); err == nil {
		t.Fatal("the struct encoded an empty payload")
	}
}

var unescapeHTMLTests = []string{
	``, `plain`, `\`, `\\`, `a\`, `\u003c`, `\u003e\u0026`, `\\u003c`, `\\\u003c`, `x\u003`, `\u00`, `\u0041`,
	`"<tag> \u003cb\u003e & \u0026amp;"`, `\u003c\u003c\u003c`, `\"\u003c\"`, strings.Repeat(`ab\u0026`, 100),
}

func TestUnescapeHTML(t *testing.T) {
	for _, in := range unescapeHTMLTests {
		if got, want := string(unescapeHTML([]byte(in))), string(unescapeHTMLRef([]byte(in))); got != want {
			t.Errorf("unescapeHTML(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzUnescapeHTML(f *testing.F) {
	for _, in := range unescapeHTMLTests {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := string(unescapeHTMLRef(b))
		if got := string(unescapeHTML(b)); got != want {
			t.Fatalf("unescapeHTML(%q) = %q, want %q", b, got, want)
		}
	})
}

// projections is every corpus projection key and value.
func projections(t *testing.T, st *store.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := st.View(func(tx *store.Tx) error {
		return tx.Iterate(pfxAll, false, func(k, v []byte) error {
			out[string(k)] = string(v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// failAfter is a projector registered after the corpus's that refuses
// events whose data holds its marker: the op fails after the corpus's
// projector has run, and every write of it is dropped.
type failAfter struct{}

const failMarker = "refused after the corpus projector"

func (failAfter) Prefixes() [][]byte { return [][]byte{[]byte("p/test-fail/")} }

func (failAfter) Apply(_ *store.Tx, se *store.StoredEvent) error {
	if strings.Contains(string(se.Event.Data), failMarker) {
		return fmt.Errorf("test: %s", failMarker)
	}
	return nil
}

// TestProjectionsRebuildTheSame: what the projector stores while the writes
// run (taking what each write already read, and its own memos) is what a
// Rebuild derives from the log alone, with refused and replayed writes
// among them, and writes refused after the projector ran.
func TestProjectionsRebuildTheSame(t *testing.T) {
	f := openSearchFixture(t, "")
	f.st.Register(failAfter{})
	p, q := f.agent(), f.agent()
	var convs []string
	for i := range 40 {
		if i%6 == 5 && len(convs) > 0 {
			for _, who := range []*api.Principal{p, q} {
				bad := writeIn{ConversationID: convs[0], Content: text(failMarker), Kind: &[]string{"claim"}, OperationToken: fmt.Sprint("fail-", i)}
				if _, err := f.s.write(context.Background(), who, &bad, false); err == nil || !strings.Contains(err.Error(), failMarker) {
					t.Fatalf("write %d: %v, want the later projector's refusal", i, err)
				}
			}
		}
		in := writeIn{Content: text(fmt.Sprint("message <", i, "> & more")), Kind: &[]string{Kinds[i%len(Kinds)].Kind}}
		if i%3 == 0 {
			in.Tags = []string{fmt.Sprint("t", i%4), "all"}
		}
		if i%5 == 0 {
			in.Payload = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
		}
		who := p
		if i%2 == 1 {
			who = q
		}
		if i%7 == 0 {
			in.Subject = fmt.Sprint("subject ", i)
			convs = append(convs, f.post(who, in).ConversationID)
			continue
		}
		in.ConversationID = convs[i%len(convs)]
		f.post(who, in)
		if i%11 == 0 { // a refused write, then a replayed one
			bad := writeIn{ConversationID: "no-such-conversation", Content: text("x"), OperationToken: fmt.Sprint("bad-", i)}
			if _, err := f.s.write(context.Background(), who, &bad, false); err == nil {
				t.Fatal("append to a missing conversation accepted")
			}
			again := in
			again.OperationToken = fmt.Sprint("op-", f.ops)
			if res, err := f.s.write(context.Background(), who, &again, false); err != nil || !res.replayed {
				t.Fatalf("replay: %v %v", err, res.replayed)
			}
		}
	}
	before := projections(t, f.st)
	if err := f.st.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := projections(t, f.st)
	if len(before) != len(after) {
		t.Fatalf("%d projection keys, %d after a rebuild", len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("%q:\nwritten %s\nrebuilt %s", k, v, after[k])
		}
	}
}
