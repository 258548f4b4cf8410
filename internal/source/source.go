package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kici-dev/kici/internal/workflow"
)

// Errors that callers act on. Each error a Source returns for these cases
// wraps one of them.
var (
	// ErrInvalidRef is returned for a ref or sha that is empty, could be
	// taken as an option, holds spaces or control characters, or (where a
	// sha is required) is not a full hex object name.
	ErrInvalidRef = errors.New("invalid ref")
	// ErrNotFound is returned for a ref, commit or repository that does
	// not exist (or, on GitHub, that the token may not see).
	ErrNotFound = errors.New("not found")
	// ErrUnauthorized is returned when GitHub refuses the token (HTTP 401).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden is returned when GitHub forbids the request for a reason
	// other than a rate limit (HTTP 403).
	ErrForbidden = errors.New("forbidden")
	// ErrRateLimited is returned when GitHub's rate limit was hit; the
	// *APIError says when to try again.
	ErrRateLimited = errors.New("rate limited")
	// ErrTooManyChangedFiles is returned when a comparison changes more
	// files than the source can list (GitHub: 3000 for a pull request, 300
	// for a comparison); the changed files are then unknown.
	ErrTooManyChangedFiles = errors.New("too many changed files to list")
)

// Kinds of source, as registered through the API (store.SourceKind has the
// same values).
const (
	KindLocal  = "local"
	KindGit    = "git"
	KindGitHub = "github"
)

// MaxFileBytes bounds a workflow file or lock read from a source.
const MaxFileBytes = 1 << 20

// Source is a repository that workflows and code come from.
//
// All methods may be called concurrently. ctx bounds each call; a
// cancelled ctx makes a call return its error (git processes are stopped).
// A failed call leaves nothing to clean up.
type Source interface {
	// Resolve returns the full commit sha that ref names: a branch or tag
	// name, a full ref ("refs/heads/main", "refs/tags/v1"), or a commit
	// sha. A ref that names nothing gives ErrNotFound.
	Resolve(ctx context.Context, ref string) (sha string, err error)
	// Workflows returns every workflow file at commit sha (each
	// .kici/workflows/*.yml or *.yaml that workflow.IsWorkflowFile
	// accepts), by path, and the committed lock (workflow.LockPath), nil
	// when absent. A commit without workflows gives an empty list and no
	// error; an unknown commit gives ErrNotFound.
	Workflows(ctx context.Context, sha string) (files []workflow.File, lock []byte, err error)
	// Archive writes a tar.gz of the tree at commit sha to w, with paths
	// relative to the repository root. If it fails after writing began,
	// what w received is not a complete archive (no gzip trailer).
	Archive(ctx context.Context, sha string, w io.Writer) error
	// ChangedFiles returns the paths that differ between commits before and
	// after, sorted, both sides of a rename included; an empty, non-nil
	// list when nothing changed. With before empty or all zeros (a new
	// branch) it returns nil: unknown. GitHub also returns nil when the
	// comparison is too large for its API to list every file.
	ChangedFiles(ctx context.Context, before, after string) ([]string, error)
	// MergeBaseFiles returns the paths that head changes since it forked
	// from base: the diff from the merge base of commits base and head to
	// head, sorted, both sides of a rename included, deletions included.
	// It is what a new branch (base: the default branch's head) adds. Nil
	// means unknown: no common history. A comparison too large to list
	// gives an error wrapping ErrTooManyChangedFiles.
	MergeBaseFiles(ctx context.Context, base, head string) ([]string, error)
	// PullRequestFiles returns the paths pull request number changes: the
	// diff from the merge base of its base commit and its head commit.
	// Local and git sources diff base and head with git (number is only
	// named in errors); GitHub lists the pull request's files with its API,
	// up to 3000, and past that gives an error wrapping
	// ErrTooManyChangedFiles.
	PullRequestFiles(ctx context.Context, number int, base, head string) ([]string, error)
	// CloneURL returns the URL agents clone the code from, and the
	// substrings of it (credentials) that must be masked wherever it could
	// appear; an empty URL means agents download Archive's output from the
	// orchestrator instead.
	CloneURL() (url string, masks []string)
}

var (
	_ Source = (*Local)(nil)
	_ Source = (*Git)(nil)
	_ Source = (*GitHub)(nil)
)

// maxRefLen bounds a ref a caller passes.
const maxRefLen = 1024

// checkRef refuses a ref that could be taken as an option, or that holds
// characters no git ref name may hold.
func checkRef(ref string) error {
	switch {
	case ref == "":
		return fmt.Errorf("%w: empty", ErrInvalidRef)
	case len(ref) > maxRefLen:
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidRef, maxRefLen)
	case ref[0] == '-':
		return fmt.Errorf("%w: %q starts with \"-\"", ErrInvalidRef, ref)
	}
	for _, r := range ref {
		if r <= ' ' || r == 0x7f || r == '\\' {
			return fmt.Errorf("%w: %q holds a space, control character or backslash", ErrInvalidRef, ref)
		}
	}
	return nil
}

// checkSHA requires a full object name: 40 (SHA-1) or 64 (SHA-256) hex
// digits.
func checkSHA(what, sha string) error {
	if (len(sha) == 40 || len(sha) == 64) && isHex(sha) {
		return nil
	}
	return fmt.Errorf("%w: %s %q is not a full commit sha", ErrInvalidRef, what, sha)
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return s != ""
}

// isFullSHA reports whether ref looks like a full commit sha.
func isFullSHA(ref string) bool { return checkSHA("", ref) == nil }

// unknownBefore reports whether a push's before commit says nothing: empty
// or all zeros (a branch that did not exist).
func unknownBefore(before string) bool {
	return strings.Trim(before, "0") == ""
}

// sortedUnique sorts paths and drops repeats; it never returns nil.
func sortedUnique(paths []string) []string {
	if paths == nil {
		return []string{}
	}
	slices.Sort(paths)
	return slices.Compact(paths)
}
