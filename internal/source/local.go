package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/workflow"
)

// Local is a git repository on the orchestrator's host (a work tree or a
// bare repository), read with the git CLI. Agents get its code as an
// archive from the orchestrator. A Local holds no mutable state.
type Local struct {
	// Path is the repository's directory; required.
	Path string
	// Timeout bounds each git command except the archive; zero means one
	// minute.
	Timeout time.Duration
	// ArchiveTimeout bounds writing an archive; zero means 30 minutes.
	ArchiveTimeout time.Duration

	mu sync.Mutex
	r  *repo
}

// Validate reports the first bad field.
func (l *Local) Validate() error {
	if l.Path == "" {
		return errors.New("local source: Path is required")
	}
	if l.Timeout < 0 || l.ArchiveTimeout < 0 {
		return errors.New("local source: timeouts must not be negative")
	}
	return nil
}

func (l *Local) repo() (*repo, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.r == nil {
		l.r = newRepo(l.Path, orDefault(l.Timeout, defaultGitTimeout), orDefault(l.ArchiveTimeout, defaultArchiveTimeout), nil)
	}
	return l.r, nil
}

// Close stops the git process the Local keeps, if one runs. A Local may
// be used after Close: it starts a new one.
func (l *Local) Close() error {
	l.mu.Lock()
	r := l.r
	l.mu.Unlock()
	if r != nil {
		r.cat.close()
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Resolve implements Source.
func (l *Local) Resolve(ctx context.Context, ref string) (string, error) {
	r, err := l.repo()
	if err != nil {
		return "", err
	}
	sha, err := r.resolve(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("local repository %q: %w", l.Path, err)
	}
	return sha, nil
}

// Workflows implements Source.
func (l *Local) Workflows(ctx context.Context, sha string) ([]workflow.File, []byte, error) {
	r, err := l.repo()
	if err != nil {
		return nil, nil, err
	}
	files, lock, err := r.workflows(ctx, sha)
	if err != nil {
		return nil, nil, fmt.Errorf("local repository %q: %w", l.Path, err)
	}
	return files, lock, nil
}

// Archive implements Source.
func (l *Local) Archive(ctx context.Context, sha string, w io.Writer) error {
	r, err := l.repo()
	if err != nil {
		return err
	}
	if err := r.archive(ctx, sha, w); err != nil {
		return fmt.Errorf("local repository %q: %w", l.Path, err)
	}
	return nil
}

// ChangedFiles implements Source.
func (l *Local) ChangedFiles(ctx context.Context, before, after string) ([]string, error) {
	r, err := l.repo()
	if err != nil {
		return nil, err
	}
	paths, err := r.changedFiles(ctx, before, after)
	if err != nil {
		return nil, fmt.Errorf("local repository %q: %w", l.Path, err)
	}
	return paths, nil
}

// MergeBaseFiles implements Source.
func (l *Local) MergeBaseFiles(ctx context.Context, base, head string) ([]string, error) {
	r, err := l.repo()
	if err != nil {
		return nil, err
	}
	paths, err := r.mergeBaseFiles(ctx, base, head)
	if err != nil {
		return nil, fmt.Errorf("local repository %q: %w", l.Path, err)
	}
	return paths, nil
}

// PullRequestFiles implements Source with git: the pull request's head
// commit must be in the repository (GitHub keeps a fork's under
// refs/pull/N/head).
func (l *Local) PullRequestFiles(ctx context.Context, number int, base, head string) ([]string, error) {
	paths, err := l.MergeBaseFiles(ctx, base, head)
	if err != nil {
		return nil, fmt.Errorf("pull request #%d: %w", number, err)
	}
	return paths, nil
}

// CloneURL returns no URL: agents download the archive from the
// orchestrator.
func (l *Local) CloneURL() (string, []string) { return "", nil }
