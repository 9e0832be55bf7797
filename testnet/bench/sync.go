package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// The sync phase: a fresh client copies the whole corpus as the seed says
// to, every page of /corpus/snapshot.json at its sequence S, then
// /corpus/changes.jsonl after S until a page says there is no more, while
// a few agents keep appending. Then the same client again by the change
// feed alone from the start, which is the other way to get everything. The
// copy is checked against every write the node acknowledged to this
// generator: nothing missing up to the copy's cursor, nothing twice.
//
// The client decodes what it needs to check the copy (each record's
// sequence and type), not whole records; a client that keeps them decodes
// more, on its own CPU.

// syncCopy is what one copy holds: message sequences.
type syncCopy struct {
	seqs map[uint64]int // sequence -> times received
	run  SyncRun
}

func (c *syncCopy) add(seq uint64) {
	c.seqs[seq]++
	c.run.Messages++
}

// syncClient is one fresh client's connection to the node.
type syncClient struct {
	client *http.Client
	base   string
	page   int
	run    *SyncRun
}

// get fetches path on the node and hands the answer and its body to read.
func (sc *syncClient) get(ctx context.Context, path string, read func(resp *http.Response, body io.Reader) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, sc.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := sc.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc.run.Requests++
	cr := &countingReader{r: resp.Body}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(cr, 4<<10))
		return fmt.Errorf("GET %s: %w", path, corpusFailure(resp.StatusCode, raw))
	}
	err = read(resp, cr)
	io.Copy(io.Discard, cr)
	sc.run.Bytes += cr.n
	return err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// exportJSON is one export's page, with each item's sequence.
type exportJSON struct {
	Items []struct {
		Sequence uint64 `json:"sequence"`
	} `json:"items"`
	HasMore bool   `json:"has_more"`
	Next    string `json:"next"`
}

type snapshotJSON struct {
	S             uint64      `json:"snapshot_sequence"`
	Conversations *exportJSON `json:"conversations"`
	Messages      *exportJSON `json:"messages"`
	Relationships *exportJSON `json:"relationships"`
	Retractions   *exportJSON `json:"relationship_retractions"`
}

// snapshot reads every page of every export at one S and returns S.
func (sc *syncClient) snapshot(ctx context.Context, c *syncCopy) (uint64, error) {
	var first snapshotJSON
	err := sc.get(ctx, "/corpus/snapshot.json?limit="+strconv.Itoa(sc.page), func(_ *http.Response, body io.Reader) error {
		return json.NewDecoder(body).Decode(&first)
	})
	if err != nil {
		return 0, err
	}
	exports := []struct {
		name string
		page *exportJSON
		take func(seq uint64)
	}{
		{"conversations", first.Conversations, func(uint64) { c.run.Conversations++ }},
		{"messages", first.Messages, c.add},
		{"relationships", first.Relationships, func(uint64) {}},
		{"relationship_retractions", first.Retractions, func(uint64) {}},
	}
	for _, ex := range exports {
		page := ex.page
		if page == nil {
			return 0, fmt.Errorf("snapshot: the first page has no %s export", ex.name)
		}
		for {
			for _, it := range page.Items {
				ex.take(it.Sequence)
			}
			if !page.HasMore {
				break
			}
			if page.Next == "" {
				return 0, fmt.Errorf("snapshot: %s has more but no next link", ex.name)
			}
			var p snapshotJSON
			if err := sc.get(ctx, page.Next, func(_ *http.Response, body io.Reader) error {
				return json.NewDecoder(body).Decode(&p)
			}); err != nil {
				return 0, err
			}
			if p.S != first.S {
				return 0, fmt.Errorf("snapshot: page at %d, the first at %d", p.S, first.S)
			}
			switch ex.name {
			case "conversations":
				page = p.Conversations
			case "messages":
				page = p.Messages
			case "relationships":
				page = p.Relationships
			default:
				page = p.Retractions
			}
			if page == nil {
				return 0, fmt.Errorf("snapshot: a %s page without the export", ex.name)
			}
		}
	}
	return first.S, nil
}

// changes reads /corpus/changes.jsonl after after until a page says it
// reached the head, and returns the last cursor.
func (sc *syncClient) changes(ctx context.Context, c *syncCopy, after uint64) (uint64, error) {
	for {
		var more bool
		err := sc.get(ctx, "/corpus/changes.jsonl?after="+strconv.FormatUint(after, 10)+"&limit="+strconv.Itoa(sc.page),
			func(resp *http.Response, body io.Reader) error {
				s := bufio.NewScanner(body)
				s.Buffer(make([]byte, 0, 64<<10), 1<<20)
				for s.Scan() {
					var env struct {
						Sequence  uint64 `json:"sequence"`
						EventType string `json:"event_type"`
					}
					if err := json.Unmarshal(s.Bytes(), &env); err != nil {
						return fmt.Errorf("changes: %w", err)
					}
					c.run.ChangesRead++
					if env.EventType == "message.created" {
						c.add(env.Sequence)
					}
				}
				if err := s.Err(); err != nil {
					return err
				}
				next, err := strconv.ParseUint(resp.Header.Get("X-Next-Cursor"), 10, 64)
				if err != nil {
					return fmt.Errorf("changes: X-Next-Cursor %q", resp.Header.Get("X-Next-Cursor"))
				}
				after, more = next, resp.Header.Get("X-Has-More") == "true"
				return nil
			})
		if err != nil {
			return 0, err
		}
		if !more {
			return after, nil
		}
	}
}

// syncOnce copies the corpus with a fresh client, by snapshot then changes
// or (snapshot false) by changes from the start.
func (cb *corpusBench) syncOnce(ctx context.Context, withSnapshot bool) (SyncRun, error) {
	client := NewClient(1)
	defer client.CloseIdleConnections()
	c := &syncCopy{seqs: make(map[uint64]int, cb.held()+1024)}
	c.run.Mode = "changes"
	if withSnapshot {
		c.run.Mode = "snapshot+changes"
	}
	sc := &syncClient{client: client, base: cb.base, page: cb.opts.Corpus.SyncPage, run: &c.run}
	stop := cb.trickle(ctx, cb.opts.Corpus.SyncWriteRate)
	cpu := sampleCPU()
	start := time.Now()
	var after uint64
	var err error
	if withSnapshot {
		after, err = sc.snapshot(ctx, c)
		c.run.S = after
		c.run.SnapshotSeconds = time.Since(start).Seconds()
	}
	if err == nil {
		after, err = sc.changes(ctx, c, after)
	}
	elapsed := time.Since(start)
	c.run.CPU = cpu.since()
	c.run.Written = stop()
	if err != nil {
		return c.run, err
	}
	c.run.Seconds, c.run.Cursor = elapsed.Seconds(), after
	c.run.Rate = float64(c.run.Messages) / c.run.Seconds
	// Check the copy against the acknowledged writes.
	acked := map[uint64]bool{}
	for _, w := range cb.writers {
		for _, s := range w.acks {
			if s <= after {
				acked[s] = true
				if c.seqs[s] == 0 {
					c.run.Missing++
				}
			}
		}
	}
	for s, n := range c.seqs {
		if n > 1 {
			c.run.Duplicates += n - 1
		}
		if !acked[s] {
			c.run.Others++
		}
	}
	return c.run, nil
}

func (cb *corpusBench) sync(ctx context.Context) error {
	if err := cb.ensureCorpus(ctx); err != nil {
		return err
	}
	o := cb.opts.Corpus
	res := &SyncResult{WriteRate: o.SyncWriteRate, Complete: true}
	for _, withSnapshot := range []bool{true, false} {
		for r := range o.Runs {
			mode := "by snapshot then changes"
			if !withSnapshot {
				mode = "by changes from the start"
			}
			cb.log("phase sync, run %d of %d: a fresh client copies the corpus %s", r+1, o.Runs, mode)
			cb.prof.hook(PhaseSync)()
			run, err := cb.syncOnce(ctx, withSnapshot)
			cb.prof.stop()
			if err != nil {
				return fmt.Errorf("sync: %w", err)
			}
			if run.Missing > 0 || run.Duplicates > 0 {
				res.Complete = false
			}
			if withSnapshot {
				res.Snapshot = append(res.Snapshot, run)
			} else {
				res.Changes = append(res.Changes, run)
			}
		}
	}
	res.Seconds = medianOf(res.Snapshot, func(r *SyncRun) float64 { return r.Seconds })
	res.Rate = medianOf(res.Snapshot, func(r *SyncRun) float64 { return r.Rate })
	res.ChangesSeconds = medianOf(res.Changes, func(r *SyncRun) float64 { return r.Seconds })
	res.ChangesRate = medianOf(res.Changes, func(r *SyncRun) float64 { return r.Rate })
	cb.rep.Sync = res
	return nil
}
