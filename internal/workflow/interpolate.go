package workflow

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// interpMode says what a `${{ }}` reference becomes in one field.
type interpMode int

const (
	// modeStatic fields (runs-on) are fixed at compile time: only matrix.*
	// and env.* may appear.
	modeStatic interpMode = iota
	// modeDeferred fields (env values, step names, working directories)
	// keep event.* and inputs.* references for Job.Bind to fill per run.
	modeDeferred
	// modeRun is a step's script: env.*, event.* and inputs.* become
	// shell variable references, so no event value is ever parsed as code.
	modeRun
)

// interpRE matches one `${{ ... }}` reference; Bind uses it. The compiler
// scans by hand (scanRefs), which is several times faster on long scripts.
var interpRE = regexp.MustCompile(`\$\{\{(.*?)\}\}`)

// parseRef splits "ns.key" of a reference and checks its form: a known
// namespace, a dot, and a name of letters, digits, - and _.
func parseRef(inner string) (ns, key string, ok bool) {
	dot := strings.IndexByte(inner, '.')
	if dot < 0 {
		return "", "", false
	}
	ns, key = inner[:dot], inner[dot+1:]
	switch ns {
	case "matrix", "env", "event", "inputs":
	default:
		return "", "", false
	}
	if key == "" || !nameRE.MatchString(key) {
		return "", "", false
	}
	return ns, key, true
}

// interpScope is what references in one field can see.
type interpScope struct {
	matrix map[string]string
	env    map[string]string // variables visible at this point, interpolated
	inputs map[string]bool
}

// interpolate rewrites the `${{ }}` references of s. It returns the new
// text and one message per bad reference.
func interpolate(s string, sc interpScope, mode interpMode) (string, []string) {
	if !strings.Contains(s, "${{") {
		return s, nil
	}
	var problems []string
	var b strings.Builder
	b.Grow(len(s))
	rest := s
	for {
		i := strings.Index(rest, "${{")
		if i < 0 {
			b.WriteString(rest)
			break
		}
		j := strings.Index(rest[i+3:], "}}")
		if j < 0 {
			problems = append(problems, "unterminated ${{: close the reference with }}")
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		whole := rest[i : i+3+j+2]
		rest = rest[i+3+j+2:]
		text, problem := expandRef(whole, strings.TrimSpace(whole[3:len(whole)-2]), sc, mode)
		if problem != "" {
			problems = append(problems, problem)
		}
		b.WriteString(text)
	}
	return b.String(), problems
}

// expandRef returns what one reference becomes, or the reference unchanged
// and a problem.
func expandRef(whole, inner string, sc interpScope, mode interpMode) (string, string) {
	ns, key, ok := parseRef(inner)
	if !ok {
		return whole, fmt.Sprintf("unsupported reference ${{ %s }}: only matrix.NAME, env.NAME, event.FIELD and inputs.NAME can be interpolated", inner)
	}
	switch ns {
	case "matrix":
		v, ok := sc.matrix[key]
		if !ok {
			return whole, fmt.Sprintf("undefined reference matrix.%s: %s", key, describeKeys("matrix dimensions", mapKeys(sc.matrix)))
		}
		return v, ""
	case "env":
		v, ok := sc.env[key]
		if !ok {
			return whole, fmt.Sprintf("undefined reference env.%s: %s", key, describeKeys("env variables", mapKeys(sc.env)))
		}
		if mode == modeRun {
			return "${" + key + "}", ""
		}
		return v, ""
	case "event":
		if !slices.Contains(eventFields, key) {
			return whole, fmt.Sprintf("undefined reference event.%s: event fields are %s", key, strings.Join(eventFields, ", "))
		}
	case "inputs":
		if !sc.inputs[key] {
			return whole, fmt.Sprintf("undefined reference inputs.%s: %s", key, describeKeys("manual inputs", setKeys(sc.inputs)))
		}
	}
	switch mode {
	case modeStatic:
		return whole, fmt.Sprintf("%s.%s cannot be used here: only matrix.* and env.* are known when the workflow is compiled", ns, key)
	case modeRun:
		return "${" + runtimeVar(ns, key) + "}", ""
	}
	return "${{ " + ns + "." + key + " }}", ""
}

// runtimeVar names the environment variable that carries an event field or
// an input to a step: KICI_EVENT_BRANCH, KICI_INPUT_TARGET_ENV, ...
func runtimeVar(ns, key string) string {
	name := strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
	if ns == "event" {
		return "KICI_EVENT_" + name
	}
	return "KICI_INPUT_" + name
}

func mapKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func setKeys(m map[string]bool) []string {
	return mapKeys(m)
}
