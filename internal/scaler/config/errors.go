package config

import (
	"fmt"
	"strings"
)

// Error is one problem in a scaler configuration file, at a 1-based line
// and column. Col is 1 when the YAML parser could not say.
type Error struct {
	File string
	Line int
	Col  int
	// Path locates the problem in the document, as in
	// "scalers[1].labelSets[0].image"; the index of a scaler counts within
	// its own file. Empty for a problem with the file as a whole.
	Path string
	Msg  string
}

// Error formats the problem as FILE:LINE:COL: PATH: message, the form
// editors and CI log viewers link to.
func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s: %s", e.File, e.Line, e.Col, e.Path, e.Msg)
}

// ErrorList is every problem found by one Parse or Load call: the main
// file's first, then each drop-in's in the order they were merged, each
// file's by line and column. It is returned as an error only when
// non-empty.
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
