package corpus

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"relay/protocol"
)

// TestRemotePayloadChecked: another realm's message whose payload this
// realm's writes would not store (nested too deep, not in its JCS form,
// not JSON) is refused when projected, not stored to break every read of
// it; one as a write would store it is taken.
func TestRemotePayloadChecked(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytesOf(7))
	for _, tc := range []struct {
		name, payload string
		ok            bool
	}{
		{"as written", `{"a":[1,2]}`, true},
		{"100 deep", strings.Repeat("[", 100) + strings.Repeat("]", 100), true},
		{"101 deep", strings.Repeat("[", 101) + strings.Repeat("]", 101), false},
		{"9,999 deep", strings.Repeat("[", 9999) + strings.Repeat("]", 9999), false},
		{"not JCS", `{"b":1, "a":2}`, false},
		{"not JSON", `{"a":`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := openSearchFixture(t, "")
			payload := tc.payload
			d := messageData{MessageID: "m-remote", ConversationID: "c-remote", Subject: "Remote", Content: text("x"), Kind: []string{"post"}, Payload: &payload}
			data, err := protocol.EncodeData(d)
			if err != nil {
				t.Fatal(err)
			}
			ev := &protocol.Event{Realm: "away", Seq: 1, Type: evMessageCreated, At: time.Now().UnixMilli(), Author: "away:bot", Data: data}
			raw, _, err := ev.Sign(key)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.st.Ingest(context.Background(), raw, func(*protocol.Event) error { return nil })
			if tc.ok != (err == nil) {
				t.Fatalf("ingest: %v, want taken %v", err, tc.ok)
			}
			out, err := f.s.listMessages(context.Background(), nil, messagesIn{})
			if err != nil {
				t.Fatalf("the messages after it: %v", err)
			}
			if got := len(out.Messages); got != map[bool]int{true: 1, false: 0}[tc.ok] {
				t.Fatalf("%d messages listed", got)
			}
		})
	}
}
