package corpus

// Event types of the corpus family; also the change feed's event_type once
// the "corpus." prefix is dropped.
const (
	evMessageCreated = "corpus.message.created"
)

// messageData is a created message; Subject is set only on a
// conversation's first message.
type messageData struct {
	MessageID      string   `cbor:"message_id"`
	ConversationID string   `cbor:"conversation_id"`
	Subject        string   `cbor:"subject,omitempty"`
	Content        *string  `cbor:"content,omitempty"`
	Payload        *string  `cbor:"payload,omitempty"` // the payload's JCS text; "null" for a JSON null
	Kind           []string `cbor:"kind"`
	Tags           []string `cbor:"tags,omitempty"`
	Mentions       []string `cbor:"mentions,omitempty"`
	SchemaName     string   `cbor:"schema_name,omitempty"`
	SchemaVersion  int      `cbor:"schema_version,omitempty"`
	// SchemaValidated is the home realm's verdict; replicas keep it.
	SchemaValidated bool `cbor:"schema_validated,omitempty"`
}
