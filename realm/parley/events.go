package parley

import "relay/protocol"

// Event types of the Parley family.
const (
	evBoardCreated  = "parley.board.created"
	evThreadOpened  = "parley.thread.opened"
	evMessagePosted = "parley.message.posted"
	evThreadState   = "parley.thread.state"
	evThreadPinned  = "parley.thread.pinned"
	evThreadModerat = "parley.thread.moderated"
	evClaimAttested = "parley.claim.attested"
	evClaimSealed   = "parley.claim.sealed"
)

type boardData struct {
	ID          uint64 `cbor:"id"`
	Slug        string `cbor:"slug"`
	Name        string `cbor:"name"`
	Description string `cbor:"description,omitempty"`
}

// messageData is a posted message; for parley.thread.opened it is the
// opening message and Board names the board.
type messageData struct {
	Thread     string              `cbor:"thread"` // the thread's key as the author realm writes it
	Board      uint64              `cbor:"board,omitempty"`
	N          uint64              `cbor:"n"`
	Parent     string              `cbor:"parent,omitempty"`
	Kind       string              `cbor:"kind"`
	Body       string              `cbor:"body"`
	Extension  string              `cbor:"extension,omitempty"`
	AuthorKind string              `cbor:"author_kind"`
	Provenance map[string]any      `cbor:"provenance,omitempty"`
	RelatesTo  []string            `cbor:"relates_to,omitempty"`
	Claims     []claimData         `cbor:"claims,omitempty"`
	Refutes    []string            `cbor:"refutes,omitempty"`
	Evidence   []protocol.Evidence `cbor:"evidence,omitempty"`
	Image      *imageData          `cbor:"image,omitempty"`
	Change     *protocol.Change    `cbor:"change,omitempty"`
}

type claimData struct {
	N         uint64              `cbor:"n"`
	Statement string              `cbor:"statement"`
	Evidence  []protocol.Evidence `cbor:"evidence,omitempty"`
}

type imageData struct {
	URL       string `cbor:"url,omitempty" json:"url,omitempty"`
	CID       string `cbor:"cid,omitempty" json:"cid,omitempty"`
	MediaType string `cbor:"media_type,omitempty" json:"media_type,omitempty"`
	Bytes     int    `cbor:"bytes,omitempty" json:"bytes,omitempty"`
}

// stateData is a state change made by close, reopen, a side state, a
// confirmation or a rejection.
type stateData struct {
	Thread string          `cbor:"thread"`
	Via    string          `cbor:"via"`
	Change protocol.Change `cbor:"change"`
	Note   string          `cbor:"note,omitempty"`
}

type pinData struct {
	Thread string `cbor:"thread"`
	Pinned bool   `cbor:"pinned"`
}

type moderateData struct {
	Thread            string `cbor:"thread"`
	LLMReplyForbidden bool   `cbor:"llm_reply_forbidden"`
}

type attestData struct {
	Claim     string              `cbor:"claim"`
	Verdict   string              `cbor:"verdict"`
	Evidence  []protocol.Evidence `cbor:"evidence,omitempty"`
	Note      string              `cbor:"note,omitempty"`
	Extension string              `cbor:"extension,omitempty"`
}

type sealData struct {
	Claim string `cbor:"claim"`
	Note  string `cbor:"note,omitempty"`
}
