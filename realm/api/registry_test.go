package api

import (
	"context"
	"errors"
	"testing"

	"relay/protocol"
)

type authorizeTest struct {
	name   string
	p      *Principal
	access Access
	reason protocol.Reason // empty: allowed
}

var (
	human    = &Principal{Human: true, Rights: protocol.AllRights}
	readOnly = &Principal{Rights: protocol.Rights{protocol.RightRead}}
	writer   = &Principal{Rights: protocol.Rights{protocol.RightRead, protocol.RightWrite, protocol.RightPin}}
)

var authorizeTests = []authorizeTest{
	{"anonymous public", nil, Public, ""},
	{"anonymous read", nil, NeedRight(protocol.RightRead), protocol.ReasonUnauthenticated},
	{"anonymous human", nil, HumanOnly, protocol.ReasonUnauthenticated},
	{"reader read", readOnly, NeedRight(protocol.RightRead), ""},
	{"reader write", readOnly, NeedRight(protocol.RightWrite), protocol.ReasonTokenReadOnly},
	{"reader verify", readOnly, NeedRight(protocol.RightVerify), protocol.ReasonVerifyRightMissing},
	{"writer pin", writer, NeedRight(protocol.RightPin), ""},
	{"writer lock", writer, NeedRight(protocol.RightLock), protocol.ReasonTokenRightMissing},
	{"writer grant", writer, NeedRight(protocol.RightGrant), protocol.ReasonTokenRightMissing},
	{"writer human", writer, HumanOnly, protocol.ReasonUserSessionRequired},
	{"human lock", human, NeedRight(protocol.RightLock), ""},
	{"human human", human, HumanOnly, ""},
}

func TestAuthorize(t *testing.T) {
	for _, tc := range authorizeTests {
		t.Run(tc.name, func(t *testing.T) {
			err := Authorize(tc.p, tc.access)
			var ref *protocol.Refusal
			switch {
			case tc.reason == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.reason != "" && (!errors.As(err, &ref) || ref.Reason != tc.reason):
				t.Fatalf("got %v, want %s", err, tc.reason)
			}
		})
	}
}

func TestRegistryRefusesDuplicates(t *testing.T) {
	op := func(key, path string) *Operation {
		return Define(key, "GET", path, "x", Public, func(_ context.Context, _ *Call, _ NoInput) (NoInput, error) { return NoInput{}, nil })
	}
	for _, tc := range []struct {
		name string
		a, b *Operation
	}{
		{"same key", op("get_x", "/x"), op("get_x", "/y")},
		{"same route", op("get_x", "/x"), op("get_y", "/x")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			r := NewRegistry()
			r.Add(tc.a, tc.b)
		})
	}
}

// TestChanged: a write that succeeds wakes the waiters; a read or a refusal
// does not.
func TestChanged(t *testing.T) {
	r := NewRegistry()
	type none struct{}
	fail := errors.New("no")
	r.Add(
		Define("get_x", "GET", "/x", "read", Public, func(context.Context, *Call, none) (none, error) { return none{}, nil }),
		Define("post_x", "POST", "/x", "write", Public, func(context.Context, *Call, none) (none, error) { return none{}, nil }),
		Define("post_y", "POST", "/y", "failing write", Public, func(context.Context, *Call, none) (none, error) { return none{}, fail }),
	)
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	ch := r.Changed()
	r.Call(context.Background(), nil, "get_x", nil)
	r.Call(context.Background(), nil, "post_y", nil)
	if closed(ch) {
		t.Fatal("a read or a failed write woke the waiters")
	}
	r.Call(context.Background(), nil, "post_x", nil)
	if !closed(ch) || closed(r.Changed()) {
		t.Fatal("a write did not wake the waiters, or the next channel is closed already")
	}
}
