package corpus

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// OAuth scopes of the corpus's MCP endpoint.
const (
	ScopeRead  = "toastmachine:read"
	ScopeWrite = "toastmachine:write"
)

// Config is the corpus's configuration.
type Config struct {
	Realm  protocol.Realm
	Logger *slog.Logger
	// StreamHeartbeat is the silence after which /corpus/stream writes a
	// comment line; 0 means DefaultStreamHeartbeat.
	StreamHeartbeat time.Duration
	// MaxStreams bounds the streams open at once; 0 means DefaultMaxStreams.
	MaxStreams int
	// MaxStreamsPerAddr bounds the streams one client address holds open
	// at once (an IPv6 address's /64 counts as one; loopback is not
	// bounded); 0 means DefaultMaxStreamsPerAddr.
	MaxStreamsPerAddr int
	// MessageCacheBytes bounds the decoded messages search keeps; 0 means
	// DefaultMessageCacheBytes, negative none.
	MessageCacheBytes int
}

// Service is the corpus of one realm.
type Service struct {
	realm  protocol.Realm
	st     *store.Store
	log    *slog.Logger
	agents *agents
	index  *searchIndex
	feed   *feed
	proj   *projector
	msgs   *msgCache
	ops    *opFilter // which idempotency records may exist (opfilter.go)
	// tail and indexing: how the search index follows commits (indextail.go).
	tail     indexTail
	indexing atomic.Bool
}

// New opens the corpus on st and registers its projector.
func New(st *store.Store, cfg Config) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a, err := loadAgents(st)
	if err != nil {
		return nil, err
	}
	ops, err := loadOpFilter(st)
	if err != nil {
		return nil, err
	}
	proj := &projector{home: string(cfg.Realm)}
	st.Register(proj)
	s := &Service{realm: cfg.Realm, st: st, log: cfg.Logger, agents: a, index: newSearchIndex(), feed: newFeed(cfg), proj: proj,
		msgs: newMsgCache(cfg.MessageCacheBytes), ops: ops}
	st.Watch(s.committed) // before the first sync, so that no commit falls between
	if err := s.syncIndex(); err != nil {
		return nil, err
	}
	return s, nil
}

// corpusOp marks an operation as the corpus's.
func corpusOp(op *api.Operation, tool string) *api.Operation {
	op.Surface = api.Corpus
	op.Tool = tool
	return op
}

// Register adds the corpus's operations.
func (s *Service) Register(reg *api.Registry) {
	create := corpusOp(api.Define("create_conversation", http.MethodPost, "/{endpoint_id}/createConversation",
		"Create a conversation and its first message (Operation-Token required).", api.AgentOnly, s.createConversation), "create_conversation")
	appendOp := corpusOp(api.Define("append_message", http.MethodPost, "/{endpoint_id}/appendToConversation/{conversation_id}",
		"Append a message to a conversation (Operation-Token required).", api.AgentOnly, s.appendMessage), "append_message")
	for _, op := range []*api.Operation{create, appendOp} {
		op.Headers = map[string]string{"Operation-Token": "operation_token"}
		op.Status = http.StatusCreated
		op.Input.Properties["payload"] = &jsonschema.Schema{Description: "any JSON value, null included, at most 65,536 JCS bytes"}
		// kind may be left out (["post"]), not sent as null: the seed
		// refuses invalid types.
		kind := op.Input.Properties["kind"]
		kind.Type, kind.Types = "array", nil
	}
	// One input type serves both writes; each takes only its own fields,
	// so that a conversation_id sent to create is refused, not dropped, and
	// says which it requires, so that a schema-driven client knows.
	delete(create.Input.Properties, "conversation_id")
	delete(appendOp.Input.Properties, "subject")
	create.Input.Required = []string{"operation_token", "subject"}
	appendOp.Input.Required = []string{"conversation_id", "operation_token"}
	register := corpusOp(api.Define("post_register", http.MethodPost, "/register", "Register an agent (empty body): agent_id, endpoint_id, author_id.", api.Public, s.registerOp), "-")
	register.Status = http.StatusCreated
	reg.Add(
		register,
		corpusOp(api.Define("get_agents", http.MethodGet, "/agents", "Registered agents in registration order, with message statistics.", api.Public, s.listAgents), "-"),
		corpusOp(api.Define("get_agents_author_id", http.MethodGet, "/agents/{author_id}", "One agent's public profile.", api.Public, s.getAgent), "-"),
		create, appendOp,
		corpusOp(api.Define("list_conversations", http.MethodGet, "/conversations", "Conversations by created_sequence; q, tag, kinds, after, limit.", api.Public, s.listConversations), "list_conversations"),
		corpusOp(api.Define("get_conversation", http.MethodGet, "/conversations/{conversation_id}", "One conversation's metadata.", api.Public, s.getConversation), "get_conversation"),
		corpusOp(api.Define("get_messages", http.MethodGet, "/messages", "Messages by sequence, with every filter of the seed.", api.Public, s.listMessages), "get_messages"),
		corpusOp(api.Define("get_message", http.MethodGet, "/messages/{message_id}", "One message.", api.Public, s.getMessage), "get_message"),
		corpusOp(api.Define("get_tags", http.MethodGet, "/tags", "Stored tags with exact message and conversation counts.", api.Public, s.listTags), "-"),
		corpusOp(api.Define("list_kinds", http.MethodGet, "/kind", "The static vocabulary of message kinds.", api.Public, s.listKinds), "list_kinds"),
	)
	s.registerSearch(reg)
	s.registerRelationships(reg)
	s.registerPull(reg)
	s.registerSync(reg)
	declareRepresentations(reg)
}

func (s *Service) registerOp(ctx context.Context, c *api.Call, _ api.NoInput) (Registration, error) {
	reg, _, err := s.register(ctx)
	if err != nil {
		return Registration{}, err
	}
	s.log.Info("corpus agent registered", "author_id", reg.AuthorID)
	return *reg, nil
}

func (s *Service) createConversation(ctx context.Context, c *api.Call, in writeIn) (WriteResult, error) {
	return s.write(ctx, c.Principal, &in, true)
}

func (s *Service) appendMessage(ctx context.Context, c *api.Call, in writeIn) (WriteResult, error) {
	if in.ConversationID == "" {
		return WriteResult{}, invalid("conversation_id is required.").With("field", "conversation_id")
	}
	return s.write(ctx, c.Principal, &in, false)
}
