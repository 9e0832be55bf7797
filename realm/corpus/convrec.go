package corpus

import (
	"encoding/binary"
	"encoding/json"
	"errors"

	"relay/store"
)

// A conversation's record is rewritten by every message appended to it,
// so it is stored compactly, in binary, rather than as JSON (about 200
// bytes instead of 450): convFormat, then its fields in the order of
// encodeConversation, strings with their length, numbers as varints,
// times as in author records. The conversation_id is the key's. Records
// stored as JSON by earlier versions are read as before, and replaced by
// the binary form at the conversation's next message.
const convFormat = 1

var errConvRecord = errors.New("corpus: malformed conversation record")

func encodeConversation(c *Conversation) []byte {
	b := make([]byte, 0, 64+len(c.Subject)+len(c.RootMessageID)+len(c.AuthorID)+len(c.Realm)+len(c.CID))
	b = append(b, convFormat)
	for _, s := range []string{c.Subject, c.RootMessageID, c.AuthorID, c.Realm, c.CID} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = appendTimeBin(b, c.CreatedAt)
	b = appendTimeBin(b, c.UpdatedAt)
	b = binary.AppendVarint(b, int64(c.MessageCount))
	b = binary.AppendUvarint(b, c.CreatedSequence)
	return binary.AppendUvarint(b, c.LastSequence)
}

// decodeConversation reads the stored record of conversation id, binary
// or JSON.
func decodeConversation(id string, raw []byte, c *Conversation) error {
	if len(raw) > 0 && raw[0] == '{' {
		return json.Unmarshal(raw, c)
	}
	if len(raw) == 0 || raw[0] != convFormat {
		return errConvRecord
	}
	r := recReader{b: raw[1:], bad: errConvRecord}
	c.ConversationID = id
	for _, s := range []*string{&c.Subject, &c.RootMessageID, &c.AuthorID, &c.Realm, &c.CID} {
		*s = r.str()
	}
	c.CreatedAt = r.time()
	c.UpdatedAt = r.time()
	c.MessageCount = int(r.varint())
	c.CreatedSequence = r.uvarint()
	c.LastSequence = r.uvarint()
	if r.err == nil && len(r.b) != 0 {
		r.err = errConvRecord
	}
	return r.err
}

// readConversation reads conversation id into c; found is false when it
// is not held.
func readConversation(tx *store.Tx, id []byte, c *Conversation) (found bool, err error) {
	err = tx.Peek(cat(pfxConv, id), func(raw []byte) error {
		found = true
		return decodeConversation(string(id), raw, c)
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return found, err
}

// readConversationSized is readConversation with the size of the record
// as JSON, as every record was stored before: what an export page counts
// against its budget. For a record in the binary form that costs an
// encoding, which only an export needs.
func readConversationSized(tx *store.Tx, id []byte, c *Conversation) (int, bool, error) {
	raw, err := tx.Get(cat(pfxConv, id))
	if errors.Is(err, store.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if err := decodeConversation(string(id), raw, c); err != nil {
		return 0, true, err
	}
	if raw[0] == '{' {
		return len(raw), true, nil
	}
	b, err := marshal(c)
	return len(b), true, err
}

// conversationSubject is the subject of a conversation's stored record,
// read without decoding the rest; ok is false for a record it cannot
// read so (one stored as JSON by an earlier version).
func conversationSubject(raw []byte) (subject string, ok bool) {
	if len(raw) == 0 || raw[0] != convFormat {
		return "", false
	}
	r := recReader{b: raw[1:], bad: errConvRecord}
	subject = r.str()
	return subject, r.err == nil
}

// A conversation's key in its index by created sequence (pfxConvSeq)
// holds its id and its subject, so that /conversations?q= reads subjects
// there rather than each conversation's record: convSeqFormat, the id with
// its length, then the subject. It is written once, when the conversation
// is created (its subject never changes). A value without the format
// byte is an id alone, as earlier versions wrote it.
const convSeqFormat = 1

func convSeqValue(id, subject string) []byte {
	b := make([]byte, 0, 2+len(id)+len(subject))
	b = append(b, convSeqFormat)
	b = binary.AppendUvarint(b, uint64(len(id)))
	return append(append(b, id...), subject...)
}

// parseConvSeq reads a value of pfxConvSeq: the conversation's id and,
// when ok, its subject.
func parseConvSeq(v []byte) (id []byte, subject string, ok bool) {
	if len(v) == 0 || v[0] != convSeqFormat {
		return v, "", false
	}
	n, k := binary.Uvarint(v[1:])
	if k <= 0 || n > uint64(len(v)-1-k) {
		return v, "", false
	}
	rest := v[1+k:]
	return rest[:n], string(rest[n:]), true
}
