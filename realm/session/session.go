package session

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"golang.org/x/crypto/argon2"

	"relay/protocol"
	"relay/realm/secret"
	"relay/store"
)

// CookieName is the session cookie's name.
const CookieName = "relay_session"

// CSRFHeader is the header an API write over a session carries its CSRF
// token in (the seed's x-csrf-token); CSRFField is the form field of the
// console's forms.
const (
	CSRFHeader = "X-CSRF-Token"
	CSRFField  = "csrf"
)

// cookiePrefix starts every session cookie value.
const cookiePrefix = "rls_"

// MinPassword is the shortest password the operator may set.
const MinPassword = 12

// touchEvery is how often a session's use is written back.
const touchEvery = time.Minute

// Config is how long sessions live. Start from DefaultConfig.
type Config struct {
	// TTL is how long a session lives without use.
	TTL time.Duration
	// MaxAge is how long a session lives at most, used or not.
	MaxAge time.Duration
}

// DefaultConfig: idle sessions end after 12 hours, every session after 7
// days.
func DefaultConfig() Config {
	return Config{TTL: 12 * time.Hour, MaxAge: 7 * 24 * time.Hour}
}

// Session is one login, as stored.
type Session struct {
	ID        uint64    `json:"id"`
	Hash      []byte    `json:"hash"`
	Via       string    `json:"via" jsonschema:"operator_secret or password"`
	CreatedAt time.Time `json:"created_at"`
	LastSeen  time.Time `json:"last_seen"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Ways of logging in.
const (
	ViaSecret   = "operator_secret"
	ViaPassword = "password"
)

// passwordRec is the operator's password as stored: argon2id.
type passwordRec struct {
	Salt    []byte    `json:"salt"`
	Hash    []byte    `json:"hash"`
	Time    uint32    `json:"time"`
	Memory  uint32    `json:"memory"`
	Threads uint8     `json:"threads"`
	SetAt   time.Time `json:"set_at"`
}

var (
	keySessionPrefix = []byte("l/sess/")
	keyPassword      = []byte("l/console/password")
)

func sessionKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), keySessionPrefix...), id)
}

// Manager creates, resolves and ends sessions.
type Manager struct {
	st  *store.Store
	cfg Config
	now func() time.Time
	// hashing admits one argon2id computation at a time: each takes
	// argonMemory and both cores for tens of milliseconds, so logins
	// arriving at once must not multiply them (a memory exhaustion by
	// unauthenticated requests).
	hashing chan struct{}
}

// ErrBusy is returned when a password could not be checked or set
// because others were being hashed for longer than hashWait.
var ErrBusy = errors.New("session: too many passwords being checked at once")

// hashWait is how long a password check waits for its turn.
var hashWait = 5 * time.Second

// New returns the session manager on st.
func New(st *store.Store, cfg Config) *Manager {
	def := DefaultConfig()
	if cfg.TTL <= 0 {
		cfg.TTL = def.TTL
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = def.MaxAge
	}
	if cfg.MaxAge < cfg.TTL {
		cfg.MaxAge = cfg.TTL
	}
	return &Manager{st: st, cfg: cfg, now: func() time.Time { return time.Now().UTC() }, hashing: make(chan struct{}, 1)}
}

// Create starts a session and returns its cookie value: the only time the
// secret is seen. Expired sessions are swept on the way.
func (m *Manager) Create(ctx context.Context, via string) (string, *Session, error) {
	raw, hash := secret.New()
	now := m.now()
	s := &Session{Hash: hash, Via: via, CreatedAt: now, LastSeen: now, ExpiresAt: now.Add(m.cfg.TTL)}
	_, err := m.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		if err := sweep(tx, now); err != nil {
			return nil, err
		}
		id, err := tx.NextID("session")
		if err != nil {
			return nil, err
		}
		s.ID = id
		return nil, put(tx, s)
	})
	if err != nil {
		return "", nil, err
	}
	return cookiePrefix + strconv.FormatUint(s.ID, 10) + "_" + raw, s, nil
}

// sweep deletes the sessions that have expired.
func sweep(tx *store.Tx, now time.Time) error {
	var dead [][]byte
	err := tx.Iterate(keySessionPrefix, false, func(k, v []byte) error {
		var s Session
		if json.Unmarshal(v, &s) != nil || !now.Before(s.ExpiresAt) {
			dead = append(dead, k)
		}
		return nil
	})
	for _, k := range dead {
		if err == nil {
			err = tx.Delete(k)
		}
	}
	return err
}

func put(tx *store.Tx, s *Session) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return tx.Set(sessionKey(s.ID), b)
}

// ErrNoSession is a cookie that names no live session: unknown, wrong,
// expired or ended.
var ErrNoSession = errors.New("session: no live session")

func split(cookie string) (uint64, string, bool) {
	idPart, raw, ok := secret.Split(cookie, cookiePrefix)
	if !ok {
		return 0, "", false
	}
	id, err := strconv.ParseUint(idPart, 10, 64)
	return id, raw, err == nil
}

// live finds the live session a cookie value names: ErrNoSession when
// there is none, or it expired.
func (m *Manager) live(cookie string) (Session, error) {
	var s Session
	id, raw, ok := split(cookie)
	if !ok {
		return s, ErrNoSession
	}
	var found bool
	err := m.st.View(func(tx *store.Tx) error {
		var err error
		found, err = tx.GetJSON(sessionKey(id), &s)
		return err
	})
	if err != nil {
		return s, err
	}
	var stored []byte
	if found {
		stored = s.Hash
	}
	if !secret.Equal(secret.Hash(raw), stored) || !m.now().Before(s.ExpiresAt) {
		return s, ErrNoSession
	}
	return s, nil
}

// Resolve finds the live session a cookie value names and records its use.
func (m *Manager) Resolve(ctx context.Context, cookie string) (*Session, error) {
	s, err := m.live(cookie)
	if err != nil {
		return nil, err
	}
	now := m.now()
	if now.Sub(s.LastSeen) >= touchEvery {
		s.LastSeen = now
		s.ExpiresAt = minTime(now.Add(m.cfg.TTL), s.CreatedAt.Add(m.cfg.MaxAge))
		_, err := m.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
			// Logout may have won the race: touch only a session still there.
			if ok, err := tx.GetJSON(sessionKey(s.ID), new(Session)); err != nil || !ok {
				return nil, err
			}
			return nil, put(tx, &s)
		})
		if err != nil {
			return nil, err
		}
	}
	return &s, nil
}

// Live reports whether the session a cookie value names is still live,
// without recording a use: a page's open stream asks it every second, and
// must not keep an idle session alive.
func (m *Manager) Live(cookie string) bool {
	_, err := m.live(cookie)
	return err == nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// End ends the session a cookie value names; an unknown one is no error.
func (m *Manager) End(ctx context.Context, cookie string) error {
	s, err := m.Resolve(ctx, cookie)
	if errors.Is(err, ErrNoSession) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = m.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		return nil, tx.Delete(sessionKey(s.ID))
	})
	return err
}

// EndAll ends every session: after the password changes, say.
func (m *Manager) EndAll(ctx context.Context) error {
	_, err := m.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		return nil, sweep(tx, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
	})
	return err
}

// CSRFToken is the CSRF token of the session a cookie value names.
func CSRFToken(cookie string) string {
	_, raw, ok := split(cookie)
	if !ok {
		return ""
	}
	mac := hmac.New(sha256.New, []byte(raw))
	mac.Write([]byte("relay console csrf v1"))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// CheckCSRF reports, in constant time, whether token is the CSRF token of
// the session a cookie value names.
func CheckCSRF(cookie, token string) bool {
	want := CSRFToken(cookie)
	return want != "" && subtle.ConstantTimeCompare([]byte(want), []byte(token)) == 1
}

// argon2id parameters (RFC 9106's second recommendation, with less memory
// for a small node): a login costs tens of milliseconds.
const (
	argonTime    = 3
	argonMemory  = 64 << 10 // KiB
	argonThreads = 2
	argonKeyLen  = 32
)

// hashTurn waits for the one argon2id computation allowed at a time, for
// at most hashWait, and returns the function that ends the turn.
func (m *Manager) hashTurn(ctx context.Context) (func(), error) {
	t := time.NewTimer(hashWait)
	defer t.Stop()
	select {
	case m.hashing <- struct{}{}:
		return func() { <-m.hashing }, nil
	case <-t.C:
		return nil, ErrBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// SetPassword sets the operator's password, replacing any earlier one.
func (m *Manager) SetPassword(ctx context.Context, password string) error {
	if n := len([]rune(password)); n < MinPassword || n > 256 {
		return protocol.Refusef(protocol.ReasonInvalidBody, "A password has %d to 256 characters.", MinPassword).With("field", "password").With("rule", "length")
	}
	salt, _ := secret.New()
	rec := passwordRec{Salt: []byte(salt), Time: argonTime, Memory: argonMemory, Threads: argonThreads, SetAt: m.now()}
	done, err := m.hashTurn(ctx)
	if err != nil {
		return err
	}
	rec.Hash = argon2.IDKey([]byte(password), rec.Salt, rec.Time, rec.Memory, rec.Threads, argonKeyLen)
	done()
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	_, err = m.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		return nil, tx.Set(keyPassword, b)
	})
	return err
}

// CheckPassword reports whether password is the operator's. Without a
// password set it is false, after the same work, so timing tells nothing.
// One password is hashed at a time: it returns ErrBusy when its turn did
// not come within hashWait, or ctx's error.
func (m *Manager) CheckPassword(ctx context.Context, password string) (bool, error) {
	done, err := m.hashTurn(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	var rec passwordRec
	var found bool
	if err := m.st.View(func(tx *store.Tx) error {
		var err error
		found, err = tx.GetJSON(keyPassword, &rec)
		return err
	}); err != nil || !found || rec.Memory == 0 || rec.Memory > 1<<20 || rec.Time > 16 {
		argon2.IDKey([]byte(password), []byte("no password set"), argonTime, argonMemory, argonThreads, argonKeyLen)
		return false, nil
	}
	got := argon2.IDKey([]byte(password), rec.Salt, rec.Time, rec.Memory, rec.Threads, uint32(len(rec.Hash)))
	return subtle.ConstantTimeCompare(got, rec.Hash) == 1, nil
}

// PasswordSetAt is when the password was set; ok is false without one.
func (m *Manager) PasswordSetAt() (at time.Time, ok bool) {
	var rec passwordRec
	err := m.st.View(func(tx *store.Tx) error {
		var err error
		ok, err = tx.GetJSON(keyPassword, &rec)
		return err
	})
	return rec.SetAt, ok && err == nil
}

// List returns the live sessions, oldest first (without their hashes).
func (m *Manager) List() ([]Session, error) {
	var out []Session
	now := m.now()
	err := m.st.View(func(tx *store.Tx) error {
		return tx.Iterate(keySessionPrefix, false, func(_, v []byte) error {
			var s Session
			if err := json.Unmarshal(v, &s); err != nil {
				return err
			}
			if now.Before(s.ExpiresAt) {
				s.Hash = nil
				out = append(out, s)
			}
			return nil
		})
	})
	return out, err
}
