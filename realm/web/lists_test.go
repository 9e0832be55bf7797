package web_test

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"relay/realm"
)

// TestConsoleListsPaged: with more applications than a page of the API
// holds, the work queue still lists every undecided one (and none decided)
// and every open feature request, and the newest decided ones first;
// and the tokens page shows a page of tokens and of applications with
// links that lead, page by page, to every one.
func TestConsoleListsPaged(t *testing.T) {
	n := startNode(t, func(c *realm.Config) { c.RateLimit = 0 })
	const apps = 230
	ids := make([]int, apps)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < apps; i += 8 {
				out := n.mustAPI(t, "POST", "/api/v1/tokens/request", "", map[string]any{"label": fmt.Sprint("agent ", i), "purpose": "p", "model": "m", "client": "c", "provider": "p", "contact": "c"})
				id, _ := out["request_id"].(float64)
				ids[i] = int(id)
			}
		})
	}
	wg.Wait()
	slices.Sort(ids)
	decided := map[int]bool{}
	for _, id := range ids[:apps:apps][10:20] {
		n.mustAPI(t, "POST", fmt.Sprintf("/api/v1/token-requests/%d/review", id), n.operator, map[string]any{"decision": "reject", "reason": "no"})
		decided[id] = true
	}
	n.mustAPI(t, "POST", fmt.Sprintf("/api/v1/token-requests/%d/review", ids[30]), n.operator, map[string]any{"decision": "defer"})

	// Feature requests: the open ones in the order they came, the newest
	// 50 decided ones newest first.
	agent := n.mustAPI(t, "POST", "/api/v1/tokens", n.operator, map[string]any{"label": "asker"})["token"].(string)
	var open, decidedFeatures []int
	for i := range 130 {
		f := n.mustAPI(t, "POST", "/api/v1/features", agent, map[string]any{"title": fmt.Sprint("feature ", i), "body": "a tool"})
		id := f["feature"].(map[string]any)["id"]
		st := []string{"open", "accepted", "planned", "done", "rejected", "done"}[i%6]
		if i%7 == 0 {
			st = "rejected"
		}
		if st != "open" {
			n.mustAPI(t, "POST", fmt.Sprintf("/api/v1/features/%v/status", id), n.operator, map[string]any{"status": st})
		}
		if st == "done" || st == "rejected" {
			decidedFeatures = append(decidedFeatures, i)
		} else {
			open = append(open, i)
		}
	}
	slices.Reverse(decidedFeatures)
	decidedFeatures = decidedFeatures[:min(50, len(decidedFeatures))]

	b := n.browser(t)
	b.login(n.operator)
	q := b.get("/console/")
	fsec := strings.SplitN(strings.SplitN(q.body, `id="features"`, 2)[1], `id="claims"`, 2)[0]
	parts := strings.SplitN(fsec, `class="decided"`, 2)
	if len(parts) != 2 {
		t.Fatal("queue: no decided feature requests")
	}
	if got := numbers(`<span class="title">feature (\d+)</span>`, parts[0]); !slices.Equal(got, open) {
		t.Fatalf("queue lists open feature requests %v,\nwant %v", got, open)
	}
	if got := numbers(`<span class="title">feature (\d+)</span>`, parts[1]); !slices.Equal(got, decidedFeatures) {
		t.Fatalf("queue lists decided feature requests %v,\nwant %v", got, decidedFeatures)
	}
	var want []int
	for _, id := range ids {
		if !decided[id] {
			want = append(want, id)
		}
	}
	if got := numbers(`id="request-(\d+)"`, q.body); !slices.Equal(got, want) {
		t.Fatalf("queue lists applications %v,\nwant %v", got, want)
	}

	// Every token (the human's, the asker's and one per application) and every
	// application, by following the links.
	for _, list := range []struct {
		param, row string
		section    int // 0: the tokens, 1: the applications
		want       int
	}{{"tokens_after", `<div class="faint">#(\d+) · `, 0, apps + 2}, {"requests_after", `<td class="mono">(\d+)</td>`, 1, apps}} {
		var got []int
		path := "/console/tokens"
		for range 10 {
			p := b.get(path)
			if p.status != 200 {
				t.Fatalf("%s: %d", path, p.status)
			}
			parts := strings.SplitN(p.body, `id="requests"`, 2)
			if len(parts) != 2 {
				t.Fatalf("%s: no applications", path)
			}
			got = append(got, numbers(list.row, parts[list.section])...)
			next := numbers(`href="/console/tokens\?`+list.param+`=(\d+)`, p.body)
			if len(next) == 0 {
				break
			}
			path = fmt.Sprintf("/console/tokens?%s=%d", list.param, next[len(next)-1])
		}
		if len(got) != list.want || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != list.want {
			t.Fatalf("%s: %d listed (in order: %v), want %d distinct", list.param, len(got), slices.IsSorted(got), list.want)
		}
	}
	// Each list's links keep the other list's page.
	p := b.get("/console/tokens?tokens_after=1&requests_after=1")
	for _, want := range []string{`?tokens_after=1#requests">First applications`, `&tokens_after=1#requests">Next applications`,
		`?requests_after=1">First tokens`, `&requests_after=1">Next tokens`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the tokens page after both first pages has no link %s", want)
		}
	}
}

func numbers(pattern, body string) []int {
	var out []int
	for _, m := range regexp.MustCompile(pattern).FindAllStringSubmatch(body, -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}
