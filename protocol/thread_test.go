package protocol

import (
	"maps"
	"testing"
)

// Thread states as the tests name them. A model's state is a proposal
// (origin llm, unconfirmed); a lock holder's is confirmed with origin llm;
// the human's is confirmed with origin user.
func proposed(s, before State) ThreadState {
	return ThreadState{State: s, Origin: OriginLLM, Before: before}
}

func byLock(s, before State) ThreadState {
	return ThreadState{State: s, Origin: OriginLLM, Confirmed: true, Before: before}
}

func byHuman(s, before State) ThreadState {
	return ThreadState{State: s, Origin: OriginUser, Confirmed: true, Before: before}
}

var standingNames = map[Standing]string{
	StandingNone:    "none",
	StandingCreator: "creator",
	StandingLock:    "lock",
	StandingHuman:   "human",
}

var allStandings = []Standing{StandingNone, StandingCreator, StandingLock, StandingHuman}

// checkChange compares a state change and its refusal with what a test
// wants: a refusal with reason (and, if given, exactly these details), or
// no refusal and want (nil for "no change").
func checkChange(t *testing.T, name string, got *Change, ref *Refusal, want *Change, reason Reason, details map[string]any) {
	t.Helper()
	if reason != "" {
		if got != nil {
			t.Errorf("%s: a change %+v next to the refusal", name, *got)
		}
		checkRefusal(t, name, ref, reason, details)
		return
	}
	if ref != nil {
		t.Errorf("%s: refused %v, want %s", name, ref, describe(want))
		return
	}
	switch {
	case want == nil && got != nil:
		t.Errorf("%s: change %+v, want none", name, *got)
	case want != nil && got == nil:
		t.Errorf("%s: no change, want %+v", name, *want)
	case want != nil && *got != *want:
		t.Errorf("%s: change %+v, want %+v", name, *got, *want)
	}
}

func describe(c *Change) string {
	if c == nil {
		return "no change"
	}
	return "a change"
}

// checkRefusal checks a refusal's reason and, when details is not nil, that
// its details are exactly details.
func checkRefusal(t *testing.T, name string, ref *Refusal, reason Reason, details map[string]any) {
	t.Helper()
	if ref == nil {
		t.Errorf("%s: accepted, want %s", name, reason)
		return
	}
	if ref.Reason != reason {
		t.Errorf("%s: reason %s (%s), want %s", name, ref.Reason, ref.Message, reason)
	}
	if ref.Message == "" {
		t.Errorf("%s: a refusal without a sentence", name)
	}
	if details != nil && !maps.Equal(ref.Details, details) {
		t.Errorf("%s: details %v, want %v", name, ref.Details, details)
	}
}

func TestNewThread(t *testing.T) {
	got := NewThread()
	if want := (ThreadState{State: StateOpen, Confirmed: true}); got != want {
		t.Fatalf("NewThread() = %+v, want %+v", got, want)
	}
	if got.Locked() {
		t.Error("a newborn thread is locked")
	}
	// A thread's birth is not a proposal: there is nothing to confirm or
	// reject, whoever asks.
	for _, s := range []Standing{StandingLock, StandingHuman} {
		if _, ref := ConfirmChange(got, s); ref == nil || ref.Reason != ReasonNothingToConfirm {
			t.Errorf("ConfirmChange(newborn, %s) = %v, want nothing_to_confirm", standingNames[s], ref)
		}
		if _, ref := RejectChange(got, got, s); ref == nil || ref.Reason != ReasonNothingToConfirm {
			t.Errorf("RejectChange(newborn, %s) = %v, want nothing_to_confirm", standingNames[s], ref)
		}
	}
}

var lockedTests = []struct {
	name string
	t    ThreadState
	want bool
}{
	{"confirmed close by the human", byHuman(StateClosed, StateAnswered), true},
	{"confirmed close by a lock holder", byLock(StateClosed, StateOpen), true},
	{"proposed close", proposed(StateClosed, StateAnswered), false},
	{"newborn", NewThread(), false},
	{"confirmed decided", byHuman(StateDecided, ""), false},
	{"confirmed deferred", byHuman(StateDeferred, StateOpen), false},
	{"confirmed rejected", byLock(StateRejected, StateOpen), false},
}

func TestLocked(t *testing.T) {
	for _, tc := range lockedTests {
		if got := tc.t.Locked(); got != tc.want {
			t.Errorf("%s: Locked() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestApply(t *testing.T) {
	from := byHuman(StateClosed, StateAnswered)
	c := Change{To: StateAnswered, Origin: OriginLLM, Confirmed: false}
	if got, want := from.Apply(c), (ThreadState{State: StateAnswered, Origin: OriginLLM}); got != want {
		t.Errorf("Apply(%+v) = %+v, want %+v (a change replaces the whole state, Before included)", c, got, want)
	}
}

func TestIsSide(t *testing.T) {
	side := map[State]bool{StateDeferred: true, StateObsolete: true, StateRejected: true}
	for _, s := range States {
		if got := IsSide(s); got != side[s] {
			t.Errorf("IsSide(%s) = %v, want %v", s, got, side[s])
		}
	}
	if IsSide("") || IsSide("paused") {
		t.Error("IsSide accepts a state that is not one")
	}
}

type actChangeTest struct {
	name   string
	from   ThreadState
	act    Act
	s      Standing
	want   *Change // nil: the act changes nothing
	reason Reason
}

var actChangeTests = []actChangeTest{
	// answer: open → answered, by anyone; the standing decides proposal or not.
	{"a model answers: a proposal", NewThread(), ActAnswer, StandingNone,
		&Change{To: StateAnswered, Origin: OriginLLM}, ""},
	{"the model creator answers: a proposal", NewThread(), ActAnswer, StandingCreator,
		&Change{To: StateAnswered, Origin: OriginLLM}, ""},
	{"a lock holder answers: confirmed", NewThread(), ActAnswer, StandingLock,
		&Change{To: StateAnswered, Origin: OriginLLM, Confirmed: true}, ""},
	{"the human answers: confirmed, origin user", NewThread(), ActAnswer, StandingHuman,
		&Change{To: StateAnswered, Origin: OriginUser, Confirmed: true}, ""},
	{"answer on a proposed open (a reopen)", proposed(StateOpen, ""), ActAnswer, StandingNone,
		&Change{To: StateAnswered, Origin: OriginLLM}, ""},

	// answer never moves a thread back, nor out of a side state.
	{"answer on answered", byHuman(StateAnswered, ""), ActAnswer, StandingHuman, nil, ""},
	{"a model answers a proposed answered", proposed(StateAnswered, ""), ActAnswer, StandingNone, nil, ""},
	{"the creator answers a proposed answered", proposed(StateAnswered, ""), ActAnswer, StandingCreator, nil, ""},
	// The human's (or a lock holder's) same mark confirms a proposal.
	{"the human answers a proposed answered: confirmed, origin user", proposed(StateAnswered, ""), ActAnswer, StandingHuman,
		&Change{To: StateAnswered, Origin: OriginUser, Confirmed: true}, ""},
	{"a lock holder answers a proposed answered: confirmed", proposed(StateAnswered, ""), ActAnswer, StandingLock,
		&Change{To: StateAnswered, Origin: OriginLLM, Confirmed: true}, ""},
	{"the human decides a proposed decided: confirmed, origin user", proposed(StateDecided, ""), ActDecide, StandingHuman,
		&Change{To: StateDecided, Origin: OriginUser, Confirmed: true}, ""},
	{"a lock holder decides a proposed decided: confirmed", proposed(StateDecided, ""), ActDecide, StandingLock,
		&Change{To: StateDecided, Origin: OriginLLM, Confirmed: true}, ""},
	{"the creator decides a proposed decided", proposed(StateDecided, ""), ActDecide, StandingCreator, nil, ""},
	{"the human answers a proposed decided", proposed(StateDecided, ""), ActAnswer, StandingHuman, nil, ""},
	{"answer on decided", byHuman(StateDecided, ""), ActAnswer, StandingHuman, nil, ""},
	{"answer on a proposed close", proposed(StateClosed, StateDecided), ActAnswer, StandingNone, nil, ""},
	{"answer on a confirmed close", byHuman(StateClosed, StateDecided), ActAnswer, StandingHuman, nil, ""},
	{"answer on deferred", byHuman(StateDeferred, StateOpen), ActAnswer, StandingHuman, nil, ""},
	{"answer on obsolete", proposed(StateObsolete, StateOpen), ActAnswer, StandingNone, nil, ""},
	{"answer on rejected", byLock(StateRejected, StateOpen), ActAnswer, StandingLock, nil, ""},

	// decide needs authority: creator, lock, human.
	{"a model without authority decides", byHuman(StateAnswered, ""), ActDecide, StandingNone, nil, ReasonThreadAuthority},
	{"a model without authority decides an open thread", NewThread(), ActDecide, StandingNone, nil, ReasonThreadAuthority},
	{"the creator decides: a proposal", proposed(StateAnswered, ""), ActDecide, StandingCreator,
		&Change{To: StateDecided, Origin: OriginLLM}, ""},
	{"a lock holder decides: confirmed", byHuman(StateAnswered, ""), ActDecide, StandingLock,
		&Change{To: StateDecided, Origin: OriginLLM, Confirmed: true}, ""},
	{"the human decides: confirmed, origin user", proposed(StateAnswered, ""), ActDecide, StandingHuman,
		&Change{To: StateDecided, Origin: OriginUser, Confirmed: true}, ""},
	// Two steps at once: decide justifies open → decided.
	{"decide from open jumps to decided", NewThread(), ActDecide, StandingCreator,
		&Change{To: StateDecided, Origin: OriginLLM}, ""},
	{"the human decides from open", NewThread(), ActDecide, StandingHuman,
		&Change{To: StateDecided, Origin: OriginUser, Confirmed: true}, ""},

	// decide never moves back either.
	{"decide on decided", byHuman(StateDecided, ""), ActDecide, StandingHuman, nil, ""},
	{"decide on a proposed close", proposed(StateClosed, StateAnswered), ActDecide, StandingCreator, nil, ""},
	{"decide on a confirmed close", byHuman(StateClosed, StateAnswered), ActDecide, StandingHuman, nil, ""},

	// A side state is an endpoint: decide is refused there.
	{"decide on deferred", byHuman(StateDeferred, StateOpen), ActDecide, StandingHuman, nil, ReasonStateInvalid},
	{"decide on obsolete", proposed(StateObsolete, StateAnswered), ActDecide, StandingCreator, nil, ReasonStateInvalid},
	{"decide on rejected", byLock(StateRejected, StateOpen), ActDecide, StandingLock, nil, ReasonStateInvalid},
	{"decide on a side state without authority", byHuman(StateDeferred, StateOpen), ActDecide, StandingNone, nil, ReasonThreadAuthority},
}

func TestActChange(t *testing.T) {
	for _, tc := range actChangeTests {
		got, ref := ActChange(tc.from, tc.act, tc.s)
		checkChange(t, tc.name, got, ref, tc.want, tc.reason, nil)
	}
}

// Every act but answer and decide leaves every thread as it is, whoever
// sends it.
func TestActChangeOtherActs(t *testing.T) {
	for _, act := range Acts {
		if act == ActAnswer || act == ActDecide {
			continue
		}
		for _, st := range States {
			for _, s := range allStandings {
				for _, from := range []ThreadState{proposed(st, StateOpen), byHuman(st, StateOpen)} {
					got, ref := ActChange(from, act, s)
					if got != nil || ref != nil {
						t.Errorf("ActChange(%+v, %s, %s) = %v, %v; want nothing", from, act, standingNames[s], got, ref)
					}
				}
			}
		}
	}
}

// Forward only: whatever an act changes, it moves the thread forward.
func TestActChangeForwardOnly(t *testing.T) {
	for _, act := range []Act{ActAnswer, ActDecide} {
		for _, st := range States {
			for _, s := range allStandings {
				from := byHuman(st, StateOpen)
				got, _ := ActChange(from, act, s)
				if got != nil && rank(got.To) <= rank(st) {
					t.Errorf("ActChange(%s, %s, %s) moves %s → %s", st, act, standingNames[s], st, got.To)
				}
			}
		}
	}
}

type closeChangeTest struct {
	name   string
	from   ThreadState
	s      Standing
	want   *Change
	reason Reason
	locked bool // Locked() after the change
}

var closeChangeTests = []closeChangeTest{
	{"no authority", byHuman(StateAnswered, ""), StandingNone, nil, ReasonThreadAuthority, false},
	{"no authority on a proposed close", proposed(StateClosed, StateOpen), StandingNone, nil, ReasonThreadAuthority, false},

	// A model creator's close is a proposal: it does not lock.
	{"the creator closes an open thread", NewThread(), StandingCreator,
		&Change{To: StateClosed, Origin: OriginLLM, Before: StateOpen}, "", false},
	{"the creator closes an answered thread", proposed(StateAnswered, ""), StandingCreator,
		&Change{To: StateClosed, Origin: OriginLLM, Before: StateAnswered}, "", false},
	{"the creator closes a decided thread", byHuman(StateDecided, ""), StandingCreator,
		&Change{To: StateClosed, Origin: OriginLLM, Before: StateDecided}, "", false},

	// A lock holder's or the human's close is confirmed: it locks.
	{"a lock holder closes", byHuman(StateAnswered, ""), StandingLock,
		&Change{To: StateClosed, Origin: OriginLLM, Confirmed: true, Before: StateAnswered}, "", true},
	{"the human closes", proposed(StateDecided, ""), StandingHuman,
		&Change{To: StateClosed, Origin: OriginUser, Confirmed: true, Before: StateDecided}, "", true},
	{"the human closes an open thread", NewThread(), StandingHuman,
		&Change{To: StateClosed, Origin: OriginUser, Confirmed: true, Before: StateOpen}, "", true},

	// Closing a proposed close with the standing to confirm confirms it,
	// keeping what reopening restores.
	{"the human closes a proposed close", proposed(StateClosed, StateAnswered), StandingHuman,
		&Change{To: StateClosed, Origin: OriginUser, Confirmed: true, Before: StateAnswered}, "", true},
	{"a lock holder closes a proposed close", proposed(StateClosed, StateDecided), StandingLock,
		&Change{To: StateClosed, Origin: OriginLLM, Confirmed: true, Before: StateDecided}, "", true},
	{"the creator closes a proposed close again", proposed(StateClosed, StateAnswered), StandingCreator, nil, ReasonStateInvalid, false},

	// A confirmed close is closed: nothing to add.
	{"the human closes a confirmed close", byHuman(StateClosed, StateAnswered), StandingHuman, nil, ReasonStateInvalid, false},
	{"a lock holder closes a confirmed close", byLock(StateClosed, StateAnswered), StandingLock, nil, ReasonStateInvalid, false},
	{"the creator closes a confirmed close", byHuman(StateClosed, StateAnswered), StandingCreator, nil, ReasonStateInvalid, false},

	// Side states are endpoints: reopen first.
	{"close deferred", byHuman(StateDeferred, StateOpen), StandingHuman, nil, ReasonStateInvalid, false},
	{"close obsolete", byLock(StateObsolete, StateAnswered), StandingLock, nil, ReasonStateInvalid, false},
	{"close rejected", proposed(StateRejected, StateOpen), StandingCreator, nil, ReasonStateInvalid, false},
	{"the human closes a proposed deferred", proposed(StateDeferred, StateOpen), StandingHuman, nil, ReasonStateInvalid, false},
}

func TestCloseChange(t *testing.T) {
	for _, tc := range closeChangeTests {
		got, ref := CloseChange(tc.from, tc.s)
		checkChange(t, tc.name, got, ref, tc.want, tc.reason, nil)
		if got != nil {
			if locked := tc.from.Apply(*got).Locked(); locked != tc.locked {
				t.Errorf("%s: Locked() after the close = %v, want %v", tc.name, locked, tc.locked)
			}
		}
	}
}

type reopenChangeTest struct {
	name   string
	from   ThreadState
	s      Standing
	want   *Change
	reason Reason
}

var reopenChangeTests = []reopenChangeTest{
	{"no authority", byHuman(StateClosed, StateAnswered), StandingNone, nil, ReasonThreadAuthority},

	// Reopening restores the state before the close.
	{"the creator reopens a proposed close", proposed(StateClosed, StateAnswered), StandingCreator,
		&Change{To: StateAnswered, Origin: OriginLLM}, ""},
	{"the creator reopens a lock holder's close: a proposal", byLock(StateClosed, StateDecided), StandingCreator,
		&Change{To: StateDecided, Origin: OriginLLM}, ""},
	{"the human reopens a thread closed from answered", byHuman(StateClosed, StateAnswered), StandingHuman,
		&Change{To: StateAnswered, Origin: OriginUser, Confirmed: true}, ""},
	{"a lock holder reopens a thread closed from open", byLock(StateClosed, StateOpen), StandingLock,
		&Change{To: StateOpen, Origin: OriginLLM, Confirmed: true}, ""},
	{"a close that recorded nothing reopens open", byHuman(StateClosed, ""), StandingHuman,
		&Change{To: StateOpen, Origin: OriginUser, Confirmed: true}, ""},

	// Side states: only moderation (lock, human).
	{"the human reopens deferred", byHuman(StateDeferred, StateAnswered), StandingHuman,
		&Change{To: StateAnswered, Origin: OriginUser, Confirmed: true}, ""},
	{"a lock holder reopens obsolete", byLock(StateObsolete, StateDecided), StandingLock,
		&Change{To: StateDecided, Origin: OriginLLM, Confirmed: true}, ""},
	{"a lock holder reopens a proposed obsolete", proposed(StateObsolete, StateDecided), StandingLock,
		&Change{To: StateDecided, Origin: OriginLLM, Confirmed: true}, ""},

	// Higher beats lower: what the human set, only the human undoes.
	{"the creator reopens the human's close", byHuman(StateClosed, StateDecided), StandingCreator, nil, ReasonThreadAuthority},
	{"a lock holder reopens the human's close", byHuman(StateClosed, StateAnswered), StandingLock, nil, ReasonThreadAuthority},
	{"a lock holder reopens the human's obsolete", byHuman(StateObsolete, StateDecided), StandingLock, nil, ReasonThreadAuthority},
	{"the human reopens a proposed rejected", proposed(StateRejected, StateOpen), StandingHuman,
		&Change{To: StateOpen, Origin: OriginUser, Confirmed: true}, ""},
	{"the creator reopens rejected", byHuman(StateRejected, StateOpen), StandingCreator, nil, ReasonThreadAuthority},
	{"the creator reopens its own proposed deferred", proposed(StateDeferred, StateAnswered), StandingCreator, nil, ReasonThreadAuthority},
	{"no authority on a side state", byHuman(StateObsolete, StateOpen), StandingNone, nil, ReasonThreadAuthority},

	// Only closed and set-aside threads reopen.
	{"reopen open", NewThread(), StandingHuman, nil, ReasonStateInvalid},
	{"reopen a proposed open", proposed(StateOpen, ""), StandingLock, nil, ReasonStateInvalid},
	{"reopen answered", byHuman(StateAnswered, ""), StandingHuman, nil, ReasonStateInvalid},
	{"reopen decided", proposed(StateDecided, ""), StandingCreator, nil, ReasonStateInvalid},
}

func TestReopenChange(t *testing.T) {
	for _, tc := range reopenChangeTests {
		got, ref := ReopenChange(tc.from, tc.from, tc.s)
		checkChange(t, tc.name, got, ref, tc.want, tc.reason, nil)
	}
}

type reopenLockedTest struct {
	name    string
	from    ThreadState // a model's reopen, a proposal
	settled ThreadState // the confirmed close that still locks the thread
	s       Standing
	want    *Change
	reason  Reason
}

// A model's reopen over a confirmed close leaves the thread locked; a
// reopen by those who confirm lifts the lock, as the thread_closed
// refusal says (reopen first: creator, lock, human).
var reopenLockedTests = []reopenLockedTest{
	{"the human reopens a thread a model proposed to reopen", proposed(StateDecided, ""), byLock(StateClosed, StateDecided), StandingHuman,
		&Change{To: StateDecided, Origin: OriginUser, Confirmed: true}, ""},
	{"a lock holder reopens a thread a model proposed to reopen", proposed(StateOpen, ""), byLock(StateClosed, StateOpen), StandingLock,
		&Change{To: StateOpen, Origin: OriginLLM, Confirmed: true}, ""},
	{"the creator reopens again", proposed(StateAnswered, ""), byLock(StateClosed, StateAnswered), StandingCreator, nil, ReasonStateInvalid},
	{"a lock holder under the human's close", proposed(StateOpen, ""), byHuman(StateClosed, StateOpen), StandingLock, nil, ReasonThreadAuthority},
	{"no authority", proposed(StateOpen, ""), byLock(StateClosed, StateOpen), StandingNone, nil, ReasonThreadAuthority},
	// Not locked: a proposed close stands under it, or nothing does.
	{"a proposed open over a proposed close", proposed(StateOpen, ""), proposed(StateClosed, StateOpen), StandingHuman, nil, ReasonStateInvalid},
}

func TestReopenChangeLocked(t *testing.T) {
	for _, tc := range reopenLockedTests {
		got, ref := ReopenChange(tc.from, tc.settled, tc.s)
		checkChange(t, tc.name, got, ref, tc.want, tc.reason, nil)
		if got != nil && tc.from.Apply(*got).Locked() {
			t.Errorf("%s: still locked after the reopen", tc.name)
		}
	}
}

// Whatever Before holds, reopening lands on a forward state short of closed.
func TestReopenChangeLandsForward(t *testing.T) {
	for _, st := range []State{StateClosed, StateDeferred, StateObsolete, StateRejected} {
		for _, before := range append([]State{""}, States...) {
			got, ref := ReopenChange(byHuman(st, before), byHuman(st, before), StandingHuman)
			if ref != nil {
				t.Errorf("ReopenChange(%s before %q): %v", st, before, ref)
				continue
			}
			if got.To == StateClosed || IsSide(got.To) || rank(got.To) == 0 {
				t.Errorf("ReopenChange(%s before %q) reopens to %q", st, before, got.To)
			}
		}
	}
}

type sideChangeTest struct {
	name    string
	from    ThreadState
	to      State
	s       Standing
	want    *Change
	reason  Reason
	details map[string]any
}

var (
	notSettable = map[string]any{"field": "state"}
	notAState   = map[string]any{"field": "state", "rule": "enum"}
)

var sideChangeTests = []sideChangeTest{
	// Only deferred, obsolete and rejected are set this way; the rule
	// answers before authority, so anyone learns it.
	{"open", NewThread(), StateOpen, StandingHuman, nil, ReasonStateNotSettable, notSettable},
	{"answered", NewThread(), StateAnswered, StandingHuman, nil, ReasonStateNotSettable, notSettable},
	{"decided", NewThread(), StateDecided, StandingLock, nil, ReasonStateNotSettable, notSettable},
	{"closed", NewThread(), StateClosed, StandingHuman, nil, ReasonStateNotSettable, notSettable},
	{"closed without authority", NewThread(), StateClosed, StandingNone, nil, ReasonStateNotSettable, notSettable},
	{"answered without authority", NewThread(), StateAnswered, StandingNone, nil, ReasonStateNotSettable, notSettable},
	{"closed on a locked thread", byHuman(StateClosed, StateOpen), StateClosed, StandingNone, nil, ReasonStateNotSettable, notSettable},
	// A state that does not exist is a body the seed refuses, before any rule.
	{"no state", NewThread(), "", StandingHuman, nil, ReasonInvalidBody, notAState},
	{"no such state", NewThread(), "paused", StandingNone, nil, ReasonInvalidBody, notAState},

	{"no authority", NewThread(), StateDeferred, StandingNone, nil, ReasonThreadAuthority, nil},
	{"no authority on a locked thread", byHuman(StateClosed, StateOpen), StateDeferred, StandingNone, nil, ReasonThreadAuthority, nil},

	// Proposal or confirmed by standing; Before records what reopen restores.
	{"the creator defers: a proposal", NewThread(), StateDeferred, StandingCreator,
		&Change{To: StateDeferred, Origin: OriginLLM, Before: StateOpen}, "", nil},
	{"a lock holder obsoletes: confirmed", byLock(StateAnswered, ""), StateObsolete, StandingLock,
		&Change{To: StateObsolete, Origin: OriginLLM, Confirmed: true, Before: StateAnswered}, "", nil},
	// Higher beats lower: what the human marked, only the human sets aside.
	{"a lock holder over the human's decision", byHuman(StateDecided, ""), StateRejected, StandingLock, nil, ReasonThreadAuthority, nil},
	{"the creator over the human's answer", byHuman(StateAnswered, ""), StateObsolete, StandingCreator, nil, ReasonThreadAuthority, nil},
	{"the human over the human's decision", byHuman(StateDecided, ""), StateObsolete, StandingHuman,
		&Change{To: StateObsolete, Origin: OriginUser, Confirmed: true, Before: StateDecided}, "", nil},
	{"the human rejects: confirmed, origin user", proposed(StateDecided, ""), StateRejected, StandingHuman,
		&Change{To: StateRejected, Origin: OriginUser, Confirmed: true, Before: StateDecided}, "", nil},

	// A confirmed close is locked.
	{"the human on a locked thread", byHuman(StateClosed, StateAnswered), StateDeferred, StandingHuman, nil, ReasonThreadClosed, nil},
	{"the creator on a locked thread", byLock(StateClosed, StateAnswered), StateObsolete, StandingCreator, nil, ReasonThreadClosed, nil},
	// A proposed close does not lock; the side state keeps what the close
	// would have restored.
	{"the creator on a proposed close", proposed(StateClosed, StateAnswered), StateDeferred, StandingCreator,
		&Change{To: StateDeferred, Origin: OriginLLM, Before: StateAnswered}, "", nil},

	// A confirmed side state is an endpoint; a proposed one may be replaced
	// or confirmed, keeping its Before.
	{"the human on a confirmed deferred", byHuman(StateDeferred, StateOpen), StateRejected, StandingHuman, nil, ReasonStateInvalid, nil},
	{"the creator on a confirmed obsolete", byLock(StateObsolete, StateOpen), StateObsolete, StandingCreator, nil, ReasonStateInvalid, nil},
	{"the human replaces a proposed deferred", proposed(StateDeferred, StateAnswered), StateRejected, StandingHuman,
		&Change{To: StateRejected, Origin: OriginUser, Confirmed: true, Before: StateAnswered}, "", nil},
	{"the creator replaces its proposed deferred", proposed(StateDeferred, StateDecided), StateObsolete, StandingCreator,
		&Change{To: StateObsolete, Origin: OriginLLM, Before: StateDecided}, "", nil},
}

func TestSideChange(t *testing.T) {
	for _, tc := range sideChangeTests {
		got, ref := SideChange(tc.from, tc.to, tc.s)
		checkChange(t, tc.name, got, ref, tc.want, tc.reason, tc.details)
	}
}

type confirmChangeTest struct {
	name    string
	from    ThreadState
	s       Standing
	want    *Change
	reason  Reason
	details map[string]any
}

var needsLock = map[string]any{"right": string(RightLock)}

var confirmChangeTests = []confirmChangeTest{
	{"a model confirms", proposed(StateAnswered, ""), StandingNone, nil, ReasonTokenRightMissing, needsLock},
	{"the creator confirms", proposed(StateClosed, StateAnswered), StandingCreator, nil, ReasonTokenRightMissing, needsLock},
	{"the creator confirms a newborn thread", NewThread(), StandingCreator, nil, ReasonTokenRightMissing, needsLock},

	{"a lock holder confirms an answer", proposed(StateAnswered, ""), StandingLock,
		&Change{To: StateAnswered, Origin: OriginLLM, Confirmed: true}, "", nil},
	{"the human confirms a close", proposed(StateClosed, StateDecided), StandingHuman,
		&Change{To: StateClosed, Origin: OriginLLM, Confirmed: true, Before: StateDecided}, "", nil},
	{"the human confirms a deferred", proposed(StateDeferred, StateOpen), StandingHuman,
		&Change{To: StateDeferred, Origin: OriginLLM, Confirmed: true, Before: StateOpen}, "", nil},

	{"a confirmed state", byHuman(StateAnswered, ""), StandingHuman, nil, ReasonNothingToConfirm, nil},
	{"a lock holder's state", byLock(StateDecided, ""), StandingLock, nil, ReasonNothingToConfirm, nil},
	{"the newborn state", NewThread(), StandingHuman, nil, ReasonNothingToConfirm, nil},
	{"an unconfirmed state of no origin", ThreadState{State: StateOpen}, StandingLock, nil, ReasonNothingToConfirm, nil},
}

func TestConfirmChange(t *testing.T) {
	for _, tc := range confirmChangeTests {
		got, ref := ConfirmChange(tc.from, tc.s)
		checkChange(t, tc.name, got, ref, tc.want, tc.reason, tc.details)
	}
	// Confirming a proposed close locks.
	from := proposed(StateClosed, StateAnswered)
	c, _ := ConfirmChange(from, StandingHuman)
	if c == nil || !from.Apply(*c).Locked() {
		t.Error("a confirmed close does not lock")
	}
}

type rejectChangeTest struct {
	name    string
	from    ThreadState // the proposal
	prev    ThreadState // the state it replaced
	s       Standing
	want    *Change
	reason  Reason
	details map[string]any
}

var rejectChangeTests = []rejectChangeTest{
	{"a model rejects", proposed(StateAnswered, ""), NewThread(), StandingNone, nil, ReasonTokenRightMissing, needsLock},
	{"the creator rejects", proposed(StateClosed, StateAnswered), byHuman(StateAnswered, ""), StandingCreator, nil, ReasonTokenRightMissing, needsLock},

	{"the human rejects an answer: back to the newborn state", proposed(StateAnswered, ""), NewThread(), StandingHuman,
		&Change{To: StateOpen, Confirmed: true}, "", nil},
	{"a lock holder rejects a close", proposed(StateClosed, StateAnswered), byHuman(StateAnswered, ""), StandingLock,
		&Change{To: StateAnswered, Origin: OriginUser, Confirmed: true}, "", nil},
	{"the human rejects a deferred", proposed(StateDeferred, StateDecided), byLock(StateDecided, ""), StandingHuman,
		&Change{To: StateDecided, Origin: OriginLLM, Confirmed: true}, "", nil},
	{"the human rejects a reopen: locked again", proposed(StateAnswered, ""), byHuman(StateClosed, StateAnswered), StandingHuman,
		&Change{To: StateClosed, Origin: OriginUser, Confirmed: true, Before: StateAnswered}, "", nil},
	// Rejecting one proposal does not confirm the one before it: the
	// thread goes back to the earlier proposal, still pending.
	{"the human rejects a close over a proposed answer", proposed(StateClosed, StateAnswered), proposed(StateAnswered, ""), StandingHuman,
		&Change{To: StateAnswered, Origin: OriginLLM}, "", nil},

	{"a confirmed state", byHuman(StateClosed, StateOpen), NewThread(), StandingHuman, nil, ReasonNothingToConfirm, nil},
	{"a lock holder's state", byLock(StateAnswered, ""), NewThread(), StandingHuman, nil, ReasonNothingToConfirm, nil},
	{"the newborn state", NewThread(), NewThread(), StandingLock, nil, ReasonNothingToConfirm, nil},
}

func TestRejectChange(t *testing.T) {
	for _, tc := range rejectChangeTests {
		got, ref := RejectChange(tc.from, tc.prev, tc.s)
		checkChange(t, tc.name, got, ref, tc.want, tc.reason, tc.details)
		if got != nil {
			if after := tc.from.Apply(*got); after != tc.prev {
				t.Errorf("%s: after rejecting, %+v; want the replaced state %+v", tc.name, after, tc.prev)
			}
		}
	}
}

var awaitsReplyTests = map[Act]bool{
	ActAsk:      true,
	ActAnswer:   false,
	ActPropose:  true,
	ActDecide:   false,
	ActNote:     false,
	ActRefine:   false,
	ActRefute:   true,
	ActRequest:  true,
	ActHandover: true,
	"":          false,
	"vote":      false,
}

func TestAwaitsReply(t *testing.T) {
	for _, act := range Acts {
		if _, ok := awaitsReplyTests[act]; !ok {
			t.Errorf("awaitsReplyTests misses %s", act)
		}
	}
	for act, want := range awaitsReplyTests {
		if got := AwaitsReply(act); got != want {
			t.Errorf("AwaitsReply(%q) = %v, want %v", act, got, want)
		}
	}
}

type claimAttestTest struct {
	name        string
	cur         ClaimState
	verdict     Verdict
	byAuthor    bool
	hasEvidence bool
	want        ClaimState
	reason      Reason
	details     map[string]any
}

var (
	evidenceField = map[string]any{"field": "evidence"}
	verdictEnum   = map[string]any{"field": "verdict", "rule": "enum"}
)

var claimAttestTests = []claimAttestTest{
	// supports: unverified → supported, by anyone but the author.
	{"support by another", ClaimUnverified, "supports", false, false, ClaimSupported, "", nil},
	{"support with evidence", ClaimUnverified, "supports", false, true, ClaimSupported, "", nil},
	{"support by the author", ClaimUnverified, "supports", true, false, ClaimUnverified, "", nil},
	{"support of a supported claim", ClaimSupported, "supports", false, false, ClaimSupported, "", nil},
	{"support does not lift a refutation", ClaimRefuted, "supports", false, true, ClaimRefuted, "", nil},
	{"support of a verified claim", ClaimVerified, "supports", false, false, ClaimVerified, "", nil},

	// refutes: evidence required; overrides any support.
	{"refutation without evidence", ClaimUnverified, "refutes", false, false, ClaimUnverified, ReasonEvidenceRequired, evidenceField},
	{"refutation of support without evidence", ClaimSupported, "refutes", false, false, ClaimSupported, ReasonEvidenceRequired, evidenceField},
	{"refutation of an unverified claim", ClaimUnverified, "refutes", false, true, ClaimRefuted, "", nil},
	{"refutation overrides support", ClaimSupported, "refutes", false, true, ClaimRefuted, "", nil},
	{"the author refutes its own claim", ClaimSupported, "refutes", true, true, ClaimRefuted, "", nil},
	{"refutation of a refuted claim", ClaimRefuted, "refutes", false, true, ClaimRefuted, "", nil},
	// verified changes only by a seal.
	{"refutation of a verified claim", ClaimVerified, "refutes", false, true, ClaimVerified, "", nil},
	{"refutation of a verified claim without evidence", ClaimVerified, "refutes", false, false, ClaimVerified, ReasonEvidenceRequired, evidenceField},

	// inconclusive changes nothing.
	{"inconclusive on unverified", ClaimUnverified, "inconclusive", false, false, ClaimUnverified, "", nil},
	{"inconclusive on supported", ClaimSupported, "inconclusive", false, true, ClaimSupported, "", nil},
	{"inconclusive on refuted", ClaimRefuted, "inconclusive", false, false, ClaimRefuted, "", nil},
	{"inconclusive on verified", ClaimVerified, "inconclusive", false, false, ClaimVerified, "", nil},

	// A superseded claim is not attested.
	{"support of a superseded claim", ClaimSuperseded, "supports", false, false, ClaimSuperseded, ReasonClaimSuperseded, nil},
	{"refutation of a superseded claim", ClaimSuperseded, "refutes", false, true, ClaimSuperseded, ReasonClaimSuperseded, nil},
	{"inconclusive on a superseded claim", ClaimSuperseded, "inconclusive", false, false, ClaimSuperseded, ReasonClaimSuperseded, nil},
	// What is wrong with the attestation itself is said first.
	{"refutation without evidence of a superseded claim", ClaimSuperseded, "refutes", false, false, ClaimSuperseded, ReasonEvidenceRequired, nil},
	{"an unknown verdict on a superseded claim", ClaimSuperseded, "agrees", false, true, ClaimSuperseded, ReasonInvalidBody, verdictEnum},

	// Only the three verdicts.
	{"no verdict", ClaimUnverified, "", false, false, ClaimUnverified, ReasonInvalidBody, verdictEnum},
	{"an unknown verdict", ClaimSupported, "agrees", false, true, ClaimSupported, ReasonInvalidBody, verdictEnum},
	{"a verdict in capitals", ClaimUnverified, "Supports", false, false, ClaimUnverified, ReasonInvalidBody, verdictEnum},
}

func TestClaimAttest(t *testing.T) {
	for _, tc := range claimAttestTests {
		got, ref := ClaimAttest(tc.cur, tc.verdict, tc.byAuthor, tc.hasEvidence)
		if got != tc.want {
			t.Errorf("%s: ClaimAttest(%s, %q) = %s, want %s", tc.name, tc.cur, tc.verdict, got, tc.want)
		}
		if tc.reason == "" {
			if ref != nil {
				t.Errorf("%s: refused %v", tc.name, ref)
			}
			continue
		}
		checkRefusal(t, tc.name, ref, tc.reason, tc.details)
	}
	for _, v := range Verdicts {
		if _, ref := ClaimAttest(ClaimUnverified, v, false, true); ref != nil {
			t.Errorf("verdict %q refused: %v", v, ref)
		}
	}
}

type claimTransitionTest struct {
	cur    ClaimState
	want   ClaimState
	reason Reason
}

// A refute act (its evidence checked by Validate) refutes whatever support
// the claim had, but not a verified claim.
var claimRefuteTests = []claimTransitionTest{
	{ClaimUnverified, ClaimRefuted, ""},
	{ClaimSupported, ClaimRefuted, ""},
	{ClaimRefuted, ClaimRefuted, ""},
	{ClaimVerified, ClaimVerified, ""},
	{ClaimSuperseded, ClaimSuperseded, ReasonClaimSuperseded},
}

var claimSealTests = []claimTransitionTest{
	{ClaimUnverified, ClaimVerified, ""},
	{ClaimSupported, ClaimVerified, ""},
	{ClaimRefuted, ClaimVerified, ""},
	{ClaimVerified, ClaimVerified, ""},
	{ClaimSuperseded, ClaimSuperseded, ReasonClaimSuperseded},
}

// Its author's refine supersedes a claim in any state, once.
var claimSupersedeTests = []claimTransitionTest{
	{ClaimUnverified, ClaimSuperseded, ""},
	{ClaimSupported, ClaimSuperseded, ""},
	{ClaimRefuted, ClaimSuperseded, ""},
	{ClaimVerified, ClaimSuperseded, ""},
	{ClaimSuperseded, ClaimSuperseded, ReasonClaimSuperseded},
}

func TestClaimRefute(t *testing.T) {
	testClaimTransition(t, "ClaimRefute", ClaimRefute, claimRefuteTests)
}

func TestClaimSeal(t *testing.T) {
	testClaimTransition(t, "ClaimSeal", ClaimSeal, claimSealTests)
}

func TestClaimSupersede(t *testing.T) {
	testClaimTransition(t, "ClaimSupersede", ClaimSupersede, claimSupersedeTests)
}

func testClaimTransition(t *testing.T, name string, f func(ClaimState) (ClaimState, *Refusal), tests []claimTransitionTest) {
	t.Helper()
	seen := map[ClaimState]bool{}
	for _, tc := range tests {
		seen[tc.cur] = true
		got, ref := f(tc.cur)
		if got != tc.want {
			t.Errorf("%s(%s) = %s, want %s", name, tc.cur, got, tc.want)
		}
		if tc.reason == "" {
			if ref != nil {
				t.Errorf("%s(%s): refused %v", name, tc.cur, ref)
			}
			continue
		}
		checkRefusal(t, name+"("+string(tc.cur)+")", ref, tc.reason, nil)
	}
	for _, s := range ClaimStates {
		if !seen[s] {
			t.Errorf("%s: no case for %s", name, s)
		}
	}
}
