package workflow

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/vm"
)

// EventVars is what `event.*` means in expressions and interpolations. The
// orchestrator fills it from the normalised trigger event.
type EventVars struct {
	Kind   string `expr:"kind" json:"kind"`
	Repo   string `expr:"repo" json:"repo"`
	Ref    string `expr:"ref" json:"ref"`
	Branch string `expr:"branch" json:"branch"`
	Tag    string `expr:"tag" json:"tag"`
	SHA    string `expr:"sha" json:"sha"`
	Before string `expr:"before" json:"before"`
	// Number is a pull request's number; 0 for every other event.
	Number int `expr:"number" json:"number,omitempty"`
	// Fork is true for a pull request from a fork (its head repository is
	// not its base repository).
	Fork         bool     `expr:"fork" json:"fork,omitempty"`
	BaseBranch   string   `expr:"base_branch" json:"base_branch"`
	HeadBranch   string   `expr:"head_branch" json:"head_branch"`
	Action       string   `expr:"action" json:"action"`
	Actor        string   `expr:"actor" json:"actor"`
	ChangedFiles []string `expr:"changed_files" json:"changed_files"`
}

// eventFields lists the scalar fields of EventVars by expression name, in
// the order their KICI_EVENT_* variables are documented.
var eventFields = []string{"kind", "repo", "ref", "branch", "tag", "sha", "before", "base_branch", "head_branch", "action", "actor", "number", "fork"}

// field returns one field as text: event.number as decimal ("0" when the
// event has none), event.fork as "true" or "false".
func (e EventVars) field(name string) string {
	switch name {
	case "number":
		return strconv.Itoa(e.Number)
	case "fork":
		return strconv.FormatBool(e.Fork)
	case "kind":
		return e.Kind
	case "repo":
		return e.Repo
	case "ref":
		return e.Ref
	case "branch":
		return e.Branch
	case "tag":
		return e.Tag
	case "sha":
		return e.SHA
	case "before":
		return e.Before
	case "base_branch":
		return e.BaseBranch
	case "head_branch":
		return e.HeadBranch
	case "action":
		return e.Action
	case "actor":
		return e.Actor
	}
	return ""
}

// StatusVars is the `status` of a job, as seen from expressions.
type StatusVars struct {
	Status string `expr:"status"`
}

// IfContext is everything an `if:` expression may read.
//
// For a job's `if`, Job.Status sums up its upstreams: "failure" when any
// ended failure, else "cancelled" when any was cancelled, else "success".
// For a step's `if`, Job.Status is the job's status so far.
type IfContext struct {
	Event  EventVars             `expr:"event"`
	Env    map[string]string     `expr:"env"`
	Matrix map[string]string     `expr:"matrix"`
	Inputs map[string]string     `expr:"inputs"`
	Needs  map[string]StatusVars `expr:"needs"`
	Job    StatusVars            `expr:"job"`
}

// statusFuncs are the functions of the status of the job, bound to one
// context. Their zero-context versions are used to type-check.
func statusFuncs(ctx *IfContext) []expr.Option {
	is := func(want string) func(...any) (any, error) {
		return func(...any) (any, error) {
			return ctx != nil && ctx.Job.Status == want, nil
		}
	}
	return []expr.Option{
		expr.Function("success", is("success"), new(func() bool)),
		expr.Function("failure", is("failure"), new(func() bool)),
		expr.Function("cancelled", is("cancelled"), new(func() bool)),
		expr.Function("always", func(...any) (any, error) { return true, nil }, new(func() bool)),
	}
}

// stripBraces allows `if: ${{ expr }}` as well as `if: expr`.
func stripBraces(src string) string {
	s := strings.TrimSpace(src)
	if strings.HasPrefix(s, "${{") && strings.HasSuffix(s, "}}") && strings.Count(s, "${{") == 1 {
		return strings.TrimSpace(s[3 : len(s)-2])
	}
	return s
}

func compileIf(src string, ctx *IfContext) (*vm.Program, error) {
	opts := append([]expr.Option{expr.Env(IfContext{}), expr.AsBool()}, statusFuncs(ctx)...)
	return expr.Compile(ifSource(src), opts...)
}

// newCheckConfig builds the type-checking configuration of `if:`
// expressions. Building it costs more than checking one expression, so a
// compilation builds it once and reuses it for every expression; a config
// is not shared between goroutines.
func newCheckConfig() *conf.Config {
	c := conf.CreateNew()
	for _, op := range append([]expr.Option{expr.Env(IfContext{}), expr.AsBool()}, statusFuncs(nil)...) {
		op(c)
	}
	c.Check()
	return c
}

// EvalIf evaluates an `if:` expression. An empty expression is true for a
// job; a step's caller passes "success()" as the default instead.
func EvalIf(src string, ctx IfContext) (bool, error) {
	if strings.TrimSpace(src) == "" {
		return true, nil
	}
	prog, err := compileIf(src, &ctx)
	if err != nil {
		return false, fmt.Errorf("compile if %q: %w", src, err)
	}
	out, err := expr.Run(prog, ctx)
	if err != nil {
		return false, fmt.Errorf("evaluate if %q: %w", src, err)
	}
	b, _ := out.(bool)
	return b, nil
}

// ifScope names what an expression at one place may refer to. A nil map
// means "anything goes" for that namespace.
type ifScope struct {
	matrix map[string]string
	env    map[string]bool
	inputs map[string]bool
	needs  map[string]bool // nil outside a job's if: needs.* is refused
}

// checkIf compiles an expression and checks every reference against the
// scope, returning a message for each problem.
func checkIf(cfg *conf.Config, src string, sc ifScope) []string {
	if strings.TrimSpace(stripBraces(src)) == "" {
		return []string{"empty expression"}
	}
	tree, err := checker.ParseCheck(ifSource(src), cfg)
	if err != nil {
		return []string{"invalid expression: " + oneLine(err.Error())}
	}
	v := &refChecker{scope: sc}
	ast.Walk(&tree.Node, v)
	return v.problems
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

type refChecker struct {
	scope    ifScope
	problems []string
}

// Visit checks `ns.name` and `ns["name"]` references of the map-valued
// namespaces, whose keys expr cannot check by type.
func (v *refChecker) Visit(n *ast.Node) {
	m, ok := (*n).(*ast.MemberNode)
	if !ok {
		return
	}
	id, ok := m.Node.(*ast.IdentifierNode)
	if !ok {
		return
	}
	prop, ok := m.Property.(*ast.StringNode)
	if !ok {
		return
	}
	key := prop.Value
	switch id.Value {
	case "matrix":
		if _, ok := v.scope.matrix[key]; !ok {
			v.problems = append(v.problems, fmt.Sprintf("undefined reference matrix.%s: %s", key, describeKeys("matrix dimensions", mapKeys(v.scope.matrix))))
		}
	case "env":
		if !v.scope.env[key] {
			v.problems = append(v.problems, fmt.Sprintf("undefined reference env.%s: %s", key, describeKeys("env variables", setKeys(v.scope.env))))
		}
	case "inputs":
		if !v.scope.inputs[key] {
			v.problems = append(v.problems, fmt.Sprintf("undefined reference inputs.%s: %s", key, describeKeys("manual inputs", setKeys(v.scope.inputs))))
		}
	case "needs":
		if v.scope.needs == nil {
			v.problems = append(v.problems, fmt.Sprintf("needs.%s: needs.* is only available in a job's if", key))
		} else if !v.scope.needs[key] {
			v.problems = append(v.problems, fmt.Sprintf("undefined reference needs.%s: %s", key, describeKeys("jobs in needs", setKeys(v.scope.needs))))
		}
	}
}

func describeKeys(what string, keys []string) string {
	if len(keys) == 0 {
		return "no " + what + " are defined here"
	}
	return what + " here: " + strings.Join(keys, ", ")
}

// CheckInputValue checks a manual input's value against its type.
func CheckInputValue(in Input, value string) error {
	switch in.Type {
	case InputBoolean:
		if value != "true" && value != "false" {
			return fmt.Errorf("input %q is a boolean: got %q, want true or false", in.Name, value)
		}
	case InputNumber:
		if _, err := strconv.ParseFloat(value, 64); err != nil {
			return fmt.Errorf("input %q is a number: got %q", in.Name, value)
		}
	case InputChoice:
		for _, o := range in.Options {
			if o == value {
				return nil
			}
		}
		return fmt.Errorf("input %q is one of %s: got %q", in.Name, strings.Join(in.Options, ", "), value)
	}
	return nil
}
