package caches

import (
	"slices"
	"strconv"

	"github.com/kici-dev/kici/internal/trigger"
)

// DefaultBranch is the fallback scope's branch when the configuration
// names none: sources do not record their default branch.
const DefaultBranch = "main"

// Scopes are the scopes one run reads and the one it writes.
type Scopes struct {
	// Write is the run's own scope, where its jobs save.
	Write string
	// Read are the scopes its jobs restore from, in order: Write first.
	Read []string
}

// Scope names.
func branchScope(b string) string { return "branch:" + b }
func tagScope(t string) string    { return "tag:" + t }
func pullScope(n int) string      { return "pull:" + strconv.Itoa(n) }

// ScopesOf returns the scopes of a run of event ev, with defaultBranch
// as the last fallback:
//
//	push or manual or schedule on branch B:  writes branch:B; reads branch:B, branch:DEFAULT
//	tag T:                                    writes tag:T;    reads tag:T, branch:DEFAULT
//	pull request N into base B:               writes pull:N;   reads pull:N, branch:B, branch:DEFAULT
//
// An event with neither branch nor tag (a manual run of a bare commit)
// writes and reads the default branch's scope. Repeated scopes are
// dropped.
func ScopesOf(ev trigger.Event, defaultBranch string) Scopes {
	if defaultBranch == "" {
		defaultBranch = DefaultBranch
	}
	var s Scopes
	switch {
	case ev.Kind == trigger.KindPullRequest:
		s.Write = pullScope(ev.Number)
		s.Read = []string{s.Write}
		if base := ev.BaseBranch; base != "" {
			s.Read = append(s.Read, branchScope(base))
		} else if ev.Branch != "" {
			s.Read = append(s.Read, branchScope(ev.Branch))
		}
	case ev.Tag != "":
		s.Write = tagScope(ev.Tag)
		s.Read = []string{s.Write}
	case ev.Branch != "":
		s.Write = branchScope(ev.Branch)
		s.Read = []string{s.Write}
	default:
		s.Write = branchScope(defaultBranch)
		s.Read = []string{s.Write}
	}
	if d := branchScope(defaultBranch); !slices.Contains(s.Read, d) {
		s.Read = append(s.Read, d)
	}
	return s
}
