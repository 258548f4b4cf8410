package trigger

import (
	"strings"

	"github.com/kici-dev/kici/internal/workflow"
)

// Decision is the matcher's verdict on one workflow for one event. It is
// what `kici preview` prints and what a run records as the reason it ran.
type Decision struct {
	// Workflow and File name the workflow (workflow.Workflow Name and
	// File). Workflow is "name" in JSON, as `kici preview -o json` prints it.
	Workflow string `json:"name"`
	File     string `json:"file"`
	// Matched is true when one of the workflow's triggers matched the event.
	Matched bool `json:"matched"`
	// Trigger is the type of the trigger that matched (workflow.TriggerPush,
	// ...); empty when nothing matched.
	Trigger string `json:"trigger,omitempty"`
	// Reason says in words why the workflow did or did not match, e.g.
	// `push to main matched branches [main]` or
	// `push trigger: branch "dev" not in branches [main]`.
	Reason string `json:"reason"`
	// Checks are the filters evaluated, in order, for every trigger tried.
	Checks []Check `json:"checks,omitempty"`
	// Inputs are the resolved inputs of a matched manual trigger: every
	// declared input, with the given value, else its default, else "".
	Inputs map[string]string `json:"inputs,omitempty"`
}

// Check is one filter of one trigger compared with the event.
type Check struct {
	// Trigger is the type of the trigger the filter belongs to.
	Trigger string `json:"trigger"`
	// Field is the filter as written in the workflow file: "kind" (the
	// trigger's event kind), "branches", "branches-ignore", "tags",
	// "types", "paths", "cron", or "inputs.<name>".
	Field string `json:"field"`
	// Expected is what the filter asks for, e.g. "[main release/**]".
	Expected string `json:"expected"`
	// Actual is what the event has, e.g. "dev".
	Actual string `json:"actual"`
	// OK is true when the filter let the event through.
	OK bool `json:"ok"`
}

// defaultPRTypes are the pull-request actions a pull_request trigger without
// `types` matches.
var defaultPRTypes = []string{"opened", "synchronize", "reopened"}

// MatchAll matches ev against every workflow of plan and returns one
// Decision per workflow, in plan order. A nil plan gives nil.
func MatchAll(plan *workflow.Plan, ev Event) []Decision {
	if plan == nil {
		return nil
	}
	ds := make([]Decision, len(plan.Workflows))
	for i := range plan.Workflows {
		ds[i] = Match(&plan.Workflows[i], ev)
	}
	return ds
}

// Match decides whether ev starts workflow wf. The workflow's triggers are
// tried in order and the first that matches wins; a workflow without
// triggers never matches. A trigger matches when the event is of its kind
// and passes every filter it sets:
//
//   - push: branches (any pattern matches the branch; empty means any
//     branch), branches-ignore (no pattern may match), paths.
//   - tag: tags (any pattern matches the tag; empty means any tag).
//   - pull_request: branches and branches-ignore against the base branch,
//     types against the action (empty means opened, synchronize and
//     reopened), paths.
//   - manual: the given inputs resolve against the declared ones (see
//     Decision.Inputs): an undeclared input, a missing required input, or a
//     value that is not of its input's type (boolean: true or false; number:
//     a decimal number; choice: one of the options) fails the trigger.
//   - schedule: the event's Cron is the trigger's cron spec.
//
// Patterns are doublestar globs (github.com/bmatcuk/doublestar/v4): `*` stays
// within one path segment and `**` crosses them, so release/* matches
// release/1.0 but not release/1.0/x, and release/** matches both.
//
// The path filter, in order: a trigger without paths passes. If the event's
// changed files are unknown (ChangedFilesKnown false, e.g. a manual run, or
// a list over the bounds) or the list is empty, it fails: no file can
// satisfy it. Changed files matching any "!" pattern are dropped; if none is
// left it fails. If the filter has only "!" patterns it passes; otherwise it
// passes when a remaining file matches any pattern without "!".
//
// Match only reads wf and ev; it is safe for concurrent use.
func Match(wf *workflow.Workflow, ev Event) Decision {
	if wf == nil {
		return Decision{Reason: "no workflow"}
	}
	d := Decision{Workflow: wf.Name, File: wf.File}
	if len(wf.Triggers) == 0 {
		d.Reason = "workflow has no triggers"
		return d
	}
	d.Checks = make([]Check, 0, 4*len(wf.Triggers))
	var failed string // why each trigger of the event's kind failed
	for i := range wf.Triggers {
		t := &wf.Triggers[i]
		r := tryTrigger(t, &ev, &d.Checks)
		if r.matched {
			d.Matched = true
			d.Trigger = t.Type
			d.Reason = r.reason
			d.Inputs = r.inputs
			return d
		}
		if r.reason != "" {
			if failed != "" {
				failed += "; "
			}
			failed += t.Type + " trigger: " + r.reason
		}
	}
	switch {
	case failed != "":
		d.Reason = failed
	case ev.Kind == KindCreate:
		d.Reason = "no trigger for event kind create: kici runs on the push delivery GitHub sends for the same ref"
	default:
		d.Reason = "no trigger for event kind " + quoteIfEmpty(ev.Kind)
	}
	return d
}

// result is the outcome of trying one trigger. reason is empty when the
// trigger is of another kind than the event; otherwise it explains the
// match or the first filter that failed.
type result struct {
	matched bool
	reason  string
	inputs  map[string]string
}

// triggerKind is the event kind a trigger type matches; "" for an unknown
// trigger type, which matches nothing.
func triggerKind(typ string) string {
	switch typ {
	case workflow.TriggerPush:
		return KindPush
	case workflow.TriggerTag:
		return KindTag
	case workflow.TriggerPullRequest:
		return KindPullRequest
	case workflow.TriggerManual:
		return KindManual
	case workflow.TriggerSchedule:
		return KindSchedule
	}
	return ""
}

// tryTrigger matches one trigger, appending its checks to checks.
func tryTrigger(t *workflow.Trigger, ev *Event, checks *[]Check) result {
	want := triggerKind(t.Type)
	kindOK := want != "" && want == ev.Kind
	expected := want
	if want == "" {
		expected = "(unknown trigger type)"
	}
	*checks = append(*checks, Check{Trigger: t.Type, Field: "kind", Expected: expected, Actual: ev.Kind, OK: kindOK})
	if !kindOK {
		return result{}
	}
	f := filters{t: t, ev: ev, checks: checks}
	switch t.Type {
	case workflow.TriggerPush:
		f.branches("branch")
		f.paths()
	case workflow.TriggerTag:
		f.tags()
	case workflow.TriggerPullRequest:
		f.branches("base branch")
		f.types()
		f.paths()
	case workflow.TriggerManual:
		f.inputs()
	case workflow.TriggerSchedule:
		f.cron()
	}
	if f.failed != "" {
		return result{reason: f.failed}
	}
	return result{matched: true, reason: matchedReason(t.Type, ev, f.passed[:f.npassed]), inputs: f.resolved}
}

// matchedReason is the Decision.Reason of a match: the event in words and
// the filters it passed.
func matchedReason(typ string, ev *Event, passed []passedFilter) string {
	var b strings.Builder
	describeEvent(&b, ev)
	b.WriteString(" matched ")
	if len(passed) == 0 {
		b.WriteString("the ")
		b.WriteString(typ)
		b.WriteString(" trigger")
		return b.String()
	}
	for i, p := range passed {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.field)
		b.WriteByte(' ')
		b.WriteString(p.expected)
		if p.note != "" {
			b.WriteString(" (")
			b.WriteString(p.note)
			b.WriteByte(')')
		}
	}
	return b.String()
}

// describeEvent writes the event in a few words: "push to main",
// "tag v1.0", "pull_request opened into main from feature", ...
func describeEvent(b *strings.Builder, ev *Event) {
	switch ev.Kind {
	case KindPush:
		b.WriteString("push to ")
		b.WriteString(ev.Branch)
	case KindTag:
		b.WriteString("tag ")
		b.WriteString(ev.Tag)
	case KindPullRequest:
		b.WriteString("pull_request ")
		b.WriteString(ev.Action)
		b.WriteString(" into ")
		b.WriteString(ev.BaseBranch)
		if ev.HeadBranch != "" {
			b.WriteString(" from ")
			b.WriteString(ev.HeadBranch)
		}
	case KindManual:
		b.WriteString("manual run on ")
		b.WriteString(refName(ev))
	case KindSchedule:
		b.WriteString("schedule ")
		b.WriteString(quote(ev.Cron))
		b.WriteString(" on ")
		b.WriteString(refName(ev))
	default:
		b.WriteString(ev.Kind)
		b.WriteString(" event")
	}
}

// refName is the short name of the event's ref for a reason.
func refName(ev *Event) string {
	switch {
	case ev.Branch != "":
		return ev.Branch
	case ev.Tag != "":
		return "tag " + ev.Tag
	case ev.Ref != "":
		return ev.Ref
	}
	return "the default branch"
}

func quoteIfEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}
