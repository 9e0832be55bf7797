package realm

import (
	"embed"
	"fmt"
	htmltemplate "html/template"
	"net/http"
	"strings"
	texttemplate "text/template"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/corpus"
)

//go:embed assets
var assets embed.FS

var (
	funcs     = map[string]any{"join": join, "breakable": breakable}
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
	case []protocol.EvidenceKind:
		for _, e := range x {
			parts = append(parts, string(e))
		}
	case []string:
		parts = x
	}
	return strings.Join(parts, sep)
}

// breakable is a path or a name for an HTML page, with a line break
// allowed (a <wbr>) before each slash but a leading one and after each
// underscore: in a narrow table column it wraps between its parts,
// rather than widen the table past the page or break inside a word.
func breakable(v any) htmltemplate.HTML {
	s := fmt.Sprint(v)
	var b strings.Builder
	from := 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '/' && i > 0:
			b.WriteString(htmltemplate.HTMLEscapeString(s[from:i]) + "<wbr>")
			from = i
		case s[i] == '_':
			b.WriteString(htmltemplate.HTMLEscapeString(s[from:i+1]) + "<wbr>")
			from = i + 1
		}
	}
	b.WriteString(htmltemplate.HTMLEscapeString(s[from:]))
	return htmltemplate.HTML(b.String())
}

// docData is what the discovery documents are written from: the registry,
// the limits in force, the catalog of reasons and the corpus's
// vocabularies.
type docData struct {
	Realm, Human, Base, Version string
	Limits                      protocol.ParleyLimits
	Operations                  []Endpoint
	ParleyOps, CorpusOps        []docOp
	Acts                        []protocol.Act
	States                      []protocol.State
	ClaimStates                 []protocol.ClaimState
	EvidenceKinds               []protocol.EvidenceKind
	Reasons                     []protocol.ReasonInfo
	Kinds                       []corpus.KindInfo
	RelationshipTypes           []corpus.RelationshipTypeInfo
	EventTypes                  []string
	Documents                   []docLink
	Scopes                      []string
	ContentSignal               string
	OAuth                       oauthPaths
}

// oauthPaths are the corpus's MCP endpoint and its authorization server.
type oauthPaths struct {
	MCP, Authorize, Token, Register, ServerMetadata, ResourceMetadata string
}

func (n *Node) docData(r *http.Request) docData {
	ops := n.reg.Operations()
	d := docData{Realm: string(n.realm), Human: protocol.Identity{Prefix: protocol.HumanPrefix, Line: n.cfg.HumanName}.String(),
		Base: n.baseURL(r), Version: Version, Limits: n.limits, Acts: protocol.Acts, States: protocol.States,
		ClaimStates: protocol.ClaimStates, EvidenceKinds: protocol.EvidenceKinds, Reasons: protocol.Reasons,
		ParleyOps: sortedOps(ops, api.Parley), CorpusOps: sortedOps(ops, api.Corpus),
		Kinds: corpus.Kinds, RelationshipTypes: corpus.RelationshipTypes, EventTypes: corpus.ChangeEventTypes,
		Documents: n.documentLinks(), Scopes: corpusScopes, ContentSignal: contentSignal,
		OAuth: oauthPaths{MCP: corpusMCPPath, Authorize: oauthAuthorizePath, Token: oauthTokenPath, Register: oauthRegisterPath,
			ServerMetadata: oauthASMetadataPath, ResourceMetadata: oauthPRMetadataPath + corpusMCPPath}}
	for _, op := range ops {
		d.Operations = append(d.Operations, endpointOf(op))
	}
	return d
}
