package realm

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"relay/protocol"
	"relay/realm/api"
)

// clock is a limiter's time, moved by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }
func testLimiter(perMinute int) (*limiter, *clock) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	l := newLimiter(perMinute)
	l.now, l.base, l.swept = c.now, c.t, c.t
	return l, c
}

// TestLimiterAnyMinute: no 60 seconds admit more than the limit, however the
// requests are spread, and a caller pacing at the limit is never refused.
func TestLimiterAnyMinute(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	p := &api.Principal{TokenID: 7}
	for _, tc := range []struct {
		name  string
		every time.Duration // between requests
		n     int           // requests sent
	}{
		{"a burst", 0, 1000},
		{"at twice the rate", 50 * time.Millisecond, 3000},
		{"a little over the rate", 95 * time.Millisecond, 3000},
		{"in bursts of 50 every 4 s", 0, 0}, // 750 a minute, in bursts
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, c := testLimiter(600)
			var admitted []time.Time
			send := func() {
				if _, ref := l.allow(p, r); ref == nil {
					admitted = append(admitted, c.now())
				} else if ref.Reason != "rate_limited" || ref.Details["retry_after_seconds"].(int) < 1 {
					t.Fatalf("refusal: %v", ref)
				}
			}
			if tc.n == 0 {
				for range 60 {
					for range 50 {
						send()
					}
					c.add(4 * time.Second)
				}
			}
			for range tc.n {
				send()
				c.add(tc.every)
			}
			for i := range admitted {
				j := i
				for j < len(admitted) && admitted[j].Sub(admitted[i]) < time.Minute {
					j++
				}
				if j-i > 600 {
					t.Fatalf("%d requests admitted within a minute from %v", j-i, admitted[i].Sub(admitted[0]))
				}
			}
			if len(admitted) < 600 {
				t.Fatalf("only %d admitted", len(admitted))
			}
		})
	}
	l, c := testLimiter(600)
	for i := range 3000 {
		if _, ref := l.allow(p, r); ref != nil {
			t.Fatalf("request %d at the rate, 100 ms apart, refused: %v", i, ref)
		}
		c.add(100 * time.Millisecond)
	}
}

// TestLimiterRetryAfter: a refusal says when the oldest counted request
// leaves the window, and a request then is admitted.
func TestLimiterRetryAfter(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	p := &api.Principal{TokenID: 1}
	l, c := testLimiter(3)
	for range 3 {
		if _, ref := l.allow(p, r); ref != nil {
			t.Fatal(ref)
		}
		c.add(10 * time.Second)
	}
	_, ref := l.allow(p, r) // 30 s after the first
	if ref == nil || ref.Details["retry_after_seconds"] != 30 {
		t.Fatalf("refusal: %v", ref)
	}
	c.add(30 * time.Second)
	if _, ref := l.allow(p, r); ref != nil {
		t.Fatalf("refused %v after retry_after", ref)
	}
	// Another caller has a window of its own.
	if _, ref := l.allow(&api.Principal{TokenID: 2}, r); ref != nil {
		t.Fatal(ref)
	}
}

// TestLimiterRefund: a refunded request is not counted, only once, and a
// refund after its slot left the window takes nothing from later ones.
func TestLimiterRefund(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	p := &api.Principal{TokenID: 1}
	l, c := testLimiter(2)
	a, _ := l.allow(p, r)
	b, _ := l.allow(p, r)
	if _, ref := l.allow(p, r); ref == nil {
		t.Fatal("a third request admitted")
	}
	a.refund()
	a.refund()
	if _, ref := l.allow(p, r); ref != nil {
		t.Fatalf("after a refund: %v", ref)
	}
	if _, ref := l.allow(p, r); ref == nil {
		t.Fatal("a refund counted twice")
	}
	c.add(2 * time.Minute)
	x, _ := l.allow(p, r)
	b.refund() // long gone
	if _, ref := l.allow(p, r); ref != nil {
		t.Fatalf("second request of the new minute: %v", ref)
	}
	if _, ref := l.allow(p, r); ref == nil {
		t.Fatal("an old refund freed a new request")
	}
	_ = x
	var none *admission
	none.refund() // the limiter off
}

// TestImagesRateLimited: GET /api/v1/images/{cid}, which asks the peers for
// an image the node does not hold, counts against the client address's
// limit like any request without a credential.
func TestImagesRateLimited(t *testing.T) {
	tn := startNodeAt(t, "ainotes", t.TempDir(), rateLimit(3))
	path := tn.srv.URL + "/api/v1/images/" + protocol.BlobCID([]byte("no such image")).String()
	for i := range 4 {
		resp, err := http.Get(path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusNotFound
		if i == 3 {
			want = http.StatusTooManyRequests
		}
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i+1, resp.StatusCode, want)
		}
		if want == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Fatal("a 429 without Retry-After")
		}
	}
}
