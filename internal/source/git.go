package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kici-dev/kici/internal/workflow"
)

// Git is a repository reached by a clone URL. It is mirrored into a bare
// repository in CacheDir (git clone --mirror the first time it is needed,
// git fetch when a ref must be refreshed or a commit is not there yet) and
// then read like a Local. Agents get its code as an archive from the
// orchestrator, so only the orchestrator needs the URL's credentials.
//
// Use a *Git, one per cache directory, and do not copy it. Its fetches are
// serialized, and reads never overlap a fetch; reads run side by side.
type Git struct {
	// URL is the clone URL: https://, http://, ssh://, git:// or file://,
	// or scp-like user@host:path; required. Credentials in it are kept out
	// of error messages.
	URL string
	// CacheDir is the directory of the bare mirror, created on first use;
	// required. It must be empty, missing, or a mirror made by a Git.
	CacheDir string
	// Timeout bounds each git command that reads the mirror, except the
	// archive; zero means one minute.
	Timeout time.Duration
	// ArchiveTimeout bounds writing an archive; zero means 30 minutes.
	ArchiveTimeout time.Duration
	// FetchTimeout bounds the first clone and each fetch; zero means 10
	// minutes.
	FetchTimeout time.Duration

	mu sync.RWMutex // held for writing by clone and fetch
	// ready is set once the mirror exists and points at URL.
	ready bool
	// fetches counts the clones and fetches started, so a caller can tell
	// whether one started after it asked and skip its own.
	fetches atomic.Uint64

	rmu sync.Mutex
	r   *repo // made on first use; its cat-file process restarts after each fetch
}

// Validate reports the first bad field.
func (g *Git) Validate() error {
	if err := CheckCloneURL(g.URL); err != nil {
		return fmt.Errorf("git source: URL: %w", err)
	}
	if g.CacheDir == "" {
		return errors.New("git source: CacheDir is required")
	}
	if g.Timeout < 0 || g.ArchiveTimeout < 0 || g.FetchTimeout < 0 {
		return errors.New("git source: timeouts must not be negative")
	}
	return nil
}

// maxCloneURL bounds a clone URL, in bytes.
const maxCloneURL = 4096

// CheckCloneURL accepts the URL forms git clones from without running a
// command: no ext:: or other "transport::" URLs, nothing that starts with
// "-", no plain paths (use a Local, or file://). Registering a git source
// (POST /api/v1/sources) and reading one (Git.Validate) both check with
// it, so what is registered is what can be read.
func CheckCloneURL(raw string) error {
	switch {
	case raw == "":
		return errors.New("empty")
	case len(raw) > maxCloneURL:
		return fmt.Errorf("%d bytes, want at most %d", len(raw), maxCloneURL)
	case raw[0] == '-':
		return fmt.Errorf("%q starts with \"-\"", raw)
	case strings.Contains(raw, "::"):
		return fmt.Errorf("%q: transport:: URLs are not allowed", raw)
	}
	for _, r := range raw {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("%q holds a space or control character", raw)
		}
	}
	if scheme, _, ok := strings.Cut(raw, "://"); ok {
		switch strings.ToLower(scheme) {
		case "https", "http", "ssh", "git", "file", "git+ssh", "ssh+git":
			return nil
		}
		return fmt.Errorf("%q: scheme %q is not one of https, http, ssh, git, file", raw, scheme)
	}
	// scp-like: [user@]host:path, with no slash before the colon.
	host, _, ok := strings.Cut(raw, ":")
	if !ok || host == "" || strings.Contains(host, "/") {
		return fmt.Errorf("%q is neither a URL nor [user@]host:path", raw)
	}
	return nil
}

// redactor returns a function that hides the credentials of a URL.
func redactor(raw string) func(string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return func(s string) string { return s }
	}
	secrets := []string{u.User.String()}
	if p, ok := u.User.Password(); ok && p != "" {
		secrets = append(secrets, p, url.QueryEscape(p))
	}
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	return func(s string) string {
		for _, sec := range secrets {
			if sec != "" {
				s = strings.ReplaceAll(s, sec, "***")
			}
		}
		return s
	}
}

func (g *Git) repo() *repo {
	g.rmu.Lock()
	defer g.rmu.Unlock()
	if g.r == nil {
		g.r = newRepo(g.CacheDir, orDefault(g.Timeout, defaultGitTimeout), orDefault(g.ArchiveTimeout, defaultArchiveTimeout), redactor(g.URL))
	}
	return g.r
}

// Close stops the git process the Git keeps for its reads, if one runs.
// A Git may be used after Close: it starts a new one.
func (g *Git) Close() error {
	g.rmu.Lock()
	r := g.r
	g.rmu.Unlock()
	if r != nil {
		r.cat.close()
	}
	return nil
}

// wrap names the source in an error.
func (g *Git) wrap(err error) error {
	return fmt.Errorf("git source %q: %w", redactor(g.URL)(g.URL), err)
}

// prepare makes sure the mirror exists and fetches from URL.
func (g *Git) prepare(ctx context.Context) error {
	g.mu.RLock()
	ready := g.ready
	g.mu.RUnlock()
	if ready {
		return nil
	}
	if err := g.Validate(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ready {
		return nil
	}
	if err := g.openMirror(ctx); err != nil {
		return g.wrap(err)
	}
	g.ready = true
	return nil
}

// openMirror checks the cache directory and clones into it if it is
// missing or empty. g.mu is held.
func (g *Git) openMirror(ctx context.Context) error {
	r := g.repo()
	entries, err := os.ReadDir(g.CacheDir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return g.clone(ctx)
	case err != nil:
		return fmt.Errorf("open mirror: %w", err)
	case len(entries) == 0:
		if err := os.Remove(g.CacheDir); err != nil {
			return fmt.Errorf("open mirror: %w", err)
		}
		return g.clone(ctx)
	}
	abs, err := filepath.Abs(g.CacheDir)
	if err != nil {
		return fmt.Errorf("open mirror: %w", err)
	}
	out, err := r.output(ctx, "rev-parse", "--is-bare-repository", "--absolute-git-dir")
	lines := strings.Fields(string(out))
	if err != nil || len(lines) != 2 || lines[0] != "true" || !sameDir(lines[1], abs) {
		return fmt.Errorf("open mirror: cache directory %q is not empty and not a bare git repository", g.CacheDir)
	}
	cur, err := r.output(ctx, "config", "--get", "remote.origin.url")
	if err != nil && exitCode(err) != 1 {
		return fmt.Errorf("open mirror: %w", err)
	}
	if strings.TrimSpace(string(cur)) != g.URL {
		// The source's URL changed since the mirror was made.
		if _, err := r.output(ctx, "config", "remote.origin.url", g.URL); err != nil {
			return fmt.Errorf("open mirror: set the remote URL: %w", err)
		}
	}
	return nil
}

func sameDir(a, b string) bool {
	ea, err1 := filepath.EvalSymlinks(a)
	eb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ea == eb
}

// ownerOnlyRepo makes git create the mirror's objects, refs and
// directories readable by their owner only, whatever the umask: the
// mirror lives in the orchestrator's data dir, which is owner-only.
const ownerOnlyRepo = "core.sharedRepository=0600"

// clone makes the mirror: git clone --mirror into a temporary directory
// beside CacheDir, renamed into place once complete, so a failed clone
// leaves nothing behind. g.mu is held.
func (g *Git) clone(ctx context.Context) error {
	parent := filepath.Dir(g.CacheDir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("clone: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, filepath.Base(g.CacheDir)+".clone-*")
	if err != nil {
		return fmt.Errorf("clone: %w", err)
	}
	g.fetches.Add(1)
	err = runGit(ctx, orDefault(g.FetchTimeout, defaultFetchTimeout), parent, nil, io.Discard, redactor(g.URL),
		"-c", ownerOnlyRepo, "clone", "--mirror", "--quiet", "--", g.URL, tmp)
	if err == nil {
		err = os.Rename(tmp, g.CacheDir)
	}
	if err != nil {
		_ = os.RemoveAll(tmp) // the error below is what matters
		return fmt.Errorf("clone: %w", err)
	}
	return nil
}

// fetch refreshes the mirror, unless a clone or fetch started after the
// caller read since from g.fetches (that one already brought what the
// caller needs).
func (g *Git) fetch(ctx context.Context, since uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fetches.Load() > since {
		return nil
	}
	g.fetches.Add(1)
	err := runGit(ctx, orDefault(g.FetchTimeout, defaultFetchTimeout), g.CacheDir, nil, io.Discard, redactor(g.URL),
		"-c", ownerOnlyRepo, "fetch", "--prune", "--quiet", "origin")
	// Whatever the fetch did, reads start on a new cat-file process, which
	// sees the refs and packs as they are now.
	g.repo().cat.restart()
	if err != nil {
		return g.wrap(fmt.Errorf("fetch: %w", err))
	}
	// git writes FETCH_HEAD under the umask, core.sharedRepository or not.
	if err := os.Chmod(filepath.Join(g.CacheDir, "FETCH_HEAD"), 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("fetch: %w", err)
	}
	return nil
}

// withCommits prepares the mirror, fetches if one of shas is missing, and
// runs fn with the mirror read-locked.
func (g *Git) withCommits(ctx context.Context, since uint64, shas []string, fn func(r *repo) error) error {
	if err := g.prepare(ctx); err != nil {
		return err
	}
	r := g.repo()
	g.mu.RLock()
	missing := false
	for _, sha := range shas {
		ok, err := r.hasCommit(ctx, sha)
		if err != nil {
			g.mu.RUnlock()
			return g.wrap(err)
		}
		missing = missing || !ok
	}
	g.mu.RUnlock()
	if missing {
		if err := g.fetch(ctx, since); err != nil {
			return err
		}
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if err := fn(r); err != nil {
		return g.wrap(err)
	}
	return nil
}

// Resolve implements Source. A branch or tag name is always looked up
// after a fetch, so it is current; a full sha the mirror already holds
// needs no fetch.
func (g *Git) Resolve(ctx context.Context, ref string) (string, error) {
	since := g.fetches.Load()
	if err := checkRef(ref); err != nil {
		return "", err
	}
	if err := g.prepare(ctx); err != nil {
		return "", err
	}
	r := g.repo()
	if isFullSHA(ref) {
		g.mu.RLock()
		ok, err := r.hasCommit(ctx, ref)
		g.mu.RUnlock()
		if err != nil {
			return "", g.wrap(err)
		}
		if ok {
			return strings.ToLower(ref), nil
		}
	}
	if err := g.fetch(ctx, since); err != nil {
		return "", err
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	sha, err := r.resolve(ctx, ref)
	if err != nil {
		return "", g.wrap(err)
	}
	return sha, nil
}

// Workflows implements Source.
func (g *Git) Workflows(ctx context.Context, sha string) (files []workflow.File, lock []byte, err error) {
	since := g.fetches.Load()
	if err := checkSHA("commit", sha); err != nil {
		return nil, nil, err
	}
	err = g.withCommits(ctx, since, []string{sha}, func(r *repo) error {
		files, lock, err = r.workflows(ctx, sha)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return files, lock, nil
}

// Archive implements Source.
func (g *Git) Archive(ctx context.Context, sha string, w io.Writer) error {
	since := g.fetches.Load()
	if err := checkSHA("commit", sha); err != nil {
		return err
	}
	return g.withCommits(ctx, since, []string{sha}, func(r *repo) error {
		return r.archive(ctx, sha, w)
	})
}

// ChangedFiles implements Source.
func (g *Git) ChangedFiles(ctx context.Context, before, after string) (paths []string, err error) {
	since := g.fetches.Load()
	if err := checkSHA("after", after); err != nil {
		return nil, err
	}
	if unknownBefore(before) {
		return nil, nil
	}
	if err := checkSHA("before", before); err != nil {
		return nil, err
	}
	err = g.withCommits(ctx, since, []string{before, after}, func(r *repo) error {
		paths, err = r.changedFiles(ctx, before, after)
		return err
	})
	if err != nil {
		return nil, err
	}
	return paths, nil
}

// MergeBaseFiles implements Source; it fetches first if the mirror lacks
// base or head.
func (g *Git) MergeBaseFiles(ctx context.Context, base, head string) (paths []string, err error) {
	since := g.fetches.Load()
	if err := checkSHA("base", base); err != nil {
		return nil, err
	}
	if err := checkSHA("head", head); err != nil {
		return nil, err
	}
	err = g.withCommits(ctx, since, []string{base, head}, func(r *repo) error {
		paths, err = r.mergeBaseFiles(ctx, base, head)
		return err
	})
	if err != nil {
		return nil, err
	}
	return paths, nil
}

// PullRequestFiles implements Source with git, on the mirror (which
// holds refs/pull/* when the remote has them).
func (g *Git) PullRequestFiles(ctx context.Context, number int, base, head string) ([]string, error) {
	paths, err := g.MergeBaseFiles(ctx, base, head)
	if err != nil {
		return nil, fmt.Errorf("pull request #%d: %w", number, err)
	}
	return paths, nil
}

// CloneURL returns no URL: agents download the archive from the
// orchestrator, and the URL's credentials stay there.
func (g *Git) CloneURL() (string, []string) { return "", nil }
