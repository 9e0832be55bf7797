package corpus

import (
	"bytes"
	"encoding/json"
	"sync"

	"relay/store"
)

// DefaultMessageCacheBytes is the default bound of the decoded messages
// search keeps (Config.MessageCacheBytes). A message of the benchmark's
// corpus takes about 1 KB here, so this holds about 250,000: at 64 MB,
// which held about half of a 100,000-message corpus, 8 concurrent searches
// ran at 1,180-1,487 queries/s with a p99 of 16-25 ms, against 2,349-2,364
// and 9-11 ms at 256 MB (docs/BENCHMARKS.md). The cache fills only with
// messages the node holds.
const DefaultMessageCacheBytes = 256 << 20

// msgCache keeps decoded messages by id for search, which reads up to 1000
// of them a query: each is a point read in Badger and a JSON decode,
// together most of a query's time. A message never changes once
// stored (a Rebuild derives the same record again), so an entry never goes
// stale and nothing invalidates it.
//
// The index fills it as it takes committed messages (derivedMessage: the
// message as its stored record reads back, from the event already
// decoded), so that what was written recently, or read from the log at
// start, is there before a search asks; search adds what it had to read
// from the store.
//
// Past its bound it evicts entries at random (Go's map order): unlike
// generations, which drop half of what they hold at once, it stays full,
// and it needs no bookkeeping per hit. Entries are shared with every
// reader: read-only.
type msgCache struct {
	max int // bytes

	mu      sync.Mutex
	entries map[string]*cachedMessage
	bytes   int
}

// cachedMessage is a message as search returns it. Immutable.
//
// It holds no JSON of the message: encoding a result again costs less
// than the cache it would take, which is better spent on more messages.
type cachedMessage struct {
	m Message
}

// derivedMessage is the message se creates as the projection's record of
// it reads back (search's messages are those): messageOf, with the payload
// as marshal stores it, compacted, HTML-escaped and unescaped again. The
// other fields decode to what they were: the strings are valid UTF-8 (the
// event's CBOR is checked for it), the time is UTC milliseconds, and nil
// and empty lists stay apart. ok is false for a payload that is not JSON,
// which the projector would have refused.
func derivedMessage(se *store.StoredEvent, d messageData) (m Message, ok bool) {
	m = messageOf(se, d)
	if m.HasPayload {
		var compact, escaped bytes.Buffer
		if err := json.Compact(&compact, m.Payload); err != nil {
			return Message{}, false
		}
		json.HTMLEscape(&escaped, compact.Bytes())
		m.Payload = unescapeHTML(escaped.Bytes())
	}
	return m, true
}

// newMsgCache returns a cache of about maxBytes; nil (a cache that holds
// nothing) when maxBytes < 0.
func newMsgCache(maxBytes int) *msgCache {
	if maxBytes < 0 {
		return nil
	}
	if maxBytes == 0 {
		maxBytes = DefaultMessageCacheBytes
	}
	return &msgCache{max: maxBytes, entries: map[string]*cachedMessage{}}
}

// size is about what an entry holds in memory.
func (c *cachedMessage) size() int {
	m := &c.m
	n := 256 + len(m.MessageID) + len(m.ConversationID) + len(m.AuthorID) + len(m.Payload) + len(m.Realm) + len(m.CID) + len(m.SchemaName)
	if m.Content != nil {
		n += len(*m.Content)
	}
	for _, list := range [][]string{m.Kind, m.Tags, m.Mentions} {
		for _, v := range list {
			n += 16 + len(v)
		}
	}
	return n
}

// getMany sets out[i] to the cached message with id ids[i], leaving out[i]
// nil when there is none, and returns how many it found. One lock for all.
func (c *msgCache) getMany(ids []string, out []*cachedMessage) (found int) {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, id := range ids {
		if m := c.entries[id]; m != nil {
			out[i] = m
			found++
		}
	}
	return found
}

// addMany caches messages read from the store, unless the cache holds
// them already.
func (c *msgCache) addMany(ms []*cachedMessage) {
	if c == nil || len(ms) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range ms {
		if c.entries[m.m.MessageID] == nil {
			c.putLocked(m)
		}
	}
}

// setMany caches the index's messages, in log order, replacing what the
// cache holds for their ids (so a message_id stored twice is, as in the
// projection, the later one).
func (c *msgCache) setMany(ms []*cachedMessage) {
	if c == nil || len(ms) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range ms {
		c.putLocked(m)
	}
}

func (c *msgCache) putLocked(m *cachedMessage) {
	id := m.m.MessageID
	if prev := c.entries[id]; prev != nil {
		delete(c.entries, id)
		c.bytes -= prev.size()
	}
	size := m.size()
	if size > c.max/4 {
		return // would crowd out the rest
	}
	for c.bytes+size > c.max {
		for k, e := range c.entries { // a random one
			delete(c.entries, k)
			c.bytes -= e.size()
			break
		}
	}
	c.entries[id] = m
	c.bytes += size
}
