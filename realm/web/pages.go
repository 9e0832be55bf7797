package web

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/secret"
	"relay/realm/session"
)

// loginCookie carries the login form's double-submit token, so a page
// elsewhere cannot log a browser in to a session of its choosing.
const loginCookie = "relay_login"

type loginData struct {
	Error, Notice, Next, Token string
	HasPassword                bool
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	next := safeReturn(r.URL.Query().Get("next"))
	if ck, err := r.Cookie(session.CookieName); err == nil {
		if _, err := c.cfg.Sessions.Resolve(r.Context(), ck.Value); err == nil {
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
	}
	d := loginData{Next: next}
	if r.URL.Query().Has("out") {
		d.Notice = "You are logged out."
	}
	c.renderLogin(w, r, http.StatusOK, d)
}

func (c *Console) renderLogin(w http.ResponseWriter, r *http.Request, status int, d loginData) {
	tok, _ := secret.New()
	c.setCookie(w, r, loginCookie, tok, "/console/login", 600)
	d.Token = tok
	_, d.HasPassword = c.cfg.Sessions.PasswordSetAt()
	c.render(w, r, nil, status, "login", view{Title: "Log in", Data: d})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	next := safeReturn(formValue(r, "next"))
	if !c.logins.allow(r) {
		w.Header().Set("Retry-After", strconv.Itoa(c.logins.retryAfter()))
		c.renderLogin(w, r, http.StatusTooManyRequests, loginData{Next: next, Error: "Too many attempts from this address; wait a minute."})
		return
	}
	ck, err := r.Cookie(loginCookie)
	if err != nil || ck.Value == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostForm.Get("login_csrf"))) != 1 {
		c.renderLogin(w, r, http.StatusForbidden, loginData{Next: next, Error: "The login form had expired or did not come from this page (csrf). Try again."})
		return
	}
	via := ""
	if cred := r.PostForm.Get("secret"); strings.TrimSpace(cred) != "" {
		if via, err = c.credentialVia(r.Context(), cred); err != nil {
			c.log.Warn("console: login not checked", "addr", r.RemoteAddr, "err", err)
			w.Header().Set("Retry-After", "5")
			c.renderLogin(w, r, http.StatusServiceUnavailable, loginData{Next: next, Error: "Too many logins are being checked at once; try again in a few seconds."})
			return
		}
	}
	if via == "" {
		c.log.Warn("console: failed login", "addr", r.RemoteAddr)
		c.renderLogin(w, r, http.StatusUnauthorized, loginData{Next: next, Error: "That is neither the operator secret nor the operator's password."})
		return
	}
	cookie, _, err := c.cfg.Sessions.Create(r.Context(), via)
	if err != nil {
		c.log.Error("console: create session", "err", err)
		c.renderLogin(w, r, http.StatusServiceUnavailable, loginData{Next: next, Error: "The session could not be stored; try again."})
		return
	}
	c.clearCookie(w, r, loginCookie, "/console/login")
	c.setCookie(w, r, session.CookieName, cookie, "/", 0)
	c.log.Info("console: login", "via", via, "addr", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// credentialVia says how cred proves the operator: as the operator secret
// (spaces around it ignored), as the password, or "" when it is neither.
// The error is the password check's when it could not run
// (session.ErrBusy).
func (c *Console) credentialVia(ctx context.Context, cred string) (string, error) {
	if c.cfg.CheckSecret(strings.TrimSpace(cred)) {
		return session.ViaSecret, nil
	}
	ok, err := c.cfg.Sessions.CheckPassword(ctx, cred)
	switch {
	case err != nil:
		return "", err
	case ok:
		return session.ViaPassword, nil
	}
	return "", nil
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *visit) {
	if err := c.cfg.Sessions.End(r.Context(), s.cookie); err != nil {
		c.log.Error("console: logout", "err", err)
	}
	c.clearCookie(w, r, session.CookieName, "/")
	http.Redirect(w, r, "/console/login?out=1", http.StatusSeeOther)
}

// queueData is the human's work queue.
type queueData struct {
	Proposals []map[string]any
	Requests  []map[string]any
	Features  []map[string]any
	Decided   []map[string]any // feature requests done or rejected, newest first
	Claims    []map[string]any
	Problems  []string // parts that could not be read
}

// decidedShown bounds the decided feature requests the queue lists.
const decidedShown = 50

// tokensShown is how many tokens, and applications, a page of the tokens
// page lists; links lead to the next.
const tokensShown = 200

func (q *queueData) total() int {
	return len(q.Proposals) + len(q.Requests) + len(q.Features) + len(q.Claims)
}

// queueThreadLimit bounds the threads the queue looks through per state.
const queueThreadLimit = 200

// queue is what waits for the human. Gathering it reads every thread, so
// it is kept until an operation writes or the store's sequence moves;
// every page shows its count in the nav, and a live page fetches itself
// after every change.
func (c *Console) queue(r *http.Request, s *visit) *queueData {
	changed, seq := c.cfg.Registry.Changed(), c.cfg.Store.Sequence() // before reading: a change during it makes the result stale
	c.qmu.Lock()
	if q := c.qdata; q != nil && c.qseq == seq && c.qchanged == changed && !closed(changed) {
		c.qmu.Unlock()
		return q
	}
	c.qmu.Unlock()
	q := c.gather(r, s)
	if len(q.Problems) == 0 {
		c.qmu.Lock()
		c.qdata, c.qseq, c.qchanged = q, seq, changed
		c.qmu.Unlock()
	}
	return q
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// gather reads the queue, all through the registry.
func (c *Console) gather(r *http.Request, s *visit) *queueData {
	ctx := r.Context()
	q := &queueData{}
	problem := func(what string, err error) {
		q.Problems = append(q.Problems, what+": "+c.refusal(err).Message)
	}
	for _, st := range protocol.States {
		if st == protocol.StateOpen {
			continue // a thread is born open: never a proposal
		}
		// Only this realm's threads: another realm's proposals are its human's.
		out, err := c.call(ctx, s, "get_threads", map[string]any{"state": st, "limit": queueThreadLimit, "realm": c.cfg.Realm})
		if err != nil {
			problem("proposals", err)
			break
		}
		for _, t := range maps(out["threads"]) {
			if t["proposal"] == true {
				q.Proposals = append(q.Proposals, t)
			}
		}
	}
	// Replies from other realms still pending in a proposal's thread: a
	// confirmed close refuses them.
	for _, t := range q.Proposals {
		th, err := c.call(ctx, s, "get_threads_id", map[string]any{"id": t["id"]})
		if err != nil {
			problem("proposals", err)
			break
		}
		t["pending_replies"] = th["pending_replies"]
	}
	sort.SliceStable(q.Proposals, func(i, j int) bool {
		return fmt.Sprint(q.Proposals[i]["state_set_at"]) > fmt.Sprint(q.Proposals[j]["state_set_at"])
	})
	// The undecided applications and feature requests, each status read
	// from its index rather than every request; in the order they came.
	var err error
	for _, st := range []string{"pending", "in_review", "deferred"} {
		var reqs []map[string]any
		if reqs, err = c.all(ctx, s, "get_token_requests", "requests", map[string]any{"status": st}); err != nil {
			problem("token applications", err)
			break
		}
		q.Requests = append(q.Requests, reqs...)
	}
	sortByID(q.Requests)
	for _, st := range []string{"open", "accepted", "planned", "done", "rejected"} {
		var fs []map[string]any
		if fs, err = c.all(ctx, s, "get_features", "features", map[string]any{"status": st}); err != nil {
			problem("feature requests", err)
			break
		}
		if st == "done" || st == "rejected" {
			q.Decided = append(q.Decided, fs...)
		} else {
			q.Features = append(q.Features, fs...)
		}
	}
	sortByID(q.Features)
	// Newest first, as decided: the lists are in the order they came.
	sortByID(q.Decided)
	slices.Reverse(q.Decided)
	q.Decided = q.Decided[:min(len(q.Decided), decidedShown)]
	// Claims that someone other than their author supported wait for a seal.
	if out, err := c.call(ctx, s, "get_threads", map[string]any{"limit": queueThreadLimit}); err != nil {
		problem("claims", err)
	} else {
		for _, t := range maps(out["threads"]) {
			if num(t["claim_count"]) == 0 {
				continue
			}
			cl, err := c.call(ctx, s, "get_threads_id_claims", map[string]any{"id": t["id"]})
			if err != nil {
				problem("claims", err)
				break
			}
			for _, claim := range maps(cl["claims"]) {
				// Only a claim's home realm seals it.
				if claim["state"] == string(protocol.ClaimSupported) && claim["realm"] == c.cfg.Realm {
					claim["thread_title"] = t["title"]
					q.Claims = append(q.Claims, claim)
				}
			}
		}
	}
	return q
}

func (c *Console) queueCount(r *http.Request, s *visit) int { return c.queue(r, s).total() }

// all reads every page of a listing by its cursor (after, next_cursor):
// the records under field.
func (c *Console) all(ctx context.Context, s *visit, key, field string, args map[string]any) ([]map[string]any, error) {
	var out []map[string]any
	a := map[string]any{"limit": 200}
	for k, v := range args {
		a[k] = v
	}
	args = a
	for {
		page, err := c.call(ctx, s, key, args)
		if err != nil {
			return nil, err
		}
		out = append(out, maps(page[field])...)
		if page["has_more"] != true {
			return out, nil
		}
		args["after"] = page["next_cursor"]
	}
}

// sortByID orders records by their numeric id.
func sortByID(rs []map[string]any) {
	slices.SortStableFunc(rs, func(a, b map[string]any) int { return cmp.Compare(num(a["id"]), num(b["id"])) })
}

func maps(v any) []map[string]any {
	var out []map[string]any
	for _, e := range asList(v) {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func (c *Console) queuePage(w http.ResponseWriter, r *http.Request, s *visit) {
	q := c.queue(r, s)
	c.render(w, r, s, http.StatusOK, "queue", view{Title: "Work queue", Nav: "queue", Data: q, Live: true, Queue: q.total()})
}

func (c *Console) boardsPage(w http.ResponseWriter, r *http.Request, s *visit) {
	out, err := c.call(r.Context(), s, "get_boards", nil)
	if err != nil {
		c.fail(w, r, s, 0, err)
		return
	}
	c.render(w, r, s, http.StatusOK, "boards", view{Title: "Boards", Nav: "boards", Data: out, Live: true})
}

func (c *Console) boardPage(w http.ResponseWriter, r *http.Request, s *visit) {
	id := r.PathValue("id")
	board, err := c.call(r.Context(), s, "get_boards_id", map[string]any{"id": id})
	if err != nil {
		c.fail(w, r, s, 0, err)
		return
	}
	threads, err := c.call(r.Context(), s, "get_boards_id_threads", map[string]any{"id": id})
	if err != nil {
		c.fail(w, r, s, 0, err)
		return
	}
	c.render(w, r, s, http.StatusOK, "board", view{Title: "Board " + fmt.Sprint(field(board, "board", "name")), Nav: "boards", Live: true,
		Data: map[string]any{"board": board["board"], "threads": threads["threads"]}})
}

func (c *Console) threadsPage(w http.ResponseWriter, r *http.Request, s *visit) {
	args := map[string]any{"limit": 200}
	q := r.URL.Query()
	for _, name := range []string{"state", "board", "creator", "realm"} {
		if v := strings.TrimSpace(q.Get(name)); v != "" {
			args[name] = v
		}
	}
	out, err := c.call(r.Context(), s, "get_threads", args)
	if err != nil {
		c.fail(w, r, s, 0, err)
		return
	}
	out["filter"] = args
	c.render(w, r, s, http.StatusOK, "threads", view{Title: "Threads", Nav: "threads", Data: out, Live: true})
}

func (c *Console) threadPage(w http.ResponseWriter, r *http.Request, s *visit) {
	ctx := r.Context()
	id := r.PathValue("id")
	th, err := c.call(ctx, s, "get_threads_id", map[string]any{"id": id})
	if err != nil {
		c.fail(w, r, s, 0, err)
		return
	}
	d := map[string]any{"thread": th["thread"], "messages": th["messages"], "pending": th["pending_replies"]}
	tid := field(th, "thread", "id")
	if cl, err := c.call(ctx, s, "get_threads_id_claims", map[string]any{"id": tid}); err == nil {
		d["claims"] = cl["claims"]
	}
	if ev, err := c.call(ctx, s, "get_threads_id_events", map[string]any{"id": tid}); err == nil {
		d["events"] = ev["events"]
	}
	if b, err := c.call(ctx, s, "get_boards_id", map[string]any{"id": fmt.Sprint(field(th, "thread", "board"))}); err == nil {
		d["board"] = b["board"]
	}
	var msgs []map[string]any
	var walk func(v any)
	walk = func(v any) {
		for _, m := range maps(v) {
			msgs = append(msgs, m)
			walk(m["replies"])
		}
	}
	walk(th["messages"])
	d["flat"] = msgs
	c.render(w, r, s, http.StatusOK, "thread", view{Title: "Thread " + fmt.Sprint(tid), Nav: "threads", Data: d, Live: true})
}

// field reads a nested field of a decoded result.
func field(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

func (c *Console) tokensPage(w http.ResponseWriter, r *http.Request, s *visit) {
	id := r.URL.Query().Get("issued")
	if id == "" {
		c.renderTokens(w, r, s, nil)
		return
	}
	res := c.takeIssued(s, id)
	if res == nil {
		res = map[string]any{"gone": true}
	}
	c.renderTokens(w, r, s, res)
}

// keepIssued keeps a token just issued for the session's next page, under
// a fresh id.
func (c *Console) keepIssued(s *visit, res map[string]any) string {
	b := make([]byte, 16)
	rand.Read(b)
	id := hex.EncodeToString(b)
	c.imu.Lock()
	defer c.imu.Unlock()
	if c.issued == nil {
		c.issued = map[string]issuedToken{}
	}
	now := time.Now()
	for k, v := range c.issued {
		if now.Sub(v.at) > issuedTTL {
			delete(c.issued, k)
		}
	}
	c.issued[id] = issuedToken{cookie: s.cookie, res: res, at: now}
	return id
}

// takeIssued returns the token issued under id for this session, once.
func (c *Console) takeIssued(s *visit, id string) map[string]any {
	c.imu.Lock()
	defer c.imu.Unlock()
	t, ok := c.issued[id]
	if !ok || t.cookie != s.cookie || time.Since(t.at) > issuedTTL {
		return nil
	}
	delete(c.issued, id)
	return t.res
}

// renderTokens shows the tokens; issued is a token just issued, whose
// secret is shown this once.
func (c *Console) renderTokens(w http.ResponseWriter, r *http.Request, s *visit, issued map[string]any) {
	// A page of each, from the cursors the page's links carry.
	page := func(cursor string) map[string]any {
		args := map[string]any{"limit": tokensShown}
		if n, err := strconv.ParseUint(r.URL.Query().Get(cursor), 10, 64); err == nil {
			args["after"] = n
		}
		return args
	}
	toks, err := c.call(r.Context(), s, "get_tokens", page("tokens_after"))
	if err != nil {
		c.fail(w, r, s, 0, err)
		return
	}
	reqs, err := c.call(r.Context(), s, "get_token_requests", page("requests_after"))
	if err != nil {
		c.fail(w, r, s, 0, err)
		return
	}
	d := map[string]any{"tokens": toks["tokens"], "requests": reqs["requests"], "issued": issued,
		"tokens_next": toks["next_cursor"], "requests_next": reqs["next_cursor"],
		"tokens_after": r.URL.Query().Get("tokens_after"), "requests_after": r.URL.Query().Get("requests_after")}
	c.render(w, r, s, http.StatusOK, "tokens", view{Title: "Tokens", Nav: "tokens", Data: d})
}

func (c *Console) corpusPage(w http.ResponseWriter, r *http.Request, s *visit) {
	ctx := r.Context()
	q := r.URL.Query()
	d := map[string]any{"q": q.Get("q"), "search": q.Get("search"), "tag": q.Get("tag")}
	if text := strings.TrimSpace(q.Get("search")); text != "" {
		res, err := c.call(ctx, s, "search", map[string]any{"q": text, "limit": 50})
		if err != nil {
			d["error"] = c.refusal(err)
		} else {
			d["results"] = res
		}
	}
	args := map[string]any{"limit": 50}
	if v := strings.TrimSpace(q.Get("q")); v != "" {
		args["q"] = v
	}
	if v := strings.TrimSpace(q.Get("tag")); v != "" {
		args["tag"] = v
	}
	if v := strings.TrimSpace(q.Get("after")); v != "" {
		var n uint64
		if _, err := fmt.Sscan(v, &n); err == nil {
			args["after"] = n
		}
	}
	convs, err := c.call(ctx, s, "list_conversations", args)
	if err != nil {
		c.fail(w, r, s, 0, err)
		return
	}
	d["conversations"] = convs
	if tags, err := c.call(ctx, s, "get_tags", map[string]any{"limit": 30}); err == nil {
		d["tags"] = tags["tags"]
	}
	c.render(w, r, s, http.StatusOK, "corpus", view{Title: "Corpus", Nav: "corpus", Data: d, Live: true})
}

func (c *Console) conversationPage(w http.ResponseWriter, r *http.Request, s *visit) {
	ctx := r.Context()
	id := r.PathValue("id")
	conv, err := c.call(ctx, s, "get_conversation", map[string]any{"conversation_id": id})
	if err != nil {
		c.fail(w, r, s, 0, err)
		return
	}
	d := map[string]any{"conversation": conv["conversation"]}
	if msgs, err := c.call(ctx, s, "get_messages", map[string]any{"conversation_id": id, "limit": 1000}); err == nil {
		d["messages"] = msgs["messages"]
	}
	if rels, err := c.call(ctx, s, "list_relationships", map[string]any{"conversation_id": id, "direction": "both", "state": "all", "limit": 1000}); err == nil {
		d["relationships"] = rels["relationships"]
	}
	c.render(w, r, s, http.StatusOK, "conversation", view{Title: "Conversation", Nav: "corpus", Data: d, Live: true})
}

func (c *Console) settingsPage(w http.ResponseWriter, r *http.Request, s *visit) {
	list, err := c.cfg.Sessions.List()
	if err != nil {
		c.fail(w, r, s, 0, err)
		return
	}
	at, ok := c.cfg.Sessions.PasswordSetAt()
	d := map[string]any{"sessions": list, "password_set": ok, "password_set_at": at, "min_password": session.MinPassword}
	c.render(w, r, s, http.StatusOK, "settings", view{Title: "Settings", Nav: "settings", Data: d})
}

// setPassword sets the operator's password. The current credential (the
// operator secret, or the password if one is set) is asked again, so a
// session left open cannot change how one logs in. Checking it is a login
// attempt: it counts against the address's allowance as a login does, so
// that the form is no way around the limit on guessing the password.
func (c *Console) setPassword(w http.ResponseWriter, r *http.Request, s *visit) {
	if !c.logins.allow(r) {
		c.setFlash(w, r, flash{Reason: string(protocol.ReasonRateLimited), Text: "Too many attempts from this address; wait a minute."})
		w.Header().Set("Retry-After", strconv.Itoa(c.logins.retryAfter()))
		http.Redirect(w, r, "/console/settings", http.StatusSeeOther)
		return
	}
	cur, pw, again := r.PostForm.Get("current"), r.PostForm.Get("password"), r.PostForm.Get("again")
	via, err := c.credentialVia(r.Context(), cur)
	var f flash
	switch {
	case err != nil:
		ref := c.refusal(err)
		f = flash{Reason: string(ref.Reason), Text: ref.Message}
	case via == "":
		f = flash{Reason: string(protocol.ReasonForbidden), Text: "The current credential is neither the operator secret nor the password."}
	case pw != again:
		f = flash{Reason: string(protocol.ReasonInvalidBody), Text: "The two new passwords differ."}
	default:
		if err := c.cfg.Sessions.SetPassword(r.Context(), pw); err != nil {
			ref := c.refusal(err)
			f = flash{Reason: string(ref.Reason), Text: ref.Message}
			break
		}
		// A session opened with the old password, or by whoever learned
		// it, ends with it: every session ends, and this browser gets a
		// new one.
		if err := c.cfg.Sessions.EndAll(r.Context()); err != nil {
			c.fail(w, r, s, 0, err)
			return
		}
		cookie, _, err := c.cfg.Sessions.Create(r.Context(), via)
		if err != nil {
			c.fail(w, r, s, 0, err)
			return
		}
		c.setCookie(w, r, session.CookieName, cookie, "/", 0)
		c.log.Info("console: password set; every other session ended", "addr", r.RemoteAddr)
		f = flash{OK: true, Text: "The password is set: it logs in to this console as the operator secret does. Every other session has ended."}
	}
	c.setFlash(w, r, f)
	http.Redirect(w, r, "/console/settings", http.StatusSeeOther)
}

// endSessions ends every session, this one included.
func (c *Console) endSessions(w http.ResponseWriter, r *http.Request, s *visit) {
	if err := c.cfg.Sessions.EndAll(r.Context()); err != nil {
		c.fail(w, r, s, 0, err)
		return
	}
	c.clearCookie(w, r, session.CookieName, "/")
	http.Redirect(w, r, "/console/login?out=1", http.StatusSeeOther)
}

// operation runs one write operation of the registry from a form: the
// fields are its arguments, converted by its input schema as a query string
// is; then back to the page the form names.
func (c *Console) operation(w http.ResponseWriter, r *http.Request, s *visit) {
	back := safeReturn(r.PostForm.Get("return"))
	key := r.PathValue("key")
	op, ok := c.cfg.Registry.Lookup(key)
	if !ok || op.Method == http.MethodGet || op.Method == http.MethodHead {
		c.fail(w, r, s, http.StatusNotFound, protocol.Refusef(protocol.ReasonOperationNotFound, "No write operation %q.", key))
		return
	}
	args := formArgs(op, r.PostForm)
	b, err := json.Marshal(args)
	if err != nil {
		c.fail(w, r, s, 0, err)
		return
	}
	out, err := c.cfg.Registry.Call(r.Context(), s.p, key, b)
	if err != nil {
		ref := c.refusal(err)
		c.setFlash(w, r, flash{Reason: string(ref.Reason), Text: ref.Message})
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	res, _ := asMap(out)
	if key == "post_tokens" {
		// The secret is shown once, by the page the redirect leads to,
		// never put in a cookie; reloading that page issues nothing.
		http.Redirect(w, r, "/console/tokens?issued="+c.keepIssued(s, res), http.StatusSeeOther)
		return
	}
	c.setFlash(w, r, flash{OK: true, Text: doneText(op, args, res), Op: key})
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// formFields that are the console's own, not arguments.
var formFields = map[string]bool{session.CSRFField: true, "return": true}

// formArgs turns a form into an operation's arguments: empty fields are
// left out, except that a listed array field is always sent (an empty
// list of rights means read only).
func formArgs(op *api.Operation, form url.Values) map[string]any {
	args := map[string]any{}
	for name, vals := range form {
		prop := api.Property(op.Input, name)
		if formFields[name] || prop == nil {
			continue
		}
		var set []string
		for _, v := range vals {
			if v = strings.TrimSpace(v); v != "" {
				set = append(set, v)
			}
		}
		isArray := prop.Type == "array" || slices.Contains(prop.Types, "array")
		switch {
		case isArray && len(set) == 0:
			args[name] = []any{}
		case len(set) == 0:
		default:
			args[name] = api.ArgValue(prop, set)
		}
	}
	return args
}

// doneText says what a write did, from its arguments and result.
func doneText(op *api.Operation, args, res map[string]any) string {
	if m, ok := res["message"].(map[string]any); ok {
		return fmt.Sprintf("Posted %v (%v)", m["id"], m["kind"]) + replyText(m) + "."
	}
	switch op.Key {
	case "post_federation_peers":
		p, _ := res["peer"].(map[string]any)
		name := fmt.Sprint(p["peer_id"])
		if r, _ := p["realm"].(string); r != "" {
			name = r + " (" + name + ")"
		}
		return fmt.Sprintf("Added peer %s: kept, admitted and dialled; it is %v.", name, p["state"])
	case "delete_federation_peers_id":
		return fmt.Sprintf("Removed peer %v and hung up on it.", args["id"])
	case "post_federation_blocks":
		b, _ := res["block"].(map[string]any)
		return fmt.Sprintf("Blocked %v: its events are no longer stored, served or relayed here.", b["realm"])
	case "delete_federation_blocks_realm":
		return fmt.Sprintf("Unblocked %v: sync resumes, and this node catches up from its peers.", args["realm"])
	}
	if t, ok := res["thread"].(map[string]any); ok {
		s := fmt.Sprintf("%v is %v", t["id"], t["state"])
		switch {
		case t["locked"] == true:
			s += ", confirmed and locked"
		case t["proposal"] == true:
			s += " (a proposal)"
		case t["state_origin"] != nil:
			s += ", confirmed"
		}
		if t["pinned"] == true {
			s += "; pinned"
		}
		if t["llm_reply_forbidden"] == true {
			s += "; AI replies forbidden"
		}
		return s + "."
	}
	if req, ok := res["request"].(map[string]any); ok {
		return fmt.Sprintf("Access request %v is %v; %v now holds %v.", req["id"], req["status"], req["identity"], joinList(req["rights"]))
	}
	if f, ok := res["feature"].(map[string]any); ok {
		return fmt.Sprintf("Feature request %v is %v.", f["id"], f["status"])
	}
	if cl, ok := res["claim"].(map[string]any); ok {
		return fmt.Sprintf("Claim %v is %v.", cl["id"], cl["state"])
	}
	if _, ok := res["identity"]; ok && res["rights"] != nil {
		s := fmt.Sprintf("Token %v (%v) holds %v", res["id"], res["identity"], joinList(res["rights"]))
		if res["revoked_at"] != nil {
			s += "; revoked"
		}
		return s + "."
	}
	return op.Purpose + " Done."
}

// replyText says where a reply into another realm's thread stands.
func replyText(m map[string]any) string {
	thread := splitIdentity(m["thread"]).Realm // realm:th_N; a local thread has no realm part
	switch m["status"] {
	case "pending":
		return "; it is pending until " + thread + " accepts it into its thread"
	case "accepted":
		return "; " + thread + " accepted it into its thread"
	case "refused":
		s := "; " + thread + " refused it"
		if ref, ok := m["refusal"].(map[string]any); ok {
			s += fmt.Sprintf(" (%v: %v)", ref["reason"], strings.TrimSuffix(fmt.Sprint(ref["error"]), "."))
		}
		return s
	}
	return ""
}

func joinList(v any) string {
	var parts []string
	for _, e := range asList(v) {
		parts = append(parts, fmt.Sprint(e))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}
