package realm

import (
	"embed"
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
	EvidenceKinds               []string
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
