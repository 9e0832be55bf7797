package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"relay/protocol"
)

//go:embed templates assets
var files embed.FS

// pageNames are the templates under templates/, each rendered inside
// layout.html.
var pageNames = []string{"login", "queue", "boards", "board", "threads", "thread", "tokens", "corpus", "conversation", "federation", "settings", "error"}

var pages = func() map[string]*template.Template {
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/parts.html"))
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		out[name] = template.Must(template.Must(base.Clone()).ParseFS(files, "templates/"+name+".html"))
	}
	return out
}()

// assetVersion changes with the assets, so pages can let browsers cache
// them for long.
var assetVersion = func() string {
	h := sha256.New()
	fs.WalkDir(files, "assets", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := files.ReadFile(p)
			h.Write(b)
		}
		return nil
	})
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))[:12]
}()

func (c *Console) serveAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, err := files.ReadFile("assets/" + path.Base(name))
	if err != nil || strings.HasPrefix(name, ".") {
		http.NotFound(w, r)
		return
	}
	ct := map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}[path.Ext(name)]
	if ct == "" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ct)
	if r.URL.Query().Get("v") == assetVersion {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	w.Header().Set("ETag", `"`+assetVersion+`"`)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}

// view is what every page is rendered from.
type view struct {
	Title string
	Nav   string // the nav entry to mark current
	Data  any
	Live  bool // the page follows /console/live
	Poll  int  // seconds between fetches of a live page besides the stream; 0: none

	// Set by render.
	Realm, Human, Version, CSRF, Path, Assets string
	LoggedIn                                  bool
	Flash                                     *flash
	Queue                                     int // items in the work queue, for the nav
}

// flash is a one-shot message after a form, carried by a short cookie.
type flash struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
	Text   string `json:"text"`
	Op     string `json:"op,omitempty"` // the operation a form ran, when it did
}

const flashCookie = "relay_flash"

func (c *Console) setFlash(w http.ResponseWriter, r *http.Request, f flash) {
	b, _ := json.Marshal(f)
	c.setCookie(w, r, flashCookie, base64.RawURLEncoding.EncodeToString(b), Prefix, 60)
}

func (c *Console) takeFlash(w http.ResponseWriter, r *http.Request) *flash {
	ck, err := r.Cookie(flashCookie)
	if err != nil {
		return nil
	}
	c.clearCookie(w, r, flashCookie, Prefix)
	b, err := base64.RawURLEncoding.DecodeString(ck.Value)
	var f flash
	if err != nil || json.Unmarshal(b, &f) != nil || f.Text == "" {
		return nil
	}
	return &f
}

// render writes a page. s is nil before login.
func (c *Console) render(w http.ResponseWriter, r *http.Request, s *visit, status int, name string, v view) {
	v.Realm, v.Human, v.Version, v.Path, v.Assets = c.cfg.Realm, c.cfg.HumanID, c.cfg.Version, r.URL.RequestURI(), assetVersion
	if s != nil {
		v.LoggedIn, v.CSRF = true, s.csrf
		if r.Method == http.MethodGet {
			v.Flash = c.takeFlash(w, r)
		}
		if v.Queue == 0 {
			v.Queue = c.queueCount(r, s)
		}
	}
	var b bytes.Buffer
	if err := pages[name].ExecuteTemplate(&b, "layout.html", &v); err != nil {
		c.log.Error("console: render", "page", name, "err", err)
		http.Error(w, "The page could not be rendered; the operator's log has the details.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// fail renders a refusal as a page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *visit, status int, err error) {
	ref := c.refusal(err)
	if status == 0 {
		status = ref.Status()
	}
	c.render(w, r, s, status, "error", view{Title: "Refused: " + string(ref.Reason), Data: consoleError(r.URL.Path, ref)})
}

// errorPage is a refusal as the console tells a person: the reason, the
// message without the API's pointers to its tools, advice for a page
// rather than a client, and the way back to the list the page is part of.
type errorPage struct {
	Reason   protocol.Reason
	Message  string
	Advice   string
	Back     string
	BackText string
}

// apiPointer is the API's "; see get_threads." at the end of a message.
var apiPointer = regexp.MustCompile(`;? ?(see|use|re-read with) [a-z_]+\.?$`)

func consoleError(path string, ref *protocol.Refusal) errorPage {
	e := errorPage{Reason: ref.Reason, Message: apiPointer.ReplaceAllString(ref.Message, "."), Back: Prefix, BackText: "Back to the work queue"}
	for _, l := range []struct{ path, text string }{
		{"/console/threads", "Back to the threads"},
		{"/console/boards", "Back to the boards"},
		{"/console/corpus", "Back to the corpus"},
		{"/console/tokens", "Back to the tokens"},
		{"/console/federation", "Back to the federation"},
	} {
		if strings.HasPrefix(path, l.path) {
			e.Back, e.BackText = l.path, l.text
		}
	}
	switch {
	case ref.Reason == protocol.ReasonCSRF:
		e.Advice = "The form was older than your session, or came from another site. Reload the page and send it again."
	case ref.Status() == http.StatusNotFound:
		e.Advice = "The address names nothing this node holds: the link may be wrong, or the record of another realm not arrived yet."
	case ref.Reason == protocol.ReasonInvalidBody || ref.Reason == protocol.ReasonInvalidRequest:
		e.Advice = "A value in the address or the form is not one this page takes."
	default:
		e.Advice = ref.Reason.Info().HowTo
	}
	return e
}

var funcs = template.FuncMap{
	"when":  when,
	"ago":   ago,
	"ident": splitIdentity,
	"list":  asList,
	"str":   func(v any) string { return fmt.Sprint(v) },
	"has":   has,
	"json":  prettyJSON,
	"value": value,
	"dict":  dict,
	"num":   num,
	"fixed": func(v any) string {
		if n, ok := v.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				return strconv.FormatFloat(f, 'f', 2, 64)
			}
		}
		return fmt.Sprint(v)
	},
	"short":  short,
	"states": func() []protocol.State { return protocol.States },
	"acts":   func() []protocol.Act { return protocol.Acts },
	"rights": func() []protocol.Right { return protocol.AllRights[1:] },
	"plural": func(n int, one, many string) string {
		if n == 1 {
			return one
		}
		return many
	},
	"keys": sortedKeys,
}

func parseTime(v any) (time.Time, bool) {
	switch t := v.(type) {
	case time.Time:
		return t, !t.IsZero()
	case *time.Time:
		if t == nil {
			return time.Time{}, false
		}
		return *t, !t.IsZero()
	}
	s, ok := v.(string)
	if !ok || s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// when is a time as the console shows it, in UTC.
func when(v any) string {
	t, ok := parseTime(v)
	if !ok {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// ago is a time relative to now, coarse.
func ago(v any) string {
	t, ok := parseTime(v)
	if !ok {
		return ""
	}
	d := time.Since(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + " s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + " min ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + " h ago"
	}
	return strconv.Itoa(int(d.Hours()/24)) + " days ago"
}

// identity is an identity split for display: realm (or "human") and line.
type identity struct{ Realm, Line string }

func splitIdentity(v any) identity {
	s := fmt.Sprint(v)
	if r, l, ok := strings.Cut(s, ":"); ok {
		return identity{r, l}
	}
	return identity{"", s}
}

func asList(v any) []any {
	switch l := v.(type) {
	case []any:
		return l
	case []map[string]any: // records the console gathered from pages
		out := make([]any, len(l))
		for i, m := range l {
			out[i] = m
		}
		return out
	}
	return nil
}

func has(list any, want string) bool {
	for _, e := range asList(list) {
		if fmt.Sprint(e) == want {
			return true
		}
	}
	if l, ok := list.([]string); ok {
		for _, e := range l {
			if e == want {
				return true
			}
		}
	}
	return false
}

// prettyJSON is a value as indented JSON, for a page to show.
func prettyJSON(v any) string { return jsonText(v, "  ") }

// jsonText is a value as JSON for a page to show, indented by indent or
// compact: without the \u003c escapes of <, > and & that json.Marshal
// writes for HTML, which html/template escapes on output anyway.
func jsonText(v any, indent string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// value is a decoded JSON value as a page shows it inline: a string as
// itself, a number or boolean as written, null, an object or an array
// as compact JSON (not Go's map[a:1] and [1 2]).
func value(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return jsonText(v, "")
}

func dict(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[fmt.Sprint(kv[i])] = kv[i+1]
	}
	return m
}

// num is a JSON number as an int (0 for anything else).
func num(v any) int {
	switch x := v.(type) {
	case json.Number:
		n, _ := strconv.Atoi(string(x))
		return n
	case int:
		return x
	}
	return 0
}

// short cuts a CID or other long value for a table cell.
func short(v any) string {
	s := fmt.Sprint(v)
	if len(s) <= 16 {
		return s
	}
	return s[:8] + "…" + s[len(s)-6:]
}
