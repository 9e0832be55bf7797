package realm

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/internal/clientaddr"
)

// limiter is the node's rate limit: per credential at most perMinute
// requests in any minute; requests without a credential are limited per
// client address the same way. Zero turns it off.
//
// Each caller's admitted requests are kept as their times, at most
// perMinute of them: a request is admitted while fewer than perMinute came
// in the minute before it, so no 60 seconds ever admit more (a token bucket
// as deep as the limit would admit twice the limit in the first minute
// after a pause), and a caller keeping to the rate is never refused. A
// refused request is not counted.
type limiter struct {
	perMinute int
	now       func() time.Time
	base      time.Time // times are kept as offsets from base, on the monotonic clock

	mu      sync.Mutex
	windows map[string]*window
	swept   time.Time
}

// window is one caller's admitted requests of the last minute: their
// times, oldest first.
type window struct {
	at []time.Duration
}

// expire drops the requests that are a minute old at now.
func (w *window) expire(now time.Duration) {
	i := sort.Search(len(w.at), func(i int) bool { return w.at[i] > now-time.Minute })
	w.at = w.at[i:]
}

func newLimiter(perMinute int) *limiter {
	now := time.Now()
	return &limiter{perMinute: perMinute, now: time.Now, base: now, windows: map[string]*window{}, swept: now}
}

// admission is one admitted request, which refund takes back: nil when the
// limiter is off.
type admission struct {
	l     *limiter
	key   string
	at    time.Duration
	agent bool // the caller is a corpus agent, whose write allowance it is
	once  sync.Once
}

// allow admits one request of the caller, or returns a rate_limited
// refusal saying when to retry.
func (l *limiter) allow(p *api.Principal, r *http.Request) (*admission, *protocol.Refusal) {
	if l == nil || l.perMinute <= 0 || r.Context().Value(admittedKey{}) != nil {
		return nil, nil
	}
	k := clientKey(p, r)
	t := l.now()
	now := t.Sub(l.base)
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.Sub(l.swept) > time.Minute {
		l.sweep(now)
		l.swept = t
	}
	w := l.windows[k]
	if w == nil {
		w = &window{}
		l.windows[k] = w
	}
	w.expire(now)
	if len(w.at) >= l.perMinute {
		// The oldest request counted leaves the window a minute after it came.
		secs := max(int(math.Ceil((w.at[0] + time.Minute - now).Seconds())), 1)
		return nil, protocol.Refusef(protocol.ReasonRateLimited, "More than %d requests per minute; retry in %d s.", l.perMinute, secs).
			With("retry_after_seconds", secs).With("limit_per_minute", l.perMinute)
	}
	if n := len(w.at); n > 0 && w.at[n-1] > now {
		now = w.at[n-1] // keep the times in order whatever the clock did
	}
	w.at = append(w.at, now)
	return &admission{l: l, key: k, at: now, agent: p != nil && p.Agent != nil}, nil
}

// refund takes the request back, once, if it is still counted: a write the
// corpus rejected does not use up the caller's allowance.
func (a *admission) refund() {
	if a == nil {
		return
	}
	a.once.Do(func() {
		a.l.mu.Lock()
		defer a.l.mu.Unlock()
		w := a.l.windows[a.key]
		if w == nil {
			return
		}
		i := sort.Search(len(w.at), func(i int) bool { return w.at[i] >= a.at })
		if i < len(w.at) && w.at[i] == a.at {
			w.at = append(w.at[:i:i], w.at[i+1:]...)
		}
	})
}

// sweep forgets the callers with nothing left in their window.
func (l *limiter) sweep(now time.Duration) {
	for k, w := range l.windows {
		if w.expire(now); len(w.at) == 0 {
			delete(l.windows, k)
		}
	}
}

type admissionKey struct{}

// admittedKey marks a request the node makes to itself on behalf of one
// the limiter counted already (an MCP resources/read, served by a GET of
// the resource): the limiter lets it through rather than count the caller
// twice, the second time as an anonymous reader at its address.
type admittedKey struct{}

// withAdmission carries a request's admission to the operation it runs.
func withAdmission(ctx context.Context, a *admission) context.Context {
	if a == nil {
		return ctx
	}
	return context.WithValue(ctx, admissionKey{}, a)
}

// refundRejected takes back the admission of a corpus agent's write that
// was refused: the seed's rejected writes "do not consume write
// allowance". Other refusals count: those of requests without an agent's
// credential (no allowance of an agent's is theirs, and a refund would let
// them send without limit), bodies over the size limit, and failures of
// the node.
func refundRejected(a *admission, op *api.Operation, err error) {
	var ref *protocol.Refusal
	if a == nil || !a.agent || !errors.As(err, &ref) || op.Surface != api.Corpus || op.Method != http.MethodPost ||
		ref.Status() >= 500 || errors.Is(err, errBodyLimit) {
		return
	}
	a.refund()
}

// refusedCredential is the answer to a request whose credential did not
// authenticate: err, or rate_limited once its client address has sent
// more such requests (with requests without a credential) than the limit
// allows, so that trying credentials is limited like anything else. With
// err nil it is nil unless the address is over the limit.
func (n *Node) refusedCredential(r *http.Request, err error) error {
	if _, ref := n.limiter.allow(nil, r); ref != nil {
		return ref
	}
	return err
}

// admissionFrom is the admission withAdmission carries, or nil.
func admissionFrom(ctx context.Context) *admission {
	a, _ := ctx.Value(admissionKey{}).(*admission)
	return a
}

func clientKey(p *api.Principal, r *http.Request) string {
	if p != nil && p.Agent != nil { // a corpus agent: TokenID is 0 for all of them
		return "c" + strconv.FormatUint(p.Agent.N, 10)
	}
	if p != nil {
		return "t" + strconv.FormatUint(p.TokenID, 10)
	}
	return "a" + clientaddr.Key(r.RemoteAddr)
}
