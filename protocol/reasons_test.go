package protocol

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// catalogStatuses are the HTTP statuses a reason may carry.
var catalogStatuses = map[int]bool{
	http.StatusBadRequest:            true, // 400
	http.StatusUnauthorized:          true, // 401
	http.StatusForbidden:             true, // 403
	http.StatusNotFound:              true, // 404
	http.StatusMethodNotAllowed:      true, // 405
	http.StatusConflict:              true, // 409
	http.StatusRequestEntityTooLarge: true, // 413
	http.StatusTooManyRequests:       true, // 429
	http.StatusNotAcceptable:         true, // 406
	http.StatusUnsupportedMediaType:  true, // 415
	http.StatusUnprocessableEntity:   true, // 422
	http.StatusPreconditionRequired:  true, // 428
	http.StatusInternalServerError:   true, // 500
	http.StatusServiceUnavailable:    true, // 503
}

var reasonPattern = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

func TestReasonCatalog(t *testing.T) {
	seen := map[Reason]bool{}
	for _, info := range Reasons {
		r := info.Reason
		if seen[r] {
			t.Errorf("reason %q is in the catalog twice", r)
		}
		seen[r] = true
		if !reasonPattern.MatchString(string(r)) {
			t.Errorf("reason %q is not snake_case", r)
		}
		if !catalogStatuses[info.Status] {
			t.Errorf("reason %q has status %d", r, info.Status)
		}
		if strings.TrimSpace(info.Message) == "" {
			t.Errorf("reason %q has no message", r)
		}
		if strings.TrimSpace(info.HowTo) == "" {
			t.Errorf("reason %q says not how to proceed", r)
		}
		if r.Info() != info || r.Status() != info.Status {
			t.Errorf("reason %q: Info() = %+v, want %+v", r, r.Info(), info)
		}
	}
	if got := Reason("no_such_reason").Info(); got.Reason != ReasonInternal || got.Status != http.StatusInternalServerError {
		t.Errorf("an unknown reason is %+v, want the internal row", got)
	}
}

// TestReasonConstantsInCatalog parses the package's source for constants of
// type Reason, so that adding one without a catalog row fails here.
func TestReasonConstantsInCatalog(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[Reason]string{} // value → constant name
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Reason" {
					continue
				}
				if len(vs.Values) != len(vs.Names) {
					t.Errorf("%s: Reason constants without a value of their own", fset.Position(vs.Pos()))
					continue
				}
				for i, name := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Errorf("%s: %s is not a string literal", fset.Position(name.Pos()), name.Name)
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					if other, dup := declared[Reason(v)]; dup {
						t.Errorf("%s and %s are both %q", other, name.Name, v)
					}
					declared[Reason(v)] = name.Name
				}
			}
		}
	}
	if len(declared) == 0 {
		t.Fatal("found no Reason constants: has the parse gone wrong?")
	}
	inCatalog := map[Reason]bool{}
	for _, info := range Reasons {
		inCatalog[info.Reason] = true
		if _, ok := declared[info.Reason]; !ok {
			t.Errorf("catalog row %q has no constant", info.Reason)
		}
	}
	for v, name := range declared {
		if !inCatalog[v] {
			t.Errorf("%s (%q) has no row in Reasons", name, v)
		}
	}
}

func TestRefusal(t *testing.T) {
	cause := errors.New("badger: disk full")
	r := Refuse(ReasonThreadClosed)
	if r.Message != ReasonThreadClosed.Info().Message || r.Status() != http.StatusConflict {
		t.Errorf("Refuse = %+v", r)
	}
	if got, want := r.Error(), "thread_closed: "+r.Message; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}

	f := Refusef(ReasonThreadNotFound, "no thread %s", "th_9")
	if f.Message != "no thread th_9" || f.Status() != http.StatusNotFound {
		t.Errorf("Refusef = %+v", f)
	}

	a := r.With("thread", "th_1")
	b := a.With("state", "closed")
	if len(r.Details) != 0 || len(a.Details) != 1 || len(b.Details) != 2 {
		t.Errorf("With shares its details: %v %v %v", r.Details, a.Details, b.Details)
	}

	internal := &Refusal{Reason: ReasonInternal, Message: ReasonInternal.Info().Message, Cause: cause}
	if !errors.Is(internal, cause) {
		t.Error("the cause is not reachable with errors.Is")
	}
	if strings.Contains(internal.Error(), cause.Error()) {
		t.Error("the cause leaks into the client's text")
	}
	var target *Refusal
	if !errors.As(error(internal), &target) || target.Reason != ReasonInternal {
		t.Error("errors.As does not find the refusal")
	}
}
