package realm

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/secret"
	"relay/store"
)

// tokenRecord is a credential as stored: only the hash of its secret.
type tokenRecord struct {
	ID        uint64          `json:"id"`
	Label     string          `json:"label"`
	Line      string          `json:"line"`
	Rights    protocol.Rights `json:"rights"`
	Human     bool            `json:"human,omitempty"`
	Hash      []byte          `json:"hash"`
	CreatedAt time.Time       `json:"created_at"`
	RevokedAt *time.Time      `json:"revoked_at,omitempty"`
}

// Keys of the local-only token tables.
var (
	keyTokenPrefix = []byte("l/tok/")
	keyLinePrefix  = []byte("l/line/")
)

func tokenKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), keyTokenPrefix...), id)
}
func lineKey(line string) []byte {
	return append(append([]byte(nil), keyLinePrefix...), line...)
}

// tokenPrefix starts every secret relay issues, so a leaked one is easy to
// recognise in logs and by secret scanners.
const tokenPrefix = "rlt_"

// Auth resolves credentials to principals. Records are cached in memory and
// the cache is updated after every durable change.
type Auth struct {
	realm protocol.Realm
	st    *store.Store

	mu     sync.RWMutex
	tokens map[uint64]*tokenRecord
}

func newAuth(realm protocol.Realm, st *store.Store) (*Auth, error) {
	a := &Auth{realm: realm, st: st, tokens: map[uint64]*tokenRecord{}}
	err := st.View(func(tx *store.Tx) error {
		return tx.Iterate(keyTokenPrefix, false, func(_, val []byte) error {
			var rec tokenRecord
			if err := json.Unmarshal(val, &rec); err != nil {
				return fmt.Errorf("token record: %w", err)
			}
			a.tokens[rec.ID] = &rec
			return nil
		})
	})
	return a, err
}

// hasHuman reports whether an operator credential exists.
func (a *Auth) hasHuman() bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, t := range a.tokens {
		if t.Human && t.RevokedAt == nil {
			return true
		}
	}
	return false
}

// Authenticate resolves a bearer secret. The lookup is by the id the secret
// carries; the secret itself is compared as a hash in constant time.
func (a *Auth) Authenticate(token string) (*api.Principal, error) {
	id, raw, ok := splitToken(token)
	if !ok {
		return nil, protocol.Refuse(protocol.ReasonUnauthenticated)
	}
	a.mu.RLock()
	rec := a.tokens[id]
	a.mu.RUnlock()
	var stored []byte
	if rec != nil {
		stored = rec.Hash
	}
	if !secret.Equal(secret.Hash(raw), stored) || rec.RevokedAt != nil {
		return nil, protocol.Refuse(protocol.ReasonUnauthenticated)
	}
	return a.principal(rec), nil
}

// isHumanSecret reports whether s is the operator secret (a live human
// credential): it logs in to the console.
func (a *Auth) isHumanSecret(s string) bool {
	p, err := a.Authenticate(s)
	return err == nil && p.Human
}

// human is the principal a session of the realm's human acts as: the human
// credential's, so that whatever holds for the operator secret holds for a
// session too (it cannot revoke itself, say).
func (a *Auth) human() *api.Principal {
	a.mu.RLock()
	var best *tokenRecord
	for _, t := range a.tokens {
		if !t.Human {
			continue
		}
		// The oldest live human credential; a revoked one only if none lives.
		if best == nil || (best.RevokedAt != nil) != (t.RevokedAt != nil) && t.RevokedAt == nil ||
			(best.RevokedAt != nil) == (t.RevokedAt != nil) && t.ID < best.ID {
			best = t
		}
	}
	a.mu.RUnlock()
	if best == nil {
		return nil
	}
	return a.principal(best)
}

func (a *Auth) principal(rec *tokenRecord) *api.Principal {
	p := &api.Principal{TokenID: rec.ID, Rights: rec.Rights, Human: rec.Human}
	if rec.Human {
		p.Identity = protocol.Identity{Prefix: protocol.HumanPrefix, Line: rec.Line}
		p.Rights = append(protocol.Rights(nil), protocol.AllRights...)
	} else {
		p.Identity = protocol.Identity{Prefix: string(a.realm), Line: rec.Line}
	}
	return p
}

func splitToken(s string) (uint64, string, bool) {
	idPart, raw, ok := secret.Split(s, tokenPrefix)
	if !ok {
		return 0, "", false
	}
	id, err := strconv.ParseUint(idPart, 10, 64)
	return id, raw, err == nil
}

// bearer extracts the token of an Authorization header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// IssuedToken is a new credential: the only time its secret is seen.
type IssuedToken struct {
	ID       uint64   `json:"id"`
	Token    string   `json:"token"`
	Label    string   `json:"label"`
	Identity string   `json:"identity"`
	Rights   []string `json:"rights"`
}

// Issue creates a credential durably and returns its secret. A human
// credential's line is its name; an agent's line is derived from the label
// and made unique in the realm.
func (a *Auth) Issue(ctx context.Context, label string, rights protocol.Rights, human bool) (*IssuedToken, error) {
	raw, hash := secret.New()
	if len(rights) == 0 {
		rights, _ = protocol.NewRights() // read, always
	}
	var rec tokenRecord
	_, err := a.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		id, err := tx.NextID("token")
		if err != nil {
			return nil, err
		}
		line, err := uniqueLine(tx, protocol.Slug(label))
		if err != nil {
			return nil, err
		}
		rec = tokenRecord{ID: id, Label: label, Line: line, Rights: rights, Human: human, Hash: hash, CreatedAt: protocol.Now()}
		if err := putToken(tx, &rec); err != nil {
			return nil, err
		}
		return nil, tx.Set(lineKey(line), binary.BigEndian.AppendUint64(nil, id))
	})
	if err != nil {
		return nil, err
	}
	a.cache(&rec)
	p := a.principal(&rec)
	return &IssuedToken{
		ID:       rec.ID,
		Token:    tokenPrefix + strconv.FormatUint(rec.ID, 10) + "_" + raw,
		Label:    rec.Label,
		Identity: p.Identity.String(),
		Rights:   rightNames(p.Rights),
	}, nil
}

// rotateHuman gives the human's credential a new secret, keeping its id,
// line and identity: the old secret stops working at once.
func (a *Auth) rotateHuman(ctx context.Context) (string, error) {
	var id uint64
	a.mu.RLock()
	for _, t := range a.tokens {
		if t.Human && t.RevokedAt == nil && (id == 0 || t.ID < id) {
			id = t.ID
		}
	}
	a.mu.RUnlock()
	if id == 0 {
		return "", errors.New("no operator credential to give a new secret")
	}
	raw, hash := secret.New()
	if _, err := a.update(ctx, id, func(rec *tokenRecord) error { rec.Hash = hash; return nil }); err != nil {
		return "", err
	}
	return tokenPrefix + strconv.FormatUint(id, 10) + "_" + raw, nil
}

func uniqueLine(tx *store.Tx, base string) (string, error) {
	line := base
	for i := 2; ; i++ {
		_, err := tx.Get(lineKey(line))
		if errors.Is(err, store.ErrNotFound) {
			return line, nil
		}
		if err != nil {
			return "", err
		}
		suffix := "-" + strconv.Itoa(i)
		line = strings.TrimRight(base[:min(len(base), 64-len(suffix))], "-._") + suffix
	}
}

func putToken(tx *store.Tx, rec *tokenRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return tx.Set(tokenKey(rec.ID), b)
}

// update changes one credential durably through f.
func (a *Auth) update(ctx context.Context, id uint64, f func(rec *tokenRecord) error) (*tokenRecord, error) {
	var out *tokenRecord
	_, err := a.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		var err error
		out, err = updateTx(tx, id, f)
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	a.cache(out)
	return out, nil
}

// updateTx changes one credential inside a write of the caller's; the
// caller reloads the cache after the commit.
func updateTx(tx *store.Tx, id uint64, f func(rec *tokenRecord) error) (*tokenRecord, error) {
	b, err := tx.Get(tokenKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, protocol.Refusef(protocol.ReasonNotFound, "No token %d.", id)
	}
	if err != nil {
		return nil, err
	}
	var rec tokenRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, err
	}
	if err := f(&rec); err != nil {
		return nil, err
	}
	return &rec, putToken(tx, &rec)
}

// setRightsTx sets an agent credential's rights inside the caller's write.
func (a *Auth) setRightsTx(tx *store.Tx, id uint64, rights protocol.Rights) error {
	_, err := updateTx(tx, id, func(rec *tokenRecord) error { return rec.setRights(rights) })
	return err
}

// setRights gives an agent credential rights. The human's holds every
// right already, and a revoked one authenticates no more: rights given it
// would be a promise nothing keeps, so both are refused.
func (rec *tokenRecord) setRights(rights protocol.Rights) error {
	switch {
	case rec.Human:
		return protocol.Refusef(protocol.ReasonForbidden, "The human's credential holds every right.")
	case rec.RevokedAt != nil:
		return protocol.Refusef(protocol.ReasonConflict, "Token %d was revoked; it takes no rights any more.", rec.ID)
	}
	rec.Rights = rights
	return nil
}

// reload refreshes one credential in the cache from the store.
func (a *Auth) reload(id uint64) {
	var rec tokenRecord
	err := a.st.View(func(tx *store.Tx) error {
		b, err := tx.Get(tokenKey(id))
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &rec)
	})
	if err == nil {
		a.cache(&rec)
	}
}

// record returns a copy of one credential's record, nil if unknown.
func (a *Auth) record(id uint64) *tokenRecord {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if t := a.tokens[id]; t != nil {
		c := *t
		return &c
	}
	return nil
}

func (a *Auth) cache(rec *tokenRecord) {
	c := *rec
	a.mu.Lock()
	a.tokens[c.ID] = &c
	a.mu.Unlock()
}

// list returns every credential, oldest first.
// page returns copies of at most n tokens with ids after after, in id
// order. Only their ids are sorted, not the records.
func (a *Auth) page(after uint64, n int) []tokenRecord {
	a.mu.RLock()
	defer a.mu.RUnlock()
	ids := make([]uint64, 0, len(a.tokens))
	for id := range a.tokens {
		if id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	out := make([]tokenRecord, 0, min(n, len(ids)))
	for _, id := range ids[:min(n, len(ids))] {
		out = append(out, *a.tokens[id])
	}
	return out
}

func rightNames(rs protocol.Rights) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}
