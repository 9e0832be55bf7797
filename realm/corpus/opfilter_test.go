package corpus

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"relay/protocol"
)

// TestOpFilter: every key added is reported, across the filter's growth,
// and fresh keys mostly are not.
func TestOpFilter(t *testing.T) {
	f := newOpFilter(0)
	const n = 5 * opMinKeys // four growths
	for i := range n {
		f.add(fmt.Appendf(nil, "l/co/op/realm:a\x00append\x00tok-%d", i))
	}
	if len(f.parts) < 3 {
		t.Errorf("%d parts after %d keys", len(f.parts), n)
	}
	for i := range n {
		if !f.mayHave(fmt.Appendf(nil, "l/co/op/realm:a\x00append\x00tok-%d", i)) {
			t.Fatalf("key %d added but not reported", i)
		}
	}
	fp := 0
	for i := range n {
		if f.mayHave(fmt.Appendf(nil, "l/co/op/realm:a\x00append\x00new-%d", i)) {
			fp++
		}
	}
	if rate := float64(fp) / n; rate > 0.03 {
		t.Errorf("false positives %.3f", rate)
	}
}

// TestOpTokensAfterReopen: the filter of a reopened corpus holds the
// tokens used before, so their retries replay and their conflicts are
// refused, for messages and relationships alike.
func TestOpTokensAfterReopen(t *testing.T) {
	f := openSearchFixture(t, t.TempDir())
	p := f.agent()
	ctx := context.Background()
	in := writeIn{Subject: "s", Content: text("first"), OperationToken: "tok-1"}
	first, err := f.s.write(ctx, p, &in, true)
	if err != nil {
		t.Fatal(err)
	}
	app := writeIn{ConversationID: first.ConversationID, Content: text("second"), OperationToken: "tok-2"}
	second, err := f.s.write(ctx, p, &app, false)
	if err != nil {
		t.Fatal(err)
	}
	f.reopen()
	p = f.s.principal(f.s.agents.get(p.Agent.N), nil)
	in = writeIn{Subject: "s", Content: text("first"), OperationToken: "tok-1"}
	again, err := f.s.write(ctx, p, &in, true)
	if err != nil || !again.replayed || again.MessageID != first.MessageID {
		t.Fatalf("retry after reopen: %v, replayed %v, %s vs %s", err, again.replayed, again.MessageID, first.MessageID)
	}
	app = writeIn{ConversationID: first.ConversationID, Content: text("other"), OperationToken: "tok-2"}
	_, err = f.s.write(ctx, p, &app, false)
	var r *protocol.Refusal
	if !errors.As(err, &r) || r.Reason != protocol.ReasonIdempotencyConflict {
		t.Fatalf("conflict after reopen: %v", err)
	}
	app = writeIn{ConversationID: first.ConversationID, Content: text("second"), OperationToken: "tok-2"}
	if again, err = f.s.write(ctx, p, &app, false); err != nil || !again.replayed || again.Sequence != second.Sequence {
		t.Fatalf("append retry after reopen: %v %+v", err, again)
	}
}
