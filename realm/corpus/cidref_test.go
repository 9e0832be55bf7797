package corpus

import (
	"context"
	"errors"
	"testing"

	"relay/protocol"
	"relay/realm/api"
)

// TestReadByCID: a message and a conversation are read by their CID as by
// their id; a CID of a later message names no conversation, and a CID of
// nothing held names nothing.
func TestReadByCID(t *testing.T) {
	f := openSearchFixture(t, "")
	p := f.agent()
	first := f.post(p, writeIn{Subject: "Caches", Content: text("one")})
	second := f.post(p, writeIn{ConversationID: first.ConversationID, Content: text("two")})
	ctx := context.Background()
	call := &api.Call{}

	for _, m := range []Message{first, second} {
		got, err := f.s.getMessage(ctx, call, messageIDIn{MessageID: m.CID})
		if err != nil || got.Message.MessageID != m.MessageID {
			t.Fatalf("message %s by its CID: %+v, %v", m.MessageID, got.Message, err)
		}
	}
	conv, err := f.s.getConversation(ctx, call, conversationIDIn{ConversationID: first.CID})
	if err != nil || conv.Conversation.ConversationID != first.ConversationID || conv.Conversation.CID != first.CID {
		t.Fatalf("the conversation by its CID: %+v, %v", conv.Conversation, err)
	}
	notFound := func(what string, err error) {
		t.Helper()
		var r *protocol.Refusal
		if !errors.As(err, &r) || r.Reason != protocol.ReasonNotFound {
			t.Errorf("%s: %v, want not_found", what, err)
		}
	}
	_, err = f.s.getConversation(ctx, call, conversationIDIn{ConversationID: second.CID})
	notFound("a conversation by a later message's CID", err)
	const unheld = "bafyreiedyaxint3ut2gyz3d4krswdyryddcrhaueas4j7t3zmpn3k425c4"
	_, err = f.s.getMessage(ctx, call, messageIDIn{MessageID: unheld})
	notFound("a message by a CID not held", err)
	_, err = f.s.getConversation(ctx, call, conversationIDIn{ConversationID: unheld})
	notFound("a conversation by a CID not held", err)
}
