package realm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"relay/testnet/cputime"
)

// BenchmarkHTTPPost posts notes through the node's HTTP handler, as relay
// bench's agents do but without the network: 16 agents per GOMAXPROCS,
// each with its own token and thread, on the in-memory store. cpu-µs/op
// is the process's CPU per post (handler, registry, op, committer and
// writer), whatever else runs on the machine.
func BenchmarkHTTPPost(b *testing.B) {
	tn := startNodeAt(b, "bench", b.TempDir(), func(c *Config) { c.InMemory = true; c.RateLimit = 0 })
	h := tn.Handler()
	call := func(token, path, body string) (int, []byte) {
		r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader([]byte(body)))
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.Bytes()
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	cpu := cputime.Now()
	defer func() {
		b.ReportMetric(float64((cputime.Now()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
	}()
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(1)
		code, raw := call(tn.operator, "/api/v1/tokens", `{"label":"bench-`+strconv.FormatInt(i, 10)+`","rights":["write"]}`)
		var tok struct{ Token string }
		if code != http.StatusOK || json.Unmarshal(raw, &tok) != nil {
			b.Errorf("issue: %d %s", code, raw)
			return
		}
		code, raw = call(tok.Token, "/api/v1/boards/1/threads", `{"kind":"ask","body":"Where does the time go?"}`)
		var th struct{ Thread struct{ ID string } }
		if code != http.StatusOK || json.Unmarshal(raw, &th) != nil {
			b.Errorf("open: %d %s", code, raw)
			return
		}
		path := "/api/v1/threads/" + th.Thread.ID + "/messages"
		body := make([]byte, 0, 96)
		for n := 0; pb.Next(); n++ {
			body = append(body[:0], `{"kind":"note","body":"bench note from agent `...)
			body = strconv.AppendInt(body, i, 10)
			body = append(body, `, number `...)
			body = strconv.AppendInt(body, int64(n), 10)
			body = append(body, `"}`...)
			if code, raw := call(tok.Token, path, string(body)); code != http.StatusOK {
				b.Errorf("post: %d %s", code, raw)
				return
			}
		}
	})
}
