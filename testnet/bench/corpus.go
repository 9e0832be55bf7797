package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// CorpusAgent is one registered corpus agent, onboarded, with the
// conversation it appends to.
type CorpusAgent struct {
	ID           string `json:"-"` // the agent_id: a private credential
	Endpoint     string `json:"-"`
	Author       string `json:"author_id"`
	Conversation string `json:"conversation_id"`
}

// corpusWriter is one agent's writes: its text, its Operation-Tokens and
// the sequences the node acknowledged. Owned by one goroutine at a time.
type corpusWriter struct {
	client *http.Client
	base   string
	agent  *CorpusAgent
	gen    *textGen
	prefix string // of its Operation-Tokens, unique to this generator and agent
	n      int    // writes sent, numbering the tokens
	buf    []byte
	auth   string
	// convEvery starts a new conversation every convEvery writes; 0 never.
	convEvery int
	inConv    int
	// acks are the sequences of the writes the node acknowledged, when
	// keepAcks.
	acks     []uint64
	keepAcks bool
}

func newWriter(client *http.Client, base string, a *CorpusAgent, v *vocabulary, prefix string, seed uint64) *corpusWriter {
	return &corpusWriter{client: client, base: strings.TrimRight(base, "/"), agent: a, gen: v.gen(seed),
		prefix: prefix, auth: "Bearer " + a.ID, buf: make([]byte, 0, 1024)}
}

// write sends the writer's next message (a new conversation when it is
// due) and waits for the node's answer: 201 means the message is durable.
func (w *corpusWriter) write(ctx context.Context) (uint64, error) {
	create := w.agent.Conversation == "" || w.convEvery > 0 && w.inConv >= w.convEvery
	w.buf = w.gen.appendBody(w.buf[:0], create)
	u := w.base + "/" + w.agent.Endpoint + "/appendToConversation/" + url.PathEscape(w.agent.Conversation)
	if create {
		u = w.base + "/" + w.agent.Endpoint + "/createConversation"
	}
	w.n++
	tok := w.prefix + strconv.Itoa(w.n)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(w.buf))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", w.auth)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Operation-Token", tok)
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusCreated {
		return 0, corpusFailure(resp.StatusCode, raw)
	}
	seq, ok := ackSequence(raw)
	if !ok {
		return 0, &Failure{Kind: "bad answer", Detail: string(raw)}
	}
	if create {
		var out struct {
			ConversationID string `json:"conversation_id"`
		}
		if err := json.Unmarshal(raw, &out); err != nil || out.ConversationID == "" {
			return 0, &Failure{Kind: "bad answer", Detail: string(raw)}
		}
		w.agent.Conversation, w.inConv = out.ConversationID, 0
	}
	w.inConv++
	if w.keepAcks {
		w.acks = append(w.acks, seq)
	}
	return seq, nil
}

// ackSequence finds the write's sequence in its answer without decoding it
// all: the answer's first "sequence" member is the top-level one (the
// fields before it are ids, the subject and a time, and a JSON string
// cannot hold an unescaped quote).
func ackSequence(raw []byte) (uint64, bool) {
	const key = `"sequence":`
	i := bytes.Index(raw, []byte(key))
	if i < 0 {
		return 0, false
	}
	rest := raw[i+len(key):]
	j := 0
	for j < len(rest) && '0' <= rest[j] && rest[j] <= '9' {
		j++
	}
	n, err := strconv.ParseUint(string(rest[:j]), 10, 64)
	return n, err == nil
}

// corpusFailure names a refused corpus request by status and error.code.
func corpusFailure(status int, raw []byte) *Failure {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	kind := "HTTP " + strconv.Itoa(status)
	if json.Unmarshal(raw, &e) == nil && e.Error.Code != "" {
		kind += " " + e.Error.Code
	}
	return &Failure{Kind: kind, Detail: string(bytes.TrimSpace(raw))}
}

// runID is a random prefix of this generator's Operation-Tokens, so that
// two runs against one node never collide.
func runID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// RegisterCorpusAgents registers n corpus agents as a new agent would: POST
// /register with an empty body, then GET /auth.md with the credential (until
// then its first write is refused with 428).
func RegisterCorpusAgents(ctx context.Context, client *http.Client, base string, n int) ([]*CorpusAgent, error) {
	base = strings.TrimRight(base, "/")
	agents := make([]*CorpusAgent, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			agents[i], errs[i] = registerCorpusAgent(ctx, client, base)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("corpus agent %d: %w", i, errs[i])
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return agents, nil
}

func registerCorpusAgent(ctx context.Context, client *http.Client, base string) (*CorpusAgent, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/register", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("register: %w", corpusFailure(resp.StatusCode, raw))
	}
	var reg struct {
		AgentID    string `json:"agent_id"`
		EndpointID string `json:"endpoint_id"`
		AuthorID   string `json:"author_id"`
		Guide      struct {
			URL string `json:"url"`
		} `json:"guide"`
	}
	if err := json.Unmarshal(raw, &reg); err != nil || reg.AgentID == "" || reg.EndpointID == "" {
		return nil, fmt.Errorf("register: unexpected answer %s", raw)
	}
	guide := reg.Guide.URL
	if guide == "" {
		guide = "/auth.md"
	}
	if !strings.HasPrefix(guide, "http") {
		guide = base + guide
	}
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, guide, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+reg.AgentID)
	resp, err = client.Do(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("guide %s: HTTP %d", guide, resp.StatusCode)
	}
	return &CorpusAgent{ID: reg.AgentID, Endpoint: reg.EndpointID, Author: reg.AuthorID}, nil
}
