package realm

import (
	"bytes"
	"embed"
	htmltemplate "html/template"
	"net/http"
	"strings"
	texttemplate "text/template"

	"relay/protocol"
	"relay/realm/api"
)

//go:embed assets
var assets embed.FS

var (
	funcs     = map[string]any{"join": join}
	llmsTmpl  = texttemplate.Must(texttemplate.New("llms.txt.tmpl").Funcs(funcs).ParseFS(assets, "assets/llms.txt.tmpl"))
	specTmpl  = htmltemplate.Must(htmltemplate.New("parley.html.tmpl").Funcs(funcs).ParseFS(assets, "assets/parley.html.tmpl"))
	guideTmpl = texttemplate.Must(texttemplate.New("auth.md.tmpl").Funcs(funcs).ParseFS(assets, "assets/auth.md.tmpl"))
)

func join(v any, sep string) string {
	var parts []string
	switch x := v.(type) {
	case []protocol.Act:
		for _, e := range x {
			parts = append(parts, string(e))
		}
	case []protocol.State:
		for _, e := range x {
			parts = append(parts, string(e))
		}
	case []protocol.ClaimState:
		for _, e := range x {
			parts = append(parts, string(e))
		}
	case []string:
		parts = x
	}
	return strings.Join(parts, sep)
}

// docData is what the discovery documents are written from: the registry,
// the limits in force and the catalog of reasons.
type docData struct {
	Realm, Human, Base string
	Limits             protocol.ParleyLimits
	Operations         []Endpoint
	Acts               []protocol.Act
	States             []protocol.State
	ClaimStates        []protocol.ClaimState
	EvidenceKinds      []string
	Reasons            []protocol.ReasonInfo
}

func (n *Node) docData(r *http.Request) docData {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	d := docData{Realm: string(n.realm), Human: protocol.Identity{Prefix: protocol.HumanPrefix, Line: n.cfg.HumanName}.String(),
		Base: scheme + "://" + r.Host, Limits: n.limits, Acts: protocol.Acts, States: protocol.States,
		ClaimStates: protocol.ClaimStates, EvidenceKinds: protocol.EvidenceKinds, Reasons: protocol.Reasons}
	for _, op := range n.reg.Operations() {
		d.Operations = append(d.Operations, endpointOf(op))
	}
	return d
}

// serveDoc renders a discovery document; before, if given, runs first.
func (n *Node) serveDoc(contentType string, render func(*bytes.Buffer, docData) error, before ...func(*http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, f := range before {
			if err := f(r); err != nil {
				n.log.Error("document", "path", r.URL.Path, "err", err)
				writeRefusal(w, protocol.Refuse(protocol.ReasonInternal))
				return
			}
		}
		var buf bytes.Buffer
		if err := render(&buf, n.docData(r)); err != nil {
			n.log.Error("render document", "path", r.URL.Path, "err", err)
			writeRefusal(w, protocol.Refuse(protocol.ReasonInternal))
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "public, max-age=60")
		w.Write(buf.Bytes())
	})
}

func (n *Node) llmsTxt() http.Handler {
	return n.serveDoc("text/plain; charset=utf-8", func(b *bytes.Buffer, d docData) error { return llmsTmpl.Execute(b, d) })
}

func (n *Node) parleyHTML() http.Handler {
	return n.serveDoc("text/html; charset=utf-8", func(b *bytes.Buffer, d docData) error { return specTmpl.Execute(b, d) })
}

// guide serves the corpus's write guide (/auth.md). Read with an agent's
// credential, it records that the agent read it: its first write may then
// go through.
func (n *Node) guide() http.Handler {
	return n.serveDoc("text/markdown; charset=utf-8", func(b *bytes.Buffer, d docData) error {
		return guideTmpl.Execute(b, d)
	}, func(r *http.Request) error {
		p, err := n.authenticate(r, api.Corpus)
		if err != nil || p == nil {
			return nil // anyone may read it; only a credential records it
		}
		return n.corpus.MarkOnboarded(r.Context(), p)
	})
}
