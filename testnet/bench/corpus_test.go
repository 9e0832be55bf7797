package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

type ackTest struct {
	body string
	seq  uint64
	ok   bool
}

var ackTests = []ackTest{
	{`{"conversation_id":"c","message_id":"m","subject":"a \"sequence\": 9","sequence":42,"message":{"sequence":42}}`, 42, true},
	{`{"sequence":7}`, 7, true},
	{`{"message_id":"m"}`, 0, false},
	{`{"sequence":"x"}`, 0, false},
}

func TestAckSequence(t *testing.T) {
	for _, tc := range ackTests {
		seq, ok := ackSequence([]byte(tc.body))
		if seq != tc.seq || ok != tc.ok {
			t.Errorf("%s: got %d %v, want %d %v", tc.body, seq, ok, tc.seq, tc.ok)
		}
	}
}

type expandTest struct {
	in   []string
	want []string
}

var expandTests = []expandTest{
	{[]string{GroupAll}, AllPhases},
	{[]string{GroupParley, PhaseCeiling}, []string{PhaseHTTP, PhaseMCP, PhaseCeiling}},
	{[]string{GroupCorpus}, []string{PhaseSearch, PhaseSync, PhaseAppends, PhaseFanout}},
	{[]string{PhaseFanout, PhaseHTTP}, []string{PhaseFanout, PhaseHTTP}},
}

func TestExpandPhases(t *testing.T) {
	for _, tc := range expandTests {
		got, err := ExpandPhases(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%v: got %v %v, want %v", tc.in, got, err, tc.want)
		}
	}
	if _, err := ExpandPhases([]string{"posts"}); err == nil {
		t.Error("an unknown phase was accepted")
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestText checks that the generated bodies are JSON, the same for the same
// seed, and that word frequencies have the Zipf shape: a few words in most
// messages, many distinct words, many of them rare.
func TestText(t *testing.T) {
	v := newVocabulary(5000, 1)
	if len(v.words) != 5000 || v.words[0] != "the" {
		t.Fatalf("vocabulary of %d words starting %q", len(v.words), v.words[0])
	}
	if w := newVocabulary(5000, 1); !slices.Equal(w.words, v.words) {
		t.Fatal("the same seed made another vocabulary")
	}
	g, h := v.gen(7), v.gen(7)
	docs := 2000
	withThe, counts := 0, map[string]int{}
	for i := range docs {
		b := g.appendBody(nil, i%20 == 0)
		if !bytes.Equal(b, h.appendBody(nil, i%20 == 0)) {
			t.Fatal("the same seed wrote another body")
		}
		var m struct {
			Subject string   `json:"subject"`
			Content string   `json:"content"`
			Kind    []string `json:"kind"`
			Tags    []string `json:"tags"`
		}
		if err := json.Unmarshal(b, &m); err != nil || m.Content == "" || len(m.Kind) != 1 || (i%20 == 0) != (m.Subject != "") {
			t.Fatalf("body %s: %+v %v", b, m, err)
		}
		seen := map[string]bool{}
		for _, w := range strings.FieldsFunc(strings.ToLower(m.Content), func(r rune) bool { return r < 'a' || r > 'z' }) {
			counts[w]++
			seen[w] = true
		}
		if seen["the"] {
			withThe++
		}
	}
	rare := 0
	for _, n := range counts {
		if n <= 3 {
			rare++
		}
	}
	if withThe < docs*3/4 || len(counts) < 3000 || rare < len(counts)/3 {
		t.Errorf(`"the" in %d of %d messages; %d distinct words, %d of them seen at most 3 times`, withThe, docs, len(counts), rare)
	}
	if q := g.query(); q == "" || len(strings.Fields(q)) > 3 {
		t.Errorf("query %q", q)
	}
}

// TestCorpusSmoke runs every corpus phase briefly against an in-process
// node with a durable store.
func TestCorpusSmoke(t *testing.T) {
	opts := DefaultOptions()
	opts.Phases = []string{GroupCorpus}
	opts.Concurrency = 4
	opts.Warmup = 50 * time.Millisecond
	opts.Duration = 400 * time.Millisecond
	opts.Corpus.Runs = 1
	opts.Corpus.Messages = 300
	opts.Corpus.Vocabulary = 2000
	opts.Corpus.Queries = 50
	opts.Corpus.SearchClients = []int{2}
	opts.Corpus.SyncPage = 40
	opts.Corpus.Subscribers = 20
	var prof bytes.Buffer
	opts.CPUProfile, opts.ProfilePhase = &prof, PhaseSync
	rep, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Corpus
	if c == nil || c.Load == nil || c.Appends == nil || c.Search == nil || c.Sync == nil || c.Fanout == nil {
		t.Fatalf("corpus report %+v", c)
	}
	if c.Load.Held < 300 || c.Load.Errors != 0 {
		t.Errorf("load %+v", c.Load)
	}
	for _, r := range c.Appends.Runs {
		if r.OK == 0 || r.Errors != 0 {
			t.Errorf("appends: %d ok, %d errors %v", r.OK, r.Errors, r.ErrorSamples)
		}
	}
	if c.Appends.Rate <= 0 || c.Appends.OfTarget <= 0 {
		t.Errorf("appends %+v", c.Appends)
	}
	for _, l := range c.Search.Levels {
		if l.Rate <= 0 || l.P99 <= 0 || l.Runs[0].Errors != 0 || l.Empty == 1 {
			t.Errorf("search level %+v", l)
		}
	}
	for _, r := range slices.Concat(c.Sync.Snapshot, c.Sync.Changes) {
		// Pages of 40 over 300+ messages: the snapshot has several pages.
		if r.Messages < 300 || r.Missing != 0 || r.Duplicates != 0 || r.Others != 0 || r.Requests < 8 {
			t.Errorf("sync %+v", r)
		}
	}
	if !c.Sync.Complete {
		t.Error("sync incomplete")
	}
	f := c.Fanout.Runs[0]
	if !c.Fanout.AllReceived || f.Writes == 0 || f.Delivered != int64(f.Writes)*20 || f.FromAck.Count != int(f.Delivered) {
		t.Errorf("fanout %+v", f)
	}
	if prof.Len() == 0 {
		t.Error("no CPU profile of the sync phase")
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil || !strings.Contains(table.String(), "fan-out") {
		t.Errorf("table %q %v", table.String(), err)
	}
	t.Logf("\n%s", table.String())
}
