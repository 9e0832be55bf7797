package secret

import (
	"strings"
	"testing"
)

func TestNewAndCheck(t *testing.T) {
	s, h := New()
	t2, _ := New()
	if len(s) != 43 || s == t2 {
		t.Fatalf("secrets %q %q", s, t2)
	}
	if !Equal(Hash(s), h) || Equal(Hash(t2), h) || Equal(Hash(s), nil) {
		t.Fatal("Equal disagrees with Hash")
	}
}

var splitTests = []struct {
	token, id, s string
	ok           bool
}{
	{"rlt_12_" + x43, "12", x43, true},
	{"rlt_ab_cd_" + x43, "ab", "cd_" + x43, true},
	{"rla_12_" + x43, "", "", false},
	{"rlt_12", "", "", false},
	{"rlt__" + x43, "", "", false},
	{"rlt_12_short", "", "", false},
}

const x43 = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"

func TestSplit(t *testing.T) {
	for _, tc := range splitTests {
		id, s, ok := Split(tc.token, "rlt_")
		if id != tc.id || s != tc.s || ok != tc.ok {
			t.Errorf("Split(%q) = %q %q %v", tc.token, id, s, ok)
		}
	}
}

// FuzzSplit: whatever Split accepts is put back together by writing it out
// again, with an id free of '_' and a secret of a length it allows.
func FuzzSplit(f *testing.F) {
	for _, tc := range splitTests {
		f.Add(tc.token)
	}
	f.Fuzz(func(t *testing.T, token string) {
		id, s, ok := Split(token, "rlt_")
		if !ok {
			if id != "" || s != "" {
				t.Fatalf("Split(%q) refused but gave %q %q", token, id, s)
			}
			return
		}
		if "rlt_"+id+"_"+s != token || id == "" || strings.Contains(id, "_") || len(s) < minLength || len(s) > 128 {
			t.Fatalf("Split(%q) = %q %q", token, id, s)
		}
	})
}
