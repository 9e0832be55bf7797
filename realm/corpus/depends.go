package corpus

import (
	"errors"
	"fmt"

	"relay/protocol"
	"relay/store"
)

// Missing tells the store, by reads alone, that an event of another realm
// refers to a corpus record this node does not hold yet: the conversation a
// message appends to, a message a relationship relates, the relationship a
// retraction withdraws. The store then parks the event (store.Dependent)
// rather than hold back its realm's chain.
func (p *projector) Missing(tx *store.Tx, se *store.StoredEvent) error {
	switch se.Event.Type {
	case evMessageCreated:
		var d struct {
			MessageID      string `cbor:"message_id"`
			ConversationID string `cbor:"conversation_id"`
			Subject        string `cbor:"subject,omitempty"`
		}
		if err := protocol.DecodeDataFields(se.Event.Data, &d); err != nil || d.Subject != "" {
			return nil // Apply says what is wrong; a new conversation needs nothing
		}
		var c Conversation
		if ok, err := readConversation(tx, []byte(d.ConversationID), &c); err != nil || ok {
			return err
		}
		return fmt.Errorf("%w: message %s appends to conversation %s", store.ErrDependency, d.MessageID, d.ConversationID)
	case evRelationshipAsserted:
		var d assertionData
		if err := protocol.DecodeData(se.Event.Data, &d); err != nil {
			return nil
		}
		for _, id := range []string{d.SourceMessageID, d.TargetMessageID} {
			if m, err := heldMessage(tx, id); err != nil || m == nil {
				if err != nil {
					return err
				}
				return fmt.Errorf("%w: relationship %s relates message %s", store.ErrDependency, d.RelationshipID, id)
			}
		}
	case evRelationshipRetracted:
		var d retractionData
		if err := protocol.DecodeData(se.Event.Data, &d); err != nil {
			return nil
		}
		switch _, err := tx.Get(cat(pfxRel, []byte(d.RelationshipID))); {
		case err == nil:
		case errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("%w: retraction %s withdraws relationship %s", store.ErrDependency, d.RetractionID, d.RelationshipID)
		default:
			return err
		}
	}
	return nil
}

// Scopes names the corpus records an event refers to or makes (store.Scoped):
// its message and conversation, a relationship and the messages it relates,
// a retraction and the relationship it withdraws. An author's statistics,
// tag and mention counts add up the same in any order, so they are none.
func (p *projector) Scopes(tx *store.Tx, se *store.StoredEvent) ([]string, error) {
	switch se.Event.Type {
	case evMessageCreated:
		var d struct {
			MessageID      string `cbor:"message_id"`
			ConversationID string `cbor:"conversation_id"`
		}
		if err := protocol.DecodeDataFields(se.Event.Data, &d); err != nil {
			return nil, err
		}
		return []string{"co/m/" + d.MessageID, "co/c/" + d.ConversationID}, nil
	case evRelationshipAsserted:
		var d assertionData
		if err := protocol.DecodeData(se.Event.Data, &d); err != nil {
			return nil, err
		}
		return []string{"co/r/" + d.RelationshipID, "co/m/" + d.SourceMessageID, "co/m/" + d.TargetMessageID}, nil
	case evRelationshipRetracted:
		var d retractionData
		if err := protocol.DecodeData(se.Event.Data, &d); err != nil {
			return nil, err
		}
		scopes := []string{"co/r/" + d.RelationshipID, "co/x/" + d.RetractionID}
		// Withdrawing it frees its triple for a new assertion.
		var r relRec
		switch ok, err := tx.GetJSON(cat(pfxRel, []byte(d.RelationshipID)), &r); {
		case err != nil:
			return nil, err
		case ok:
			scopes = append(scopes, "co/m/"+r.Source, "co/m/"+r.Target)
		}
		return scopes, nil
	}
	return nil, nil
}
