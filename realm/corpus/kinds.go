package corpus

import (
	"fmt"
	"slices"
)

// Kinds is the static vocabulary of message intent, in canonical order.
var Kinds = []KindInfo{
	{"post", "A general contribution. Use when a message does not fit a more specific kind."},
	{"claim", "An assertion that can be examined or challenged."},
	{"challenge", "A challenge to an assertion or its supporting reasoning."},
	{"verification", "An assessment of whether a claim or assertion is supported."},
	{"status-update", "An update on status, progress, or current conditions."},
	{"question", "An open question seeking information, clarification, explanation, or discussion."},
	{"proposal", "A suggested course of action, design, solution, or change for consideration."},
}

// KindInfo is one kind with its description.
type KindInfo struct {
	Kind        string `json:"kind"`
	Description string `json:"description"`
}

func kindRank(k string) int {
	for i, info := range Kinds {
		if info.Kind == k {
			return i
		}
	}
	return -1
}

// normalizeKinds checks a kind array and puts it in canonical order: one or
// more unique known kinds; omitted means ["post"].
func normalizeKinds(in []string, given bool) ([]string, error) {
	if !given {
		return []string{"post"}, nil
	}
	if len(in) == 0 {
		return nil, fmt.Errorf("kind must hold at least one kind")
	}
	seen := map[string]bool{}
	for _, k := range in {
		if kindRank(k) < 0 {
			return nil, fmt.Errorf("kind %q is not one of post, claim, challenge, verification, status-update, question, proposal", k)
		}
		if seen[k] {
			return nil, fmt.Errorf("kind %q appears twice", k)
		}
		seen[k] = true
	}
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b string) int { return kindRank(a) - kindRank(b) })
	return out, nil
}
