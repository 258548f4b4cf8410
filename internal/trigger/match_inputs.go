package trigger

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/kici-dev/kici/internal/workflow"
)

// inputs resolves the event's inputs against the manual trigger's declared
// inputs. Every problem gets a failing check and a phrase in the reason:
// undeclared inputs first (by name), then declared inputs in order. A given
// value of "" counts as not given, so the input's default applies.
func (f *filters) inputs() {
	if f.failed != "" {
		return
	}
	decl := f.t.Inputs
	var problems []string

	var unknown []string
	for name := range f.ev.Inputs {
		if !slices.ContainsFunc(decl, func(in workflow.Input) bool { return in.Name == name }) {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		f.check("inputs."+name, "a declared input", f.ev.Inputs[name], false)
		problems = append(problems, "unknown input "+quote(name))
	}

	var resolved map[string]string // nil without declared inputs
	if len(decl) > 0 {
		resolved = make(map[string]string, len(decl))
	}
	for _, in := range decl {
		v, given := f.ev.Inputs[in.Name]
		given = given && v != ""
		if !given {
			v = in.Default
		}
		expected := inputExpectation(in)
		if v == "" && in.Required {
			f.check("inputs."+in.Name, expected, "(missing)", false)
			problems = append(problems, "missing required input "+quote(in.Name))
			continue
		}
		if given {
			canon, why := checkInput(in, v)
			f.check("inputs."+in.Name, expected, v, why == "")
			if why != "" {
				problems = append(problems, "input "+quote(in.Name)+": "+quote(v)+" "+why)
				continue
			}
			v = canon
		}
		resolved[in.Name] = v
	}
	if len(problems) > 0 {
		f.failed = strings.Join(problems, "; ")
		return
	}
	f.resolved = resolved
}

// inputExpectation describes a declared input for Check.Expected, e.g.
// "boolean, required" or "choice of [dev prod]".
func inputExpectation(in workflow.Input) string {
	s := in.Type
	if s == "" {
		s = workflow.InputString
	}
	if in.Type == workflow.InputChoice {
		s += " of " + patternList(in.Options)
	}
	if in.Required {
		s += ", required"
	}
	return s
}

// checkInput type-checks a given value. It returns the value to use (a
// boolean in lower case) and, when the value does not fit, why not.
func checkInput(in workflow.Input, v string) (canon, why string) {
	switch in.Type {
	case workflow.InputBoolean:
		switch {
		case strings.EqualFold(v, "true"):
			return "true", ""
		case strings.EqualFold(v, "false"):
			return "false", ""
		}
		return "", "is not a boolean (true or false)"
	case workflow.InputNumber:
		if !isDecimal(v) {
			return "", "is not a number"
		}
		return v, ""
	case workflow.InputChoice:
		if !slices.Contains(in.Options, v) {
			return "", "is not one of " + patternList(in.Options)
		}
		return v, ""
	}
	return v, ""
}

// isDecimal reports whether v is a finite decimal number such as 3, -1.5 or
// 2e10: what strconv.ParseFloat accepts, less hexadecimal, underscores,
// infinities and NaN.
func isDecimal(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('0' <= c && c <= '9' || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E') {
			return false
		}
	}
	n, err := strconv.ParseFloat(v, 64)
	return err == nil && !math.IsInf(n, 0)
}
