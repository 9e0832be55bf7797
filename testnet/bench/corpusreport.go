package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Targets of the corpus phases, from the issue, for this class of machine
// (2 cores).
const (
	TargetAppendsPerSec = 10000
	TargetSearchP99ms   = 20
)

// CorpusReport is what the corpus phases measured.
type CorpusReport struct {
	Options CorpusOptions `json:"options"`
	// Agents is the number of registered corpus agents writing, one per
	// client.
	Agents int `json:"agents"`
	// Before is the messages of local agents the node held before the
	// corpus phases wrote (a kept data directory, or a running node).
	Before  int            `json:"messages_before"`
	Load    *LoadResult    `json:"load,omitempty"`
	Appends *AppendsResult `json:"appends,omitempty"`
	Search  *SearchResult  `json:"search,omitempty"`
	Sync    *SyncResult    `json:"sync,omitempty"`
	Fanout  *FanoutResult  `json:"fanout,omitempty"`
}

// AppendsResult is the appends phase: several closed-loop runs of every
// agent appending to its own conversation; a write counts when the node
// answers 201, which it does once the message is durable.
type AppendsResult struct {
	Runs []PhaseResult `json:"runs"`
	// Rate, P50 and P99 are the medians over the runs.
	Rate     float64 `json:"rate_per_s"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	Target   float64 `json:"target_per_s"`
	OfTarget float64 `json:"of_target"`
}

// LoadResult is the load that brought the corpus to its size for search
// and sync: the same HTTP writes, every agent at once, a new conversation
// every ConversationSize messages.
type LoadResult struct {
	Written int64 `json:"written"`
	// Held is the messages the node held after the load: those before and
	// every write acknowledged since.
	Held       int              `json:"held"`
	Seconds    float64          `json:"seconds"`
	Rate       float64          `json:"rate_per_s"`
	Errors     int64            `json:"errors"`
	ErrorKinds map[string]int64 `json:"error_kinds,omitempty"`
	CPU        *CPUUse          `json:"cpu,omitempty"`
}

// SearchResult is the search phase: closed loops of searchers at each
// level of concurrency, several runs each.
type SearchResult struct {
	// Corpus is the messages the node held as the phase began.
	Corpus        int           `json:"corpus_messages"`
	Queries       int           `json:"queries"`
	DistinctTerms int           `json:"distinct_terms"`
	Limit         int           `json:"limit"`
	Levels        []SearchLevel `json:"levels"`
	TargetP99     float64       `json:"target_p99_ms"`
}

// SearchLevel is one concurrency of the search phase.
type SearchLevel struct {
	Clients int           `json:"clients"`
	Runs    []PhaseResult `json:"runs"`
	// Rate, P50 and P99 are the medians over the runs.
	Rate float64 `json:"rate_per_s"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	// Empty is the share of queries that found nothing.
	Empty float64 `json:"empty_share"`
	// OfTarget is the p99 target over P99: at least 1 meets it.
	OfTarget float64 `json:"of_target"`
}

// SyncResult is the sync phase: a fresh client copies the corpus, by
// snapshot then changes (the seed's way), and by the change feed alone
// from the start, for comparison.
type SyncResult struct {
	// Messages per second appended while a sync runs.
	WriteRate float64   `json:"write_rate_per_s"`
	Snapshot  []SyncRun `json:"snapshot_runs"`
	Changes   []SyncRun `json:"changes_runs"`
	// Medians of the snapshot runs.
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"messages_per_s"`
	// ChangesSeconds and ChangesRate are the medians of the changes-only runs.
	ChangesSeconds float64 `json:"changes_seconds"`
	ChangesRate    float64 `json:"changes_messages_per_s"`
	// Every run got every acknowledged message up to its cursor, once.
	Complete bool `json:"complete"`
}

// SyncRun is one copy of the corpus.
type SyncRun struct {
	Mode            string  `json:"mode"` // "snapshot+changes" or "changes"
	Seconds         float64 `json:"seconds"`
	SnapshotSeconds float64 `json:"snapshot_seconds,omitempty"`
	Messages        int     `json:"messages"`
	Rate            float64 `json:"messages_per_s"`
	Conversations   int     `json:"conversations,omitempty"`
	ChangesRead     int     `json:"changes_read"`
	Requests        int     `json:"requests"`
	Bytes           int64   `json:"bytes"`
	S               uint64  `json:"snapshot_sequence,omitempty"`
	Cursor          uint64  `json:"cursor"`
	// Missing are acknowledged messages at or below Cursor not in the copy;
	// Duplicates, messages received twice; Others, messages in the copy this
	// generator did not write (another client's, or a write whose answer
	// was lost).
	Missing    int     `json:"missing"`
	Duplicates int     `json:"duplicates"`
	Others     int     `json:"others"`
	Written    int     `json:"written_meanwhile"`
	CPU        *CPUUse `json:"cpu,omitempty"`
}

// FanoutResult is the fan-out phase.
type FanoutResult struct {
	Runs []FanoutRun `json:"runs"`
	// Medians over the runs of the delivery latency from the writer's ack.
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	// AllReceived: in every run every subscriber got every write once.
	AllReceived bool `json:"all_received"`
}

// FanoutRun is one fan-out: Subscribers streams open, Writes appended at a
// steady rate, each delivered to every stream.
type FanoutRun struct {
	Subscribers int     `json:"subscribers"`
	OpenSeconds float64 `json:"open_seconds"`
	Writes      int     `json:"writes"`
	WriteRate   float64 `json:"write_rate_per_s"`
	Expected    int64   `json:"expected_deliveries"`
	Delivered   int64   `json:"delivered"`
	Missing     int64   `json:"missing"`
	Duplicates  int64   `json:"duplicates"`
	// Subscribers that got every write once.
	Complete int `json:"complete_subscribers"`
	// FromAck is receipt time minus the time the writer had the 201;
	// BeforeAck receipts came earlier (the node wakes streams before it
	// answers) and count as 0. FromSend is from the moment the write was
	// sent.
	FromAck   Latency `json:"from_ack"`
	BeforeAck int64   `json:"before_ack"`
	FromSend  Latency `json:"from_send"`
	// DrainSeconds is from the last ack to the last receipt.
	DrainSeconds float64 `json:"drain_seconds"`
	Errors       int64   `json:"errors"`
	CPU          *CPUUse `json:"cpu,omitempty"`
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func medianOf[T any](xs []T, f func(*T) float64) float64 {
	v := make([]float64, len(xs))
	for i := range xs {
		v[i] = f(&xs[i])
	}
	return median(v)
}

func cpuText(c *CPUUse) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f/%.2f", c.ProcessCores, c.OtherCores)
}

func seconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
}

// writeTable prints the corpus part of the report.
func (c *CorpusReport) writeTable(w io.Writer) error {
	o := c.Options
	fmt.Fprintf(w, "\ncorpus: %d agents (one registered agent each); runs per phase: %d; corpus: %d messages; vocabulary: %d words\n",
		c.Agents, o.Runs, o.Messages, o.Vocabulary)
	var tw *tabwriter.Writer
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	table := func() { tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight) }
	if c.Before > 0 {
		fmt.Fprintf(w, "the node held %d messages before\n", c.Before)
	}
	if l := c.Load; l != nil {
		fmt.Fprintf(w, "load: %d messages in %s, %.0f/s, %d errors (cores this/other %s); the node then held %d\n",
			l.Written, seconds(l.Seconds), l.Rate, l.Errors, cpuText(l.CPU), l.Held)
	}
	if a := c.Appends; a != nil {
		fmt.Fprintln(w)
		table()
		row("appends run", "appends/s", "ok", "errors", "p50 ms", "p90 ms", "p99 ms", "max ms", "cores: this/other")
		for i, r := range a.Runs {
			row(fmt.Sprint(i+1), fmt.Sprintf("%.0f", r.Rate), fmt.Sprint(r.OK), fmt.Sprint(r.Errors), fmt.Sprintf("%.2f", r.Latency.P50),
				fmt.Sprintf("%.2f", r.Latency.P90), fmt.Sprintf("%.2f", r.Latency.P99), fmt.Sprintf("%.2f", r.Latency.Max), cpuText(r.CPU))
		}
		row("median", fmt.Sprintf("%.0f", a.Rate), "", "", fmt.Sprintf("%.2f", a.P50), "", fmt.Sprintf("%.2f", a.P99), "",
			fmt.Sprintf("%.0f %% of %d/s", 100*a.OfTarget, TargetAppendsPerSec))
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if s := c.Search; s != nil {
		fmt.Fprintln(w)
		table()
		row("search clients", "queries/s", "ok", "errors", "p50 ms", "p90 ms", "p99 ms", "max ms", "cores: this/other")
		for _, l := range s.Levels {
			for i, r := range l.Runs {
				row(fmt.Sprintf("%d (run %d)", l.Clients, i+1), fmt.Sprintf("%.0f", r.Rate), fmt.Sprint(r.OK), fmt.Sprint(r.Errors),
					fmt.Sprintf("%.2f", r.Latency.P50), fmt.Sprintf("%.2f", r.Latency.P90), fmt.Sprintf("%.2f", r.Latency.P99),
					fmt.Sprintf("%.2f", r.Latency.Max), cpuText(r.CPU))
			}
			row(fmt.Sprintf("%d median", l.Clients), fmt.Sprintf("%.0f", l.Rate), "", "", fmt.Sprintf("%.2f", l.P50), "",
				fmt.Sprintf("%.2f", l.P99), "", fmt.Sprintf("p99 target %d ms: %s", TargetSearchP99ms, meets(l.P99 <= TargetSearchP99ms)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "search: %d distinct queries of 1-3 words (%d distinct terms), limit %d, over %d messages\n",
			s.Queries, s.DistinctTerms, s.Limit, s.Corpus)
		for _, l := range s.Levels {
			fmt.Fprintf(w, "  %d clients: %.1f %% of queries found nothing\n", l.Clients, 100*l.Empty)
		}
	}
	if s := c.Sync; s != nil {
		fmt.Fprintf(w, "\nsync (a fresh client copies the corpus; %.0f messages/s appended meanwhile):\n", s.WriteRate)
		table()
		row("mode", "time", "of it snapshot", "messages", "messages/s", "requests", "MB", "missing", "dup", "others", "cores: this/other")
		for _, r := range slices.Concat(s.Snapshot, s.Changes) {
			snap := "-"
			if r.SnapshotSeconds > 0 {
				snap = seconds(r.SnapshotSeconds)
			}
			row(r.Mode, seconds(r.Seconds), snap, fmt.Sprint(r.Messages), fmt.Sprintf("%.0f", r.Rate), fmt.Sprint(r.Requests),
				fmt.Sprintf("%.1f", float64(r.Bytes)/1e6), fmt.Sprint(r.Missing), fmt.Sprint(r.Duplicates), fmt.Sprint(r.Others), cpuText(r.CPU))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "median: snapshot+changes %s (%.0f messages/s); changes alone %s (%.0f messages/s); complete: %s\n",
			seconds(s.Seconds), s.Rate, seconds(s.ChangesSeconds), s.ChangesRate, yesNo(s.Complete))
	}
	if f := c.Fanout; f != nil {
		fmt.Fprintf(w, "\nfan-out (/corpus/stream; latency from the writer's 201 to receipt):\n")
		table()
		row("run", "subscribers", "writes", "writes/s", "delivered", "missing", "dup", "p50 ms", "p90 ms", "p99 ms", "max ms", "p99 from send", "drain", "cores: this/other")
		for i, r := range f.Runs {
			row(fmt.Sprint(i+1), fmt.Sprint(r.Subscribers), fmt.Sprint(r.Writes), fmt.Sprintf("%.0f", r.WriteRate),
				fmt.Sprintf("%d/%d", r.Delivered, r.Expected), fmt.Sprint(r.Missing), fmt.Sprint(r.Duplicates),
				fmt.Sprintf("%.2f", r.FromAck.P50), fmt.Sprintf("%.2f", r.FromAck.P90), fmt.Sprintf("%.2f", r.FromAck.P99),
				fmt.Sprintf("%.2f", r.FromAck.Max), fmt.Sprintf("%.2f", r.FromSend.P99), seconds(r.DrainSeconds), cpuText(r.CPU))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "median: p50 %.2f ms, p99 %.2f ms; every subscriber got every write: %s\n", f.P50, f.P99, yesNo(f.AllReceived))
	}
	return nil
}

func meets(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}
