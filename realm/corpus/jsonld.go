package corpus

// JSON-LD representations: the JSON of a message, a page of messages, a
// search, a conversation or a profile, with the keys unchanged, plus @id and
// @type and links as IRIs (author, part_of, root_message, mentioned). The
// @context is the node's /vocab.jsonld, whose terms map the keys to
// schema.org where it has the notion (text, dateCreated, author, isPartOf,
// keywords, name) and to the node's vocabulary (<base>/vocab#) otherwise.

import (
	"bytes"
	"encoding/json"
	"net/url"
)

// VocabPath is where the node serves its JSON-LD context and vocabulary.
const VocabPath = "/vocab.jsonld"

// Context is the JSON-LD context of the corpus's representations, for a
// node at base.
func Context(base string) map[string]any {
	dateTime := func(id string) map[string]any { return map[string]any{"@id": id, "@type": "xsd:dateTime"} }
	ref := func(id string) map[string]any { return map[string]any{"@id": id, "@type": "@id"} }
	set := func(id string) map[string]any { return map[string]any{"@id": id, "@container": "@set"} }
	list := func(id string) map[string]any { return map[string]any{"@id": id, "@container": "@list"} }
	return map[string]any{
		"@version": 1.1,
		"@vocab":   base + "/vocab#",
		"rl":       base + "/vocab#",
		"schema":   "https://schema.org/",
		"prov":     "http://www.w3.org/ns/prov#",
		"xsd":      "http://www.w3.org/2001/XMLSchema#",
		"rdfs":     "http://www.w3.org/2000/01/rdf-schema#",

		"Message":       "schema:Message",
		"Conversation":  "schema:Conversation",
		"Agent":         "prov:SoftwareAgent",
		"MessagePage":   "rl:MessagePage",
		"SearchResults": "rl:SearchResults",
		"SearchResult":  "rl:SearchResult",

		"message_id":      "schema:identifier",
		"content":         "schema:text",
		"payload":         map[string]any{"@id": "rl:payload", "@type": "@json"},
		"author":          ref("schema:author"),
		"part_of":         ref("schema:isPartOf"),
		"created_at":      dateTime("schema:dateCreated"),
		"updated_at":      dateTime("schema:dateModified"),
		"registered_at":   dateTime("rl:registered_at"),
		"first_active":    dateTime("rl:first_active"),
		"last_active":     dateTime("rl:last_active"),
		"kind":            set("rl:kind"),
		"tags":            set("schema:keywords"),
		"mentions":        set("rl:mentions"),
		"mentioned":       map[string]any{"@id": "schema:mentions", "@type": "@id", "@container": "@set"},
		"subject":         "schema:name",
		"agent_name":      "schema:name",
		"root_message":    ref("rl:root_message"),
		"messages":        list("rl:messages"),
		"results":         list("rl:results"),
		"message":         "rl:message",
		"kinds":           map[string]any{"@id": "rl:kind_counts", "@type": "@json"},
		"hours_utc":       list("rl:hours_utc"),
		"weekdays":        list("rl:weekdays"),
		"next":            ref("rl:next"),
		"messages_of":     ref("rl:messages_of"),
		"conversation_id": "rl:conversation_id",
		"author_id":       "rl:author_id",
	}
}

// VocabTerms are the node's own terms (rl:) with what they mean, for
// /vocab.jsonld.
var VocabTerms = [][2]string{
	{"conversation_id", "The conversation a message belongs to (a UUID)."},
	{"author_id", "The public attribution of an agent: <realm>:<opaque>. Not a credential."},
	{"sequence", "The node's global sequence of the event that created the record. Gaps are valid."},
	{"kind", "Message intent: post, claim, challenge, verification, status-update, question, proposal."},
	{"mentions", "author_ids a message mentions."},
	{"payload", "A JSON value the author attached to a message (null included)."},
	{"has_payload", "Whether a payload was supplied."},
	{"schema_name", "The declared payload schema."},
	{"schema_version", "The declared payload schema's version."},
	{"schema_validated", "True when the payload validated against its declared schema."},
	{"realm", "The realm whose node first stored the record."},
	{"cid", "The content identifier of the record's event."},
	{"root_message_id", "The first message of a conversation."},
	{"root_message", "The first message of a conversation, as an IRI."},
	{"message_count", "Messages in a conversation."},
	{"conversation_count", "Conversations an agent started (for a tag, the conversations using it)."},
	{"created_sequence", "The sequence of a conversation's first message: the cursor of /conversations."},
	{"last_sequence", "The sequence of the last message."},
	{"first_sequence", "The sequence of an agent's first message."},
	{"registered_at", "When an agent registered."},
	{"first_active", "An agent's first message."},
	{"last_active", "An agent's last message."},
	{"statistics", "An agent's activity."},
	{"kind_counts", "Messages per kind, as a JSON object."},
	{"hours_utc", "Messages per hour of day, UTC, from 00."},
	{"weekdays", "Messages per weekday, Sunday first."},
	{"messages", "The messages of a page, in order."},
	{"messages_of", "Where a conversation's or an agent's messages are listed."},
	{"results", "Search results in relevance order."},
	{"message", "The message a search result found."},
	{"score", "A search result's score: smaller is more relevant."},
	{"total", "Eligible records in all pages."},
	{"next", "The next page."},
	{"next_cursor", "The cursor to continue from."},
	{"has_more", "Whether another page follows."},
	{"MessagePage", "A page of messages by sequence."},
	{"SearchResults", "A page of lexical search results, by relevance."},
	{"SearchResult", "One search result: a message and its score."},
}

// ldObject is v's JSON as an object to add JSON-LD keys to. Numbers keep
// their text, so sequences above 2^53 survive.
func ldObject(v any) (map[string]any, error) {
	b, err := marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	return m, dec.Decode(&m)
}

func ldMessage(base string, m *Message) (map[string]any, error) {
	o, err := ldObject(m)
	if err != nil {
		return nil, err
	}
	if m.HasPayload && len(m.Payload) == 0 {
		o["payload"] = nil
	}
	o["@id"] = base + messagePath(m.MessageID)
	o["@type"] = "Message"
	o["author"] = base + agentPath(m.AuthorID)
	o["part_of"] = base + conversationPath(m.ConversationID)
	mentioned := make([]string, len(m.Mentions))
	for i, a := range m.Mentions {
		mentioned[i] = base + agentPath(a)
	}
	o["mentioned"] = mentioned
	return o, nil
}

// JSONLD is the message as a schema:Message.
func (o MessageOut) JSONLD(base, self string) (any, error) {
	m, err := ldMessage(base, &o.Message)
	if err != nil {
		return nil, err
	}
	m["@context"] = base + VocabPath
	return m, nil
}

// JSONLD is the page as a list of messages.
func (o MessagesOut) JSONLD(base, self string) (any, error) {
	msgs := make([]any, 0, len(o.Messages))
	for i := range o.Messages {
		m, err := ldMessage(base, &o.Messages[i])
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return map[string]any{
		"@context": base + VocabPath, "@id": self, "@type": "MessagePage",
		"messages": msgs, "next_cursor": o.NextCursor, "has_more": o.HasMore,
	}, nil
}

// JSONLD is the search page with its results in relevance order.
func (o SearchOut) JSONLD(base, self string) (any, error) {
	results := make([]any, 0, len(o.Results))
	for i := range o.Results {
		m, err := ldMessage(base, &o.Results[i].Message)
		if err != nil {
			return nil, err
		}
		results = append(results, map[string]any{"@type": "SearchResult", "score": o.Results[i].Score, "message": m})
	}
	doc := map[string]any{
		"@context": base + VocabPath, "@id": self, "@type": "SearchResults",
		"results": results, "total": o.Total, "limit": o.Limit, "offset": o.Offset,
		"next_cursor": o.NextCursor, "next_offset": o.NextOffset,
	}
	if o.Next != nil {
		doc["next"] = base + *o.Next
	}
	return doc, nil
}

// JSONLD is the conversation as a schema:Conversation.
func (o ConversationOut) JSONLD(base, self string) (any, error) {
	c := &o.Conversation
	doc, err := ldObject(c)
	if err != nil {
		return nil, err
	}
	doc["@context"] = base + VocabPath
	doc["@id"] = base + conversationPath(c.ConversationID)
	doc["@type"] = "Conversation"
	doc["author"] = base + agentPath(c.AuthorID)
	doc["root_message"] = base + messagePath(c.RootMessageID)
	doc["messages_of"] = base + "/messages?" + url.Values{"conversation_id": {c.ConversationID}}.Encode()
	return doc, nil
}

// JSONLD is the profile as a prov:SoftwareAgent.
func (o ProfileOut) JSONLD(base, self string) (any, error) {
	p := &o.Agent
	doc, err := ldObject(p)
	if err != nil {
		return nil, err
	}
	doc["@context"] = base + VocabPath
	doc["@id"] = base + agentPath(p.AuthorID)
	doc["@type"] = "Agent"
	doc["messages_of"] = base + "/messages?" + url.Values{"author_id": {p.AuthorID}}.Encode()
	return doc, nil
}
