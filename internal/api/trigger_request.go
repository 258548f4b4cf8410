package api

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Bounds of a trigger request's lists. A workflow name is a YAML string
// kici does not otherwise bound, so its bound here is generous; a changed
// file is a repository path.
const (
	maxTriggerWorkflows    = 100
	maxTriggerWorkflowName = 256
	maxTriggerChangedFiles = 3000
	maxChangedFilePath     = 4096
)

// checkTriggerWorkflows checks the "workflows" of a trigger request and
// returns them without duplicates, in the order given.
func checkTriggerWorkflows(names []string) ([]string, error) {
	if len(names) > maxTriggerWorkflows {
		return nil, fmt.Errorf("workflows: %d names, at most %d", len(names), maxTriggerWorkflows)
	}
	var out []string
	for i, n := range names {
		switch {
		case strings.TrimSpace(n) == "":
			return nil, fmt.Errorf("workflows[%d]: empty name", i)
		case len(n) > maxTriggerWorkflowName:
			return nil, fmt.Errorf("workflows[%d]: name of %d bytes, at most %d", i, len(n), maxTriggerWorkflowName)
		case !utf8.ValidString(n) || strings.ContainsFunc(n, isControl):
			return nil, fmt.Errorf("workflows[%d] %q: control characters or invalid UTF-8", i, n)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// checkChangedFiles checks the "changed_files" of a trigger request: at
// most maxTriggerChangedFiles repository-relative paths, each non-empty,
// at most maxChangedFilePath bytes, valid UTF-8 without NUL or other
// control characters, not absolute and without empty, "." or ".." segments. It
// returns them sorted and without duplicates, as trigger.Event holds them.
func checkChangedFiles(files []string) ([]string, error) {
	if len(files) > maxTriggerChangedFiles {
		return nil, fmt.Errorf("changed_files: %d paths, at most %d", len(files), maxTriggerChangedFiles)
	}
	for i, f := range files {
		if err := checkChangedFile(f); err != nil {
			return nil, fmt.Errorf("changed_files[%d] %q: %w", i, f, err)
		}
	}
	out := slices.Clone(files)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// checkChangedFile checks one path of changed_files.
func checkChangedFile(f string) error {
	switch {
	case f == "":
		return fmt.Errorf("empty path")
	case len(f) > maxChangedFilePath:
		return fmt.Errorf("path of %d bytes, at most %d", len(f), maxChangedFilePath)
	case strings.ContainsRune(f, 0):
		return fmt.Errorf("path holds a NUL byte")
	case !utf8.ValidString(f) || strings.ContainsFunc(f, isControl):
		return fmt.Errorf("path holds control characters or invalid UTF-8")
	case strings.HasPrefix(f, "/"):
		return fmt.Errorf("absolute path: want one relative to the repository root, like src/main.go")
	}
	for seg := range strings.SplitSeq(f, "/") {
		if seg == "" {
			return fmt.Errorf("path has an empty segment (a doubled or trailing '/')")
		}
		if seg == "." || seg == ".." {
			return fmt.Errorf("path has a %q segment: want a clean repository-relative path", seg)
		}
	}
	return nil
}

// isControl reports a C0 control character or DEL.
func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f
}
