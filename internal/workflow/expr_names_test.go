package workflow

import (
	"strings"
	"testing"
)

func TestQuoteDashedNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want string
	}{
		{name: "input", src: "inputs.dry-run == 'true'", want: `inputs["dry-run"] == 'true'`},
		{name: "several dashes", src: "inputs.a-b-c", want: `inputs["a-b-c"]`},
		{name: "needs job then member", src: "needs.build-linux.status == 'success'", want: `needs["build-linux"].status == 'success'`},
		{name: "matrix", src: "matrix.go-version != ''", want: `matrix["go-version"] != ''`},
		{name: "no dash unchanged", src: "inputs.target == 'x-y'", want: "inputs.target == 'x-y'"},
		{name: "spaced minus is subtraction", src: "inputs.n - 1 > 0", want: "inputs.n - 1 > 0"},
		{name: "single-quoted string untouched", src: "'inputs.dry-run' == inputs.dry-run", want: `'inputs.dry-run' == inputs["dry-run"]`},
		{name: "double-quoted string with escape untouched", src: `"a\"inputs.x-y" != inputs.x-y`, want: `"a\"inputs.x-y" != inputs["x-y"]`},
		{name: "backquoted string untouched", src: "`inputs.x-y` == ''", want: "`inputs.x-y` == ''"},
		{name: "env is not rewritten", src: "env.A-1 == 0", want: "env.A-1 == 0"},
		{name: "member of another value", src: "event.inputs.a-b", want: "event.inputs.a-b"},
		{name: "longer identifier", src: "myinputs.a-b", want: "myinputs.a-b"},
		{name: "two references", src: "inputs.dry-run == 'false' && needs.unit-tests.status == 'success'", want: `inputs["dry-run"] == 'false' && needs["unit-tests"].status == 'success'`},
		{name: "unterminated string", src: "inputs.a-b == 'x", want: `inputs["a-b"] == 'x`},
		{name: "namespace at end", src: "inputs.", want: "inputs."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := quoteDashedNames(tt.src); got != tt.want {
				t.Errorf("quoteDashedNames(%q): got %q, want %q", tt.src, got, tt.want)
			}
		})
	}
}

// TestEvalIfDashedNames checks that `if:` reads an input, a matrix
// dimension and a needed job whose names hold a '-' (before, inputs.dry-run
// failed with "unknown name run"), both when evaluated and when checked at
// compile time.
func TestEvalIfDashedNames(t *testing.T) {
	t.Parallel()
	ctx := IfContext{
		Inputs: map[string]string{"dry-run": "true", "n": "3"},
		Matrix: map[string]string{"go-version": "1.26"},
		Needs:  map[string]StatusVars{"unit-tests": {Status: "failure"}},
	}
	tests := []struct {
		name string
		src  string
		want bool
	}{
		{name: "input true", src: "inputs.dry-run == 'true'", want: true},
		{name: "input false", src: "${{ inputs.dry-run == 'false' }}", want: false},
		{name: "matrix", src: "matrix.go-version == '1.26'", want: true},
		{name: "needs", src: "needs.unit-tests.status == 'failure'", want: true},
		{name: "string literal kept", src: "'inputs.dry-run' != inputs.dry-run", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := EvalIf(tt.src, ctx)
			if err != nil {
				t.Fatalf("EvalIf(%q): %v", tt.src, err)
			}
			if got != tt.want {
				t.Errorf("EvalIf(%q): got %v, want %v", tt.src, got, tt.want)
			}
		})
	}
	scope := ifScope{
		matrix: map[string]string{"go-version": ""},
		inputs: map[string]bool{"dry-run": true},
		needs:  map[string]bool{"unit-tests": true},
	}
	cfg := newCheckConfig()
	checks := []struct {
		src  string
		want string // substring of the only problem; "" for none
	}{
		{src: "inputs.dry-run == 'true' && matrix.go-version != '' && needs.unit-tests.status == 'success'"},
		{src: "inputs.dry-runs == 'true'", want: "undefined reference inputs.dry-runs: manual inputs here: dry-run"},
	}
	for _, c := range checks {
		got := checkIf(cfg, c.src, scope)
		if c.want == "" {
			if len(got) != 0 {
				t.Errorf("checkIf(%q): got %q, want no problems", c.src, got)
			}
			continue
		}
		if len(got) != 1 || !strings.Contains(got[0], c.want) {
			t.Errorf("checkIf(%q): got %q, want one problem containing %q", c.src, got, c.want)
		}
	}
}
