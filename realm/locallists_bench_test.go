package realm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/session"
)

// BenchmarkLocalLists reads the realm's local lists as the human, and the
// console's pages made of them, with 30,000 token applications (all but
// 10 decided, each with its token) and 3,000 feature requests (all but 10
// decided): a page should cost what it shows, not every record.
func BenchmarkLocalLists(b *testing.B) {
	tn := startNodeAt(b, "bench", b.TempDir(), rateLimit(0), func(c *Config) { c.InMemory = true })
	ctx := context.Background()
	hid, err := protocol.ParseIdentity("human:operator")
	if err != nil {
		b.Fatal(err)
	}
	all, err := protocol.NewRights("read", "write", "pin", "lock", "verify", "grant")
	if err != nil {
		b.Fatal(err)
	}
	human := &api.Call{Principal: &api.Principal{Identity: hid, Human: true, Rights: all}}
	const requests, features, workers = 30000, 3000, 16
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < requests; i += workers {
				out, err := tn.applyToken(ctx, nil, applyIn{Label: fmt.Sprint("agent ", i), Purpose: "to bench", Model: "m", Client: "c", Provider: "p", Contact: "c"})
				if err != nil {
					b.Error(err)
					return
				}
				if i%3000 == 0 {
					continue // pending
				}
				if _, err := tn.reviewTokenRequest(ctx, human, reviewIn{ID: out.RequestID, Decision: "reject", Reason: "a bench"}); err != nil {
					b.Error(err)
					return
				}
			}
			for i := w; i < features; i += workers {
				var f map[string]any
				if err := call(tn, human, "post_features", map[string]any{"title": fmt.Sprint("feature ", i), "body": "a tool"}, &f); err != nil {
					b.Error(err)
					return
				}
				if i%300 == 0 {
					continue // open
				}
				id := f["feature"].(map[string]any)["id"]
				if err := call(tn, human, "post_features_id_status", map[string]any{"id": id, "status": "rejected"}, nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, op := range []string{"get_token_requests", "get_tokens", "get_features"} {
		b.Run(op, func(b *testing.B) {
			for b.Loop() {
				if _, err := tn.reg.Call(ctx, human.Principal, op, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	cookie, _, err := tn.sessions.Create(ctx, session.ViaSecret)
	if err != nil {
		b.Fatal(err)
	}
	for name, page := range map[string]string{"queue": "/console/", "tokens": "/console/tokens"} {
		b.Run("console "+name, func(b *testing.B) {
			for b.Loop() {
				// A write, so that the queue is gathered again rather
				// than taken from the console's memory of it.
				b.StopTimer()
				if _, err := tn.reg.Call(ctx, human.Principal, "post_inbox_ack", nil); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				req, _ := http.NewRequest("GET", tn.srv.URL+page, nil)
				req.AddCookie(&http.Cookie{Name: session.CookieName, Value: cookie})
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("%s: %d", page, resp.StatusCode)
				}
			}
		})
	}
}

// call runs operation key as c's principal, with args as its JSON input,
// into out.
func call(tn *testNode, c *api.Call, key string, args map[string]any, out *map[string]any) error {
	b, err := json.Marshal(args)
	if err != nil {
		return err
	}
	res, err := tn.reg.Call(context.Background(), c.Principal, key, b)
	if err != nil || out == nil {
		return err
	}
	b, err = json.Marshal(res)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
