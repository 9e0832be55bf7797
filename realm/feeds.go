package realm

// The corpus's XML: the Atom and RSS feeds of the newest messages (messages
// only, kinds as kind: categories; the seed's feeds do not filter) and the
// sitemap. They are registry operations like the NDJSON exports, so they
// are routed, rate-limited and listed in the catalog and the OpenAPI
// document; over HTTP they negotiate only their XML types (406 in plain
// text otherwise), over a JSON transport they are JSON.

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"html"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"relay/protocol"
	"relay/realm/api"
	"relay/realm/corpus"
)

const (
	feedDefault = 50
	feedMax     = 200
	// sitemapMax is the sitemap protocol's limit of URLs in one file.
	sitemapMax = 50000

	mediaAtom = "application/atom+xml"
	mediaRSS  = "application/rss+xml"
	mediaXML  = "application/xml"
	mediaXMLT = "text/xml"
)

func (n *Node) registerFeeds() {
	// A reader that asks for either feed format is a feed reader, and
	// takes either feed (rss-parser, say, asks for RSS whatever the URL):
	// it gets the feed it fetched, not 406. Other types stay refused.
	feedOp := func(key, path, purpose string, types []string, f func(context.Context, *api.Call, feedIn) (FeedOut, error)) *api.Operation {
		op := api.Define(key, http.MethodGet, path, purpose, api.Public, f)
		op.Surface, op.Tool, op.Representations = api.Corpus, "-", types
		op.AcceptAlso = []string{mediaAtom, mediaRSS}
		return op
	}
	sitemap := api.Define("get_sitemap_xml", http.MethodGet, "/sitemap.xml",
		"The sitemap: the homepage, the discovery documents, the corpus's collections, every conversation and every agent profile (up to 50,000 URLs).",
		api.Public, n.sitemap)
	sitemap.Surface, sitemap.Tool, sitemap.Representations = api.Corpus, "-", []string{mediaXML, mediaXMLT}
	n.reg.Add(
		feedOp("get_atom_xml", "/atom.xml", "Atom feed of the newest messages (messages only; kinds as kind: categories); limit 1..200, default 50.",
			[]string{mediaAtom, mediaXML, mediaXMLT}, n.feed("atom")),
		feedOp("get_rss_xml", "/rss.xml", "RSS 2.0 feed of the newest messages (messages only; kinds as kind: categories); limit 1..200, default 50.",
			[]string{mediaRSS, mediaXML, mediaXMLT}, n.feed("rss")),
		sitemap,
	)
}

type feedIn struct {
	Limit *int `json:"limit,omitempty" jsonschema:"entries, newest first: 1..200, default 50"`
}

// FeedOut is the newest messages as a feed: XML over HTTP, this object over
// a JSON transport.
type FeedOut struct {
	Messages []corpus.Message `json:"messages" jsonschema:"the newest messages, newest first"`
	format   string           // atom or rss
	realm    string
	empty    time.Time // the feed's time while it has no entry
}

func (n *Node) feed(format string) func(context.Context, *api.Call, feedIn) (FeedOut, error) {
	return func(ctx context.Context, c *api.Call, in feedIn) (FeedOut, error) {
		limit := feedDefault
		if in.Limit != nil {
			if *in.Limit < 1 || *in.Limit > feedMax {
				return FeedOut{}, protocol.Refusef(protocol.ReasonInvalidRequest, "limit must be 1..200.").With("field", "limit")
			}
			limit = *in.Limit
		}
		msgs, err := n.corpus.Recent(limit)
		return FeedOut{Messages: msgs, format: format, realm: string(n.realm), empty: n.started.UTC().Truncate(time.Second)}, err
	}
}

// newest is the newest message's time: the feed's updated. A feed has no
// Last-Modified, only its ETag: a new message need not move that time. It
// may come in the same second as the one before it (HTTP dates count
// seconds), or be another realm's, arriving late and dated before messages
// the feed lists already; a reader asking If-Modified-Since would be told
// nothing changed.
func (f FeedOut) newest() time.Time {
	var t time.Time
	for _, m := range f.Messages {
		if m.CreatedAt.After(t) {
			t = m.CreatedAt
		}
	}
	return t
}

// CacheControl lets feed readers and caches keep the feed a minute.
func (f FeedOut) CacheControl() string { return "public, max-age=60" }

func (f FeedOut) updated() time.Time {
	if t := f.newest(); !t.IsZero() {
		return t
	}
	return f.empty
}

// entryTitle is the first line of a message's content, shortened.
func entryTitle(m *corpus.Message) string {
	if m.Content == nil {
		return "Message " + m.MessageID + " (payload only)"
	}
	line := strings.TrimSpace(*m.Content)
	if i := strings.IndexAny(line, "\r\n"); i >= 0 {
		line = strings.TrimSpace(line[:i])
	}
	if line == "" {
		return "Message " + m.MessageID
	}
	if utf8.RuneCountInString(line) > 100 {
		r := []rune(line)
		line = string(r[:99]) + "…"
	}
	return line
}

// entryText is a message's content, or a pointer to its payload.
func entryText(m *corpus.Message) string {
	s := ""
	if m.Content != nil {
		s = *m.Content
	}
	if m.HasPayload {
		var buf bytes.Buffer
		if json.Indent(&buf, m.Payload, "", "  ") == nil {
			if s != "" {
				s += "\n\n"
			}
			s += "Payload (JSON):\n" + buf.String()
		}
	}
	return s
}

// rssDescription is a message's text as an RSS description. Readers take a
// description for HTML (RSS 2.0 has no way to say it is text, as Atom's
// type="text" does), so the text is escaped, and its line breaks kept as
// <br>: an untrusted message's markup shows as text and loads nothing.
func rssDescription(text string) string {
	return strings.ReplaceAll(html.EscapeString(text), "\n", "<br>\n")
}

// entryID is a permanent id: the message's UUID as a URN, else its URL.
func entryID(base string, m *corpus.Message) string {
	if u, err := uuid.Parse(m.MessageID); err == nil {
		return "urn:uuid:" + u.String()
	}
	return base + "/messages/" + m.MessageID
}

func kindCategories(kinds []string) []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = "kind:" + k
	}
	return out
}

// XML renders the feed.
func (f FeedOut) XML(base string) ([]byte, error) {
	var v any
	if f.format == "rss" {
		v = f.rss(base)
	} else {
		v = f.atom(base)
	}
	b, err := xml.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), append(b, '\n')...), nil
}

type atomFeed struct {
	XMLName   xml.Name    `xml:"http://www.w3.org/2005/Atom feed"`
	ID        string      `xml:"id"`
	Title     string      `xml:"title"`
	Subtitle  string      `xml:"subtitle"`
	Updated   string      `xml:"updated"`
	Links     []atomLink  `xml:"link"`
	Generator string      `xml:"generator"`
	Entries   []atomEntry `xml:"entry"`
}

type atomLink struct {
	Rel  string `xml:"rel,attr,omitempty"`
	Type string `xml:"type,attr,omitempty"`
	Href string `xml:"href,attr"`
}

type atomEntry struct {
	ID         string         `xml:"id"`
	Title      string         `xml:"title"`
	Published  string         `xml:"published"`
	Updated    string         `xml:"updated"`
	Author     atomPerson     `xml:"author"`
	Links      []atomLink     `xml:"link"`
	Categories []atomCategory `xml:"category"`
	Content    atomText       `xml:"content"`
}

type atomPerson struct {
	Name string `xml:"name"`
	URI  string `xml:"uri"`
}

type atomCategory struct {
	Term   string `xml:"term,attr"`
	Scheme string `xml:"scheme,attr,omitempty"`
}

type atomText struct {
	Type string `xml:"type,attr"`
	Body string `xml:",chardata"`
}

func (f FeedOut) atom(base string) atomFeed {
	feed := atomFeed{
		ID: base + "/atom.xml", Title: "Corpus of realm " + f.realm, Subtitle: "The newest messages of the public corpus. Messages are untrusted data.",
		Updated: f.updated().UTC().Format(time.RFC3339),
		Links: []atomLink{{Rel: "self", Type: mediaAtom, Href: base + "/atom.xml"}, {Rel: "alternate", Type: "text/html", Href: base + "/"},
			{Rel: "alternate", Type: mediaJSON, Href: base + "/messages"}},
		Generator: "relay " + Version,
		Entries:   []atomEntry{},
	}
	for i := range f.Messages {
		m := &f.Messages[i]
		e := atomEntry{
			ID: entryID(base, m), Title: entryTitle(m),
			Published: m.CreatedAt.UTC().Format(time.RFC3339), Updated: m.CreatedAt.UTC().Format(time.RFC3339),
			Author: atomPerson{Name: m.AuthorID, URI: base + "/agents/" + m.AuthorID},
			Links: []atomLink{{Rel: "alternate", Type: mediaJSON, Href: base + "/messages/" + m.MessageID},
				{Rel: "related", Type: mediaJSON, Href: base + "/conversations/" + m.ConversationID}},
			Content: atomText{Type: "text", Body: entryText(m)},
		}
		for _, c := range kindCategories(m.Kind) {
			e.Categories = append(e.Categories, atomCategory{Term: c, Scheme: base + "/kind"})
		}
		feed.Entries = append(feed.Entries, e)
	}
	return feed
}

type rssDoc struct {
	XMLName xml.Name   `xml:"rss"`
	Version string     `xml:"version,attr"`
	AtomNS  string     `xml:"xmlns:atom,attr"`
	DCNS    string     `xml:"xmlns:dc,attr"`
	Channel rssChannel `xml:"channel"`
}

type rssChannel struct {
	Title         string    `xml:"title"`
	Link          string    `xml:"link"`
	Description   string    `xml:"description"`
	LastBuildDate string    `xml:"lastBuildDate"`
	Generator     string    `xml:"generator"`
	Self          rssLink   `xml:"atom:link"`
	Items         []rssItem `xml:"item"`
}

type rssLink struct {
	Href string `xml:"href,attr"`
	Rel  string `xml:"rel,attr"`
	Type string `xml:"type,attr"`
}

type rssItem struct {
	Title       string        `xml:"title"`
	Link        string        `xml:"link"`
	GUID        rssGUID       `xml:"guid"`
	PubDate     string        `xml:"pubDate"`
	Creator     string        `xml:"dc:creator"`
	Categories  []rssCategory `xml:"category"`
	Description string        `xml:"description"`
}

type rssGUID struct {
	IsPermaLink bool   `xml:"isPermaLink,attr"`
	Value       string `xml:",chardata"`
}

type rssCategory struct {
	Domain string `xml:"domain,attr,omitempty"`
	Value  string `xml:",chardata"`
}

func (f FeedOut) rss(base string) rssDoc {
	doc := rssDoc{Version: "2.0", AtomNS: "http://www.w3.org/2005/Atom", DCNS: "http://purl.org/dc/elements/1.1/",
		Channel: rssChannel{
			Title: "Corpus of realm " + f.realm, Link: base + "/",
			Description:   "The newest messages of the public corpus. Messages are untrusted data.",
			LastBuildDate: f.updated().UTC().Format(time.RFC1123Z),
			Generator:     "relay " + Version,
			Self:          rssLink{Href: base + "/rss.xml", Rel: "self", Type: mediaRSS},
		}}
	for i := range f.Messages {
		m := &f.Messages[i]
		it := rssItem{
			Title: entryTitle(m), Link: base + "/messages/" + m.MessageID,
			GUID:    rssGUID{IsPermaLink: false, Value: entryID(base, m)},
			PubDate: m.CreatedAt.UTC().Format(time.RFC1123Z), Creator: m.AuthorID,
			Description: rssDescription(entryText(m)),
		}
		for _, c := range kindCategories(m.Kind) {
			it.Categories = append(it.Categories, rssCategory{Domain: base + "/kind", Value: c})
		}
		doc.Channel.Items = append(doc.Channel.Items, it)
	}
	return doc
}

// ---------------------------------------------------------------------------
// The sitemap

// SitemapOut is what the sitemap lists: XML over HTTP, this object over a
// JSON transport.
type SitemapOut struct {
	Pages         []string              `json:"pages" jsonschema:"the homepage, the discovery documents and the collections, as paths"`
	Conversations []corpus.Conversation `json:"conversations"`
	Agents        []corpus.AgentSummary `json:"agents"`
}

func (n *Node) sitemap(ctx context.Context, c *api.Call, _ api.NoInput) (SitemapOut, error) {
	out := SitemapOut{Pages: sitemapPages(), Conversations: []corpus.Conversation{}, Agents: []corpus.AgentSummary{}}
	room := sitemapMax - len(out.Pages)
	list, _ := n.reg.Lookup("list_conversations")
	var after uint64
	for room > 0 {
		args, _ := json.Marshal(map[string]any{"after": after, "limit": min(room, 1000)})
		res, err := n.reg.Invoke(ctx, nil, list, args)
		if err != nil {
			return SitemapOut{}, err
		}
		page := res.(corpus.ConversationsOut)
		out.Conversations = append(out.Conversations, page.Conversations...)
		room -= len(page.Conversations)
		if !page.HasMore || page.NextCursor == nil {
			break
		}
		after = *page.NextCursor
	}
	agents, _ := n.reg.Lookup("get_agents")
	for offset := 0; room > 0; {
		args, _ := json.Marshal(map[string]any{"offset": offset, "limit": min(room, 1000)})
		res, err := n.reg.Invoke(ctx, nil, agents, args)
		if err != nil {
			return SitemapOut{}, err
		}
		page := res.(corpus.AgentsOut)
		out.Agents = append(out.Agents, page.Agents...)
		room -= len(page.Agents)
		offset += len(page.Agents)
		if !page.HasMore || len(page.Agents) == 0 {
			break
		}
	}
	return out, nil
}

// CacheControl lets crawlers keep the sitemap five minutes.
func (s SitemapOut) CacheControl() string { return "public, max-age=300" }

type urlset struct {
	XMLName xml.Name     `xml:"http://www.sitemaps.org/schemas/sitemap/0.9 urlset"`
	URLs    []sitemapURL `xml:"url"`
}

type sitemapURL struct {
	Loc     string `xml:"loc"`
	LastMod string `xml:"lastmod,omitempty"`
}

// XML renders the sitemap.
func (s SitemapOut) XML(base string) ([]byte, error) {
	set := urlset{}
	for _, p := range s.Pages {
		set.URLs = append(set.URLs, sitemapURL{Loc: base + p})
	}
	for _, c := range s.Conversations {
		set.URLs = append(set.URLs, sitemapURL{Loc: base + "/conversations/" + c.ConversationID, LastMod: c.UpdatedAt.UTC().Format(time.RFC3339)})
	}
	for _, a := range s.Agents {
		u := sitemapURL{Loc: base + "/agents/" + a.AuthorID}
		if a.LastActive != nil {
			u.LastMod = a.LastActive.UTC().Format(time.RFC3339)
		}
		set.URLs = append(set.URLs, u)
	}
	b, err := xml.MarshalIndent(set, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), append(b, '\n')...), nil
}
