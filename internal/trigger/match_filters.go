package trigger

import (
	"slices"
	"strconv"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/kici-dev/kici/internal/workflow"
)

// filters runs the filters of one trigger against one event. The first
// filter that fails sets failed; the filters after it are not evaluated.
type filters struct {
	t      *workflow.Trigger
	ev     *Event
	checks *[]Check
	// failed is the reason of the filter that failed, without the
	// "<type> trigger: " prefix.
	failed string
	// passed lists the filters passed, for the reason of a match. A
	// trigger sets at most four filters; the array keeps them off the heap.
	passed  [4]passedFilter
	npassed int
	// resolved are the inputs of a manual trigger.
	resolved map[string]string
}

// passedFilter is one filter passed: its field, expected value, and a note
// such as the file that satisfied a path filter.
type passedFilter struct {
	field, expected, note string
}

func (f *filters) pass(field, expected, note string) {
	if f.npassed < len(f.passed) {
		f.passed[f.npassed] = passedFilter{field: field, expected: expected, note: note}
		f.npassed++
	}
}

func (f *filters) check(field, expected, actual string, ok bool) {
	*f.checks = append(*f.checks, Check{Trigger: f.t.Type, Field: field, Expected: expected, Actual: actual, OK: ok})
}

// branches checks branches and branches-ignore against the event's Branch
// (the base branch of a pull request, which noun names).
func (f *filters) branches(noun string) {
	if f.failed != "" {
		return
	}
	branch := f.ev.Branch
	if len(f.t.Branches) > 0 {
		exp := patternList(f.t.Branches)
		ok := anyGlob(f.t.Branches, branch)
		f.check("branches", exp, branch, ok)
		if !ok {
			f.failed = noun + " " + quote(branch) + " not in branches " + exp
			return
		}
		f.pass("branches", exp, "")
	}
	if len(f.t.BranchesIgnore) > 0 {
		exp := patternList(f.t.BranchesIgnore)
		ok := !anyGlob(f.t.BranchesIgnore, branch)
		f.check("branches-ignore", exp, branch, ok)
		if !ok {
			f.failed = noun + " " + quote(branch) + " matched branches-ignore " + exp
			return
		}
		f.pass("branches-ignore", exp, "not ignored")
	}
}

// tags checks tags against the event's Tag.
func (f *filters) tags() {
	if f.failed != "" || len(f.t.Tags) == 0 {
		return
	}
	exp := patternList(f.t.Tags)
	ok := anyGlob(f.t.Tags, f.ev.Tag)
	f.check("tags", exp, f.ev.Tag, ok)
	if !ok {
		f.failed = "tag " + quote(f.ev.Tag) + " not in tags " + exp
		return
	}
	f.pass("tags", exp, "")
}

// types checks a pull request's action against types, or against the
// default set when types is empty.
func (f *filters) types() {
	if f.failed != "" {
		return
	}
	types, explicit := f.t.Types, true
	if len(types) == 0 {
		types, explicit = defaultPRTypes, false
	}
	exp := patternList(types)
	if !explicit {
		exp += " (default)"
	}
	ok := slices.Contains(types, f.ev.Action)
	f.check("types", exp, f.ev.Action, ok)
	if !ok {
		f.failed = "action " + quote(f.ev.Action) + " not in types " + exp
		return
	}
	if explicit {
		f.pass("types", exp, "")
	}
}

// paths applies the path filter rule of Match to the event's changed files.
func (f *filters) paths() {
	if f.failed != "" || len(f.t.Paths) == 0 {
		return
	}
	ps := f.t.Paths
	exp := patternList(ps)
	switch {
	case !f.ev.ChangedFilesKnown:
		f.check("paths", exp, "(changed files unknown)", false)
		why := ""
		if f.ev.ChangedFilesWarning != "" {
			why = " (" + f.ev.ChangedFilesWarning + ")"
		}
		f.failed = "path filter " + exp + ": the changed files are unknown" + why + ", so a path filter cannot match"
		return
	case len(f.ev.ChangedFiles) == 0:
		f.check("paths", exp, "(no changed files)", false)
		f.failed = "path filter " + exp + ": no files changed, so a path filter cannot match"
		return
	}
	hit, left := matchPaths(ps, f.ev.ChangedFiles)
	if hit != "" {
		f.check("paths", exp, hit, true)
		f.pass("paths", exp, hit)
		return
	}
	actual := strconv.Itoa(len(f.ev.ChangedFiles)) + " changed files"
	f.check("paths", exp, actual, false)
	if left == 0 {
		f.failed = "path filter: every changed file is excluded by " + exp
		return
	}
	f.failed = "path filter: no changed file matched " + exp
}

// matchPaths applies a non-empty path filter to a non-empty list of files:
// hit is the first file that satisfies it ("" when none does) and left
// counts the files no "!" pattern excluded, up to and including hit. It does
// not allocate.
func matchPaths(patterns, files []string) (hit string, left int) {
	onlyExclusions := true
	for _, p := range patterns {
		if !strings.HasPrefix(p, "!") {
			onlyExclusions = false
			break
		}
	}
	for _, file := range files {
		if excluded(patterns, file) {
			continue
		}
		left++
		if onlyExclusions {
			return file, left
		}
		for _, p := range patterns {
			if !strings.HasPrefix(p, "!") && glob(p, file) {
				return file, left
			}
		}
	}
	return "", left
}

// excluded reports whether any "!" pattern matches file.
func excluded(patterns []string, file string) bool {
	for _, p := range patterns {
		if strings.HasPrefix(p, "!") && glob(p[1:], file) {
			return true
		}
	}
	return false
}

// cron checks that the schedule that fired is this trigger's. Specs are
// compared field by field, so spacing does not matter.
func (f *filters) cron() {
	if f.failed != "" {
		return
	}
	ok := sameFields(f.t.Cron, f.ev.Cron)
	f.check("cron", f.t.Cron, f.ev.Cron, ok)
	if !ok {
		f.failed = "cron " + quote(f.t.Cron) + " is not the schedule that fired (" + quote(f.ev.Cron) + ")"
		return
	}
	f.pass("cron", quote(f.t.Cron), "")
}

// sameFields reports whether a and b have the same whitespace-separated
// fields, without allocating.
func sameFields(a, b string) bool {
	for {
		a = strings.TrimLeft(a, " \t")
		b = strings.TrimLeft(b, " \t")
		if a == "" || b == "" {
			return a == b
		}
		fa, fb := a, b
		if i := strings.IndexAny(a, " \t"); i >= 0 {
			fa, a = a[:i], a[i:]
		} else {
			a = ""
		}
		if i := strings.IndexAny(b, " \t"); i >= 0 {
			fb, b = b[:i], b[i:]
		} else {
			b = ""
		}
		if fa != fb {
			return false
		}
	}
}

// anyGlob reports whether any pattern matches name.
func anyGlob(patterns []string, name string) bool {
	for _, p := range patterns {
		if glob(p, name) {
			return true
		}
	}
	return false
}

// glob matches name against a doublestar pattern. A malformed pattern
// matches nothing; the workflow compiler rejects such patterns.
func glob(pattern, name string) bool {
	ok, err := doublestar.Match(pattern, name)
	return ok && err == nil
}

// patternList renders patterns as "[a b c]", the way Go prints a []string.
func patternList(ps []string) string {
	n := 2
	for _, p := range ps {
		n += len(p) + 1
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('[')
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p)
	}
	b.WriteByte(']')
	return b.String()
}

func quote(s string) string {
	return strconv.Quote(s)
}
