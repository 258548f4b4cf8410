package workflow

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem found in a workflow file, at a 1-based line and
// column. Col is 1 when the YAML parser could not say.
type Error struct {
	File string
	Line int
	Col  int
	Msg  string
}

// Error formats the problem as FILE:LINE:COL: message, the form editors and
// CI log viewers link to.
func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// ErrorList is every problem found by one Compile call, sorted by file,
// line and column. It is returned as an error only when non-empty.
type ErrorList []*Error

// Error joins the problems, one per line.
func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

func (l ErrorList) sort() {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// WithPrefix returns a copy of the list whose file names are joined to
// prefix (a directory), so that the CLI can print paths relative to where
// the user stands.
func (l ErrorList) WithPrefix(join func(string) string) ErrorList {
	out := make(ErrorList, len(l))
	for i, e := range l {
		c := *e
		c.File = join(e.File)
		out[i] = &c
	}
	return out
}
