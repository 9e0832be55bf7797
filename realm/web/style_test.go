package web

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// cssRule is one rule of console.css: its selector and declarations.
type cssRule struct {
	selector string
	decls    map[string]string
}

var (
	cssComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	cssBlock   = regexp.MustCompile(`([^{}]+)\{([^{}]*)\}`)
	cssVar     = regexp.MustCompile(`var\((--[a-z-]+)\)`)
	hexColour  = regexp.MustCompile(`^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$`)
)

// consoleRules parses console.css, resolving the custom properties of
// :root in every declaration.
func consoleRules(t *testing.T) []cssRule {
	t.Helper()
	b, err := files.ReadFile("assets/console.css")
	if err != nil {
		t.Fatal(err)
	}
	var rules []cssRule
	vars := map[string]string{}
	for _, m := range cssBlock.FindAllStringSubmatch(cssComment.ReplaceAllString(string(b), ""), -1) {
		r := cssRule{selector: strings.TrimSpace(m[1]), decls: map[string]string{}}
		for _, d := range strings.Split(m[2], ";") {
			k, v, ok := strings.Cut(d, ":")
			if !ok {
				continue
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if r.selector == ":root" {
				vars[k] = v
			}
			r.decls[k] = v
		}
		rules = append(rules, r)
	}
	for _, r := range rules {
		for k, v := range r.decls {
			r.decls[k] = cssVar.ReplaceAllStringFunc(v, func(s string) string { return vars[cssVar.FindStringSubmatch(s)[1]] })
		}
	}
	return rules
}

// luminance is a colour's relative luminance (WCAG 2).
func luminance(t *testing.T, hex string) float64 {
	t.Helper()
	h := strings.TrimPrefix(hex, "#")
	if len(h) == 3 {
		h = string([]byte{h[0], h[0], h[1], h[1], h[2], h[2]})
	}
	var c [3]float64
	for i := range c {
		v, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			t.Fatalf("colour %q: %v", hex, err)
		}
		s := float64(v) / 255
		if s <= 0.04045 {
			c[i] = s / 12.92
		} else {
			c[i] = math.Pow((s+0.055)/1.055, 2.4)
		}
	}
	return 0.2126*c[0] + 0.7152*c[1] + 0.0722*c[2]
}

// contrast is the WCAG contrast ratio of two colours.
func contrast(t *testing.T, a, b string) float64 {
	la, lb := luminance(t, a), luminance(t, b)
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}

// TestContrast: the console's text colours read at WCAG AA (4.5:1; no
// console text is large enough for 3:1) on the backgrounds they sit on:
// the faint and muted greys on the panels and the page, and every rule
// that sets both a colour and a background (badges, tags, buttons).
func TestContrast(t *testing.T) {
	rules := consoleRules(t)
	rule := func(sel string) map[string]string {
		for _, r := range rules {
			if r.selector == sel {
				return r.decls
			}
		}
		t.Fatalf("console.css has no rule %q", sel)
		return nil
	}
	root := rule(":root")
	check := func(what, fg, bg string) {
		t.Helper()
		if c := contrast(t, fg, bg); c < 4.5 {
			t.Errorf("%s: %s on %s is %.2f:1, under 4.5:1", what, fg, bg, c)
		}
	}
	for _, fg := range []string{"--faint", "--muted", "--text"} {
		for _, bg := range []string{"--panel", "--bg"} {
			check(fg+" on "+bg, root[fg], root[bg])
		}
	}
	check(".tags a .c", rule(".tags a .c")["color"], rule(".tags a")["background"])
	check(".side .faint", rule(".side .faint")["color"], root["--side"])
	checked := 0
	for _, r := range rules {
		fg, bg := r.decls["color"], r.decls["background"]
		if hexColour.MatchString(fg) && hexColour.MatchString(bg) {
			check(r.selector, fg, bg)
			checked++
		}
	}
	if checked < 30 {
		t.Fatalf("only %d rules set a colour on a background: is console.css parsed?", checked)
	}
}
