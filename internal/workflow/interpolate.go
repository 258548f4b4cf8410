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

var (
	interpRE = regexp.MustCompile(`\$\{\{(.*?)\}\}`)
	refRE    = regexp.MustCompile(`^(matrix|env|event|inputs)\.([A-Za-z_][A-Za-z0-9_-]*)$`)
)

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
	out := interpRE.ReplaceAllStringFunc(s, func(m string) string {
		inner := strings.TrimSpace(m[3 : len(m)-2])
		parts := refRE.FindStringSubmatch(inner)
		if parts == nil {
			problems = append(problems, fmt.Sprintf("unsupported reference ${{ %s }}: only matrix.NAME, env.NAME, event.FIELD and inputs.NAME can be interpolated", inner))
			return m
		}
		ns, key := parts[1], parts[2]
		switch ns {
		case "matrix":
			v, ok := sc.matrix[key]
			if !ok {
				problems = append(problems, fmt.Sprintf("undefined reference matrix.%s: %s", key, describeKeys("matrix dimensions", mapKeys(sc.matrix))))
				return m
			}
			return v
		case "env":
			v, ok := sc.env[key]
			if !ok {
				problems = append(problems, fmt.Sprintf("undefined reference env.%s: %s", key, describeKeys("env variables", mapKeys(sc.env))))
				return m
			}
			if mode == modeRun {
				return "${" + key + "}"
			}
			return v
		case "event":
			if !slices.Contains(eventFields, key) {
				problems = append(problems, fmt.Sprintf("undefined reference event.%s: event fields are %s", key, strings.Join(eventFields, ", ")))
				return m
			}
		case "inputs":
			if !sc.inputs[key] {
				problems = append(problems, fmt.Sprintf("undefined reference inputs.%s: %s", key, describeKeys("manual inputs", setKeys(sc.inputs))))
				return m
			}
		}
		switch mode {
		case modeStatic:
			problems = append(problems, fmt.Sprintf("%s.%s cannot be used here: only matrix.* and env.* are known when the workflow is compiled", ns, key))
			return m
		case modeRun:
			return "${" + runtimeVar(ns, key) + "}"
		}
		return "${{ " + ns + "." + key + " }}"
	})
	if i := strings.Index(interpRE.ReplaceAllString(s, ""), "${{"); i >= 0 {
		problems = append(problems, "unterminated ${{: close the reference with }}")
	}
	return out, problems
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
