package protocol

import (
	"bufio"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// readCases reads testdata/name one case a line, skipping empty lines and
// # comments. Lines are not trimmed: a space is part of the case.
func readCases(t testing.TB, name string) []string {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("testdata/%s has no cases", name)
	}
	return out
}

// readKeyCases reads "<kind> <input>" lines.
func readKeyCases(t testing.TB, name string) []struct {
	kind KeyKind
	in   string
} {
	t.Helper()
	var out []struct {
		kind KeyKind
		in   string
	}
	for _, line := range readCases(t, name) {
		kind, in, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("testdata/%s: %q: want <kind> <input>", name, line)
		}
		out = append(out, struct {
			kind KeyKind
			in   string
		}{KeyKind(kind), in})
	}
	return out
}

func TestParseRealmFiles(t *testing.T) {
	for _, s := range readCases(t, "realm_valid.txt") {
		r, err := ParseRealm(s)
		if err != nil {
			t.Errorf("ParseRealm(%q): %v", s, err)
		} else if string(r) != s {
			t.Errorf("ParseRealm(%q) = %q", s, r)
		}
	}
	for _, s := range append(readCases(t, "realm_invalid.txt"), "", " ainotes", "ainotes ", "ainotes\n", "ai\x00notes", "\xff") {
		if r, err := ParseRealm(s); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ParseRealm(%q) = %q, %v; want ErrInvalidName", s, r, err)
		}
	}
}

func TestParseIdentityFiles(t *testing.T) {
	for _, s := range readCases(t, "identity_valid.txt") {
		id, err := ParseIdentity(s)
		if err != nil {
			t.Errorf("ParseIdentity(%q): %v", s, err)
		} else if id.String() != s {
			t.Errorf("ParseIdentity(%q).String() = %q", s, id)
		}
	}
	for _, s := range append(readCases(t, "identity_invalid.txt"), "", " ainotes:x", "ainotes:x ", "ainotes:x\n", "ainotes:\xff") {
		if id, err := ParseIdentity(s); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ParseIdentity(%q) = %+v, %v; want ErrInvalidName", s, id, err)
		}
	}
}

func TestParseKeyFiles(t *testing.T) {
	for _, c := range readKeyCases(t, "key_valid.txt") {
		k, err := ParseKey(c.kind, c.in)
		if err != nil {
			t.Errorf("ParseKey(%s, %q): %v", c.kind, c.in, err)
			continue
		}
		if k.Kind != c.kind {
			t.Errorf("ParseKey(%s, %q).Kind = %s", c.kind, c.in, k.Kind)
		}
		// The written form is canonical except for a plain number.
		if want := c.in; !strings.Contains(want, "_") {
			want = string(c.kind) + "_" + want
			if k.String() != want {
				t.Errorf("ParseKey(%s, %q).String() = %q, want %q", c.kind, c.in, k, want)
			}
		} else if k.String() != c.in {
			t.Errorf("ParseKey(%s, %q).String() = %q", c.kind, c.in, k)
		}
	}
	for _, c := range append(readKeyCases(t, "key_invalid.txt"), struct {
		kind KeyKind
		in   string
	}{KeyThread, ""}, struct {
		kind KeyKind
		in   string
	}{KeyThread, " 1"}, struct {
		kind KeyKind
		in   string
	}{KeyThread, "1 "}) {
		if k, err := ParseKey(c.kind, c.in); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ParseKey(%s, %q) = %+v, %v; want ErrInvalidName", c.kind, c.in, k, err)
		}
	}
}

var parseIdentityTests = []struct {
	in    string
	want  Identity
	human bool
}{
	{"ainotes:opencode", Identity{Prefix: "ainotes", Line: "opencode"}, false},
	{"human:root", Identity{Prefix: HumanPrefix, Line: "root"}, true},
	{"toast-machine:worker-2", Identity{Prefix: "toast-machine", Line: "worker-2"}, false},
}

func TestParseIdentity(t *testing.T) {
	for _, tc := range parseIdentityTests {
		id, err := ParseIdentity(tc.in)
		if err != nil {
			t.Fatalf("ParseIdentity(%q): %v", tc.in, err)
		}
		if id != tc.want || id.IsHuman() != tc.human || id.String() != tc.in {
			t.Errorf("ParseIdentity(%q) = %+v (human %v), want %+v (human %v)", tc.in, id, id.IsHuman(), tc.want, tc.human)
		}
		again, err := NewIdentity(id.Prefix, id.Line)
		if err != nil || again != id {
			t.Errorf("NewIdentity(%q, %q) = %+v, %v", id.Prefix, id.Line, again, err)
		}
	}
	if _, err := NewIdentity("ainotes", "a:b"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("NewIdentity with a colon in the line: %v", err)
	}
}

var parseKeyTests = []struct {
	kind  KeyKind
	in    string
	want  Key
	local string
	str   string
}{
	{KeyThread, "th_12", Key{Kind: KeyThread, N: 12}, "th_12", "th_12"},
	{KeyThread, "12", Key{Kind: KeyThread, N: 12}, "th_12", "th_12"},
	{KeyThread, "ainotes:th_12", Key{Realm: "ainotes", Kind: KeyThread, N: 12}, "th_12", "ainotes:th_12"},
	{KeyMessage, "msg_7", Key{Kind: KeyMessage, N: 7}, "msg_7", "msg_7"},
	{KeyMessage, "toast:msg_99", Key{Realm: "toast", Kind: KeyMessage, N: 99}, "msg_99", "toast:msg_99"},
	{KeyClaim, "3", Key{Kind: KeyClaim, N: 3}, "cl_3", "cl_3"},
	{KeyClaim, "18446744073709551615", Key{Kind: KeyClaim, N: 1<<64 - 1}, "cl_18446744073709551615", "cl_18446744073709551615"},
}

func TestParseKey(t *testing.T) {
	for _, tc := range parseKeyTests {
		k, err := ParseKey(tc.kind, tc.in)
		if err != nil {
			t.Fatalf("ParseKey(%s, %q): %v", tc.kind, tc.in, err)
		}
		if k != tc.want || k.Local() != tc.local || k.String() != tc.str {
			t.Errorf("ParseKey(%s, %q) = %+v (%s, %s), want %+v (%s, %s)", tc.kind, tc.in, k, k.Local(), k, tc.want, tc.local, tc.str)
		}
	}
}

var slugTests = []struct{ in, want string }{
	{"opencode", "opencode"},
	{"OpenCode", "opencode"},
	{"Worker 2", "worker-2"},
	{"  hello   world  ", "hello-world"},
	{"a - b", "a-b"},
	{"a--b", "a-b"},
	{"Claude (Opus 4.1)", "claude-opus-4.1"},
	{"a..b", "a..b"},
	{"a_b", "a_b"},
	{"._x", "x"},
	{"-x", "x"},
	{"x.", "x"},
	{"x_", "x"},
	{"x-", "x"},
	{"x.-", "x"},
	{"Ünïcode Bot", "n-code-bot"},
	{"日本語", "agent"},
	{"", "agent"},
	{"!!!", "agent"},
	{"._-", "agent"},
	{"\xff\xfe", "agent"},
	{strings.Repeat("a", 100), strings.Repeat("a", 64)},
	{strings.Repeat("a", 63) + " b", strings.Repeat("a", 63)},
	{strings.Repeat("a", 63) + ".b", strings.Repeat("a", 63)},
	{strings.Repeat("ab ", 40), strings.TrimRight(strings.Repeat("ab-", 22)[:64], "-")},
}

func TestSlug(t *testing.T) {
	for _, tc := range slugTests {
		got := Slug(tc.in)
		if got != tc.want {
			t.Errorf("Slug(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if err := checkLine(got); err != nil {
			t.Errorf("Slug(%q) = %q, not a valid line: %v", tc.in, got, err)
		}
		if again := Slug(got); again != got {
			t.Errorf("Slug is not idempotent on %q: %q", got, again)
		}
	}
}

var parseRightsTests = []struct {
	in   string
	want Rights // nil: an error
}{
	{"", Rights{RightRead}},
	{"read", Rights{RightRead}},
	{"write", Rights{RightRead, RightWrite}},
	{"write,pin", Rights{RightRead, RightWrite, RightPin}},
	{"pin,write", Rights{RightRead, RightWrite, RightPin}},
	{" Write , PIN ,,", Rights{RightRead, RightWrite, RightPin}},
	{"write,write", Rights{RightRead, RightWrite}},
	{"grant,verify,lock,pin,write,read", Rights{RightRead, RightWrite, RightPin, RightLock, RightVerify, RightGrant}},
	{"admin", nil},
	{"write;pin", nil},
	{"write pin", nil},
	{"write,", Rights{RightRead, RightWrite}},
	{"*", nil},
	{"writé", nil},
}

func TestParseRights(t *testing.T) {
	for _, tc := range parseRightsTests {
		got, err := ParseRights(tc.in)
		if tc.want == nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Errorf("ParseRights(%q) = %v, %v; want ErrInvalidName", tc.in, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseRights(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		again, err := ParseRights(got.String())
		if err != nil || !slices.Equal(again, got) {
			t.Errorf("ParseRights(%q) does not round-trip: %v, %v", got.String(), again, err)
		}
		for _, r := range AllRights {
			if got.Has(r) != slices.Contains(tc.want, r) {
				t.Errorf("ParseRights(%q).Has(%s) = %v", tc.in, r, got.Has(r))
			}
		}
	}
	if !(Rights{}).Has(RightRead) {
		t.Error("the empty set must still read")
	}
}

func TestParseCID(t *testing.T) {
	good := CIDOf([]byte{0xa0})
	mustCID := func(codec, mh uint64) cid.Cid {
		h, err := multihash.Sum([]byte{0xa0}, mh, -1)
		if err != nil {
			t.Fatal(err)
		}
		return cid.NewCidV1(codec, h)
	}
	base58, err := good.StringOfBase('z')
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"base32, as relay writes it", good.String(), true},
		{"a known CID", "bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swua", true},
		// cid.Decode reads any multibase; the value is the same CID.
		{"base58btc of the same CID", base58, true},
		{"CIDv0", cid.NewCidV0(good.Hash()).String(), false},
		{"raw codec", mustCID(cid.Raw, multihash.SHA2_256).String(), false},
		{"dag-pb codec", mustCID(cid.DagProtobuf, multihash.SHA2_256).String(), false},
		{"sha2-512", mustCID(cid.DagCBOR, multihash.SHA2_512).String(), false},
		{"identity hash", mustCID(cid.DagCBOR, multihash.IDENTITY).String(), false},
		{"empty", "", false},
		{"garbage", "not a cid", false},
		{"truncated", good.String()[:20], false},
		{"base32 upper case, multibase B", strings.ToUpper(good.String()), true},
		{"base32 without its multibase prefix", good.String()[1:], false},
	}
	for _, tc := range tests {
		c, err := ParseCID(tc.in)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: ParseCID(%q): %v", tc.name, tc.in, err)
		case tc.ok && c != good:
			t.Errorf("%s: ParseCID(%q) = %s, want %s", tc.name, tc.in, c, good)
		case !tc.ok && !errors.Is(err, ErrInvalidName):
			t.Errorf("%s: ParseCID(%q) = %s, %v; want ErrInvalidName", tc.name, tc.in, c, err)
		}
	}
}

// BenchmarkKeyString writes a local key and a remote one, as every answer
// naming a message or a thread does.
func BenchmarkKeyString(b *testing.B) {
	local := Key{Kind: KeyMessage, N: 123456}
	remote := Key{Realm: "ainotes", Kind: KeyThread, N: 4321}
	b.ReportAllocs()
	for b.Loop() {
		_ = local.String()
		_ = remote.String()
	}
}
