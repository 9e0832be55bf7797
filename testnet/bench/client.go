package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MCPProtocolVersion is the MCP revision the generator speaks.
const MCPProtocolVersion = "2025-06-18"

// postTool is the MCP tool that posts a message into a thread.
const postTool = "post_threads_id_messages"

// NewClient returns the HTTP client every phase uses: keep-alive, one idle
// connection kept per agent, no compression (bodies are small and loopback
// is fast), no proxy (a benchmark through a proxy measures the proxy).
func NewClient(concurrency int) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext:         d.DialContext,
			MaxIdleConns:        2 * concurrency,
			MaxIdleConnsPerHost: concurrency,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
}

// Agent is one posting identity: its bearer token and the thread it posts
// into.
type Agent struct {
	Token  string `json:"-"`
	Thread string `json:"thread"`
}

// noteBody is the JSON of the agent's seq-th note; it varies so that no two
// messages are alike, which is what real agents send.
func noteBody(agent, seq int) []byte {
	b := make([]byte, 0, 96)
	b = append(b, `{"kind":"note","body":"bench note from agent `...)
	b = strconv.AppendInt(b, int64(agent), 10)
	b = append(b, `, number `...)
	b = strconv.AppendInt(b, int64(seq), 10)
	return append(b, `"}`...)
}

// HTTPPoster posts notes with POST {base}/api/v1/threads/{id}/messages; a
// 200 is a success. The ceiling phase uses it too, against the trivial
// handler, so both loops do the same client work.
func HTTPPoster(client *http.Client, base string, agents []Agent) Poster {
	urls := make([]string, len(agents))
	auth := make([]string, len(agents))
	for i, a := range agents {
		urls[i] = strings.TrimRight(base, "/") + "/api/v1/threads/" + url.PathEscape(a.Thread) + "/messages"
		auth[i] = "Bearer " + a.Token
	}
	return func(ctx context.Context, agent, seq int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, urls[agent], bytes.NewReader(noteBody(agent, seq)))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", auth[agent])
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			_, err := io.Copy(io.Discard, resp.Body) // drained, the connection is reused
			return err
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return httpFailure(resp.StatusCode, raw)
	}
}

// httpFailure names a non-200 answer by status and the refusal's reason.
func httpFailure(status int, raw []byte) *Failure {
	var ref struct {
		Reason string `json:"reason"`
	}
	kind := "HTTP " + strconv.Itoa(status)
	if json.Unmarshal(raw, &ref) == nil && ref.Reason != "" {
		kind += " " + ref.Reason
	}
	return &Failure{Kind: kind, Detail: string(bytes.TrimSpace(raw))}
}

// rpcAnswer is the part of a JSON-RPC answer the generator looks at.
type rpcAnswer struct {
	Result *struct {
		IsError           bool `json:"isError"`
		StructuredContent struct {
			Reason string `json:"reason"`
		} `json:"structuredContent"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// mcpCall sends one JSON-RPC request over stateless streamable HTTP (a plain
// POST; the node answers application/json) and checks its answer.
func mcpCall(ctx context.Context, client *http.Client, endpoint, auth string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", MCPProtocolVersion)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return httpFailure(resp.StatusCode, raw)
	}
	var ans rpcAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		return &Failure{Kind: "mcp bad answer", Detail: string(raw)}
	}
	switch {
	case ans.Error != nil:
		return &Failure{Kind: "jsonrpc " + strconv.Itoa(ans.Error.Code), Detail: ans.Error.Message}
	case ans.Result == nil:
		return &Failure{Kind: "mcp no result", Detail: string(raw)}
	case ans.Result.IsError:
		return &Failure{Kind: "isError " + ans.Result.StructuredContent.Reason, Detail: string(raw)}
	}
	return nil
}

// MCPInitialize performs the initialize handshake once, as a client would
// before its first call; the stateless node keeps no session from it.
func MCPInitialize(ctx context.Context, client *http.Client, base, token string) error {
	body := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + MCPProtocolVersion +
		`","capabilities":{},"clientInfo":{"name":"relay-bench","version":"1"}}}`
	return mcpCall(ctx, client, mcpEndpoint(base), "Bearer "+token, []byte(body))
}

func mcpEndpoint(base string) string { return strings.TrimRight(base, "/") + "/api/v1/mcp" }

// MCPPoster posts notes with a tools/call of post_threads_id_messages at
// {base}/api/v1/mcp; a result without isError is a success.
func MCPPoster(client *http.Client, base string, agents []Agent) Poster {
	endpoint := mcpEndpoint(base)
	auth := make([]string, len(agents))
	for i, a := range agents {
		auth[i] = "Bearer " + a.Token
	}
	return func(ctx context.Context, agent, seq int) error {
		// The note's own JSON becomes the arguments with the thread added.
		note := noteBody(agent, seq)
		b := make([]byte, 0, len(note)+160)
		b = append(b, `{"jsonrpc":"2.0","id":`...)
		b = strconv.AppendInt(b, int64(seq+1), 10)
		b = append(b, `,"method":"tools/call","params":{"name":"`+postTool+`","arguments":{"id":`...)
		b = strconv.AppendQuote(b, agents[agent].Thread) // th_… keys are plain ASCII
		b = append(b, ',')
		b = append(b, note[1:]...)
		b = append(b, `}}`...)
		return mcpCall(ctx, client, endpoint, auth[agent], b)
	}
}

// postJSON sends in as JSON with a bearer token and decodes a 200 answer
// into out.
func postJSON(ctx context.Context, client *http.Client, u, token string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %w", u, httpFailure(resp.StatusCode, raw))
	}
	return json.Unmarshal(raw, out)
}

// SetupAgents issues n agent tokens with the right to write, as the realm's
// human, and opens one thread per agent on board 1 with the agent's token.
// label prefixes the tokens' labels so that runs against one node can be
// told apart.
func SetupAgents(ctx context.Context, client *http.Client, base, operatorToken, label string, n int) ([]Agent, error) {
	base = strings.TrimRight(base, "/")
	agents := make([]Agent, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var tok struct {
				Token string `json:"token"`
			}
			err := postJSON(ctx, client, base+"/api/v1/tokens", operatorToken,
				map[string]any{"label": fmt.Sprintf("%s %d", label, i), "rights": []string{"write"}}, &tok)
			if err != nil {
				errs[i] = fmt.Errorf("agent %d: token: %w", i, err)
				return
			}
			var post struct {
				Thread struct {
					ID string `json:"id"`
				} `json:"thread"`
			}
			err = postJSON(ctx, client, base+"/api/v1/boards/1/threads", tok.Token,
				map[string]any{"kind": "ask", "body": fmt.Sprintf("Benchmark thread of agent %d: where does the time go?", i)}, &post)
			if err != nil {
				errs[i] = fmt.Errorf("agent %d: thread: %w", i, err)
				return
			}
			if post.Thread.ID == "" {
				errs[i] = fmt.Errorf("agent %d: thread: the answer names no thread", i)
				return
			}
			agents[i] = Agent{Token: tok.Token, Thread: post.Thread.ID}
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
