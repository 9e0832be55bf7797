package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/internal/allow"
	"relay/realm/internal/clientaddr"
	"relay/realm/session"
	"relay/store"
)

// Prefix is where the console lives.
const Prefix = "/console/"

// CSP is the Content-Security-Policy of every console response: nothing
// inline, nothing from elsewhere, never framed.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Config is what the console needs of its node.
type Config struct {
	Realm   string
	HumanID string // the human's identity, human:<name>
	Version string
	// Registry runs every operation the console reads or writes.
	Registry *api.Registry
	Sessions *session.Manager
	// Store is read only for its sequence, which moves when events arrive
	// by no operation (from peers): the live stream and the queue's cache
	// follow it.
	Store *store.Store
	// Human is the principal a session acts as.
	Human func() *api.Principal
	// CheckSecret reports whether a string is the operator secret.
	CheckSecret func(string) bool
	// TrustForwardedProto: see realm.Config.
	TrustForwardedProto bool
	// Refusal says what a person may see of an error, as the API says it
	// (the node's failures, a full disk, …), logging what it may not; nil
	// shows refusals as they are and anything else as internal.
	Refusal func(err error, op string) *protocol.Refusal
	// LoginsPerMinute bounds login attempts per client address; 0 means 10.
	LoginsPerMinute int
	Logger          *slog.Logger
}

// Console is the operator's web console.
type Console struct {
	cfg       Config
	log       *slog.Logger
	done      chan struct{}
	closeOnce sync.Once
	logins    *addrLimiter

	// The work queue as last gathered, valid while neither the registry's
	// Changed channel nor the store's sequence has moved. Templates only
	// read it.
	qmu      sync.Mutex
	qdata    *queueData
	qseq     uint64
	qchanged <-chan struct{}

	// issued holds a token just issued from the form, for the one page
	// after the redirect that shows its secret: a reload of that page
	// shows it no more, and issues nothing. Kept in memory only.
	imu    sync.Mutex
	issued map[string]issuedToken
}

// issuedToken is a token issued from the console, waiting to be shown.
type issuedToken struct {
	cookie string // the session that issued it, the only one that sees it
	res    map[string]any
	at     time.Time
}

// issuedTTL is how long an issued token's secret waits to be shown.
const issuedTTL = 2 * time.Minute

// New returns the console.
func New(cfg Config) *Console {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LoginsPerMinute <= 0 {
		cfg.LoginsPerMinute = 10
	}
	return &Console{cfg: cfg, log: cfg.Logger, done: make(chan struct{}),
		logins: newAddrLimiter(rate.Every(time.Minute/time.Duration(cfg.LoginsPerMinute)), cfg.LoginsPerMinute)}
}

// Close ends the open live streams: call it when the node shuts down.
func (c *Console) Close() { c.closeOnce.Do(func() { close(c.done) }) }

// Handler serves /console and everything under /console/. It has its own
// mux: the console's paths would clash with the corpus's root patterns
// (/{endpoint_id}/…) in one mux, and nothing else lives under /console/.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, f http.HandlerFunc) { mux.Handle(pattern, secure(bounded(f))) }
	h("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, (&url.URL{Path: Prefix, RawQuery: r.URL.RawQuery}).String(), http.StatusMovedPermanently)
	})
	h("GET /console/assets/{name}", c.serveAsset)
	h("GET /console/login", c.loginPage)
	h("POST /console/login", c.login)
	h("POST /console/logout", c.authed(c.logout))

	h("GET /console/{$}", c.authed(c.queuePage))
	h("GET /console/boards", c.authed(c.boardsPage))
	h("GET /console/boards/{id}", c.authed(c.boardPage))
	h("GET /console/threads", c.authed(c.threadsPage))
	h("GET /console/threads/{id}", c.authed(c.threadPage))
	h("GET /console/tokens", c.authed(c.tokensPage))
	h("GET /console/corpus", c.authed(c.corpusPage))
	h("GET /console/corpus/conversations/{id}", c.authed(c.conversationPage))
	h("GET /console/federation", c.authed(c.federationPage))
	h("GET /console/settings", c.authed(c.settingsPage))
	h("POST /console/settings/password", c.authed(c.setPassword))
	h("POST /console/settings/sessions/end", c.authed(c.endSessions))
	h("POST /console/op/{key}", c.authed(c.operation))
	h("GET /console/live", c.authed(c.live))
	pageOrMissing := c.authed(func(w http.ResponseWriter, r *http.Request, s *visit) {
		// A page's path with a slash after it is the page.
		if trimmed := strings.TrimSuffix(r.URL.Path, "/"); isRead(r) && trimmed != r.URL.Path && trimmed != "/console" {
			probe := r.Clone(r.Context())
			probe.URL.Path = trimmed
			if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/console/" {
				u := url.URL{Path: trimmed, RawQuery: r.URL.RawQuery} // this host's, whatever the request line named
				http.Redirect(w, r, u.String(), http.StatusMovedPermanently)
				return
			}
		}
		c.fail(w, r, s, http.StatusNotFound, protocol.Refusef(protocol.ReasonNotFound, "No console page %s.", r.URL.Path))
	})
	h("/console/", func(w http.ResponseWriter, r *http.Request) {
		// A path the console has, under other methods: 405, before any
		// session or CSRF check (RFC 9110, section 15.5.6).
		if methods := allow.Of(mux, r, "/console/"); len(methods) > 0 {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			http.Error(w, r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+strings.Join(methods, ", ")+".", http.StatusMethodNotAllowed)
			return
		}
		pageOrMissing(w, r)
	})
	return mux
}

// Owns reports whether a path is the console's.
func Owns(path string) bool { return path == "/console" || strings.HasPrefix(path, Prefix) }

// secure sets the headers every console response carries.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if !strings.HasPrefix(r.URL.Path, "/console/assets/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// maxFormBytes bounds a console request's body: its forms are short text
// (a post's body is at most 500 characters), and a body is read before
// the login's rate limit or any session is checked.
const maxFormBytes = 64 << 10

// bounded refuses a request body over maxFormBytes, which ParseForm would
// otherwise read up to 10 MB of, from anyone.
func bounded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxFormBytes {
			http.Error(w, "The form is over "+strconv.Itoa(maxFormBytes)+" bytes.", http.StatusRequestEntityTooLarge)
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		}
		next.ServeHTTP(w, r)
	})
}

// visit is one request of a logged-in human.
type visit struct {
	cookie string
	csrf   string
	p      *api.Principal
}

// authed resolves the session; without one a page goes to the login. Every
// POST must carry the session's CSRF token.
func (c *Console) authed(f func(w http.ResponseWriter, r *http.Request, s *visit)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(session.CookieName)
		if err != nil || ck.Value == "" {
			c.toLogin(w, r)
			return
		}
		if _, err := c.cfg.Sessions.Resolve(r.Context(), ck.Value); err != nil {
			if !errors.Is(err, session.ErrNoSession) {
				c.log.Error("console: session", "err", err)
			}
			c.clearCookie(w, r, session.CookieName, "/")
			c.toLogin(w, r)
			return
		}
		p := c.cfg.Human()
		if p == nil {
			c.toLogin(w, r)
			return
		}
		s := &visit{cookie: ck.Value, csrf: session.CSRFToken(ck.Value), p: p}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !session.CheckCSRF(ck.Value, formValue(r, session.CSRFField)) {
				c.fail(w, r, s, http.StatusForbidden, protocol.Refusef(protocol.ReasonCSRF, "This form was not sent by a console page of this session (its CSRF token is missing or wrong). Reload the page and try again."))
				return
			}
		}
		f(w, r, s)
	}
}

// formValue reads a field of a urlencoded form body without the query.
func formValue(r *http.Request, name string) string {
	if err := r.ParseForm(); err != nil {
		return ""
	}
	return r.PostForm.Get(name)
}

func (c *Console) toLogin(w http.ResponseWriter, r *http.Request) {
	if isRead(r) && r.URL.Path != "/console/live" {
		http.Redirect(w, r, "/console/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	// A form sent after the session ended: back to the page it came from.
	c.renderLogin(w, r, http.StatusUnauthorized, loginData{Next: safeReturn(formValue(r, "return")), Error: "Your session has ended. Log in again."})
}

// isRead reports whether the request is a GET or a HEAD, which is answered
// as the GET without its body.
func isRead(r *http.Request) bool { return r.Method == http.MethodGet || r.Method == http.MethodHead }

// isTLS reports whether the request came over TLS, directly or through a
// proxy the operator trusts.
func (c *Console) isTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	return c.cfg.TrustForwardedProto && strings.EqualFold(strings.TrimSpace(strings.Split(r.Header.Get("X-Forwarded-Proto"), ",")[0]), "https")
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value, path string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.isTLS(r)})
}

func (c *Console) clearCookie(w http.ResponseWriter, r *http.Request, name, path string) {
	c.setCookie(w, r, name, "", path, -1)
}

// safeReturn is where to go after a form: a console path, never elsewhere.
func safeReturn(s string) string {
	if !strings.HasPrefix(s, Prefix) || strings.HasPrefix(s, "//") || strings.ContainsAny(s, "\\\r\n") {
		return Prefix
	}
	return s
}

// call runs an operation as the human and returns its result as API
// clients see it: the JSON it encodes to, decoded.
func (c *Console) call(ctx context.Context, s *visit, key string, args map[string]any) (map[string]any, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	out, err := c.cfg.Registry.Call(ctx, s.p, key, b)
	if err != nil {
		return nil, err
	}
	return asMap(out)
}

func asMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	return m, dec.Decode(&m)
}

// refusal is an error as the human may read it: a refusal's reason and
// message; anything else is logged and shown as internal.
func (c *Console) refusal(err error) *protocol.Refusal {
	if c.cfg.Refusal != nil {
		return c.cfg.Refusal(err, "console")
	}
	var ref *protocol.Refusal
	if errors.As(err, &ref) {
		return ref
	}
	c.log.Error("console: operation failed", "err", err)
	return protocol.Refuse(protocol.ReasonInternal)
}

// addrLimiter limits attempts per client address.
type addrLimiter struct {
	mu    sync.Mutex
	every rate.Limit
	burst int
	m     map[string]*rate.Limiter
	swept time.Time // when forgetQuiet last ran
	// over is the allowance newcomers share while m is full.
	over *rate.Limiter
}

func newAddrLimiter(every rate.Limit, burst int) *addrLimiter {
	return &addrLimiter{every: every, burst: burst, m: map[string]*rate.Limiter{}}
}

func (l *addrLimiter) allow(r *http.Request) bool {
	host := clientaddr.Key(r.RemoteAddr)
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.m[host]
	if lim == nil {
		if len(l.m) >= maxLimitedAddrs {
			l.forgetQuiet()
		}
		if len(l.m) >= maxLimitedAddrs {
			// As many addresses tried lately as are remembered: a
			// newcomer shares one allowance with every other, rather
			// than starting afresh (clearing the map would give each
			// remembered address a fresh allowance too).
			if l.over == nil {
				l.over = rate.NewLimiter(l.every, l.burst)
			}
			return l.over.Allow()
		}
		lim = rate.NewLimiter(l.every, l.burst)
		l.m[host] = lim
	}
	return lim.Allow()
}

// retryAfter is how many seconds a refused address waits before it may
// try again: the time its allowance takes to regain one attempt.
func (l *addrLimiter) retryAfter() int {
	return int(math.Ceil(1 / float64(l.every)))
}

// maxLimitedAddrs bounds the addresses an addrLimiter remembers.
var maxLimitedAddrs = 10000

// forgetQuiet drops the addresses whose allowance is whole again: they
// would start afresh anyway.
func (l *addrLimiter) forgetQuiet() {
	now := time.Now()
	if now.Sub(l.swept) < time.Second {
		return // a full map of busy addresses is not read again at once
	}
	l.swept = now
	for k, lim := range l.m {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.m, k)
		}
	}
}
