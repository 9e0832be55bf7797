package parley

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

func (s *Service) registerBoards(reg *api.Registry) {
	reg.Add(
		api.Define("get_boards", http.MethodGet, "/api/v1/boards", "List boards (containers of threads).", api.Public, s.listBoards),
		loosen(api.Define("get_boards_id", http.MethodGet, "/api/v1/boards/{id}", "One board with counters (id or slug).", api.Public, s.getBoard), "id"),
		api.Define("post_boards", http.MethodPost, "/api/v1/boards", "Create a board (container); needs the write right.", api.NeedRight(protocol.RightWrite), s.postBoard),
		loosen(api.Define("get_boards_id_threads", http.MethodGet, "/api/v1/boards/{id}/threads", "The threads of a board, waiting first.", api.Public, s.boardThreads), "id"),
		envelope(loosen(api.Define("post_boards_id_threads", http.MethodPost, "/api/v1/boards/{id}/threads",
			"Open a thread with an envelope (kind, body); an envelope naming a thread continues it.", api.NeedRight(protocol.RightWrite), s.openThread),
			"id", "thread", "parent")),
	)
}

// BoardsOut lists boards.
type BoardsOut struct {
	Boards []Board `json:"boards"`
}

func (s *Service) listBoards(ctx context.Context, c *api.Call, _ api.NoInput) (BoardsOut, error) {
	out := BoardsOut{Boards: []Board{}}
	err := s.st.View(func(tx *store.Tx) error {
		return tx.Iterate(pfxBoard, false, func(_, v []byte) error {
			var b Board
			if err := json.Unmarshal(v, &b); err != nil {
				return err
			}
			out.Boards = append(out.Boards, b)
			return nil
		})
	})
	return out, err
}

type boardIDIn struct {
	ID protocol.KeyRef `json:"id" jsonschema:"the board's number or slug"`
}

// BoardOut is one board.
type BoardOut struct {
	Board Board `json:"board"`
}

func (s *Service) getBoard(ctx context.Context, c *api.Call, in boardIDIn) (BoardOut, error) {
	var out BoardOut
	err := s.st.View(func(tx *store.Tx) error {
		b, err := s.loadBoard(tx, in.ID)
		if err == nil {
			out.Board = *b
		}
		return err
	})
	return out, err
}

func (s *Service) loadBoard(tx *store.Tx, ref protocol.KeyRef) (*Board, error) {
	id, ok, err := s.boardRef(tx, ref)
	if err != nil {
		return nil, err
	}
	var b Board
	if ok {
		ok, err = tx.GetJSON(key(pfxBoard, id.bytes()), &b)
	}
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, protocol.Refusef(protocol.ReasonBoardNotFound, "No board %q; see get_boards.", ref)
	}
	return &b, nil
}

type postBoardIn struct {
	Slug        string `json:"slug" jsonschema:"[a-z0-9-], 1 to 40 characters, unique"`
	Name        string `json:"name" jsonschema:"1 to 80 characters"`
	Description string `json:"description,omitempty" jsonschema:"at most 500 characters"`
}

var slugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)

func (s *Service) postBoard(ctx context.Context, c *api.Call, in postBoardIn) (BoardOut, error) {
	in.Slug = strings.TrimSpace(in.Slug)
	switch {
	case !slugRE.MatchString(in.Slug):
		return BoardOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "slug: 1 to 40 of a-z, 0-9 and -, starting with a letter or digit.").With("field", "slug").With("rule", "format")
	case strings.Trim(in.Slug, "0123456789") == "":
		// /api/v1/boards/2 names board number 2: a slug of digits only
		// could never be reached as one.
		return BoardOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "slug: not digits only, which name a board by its number.").With("field", "slug").With("rule", "format")
	case protocol.CodePoints(strings.TrimSpace(in.Name)) == 0 || protocol.CodePoints(in.Name) > 80:
		return BoardOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "name: 1 to 80 characters.").With("field", "name").With("rule", lengthRule(protocol.CodePoints(strings.TrimSpace(in.Name))))
	case protocol.CodePoints(in.Description) > 500:
		return BoardOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "description: at most 500 characters.").With("field", "description").With("rule", "max_length")
	}
	if ref := protocol.CheckControl("name", in.Name, "description", in.Description); ref != nil {
		return BoardOut{}, ref
	}
	b, err := s.createBoard(ctx, c.Principal.Identity.String(), in.Slug, strings.TrimSpace(in.Name), in.Description)
	if err != nil {
		return BoardOut{}, err
	}
	return BoardOut{Board: *b}, nil
}

// createBoard appends a board created by author.
func (s *Service) createBoard(ctx context.Context, author, slug, name, desc string) (*Board, error) {
	var id uint64
	_, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		if _, err := tx.Get(slugKey(s.realm, slug)); err == nil {
			return nil, protocol.Refusef(protocol.ReasonConflict, "A board with slug %q exists.", slug).With("field", "slug")
		}
		n, err := tx.NextID("board")
		if err != nil {
			return nil, err
		}
		id = n
		data, err := protocol.EncodeData(boardData{ID: n, Slug: slug, Name: name, Description: desc})
		if err != nil {
			return nil, err
		}
		return &protocol.Draft{Type: evBoardCreated, Author: author, Data: data}, nil
	})
	if err != nil {
		return nil, err
	}
	var b Board
	err = s.st.View(func(tx *store.Tx) error {
		_, err := tx.GetJSON(key(pfxBoard, rid{s.realm, id}.bytes()), &b)
		return err
	})
	return &b, err
}

type boardThreadsIn struct {
	ID     protocol.KeyRef `json:"id" jsonschema:"the board's number or slug"`
	State  protocol.State  `json:"state,omitempty" jsonschema:"only threads in this state"`
	Limit  int             `json:"limit,omitempty" jsonschema:"at most this many (default 50, at most 200)"`
	Offset int             `json:"offset,omitempty" jsonschema:"skip this many of the ordered threads (default 0): with has_more, the next page"`
}

// ThreadsOut lists threads: one page of them, in the listing's order.
type ThreadsOut struct {
	Threads []ThreadOut `json:"threads"`
	HasMore bool        `json:"has_more" jsonschema:"more threads follow: ask again with offset + the threads returned"`
}

// pageOf returns the page at offset, limit long, of the threads an order
// index under prefix lists (threadAtKey, boardAtKey: after prefix, each key
// holds order bytes, then the thread's id) that match says to keep; a
// thread for which it says no more ends the list. match nil keeps every
// thread: those before offset are then skipped unread.
func (s *Service) pageOf(tx *store.Tx, prefix []byte, order, offset, limit int, match func(*threadRec) (keep, more bool)) (ThreadsOut, error) {
	if offset < 0 {
		return ThreadsOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "offset is 0 or more.").With("field", "offset").With("rule", "minimum")
	}
	out := ThreadsOut{Threads: []ThreadOut{}}
	skipped := 0
	err := tx.Iterate(prefix, false, func(k, _ []byte) error {
		if len(k) <= len(prefix)+order {
			return fmt.Errorf("parley: order key %q is short", k)
		}
		if match == nil && skipped < offset {
			skipped++
			return nil
		}
		var t threadRec
		ok, err := s.recs.threads.Get(tx, key(pfxThread, k[len(prefix)+order:]), &t)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("parley: order key %q names no thread", k)
		}
		keep, more := true, true
		if match != nil {
			keep, more = match(&t)
		}
		switch {
		case !more:
			return store.ErrStop
		case !keep:
			return nil
		case skipped < offset:
			skipped++
			return nil
		case len(out.Threads) == limit:
			out.HasMore = true
			return store.ErrStop
		}
		out.Threads = append(out.Threads, s.threadOut(&t))
		return nil
	})
	return out, err
}

func (s *Service) boardThreads(ctx context.Context, c *api.Call, in boardThreadsIn) (ThreadsOut, error) {
	if in.State != "" && !slices.Contains(protocol.States, in.State) {
		return ThreadsOut{}, notAState(in.State)
	}
	var out ThreadsOut
	err := s.st.View(func(tx *store.Tx) error {
		b, err := s.loadBoard(tx, in.ID)
		if err != nil {
			return err
		}
		// Pinned first, then threads awaiting a reply, then the rest,
		// each newest first (boardAtKey), read until the page is full.
		var match func(*threadRec) (keep, more bool)
		if in.State != "" {
			match = func(t *threadRec) (keep, more bool) { return t.State.State == in.State, true }
		}
		out, err = s.pageOf(tx, key(pfxBoardAt, b.id().bytes()), boardOrder, in.Offset, ClampLimit(in.Limit), match)
		return err
	})
	return out, err
}

// ClampLimit is a listing page's size: 50 unless asked, at most 200. The
// forum's listings use it, and the node's lists of tokens and requests.
func ClampLimit(n int) int {
	switch {
	case n <= 0:
		return 50
	case n > 200:
		return 200
	}
	return n
}

// openThreadIn is an envelope with the board's id.
type openThreadIn struct {
	ID protocol.KeyRef `json:"id" jsonschema:"the board's number or slug"`
	protocol.Envelope
}

func (s *Service) openThread(ctx context.Context, c *api.Call, in openThreadIn) (PostOut, error) {
	return s.post(ctx, c.Principal, in.ID, &in.Envelope, "")
}
