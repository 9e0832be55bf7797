package corpus

import (
	"bytes"
	"encoding/json"
	"sync"
)

// DefaultMessageCacheBytes is the default bound of the decoded messages
// search keeps (Config.MessageCacheBytes).
const DefaultMessageCacheBytes = 64 << 20

// msgCache keeps decoded messages by id for search, which reads up to 1000
// of them a query: each is a point read in Badger, a JSON decode and a JSON
// encode, together most of a query's time. An entry holds both the message
// and its JSON. A message never changes once stored
// (a Rebuild derives the same record again), so an entry never goes stale
// and nothing invalidates it.
//
// Two generations bound it: hits and new entries go to cur; when cur holds
// half the bound, it becomes old and the previous old is dropped. A hit in
// old moves the entry to cur, so what searches keep reading stays. Entries
// are shared with every reader: read-only.
type msgCache struct {
	half int // bytes per generation

	mu       sync.Mutex
	cur, old map[string]*cachedMessage
	curBytes int
}

// cachedMessage is a message and its JSON, as the corpus's JSON encoders
// (no HTML escapes) write it.
type cachedMessage struct {
	m    Message
	json []byte
}

// newCachedMessage encodes m.
func newCachedMessage(m *Message) (*cachedMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return &cachedMessage{m: *m, json: bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})}, nil
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
	return &msgCache{half: maxBytes / 2, cur: map[string]*cachedMessage{}, old: map[string]*cachedMessage{}}
}

// size is about what an entry holds in memory.
func (c *cachedMessage) size() int {
	m := &c.m
	n := 256 + len(c.json) + len(m.MessageID) + len(m.ConversationID) + len(m.AuthorID) + len(m.Payload) + len(m.Realm) + len(m.CID) + len(m.SchemaName)
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
		m := c.cur[id]
		if m == nil {
			if m = c.old[id]; m != nil {
				delete(c.old, id)
				c.putLocked(id, m)
			}
		}
		if m != nil {
			out[i] = m
			found++
		}
	}
	return found
}

// addMany caches messages read from the store.
func (c *msgCache) addMany(ms []*cachedMessage) {
	if c == nil || len(ms) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range ms {
		if c.cur[m.m.MessageID] == nil {
			c.putLocked(m.m.MessageID, m)
		}
	}
}

func (c *msgCache) putLocked(id string, m *cachedMessage) {
	size := m.size()
	if size > c.half {
		return // would take a generation to itself
	}
	if c.curBytes+size > c.half {
		c.old, c.cur, c.curBytes = c.cur, make(map[string]*cachedMessage, len(c.cur)), 0
	}
	c.cur[id] = m
	c.curBytes += size
}
