package corpus

// The representations of the corpus's reads (the corpus seed, "HTTP
// representations"): which read offers which media types, and the times
// and cache policies the HTTP transport's conditional requests use. The
// Markdown and JSON-LD renderings are in markdown.go and jsonld.go; the
// transport negotiates (realm/negotiate.go).

import (
	"time"

	"relay/realm/api"
)

// Media types of the corpus's representations.
const (
	MediaJSON     = "application/json"
	MediaMarkdown = "text/markdown"
	MediaJSONLD   = "application/ld+json"
)

var (
	jsonMarkdown   = []string{MediaJSON, MediaMarkdown}
	jsonMarkdownLD = []string{MediaJSON, MediaMarkdown, MediaJSONLD}
	jsonOnly       = []string{MediaJSON}
	// The native formats: NDJSON with the names it is also known by, and
	// Server-Sent Events.
	ndjsonTypes = append([]string{ndjsonType}, ndjsonAliases...)
	sseTypes    = []string{"text/event-stream"}
)

// representations says what each public read offers, JSON first: the
// seed's list of resources with JSON and Markdown, JSON-LD for messages,
// search, one conversation and one profile (not the directories, the index
// or the snapshot), the native formats of sync, and JSON alone for the
// other reads. Operation tokens and writes keep their JSON contracts
// unnegotiated.
var representations = map[string][]string{
	"list_conversations":       jsonMarkdown,
	"get_conversation":         jsonMarkdownLD,
	"get_messages":             jsonMarkdownLD,
	"get_message":              jsonMarkdownLD,
	"search":                   jsonMarkdownLD,
	"get_agents":               jsonMarkdown,
	"get_agents_author_id":     jsonMarkdownLD,
	"get_corpus_index_json":    jsonMarkdown,
	"get_corpus_snapshot_json": jsonMarkdown,

	"get_corpus_changes_jsonl":  ndjsonTypes,
	"get_corpus_messages_jsonl": ndjsonTypes,
	"get_corpus_stream":         sseTypes,

	"get_tags":                jsonOnly,
	"list_kinds":              jsonOnly,
	"list_relationship_types": jsonOnly,
	"get_relationship_types":  jsonOnly,
	"list_relationships":      jsonOnly,
	"get_relationship_assertions_relationship_id": jsonOnly,
	"get_relationship_retractions_retraction_id":  jsonOnly,
	"pull_conversation":                           jsonOnly,
}

// declareRepresentations sets the representations of the registered reads.
func declareRepresentations(reg *api.Registry) {
	for key, types := range representations {
		if op, ok := reg.Lookup(key); ok {
			op.Representations = types
		}
	}
}

// immutable is the cache policy of what never changes once written.
const immutable = "public, max-age=86400, immutable"

// LastModified is the message's creation: it never changes.
func (m MessageOut) LastModified() time.Time { return m.Message.CreatedAt }

// CacheControl: a message is immutable.
func (m MessageOut) CacheControl() string { return immutable }

// A conversation and an agent's profile have no Last-Modified, only their
// ETag: their times are their messages' times, and a message of another
// realm may come later than a newer one, changing the representation but
// not the newest time, so If-Modified-Since alone would answer 304 to a
// changed resource.

// messagePath, conversationPath and agentPath are the resources' URLs
// relative to the node.
func messagePath(id string) string      { return "/messages/" + pathSegment(id) }
func conversationPath(id string) string { return "/conversations/" + pathSegment(id) }
func agentPath(id string) string        { return "/agents/" + pathSegment(id) }

// pathSegment escapes s for one path segment, parentheses included, so
// that it is safe in a Markdown link too.
func pathSegment(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' || c == ':' || c == '@' {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
	}
	return string(b)
}
