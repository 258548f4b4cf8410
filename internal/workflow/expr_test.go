package workflow

import (
	"strings"
	"testing"
)

func TestEvalIf(t *testing.T) {
	t.Parallel()
	ctx := IfContext{
		Event:  EventVars{Kind: "push", Branch: "main", ChangedFiles: []string{"src/a.go", "docs/x.md"}},
		Env:    map[string]string{"MODE": "fast"},
		Matrix: map[string]string{"go": "1.26"},
		Inputs: map[string]string{"target": "staging"},
		Needs:  map[string]StatusVars{"build": {Status: "failure"}},
		Job:    StatusVars{Status: "failure"},
	}
	tests := []struct {
		name string
		src  string
		want bool
	}{
		{name: "empty is true", src: "", want: true},
		{name: "branch equality", src: "event.branch == 'main'", want: true},
		{name: "braces are allowed", src: "${{ event.branch == 'dev' }}", want: false},
		{name: "matrix", src: "matrix.go == '1.26'", want: true},
		{name: "env", src: "env.MODE != 'fast'", want: false},
		{name: "inputs", src: "inputs.target in ['staging', 'prod']", want: true},
		{name: "needs status", src: "needs.build.status == 'failure'", want: true},
		{name: "success false after failure", src: "success()", want: false},
		{name: "failure true", src: "failure()", want: true},
		{name: "always", src: "always()", want: true},
		{name: "cancelled", src: "cancelled()", want: false},
		{name: "changed files", src: "any(event.changed_files, # startsWith 'src/')", want: true},
		{name: "missing matrix key is empty", src: "matrix.os == ''", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := EvalIf(tt.src, ctx)
			if err != nil {
				t.Fatalf("EvalIf(%q): %v", tt.src, err)
			}
			if got != tt.want {
				t.Errorf("EvalIf(%q) = %v, want %v", tt.src, got, tt.want)
			}
		})
	}
}

func TestEvalIfRejectsNonBoolean(t *testing.T) {
	t.Parallel()
	_, err := EvalIf("event.branch", IfContext{})
	if err == nil || !strings.Contains(err.Error(), "event.branch") {
		t.Fatalf("got %v, want an error naming the expression", err)
	}
}

func TestCheckIf(t *testing.T) {
	t.Parallel()
	scope := ifScope{
		matrix: map[string]string{"go": ""},
		env:    map[string]bool{"A": true},
		inputs: map[string]bool{"who": true},
		needs:  map[string]bool{"build": true},
	}
	tests := []struct {
		name string
		src  string
		want string // substring of the only problem; "" for none
	}{
		{name: "valid", src: "matrix.go == '1' && env.A != '' && inputs.who == 'x' && needs.build.status == 'success'"},
		{name: "index form", src: "matrix['nope'] == '1'", want: "undefined reference matrix.nope"},
		{name: "unknown env", src: "env.B == ''", want: "undefined reference env.B"},
		{name: "unknown input", src: "inputs.whom == ''", want: "undefined reference inputs.whom"},
		{name: "unknown needs", src: "needs.test.status == ''", want: "undefined reference needs.test"},
		{name: "unknown event field", src: "event.brnch == ''", want: "invalid expression"},
		{name: "unknown function", src: "deploy()", want: "invalid expression"},
		{name: "syntax", src: "a &&", want: "invalid expression"},
		{name: "not boolean", src: "'x'", want: "invalid expression"},
		{name: "blank", src: "  ", want: "empty expression"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := checkIf(newCheckConfig(), tt.src, scope)
			if tt.want == "" {
				if len(got) != 0 {
					t.Fatalf("checkIf(%q) = %q, want no problems", tt.src, got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tt.want) {
				t.Fatalf("checkIf(%q) = %q, want one problem containing %q", tt.src, got, tt.want)
			}
		})
	}
}

func TestCheckInputValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    Input
		value string
		ok    bool
	}{
		{name: "string anything", in: Input{Name: "s", Type: InputString}, value: "x y", ok: true},
		{name: "boolean true", in: Input{Name: "b", Type: InputBoolean}, value: "true", ok: true},
		{name: "boolean yes", in: Input{Name: "b", Type: InputBoolean}, value: "yes"},
		{name: "number", in: Input{Name: "n", Type: InputNumber}, value: "-1.5", ok: true},
		{name: "number word", in: Input{Name: "n", Type: InputNumber}, value: "two"},
		{name: "choice in", in: Input{Name: "c", Type: InputChoice, Options: []string{"a", "b"}}, value: "b", ok: true},
		{name: "choice out", in: Input{Name: "c", Type: InputChoice, Options: []string{"a", "b"}}, value: "c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckInputValue(tt.in, tt.value)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckInputValue(%q) = %v, want ok=%v", tt.value, err, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), tt.in.Name) {
				t.Errorf("error %q does not name input %q", err, tt.in.Name)
			}
		})
	}
}

// TestEvalIfForkAndNumber checks that event.fork is a bool and
// event.number an int in if: (before they were no fields at all, and the
// error named the Go type), for a fork's pull request and for a push,
// and that both pass the compile-time check of a workflow.
func TestEvalIfForkAndNumber(t *testing.T) {
	t.Parallel()
	fork := IfContext{Event: EventVars{Kind: "pull_request", Number: 7, Fork: true}}
	push := IfContext{Event: EventVars{Kind: "push"}}
	tests := []struct {
		src  string
		ctx  IfContext
		want bool
	}{
		{src: "event.fork", ctx: fork, want: true},
		{src: "!event.fork", ctx: fork, want: false},
		{src: "event.fork == true", ctx: fork, want: true},
		{src: "event.number == 7", ctx: fork, want: true},
		{src: "event.number > 6 && event.number < 8", ctx: fork, want: true},
		{src: "event.fork", ctx: push, want: false},
		{src: "event.number == 0", ctx: push, want: true},
		{src: "event.number == 7", ctx: push, want: false},
	}
	cfg := newCheckConfig()
	for _, tt := range tests {
		t.Run(tt.src+"/"+tt.ctx.Event.Kind, func(t *testing.T) {
			t.Parallel()
			got, err := EvalIf(tt.src, tt.ctx)
			if err != nil {
				t.Fatalf("EvalIf(%q): %v", tt.src, err)
			}
			if got != tt.want {
				t.Errorf("EvalIf(%q) = %v, want %v", tt.src, got, tt.want)
			}
		})
	}
	for _, src := range []string{"event.fork", "event.number == 7", "event.fork && event.number > 0"} {
		if problems := checkIf(cfg, src, ifScope{}); len(problems) > 0 {
			t.Errorf("checkIf(%q): got %q, want no problem", src, problems)
		}
	}
	env := RuntimeEnv(fork.Event, nil)
	if env["KICI_EVENT_FORK"] != "true" || env["KICI_EVENT_NUMBER"] != "7" {
		t.Errorf("RuntimeEnv: got KICI_EVENT_FORK=%q KICI_EVENT_NUMBER=%q, want true and 7", env["KICI_EVENT_FORK"], env["KICI_EVENT_NUMBER"])
	}
}
