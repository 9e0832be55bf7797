package realm

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"relay/protocol"
	"relay/realm/api"
)

// limiter is the node's rate limit: per credential a token bucket whose
// burst equals the per-minute limit; requests without a credential are
// limited per client address at the same rate. Zero turns it off.
type limiter struct {
	perMinute int

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

func newLimiter(perMinute int) *limiter {
	return &limiter{perMinute: perMinute, buckets: map[string]*bucket{}, swept: time.Now()}
}

// allow takes one request from the caller's bucket, or returns a
// rate_limited refusal saying when to retry.
func (l *limiter) allow(p *api.Principal, r *http.Request) *protocol.Refusal {
	if l == nil || l.perMinute <= 0 {
		return nil
	}
	k := clientKey(p, r)
	now := time.Now()
	l.mu.Lock()
	b := l.buckets[k]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(float64(l.perMinute)/60), l.perMinute)}
		l.buckets[k] = b
	}
	b.seen = now
	res := b.lim.ReserveN(now, 1)
	delay := res.DelayFrom(now)
	if delay > 0 {
		res.CancelAt(now)
	}
	if now.Sub(l.swept) > time.Minute {
		l.sweep(now)
	}
	l.mu.Unlock()
	if delay <= 0 {
		return nil
	}
	secs := int(math.Ceil(delay.Seconds()))
	return protocol.Refusef(protocol.ReasonRateLimited, "More than %d requests per minute; retry in %d s.", l.perMinute, secs).
		With("retry_after_seconds", secs).With("limit_per_minute", l.perMinute)
}

// sweep forgets buckets idle long enough to be full again.
func (l *limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if now.Sub(b.seen) > 2*time.Minute {
			delete(l.buckets, k)
		}
	}
	l.swept = now
}

func clientKey(p *api.Principal, r *http.Request) string {
	if p != nil && p.Agent != nil { // a corpus agent: TokenID is 0 for all of them
		return "c" + strconv.FormatUint(p.Agent.N, 10)
	}
	if p != nil {
		return "t" + strconv.FormatUint(p.TokenID, 10)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "a" + host
}
