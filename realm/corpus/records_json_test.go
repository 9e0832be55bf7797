package corpus

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// reflectMarshal is marshal without the hand encoders: what every record
// was encoded with before them.
func reflectMarshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return unescapeHTML(b), nil
}

// sameJSON fails t unless marshal encodes v byte for byte as reflection
// does (or both refuse it).
func sameJSON(t *testing.T, name string, v any) {
	t.Helper()
	if _, ok := v.(recordJSON); !ok {
		t.Fatalf("%s: %T encodes by reflection", name, v)
	}
	got, gerr := marshal(v)
	want, werr := reflectMarshal(v)
	if (gerr != nil) != (werr != nil) {
		t.Fatalf("%s: hand error %v, reflection error %v", name, gerr, werr)
	}
	if string(got) != string(want) {
		t.Fatalf("%s:\nhand       %s\nreflection %s", name, got, want)
	}
}

var oddStrings = []string{
	"", "plain", "<b>&amp;</b>", `quote " backslash \ slash /`, "\\u003c stays", "\\\u003c", "tab\t nl\n cr\r bs\b ff\f",
	"nul \x00 esc \x1b del \x7f", "é ü 中文 🙂", "line\u2028para\u2029", "bad \xff\xfe utf8", "half \xe2\x80", "\u00e9\u0301",
}

var oddPayloads = []json.RawMessage{
	nil, json.RawMessage(`null`), json.RawMessage(`{"a":"<b>&"}`), json.RawMessage(`"\u003c\u0026"`),
	json.RawMessage(` [1, 2 ,{"x" : true}] `), json.RawMessage("{\"x\":\"é\u2028\"}"), json.RawMessage(`{"x":"\u2028"}`),
	json.RawMessage(`1.50e+3`), json.RawMessage(`{`), json.RawMessage(`{"a":"b"} x`), json.RawMessage("\"\x7f\""), json.RawMessage(`{}`),
	json.RawMessage{},
}

var oddTimes = func() []time.Time {
	ny, _ := time.LoadLocation("America/New_York")
	return []time.Time{
		{}, time.UnixMilli(1764441600123).UTC(), time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 29, 21, 0, 0, 120000000, time.FixedZone("x", 3600)), time.Date(2026, 1, 2, 3, 4, 5, 6, ny),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.Local),
	}
}()

// TestRecordsJSON holds every hand encoder to encoding/json (through
// marshal) for every field: values that are omitted, null, empty, odd
// strings, payloads of every shape, times of every location and range.
func TestRecordsJSON(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	str := func() string { return oddStrings[r.Intn(len(oddStrings))] }
	strs := func() []string {
		switch r.Intn(4) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		out := make([]string, 1+r.Intn(3))
		for i := range out {
			out[i] = str()
		}
		return out
	}
	strp := func() *string {
		if r.Intn(4) == 0 {
			return nil
		}
		s := str()
		return &s
	}
	tm := func() time.Time { return oddTimes[r.Intn(len(oddTimes))] }
	boolp := func() *bool {
		if r.Intn(3) == 0 {
			return nil
		}
		b := r.Intn(2) == 0
		return &b
	}
	for i := range 5000 {
		payload := oddPayloads[r.Intn(len(oddPayloads))]
		m := Message{MessageID: str(), ConversationID: str(), Content: strp(), Payload: payload, HasPayload: r.Intn(2) == 0,
			AuthorID: str(), CreatedAt: tm(), Sequence: r.Uint64() >> uint(r.Intn(64)), Kind: strs(), Tags: strs(), Mentions: strs(),
			SchemaName: str(), SchemaVersion: r.Intn(3) - 1, SchemaValidated: boolp(), Realm: str(), CID: str()}
		sameJSON(t, "message", &m)
		d := changeData(&m, str())
		if r.Intn(3) == 0 {
			d.SchemaVersion = nil
		}
		if r.Intn(5) == 0 {
			var nilRaw json.RawMessage
			d.Payload = &nilRaw
		}
		sameJSON(t, "change data", d)
		if data, err := marshal(d); err == nil {
			ch := Change{SchemaVersion: r.Intn(3), Sequence: r.Uint64(), EventType: str(), ResourceID: str(), RecordedAt: tm(), Data: data}
			got, gerr := encodeChange(&ch)
			want, werr := reflectMarshal(&ch)
			if (gerr != nil) != (werr != nil) || string(got) != string(want) {
				t.Fatalf("change envelope:\nhand       %s (%v)\nreflection %s (%v)", got, gerr, want, werr)
			}
		}
		c := Conversation{ConversationID: str(), Subject: str(), RootMessageID: str(), AuthorID: str(), CreatedAt: tm(), UpdatedAt: tm(),
			MessageCount: r.Intn(1 << 20), CreatedSequence: r.Uint64(), LastSequence: r.Uint64(), Realm: str(), CID: str()}
		sameJSON(t, "conversation", &c)
		if i == 0 {
			sameJSON(t, "nil message", (*Message)(nil))
			sameJSON(t, "nil change", (*changeMessage)(nil))
			sameJSON(t, "nil conversation", (*Conversation)(nil))
		}
	}
}

// FuzzRecordStrings holds the string and payload encoders to encoding/json
// for any input.
func FuzzRecordStrings(f *testing.F) {
	for _, s := range oddStrings {
		f.Add(s, s)
	}
	for _, p := range oddPayloads {
		f.Add(strings.Repeat("<&>", 2), string(p))
	}
	f.Fuzz(func(t *testing.T, s, payload string) {
		m := Message{MessageID: s, Content: &s, Kind: []string{s}, Payload: json.RawMessage(payload), HasPayload: true}
		sameJSON(t, "message", &m)
		sameJSON(t, "change data", changeData(&m, s))
	})
}
