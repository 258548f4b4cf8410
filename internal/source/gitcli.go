package source

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/workflow"
)

// Defaults of the git timeouts.
const (
	defaultGitTimeout     = time.Minute
	defaultArchiveTimeout = 30 * time.Minute
	defaultFetchTimeout   = 10 * time.Minute
	// killGrace is how long git may take to stop after being interrupted.
	killGrace = 5 * time.Second
	// maxGitOutput bounds what is collected from one git command's stdout.
	maxGitOutput = 64 << 20
	// maxStderr bounds the stderr kept for an error message.
	maxStderr = 4 << 10
)

// gitConfig is passed to every git command: never run a filesystem
// monitor hook, and never allow the ext:: transport (which runs commands).
var gitConfig = []string{"-c", "core.fsmonitor=false", "-c", "protocol.ext.allow=never"}

// gitEnv is the environment of git commands: the orchestrator's, without
// the variables that would point git at another repository, and with
// prompts turned off.
func gitEnv() []string {
	drop := map[string]bool{
		"GIT_DIR": true, "GIT_WORK_TREE": true, "GIT_INDEX_FILE": true, "GIT_OBJECT_DIRECTORY": true,
		"GIT_ALTERNATE_OBJECT_DIRECTORIES": true, "GIT_COMMON_DIR": true, "GIT_NAMESPACE": true,
		"GIT_PREFIX": true, "GIT_CEILING_DIRECTORIES": true, "GIT_DISCOVERY_ACROSS_FILESYSTEM": true,
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	return append(env, "GIT_TERMINAL_PROMPT=0", "GCM_INTERACTIVE=never", "LC_ALL=C")
}

// gitError is a git command that failed. Its message passes through
// redact, which hides the credentials of a clone URL.
type gitError struct {
	args   []string
	code   int // exit code; -1 when git did not exit by itself
	stderr string
	err    error
	redact func(string) string
}

func (e *gitError) Error() string {
	msg := "git " + strings.Join(e.args, " ") + ": " + e.err.Error()
	if e.stderr != "" {
		msg += ": " + e.stderr
	}
	if e.redact != nil {
		msg = e.redact(msg)
	}
	return msg
}

func (e *gitError) Unwrap() error { return e.err }

// exitCode returns the exit code of a failed git command, or -1.
func exitCode(err error) int {
	var ge *gitError
	if errors.As(err, &ge) {
		return ge.code
	}
	return -1
}

// git runs one git command in dir (with -C) within timeout, feeding it
// stdin and writing its standard output to stdout. The error names the
// command and holds git's stderr, with redact applied to both.
func runGit(ctx context.Context, timeout time.Duration, dir string, stdin io.Reader, stdout io.Writer, redact func(string) string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	full := append(append(append([]string(nil), gitConfig...), "-C", dir), args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = gitEnv()
	cmd.Stdin = stdin
	cmd.Stdout = stdout
	var stderr limitedBuffer
	stderr.limit = maxStderr
	cmd.Stderr = &stderr
	cmd.WaitDelay = killGrace
	setProcessGroup(cmd)
	err := cmd.Run()
	if ctx.Err() != nil {
		killGroup(cmd) // a transport helper git started must not outlive it
	}
	if err == nil {
		return nil
	}
	code := -1
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		code = ee.ExitCode()
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
	}
	return &gitError{args: args, code: code, stderr: strings.TrimSpace(stderr.String()), err: err, redact: redact}
}

// limitedBuffer collects up to limit bytes and fails beyond them (or, for
// stderr, drops the rest).
type limitedBuffer struct {
	bytes.Buffer
	limit    int
	failOver bool
}

var errOutputTooLarge = errors.New("git output too large")

func (b *limitedBuffer) Write(p []byte) (int, error) {
	room := b.limit - b.Len()
	if len(p) > room {
		if b.failOver {
			return 0, errOutputTooLarge
		}
		b.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// repo runs read-only git commands on one repository directory (a work
// tree or a bare repository). Every command reads objects only: nothing
// looks at a work tree or runs the repository's hooks.
type repo struct {
	dir            string
	timeout        time.Duration
	archiveTimeout time.Duration
	redact         func(string) string
}

// output runs a git command and returns its standard output.
func (r *repo) output(ctx context.Context, args ...string) ([]byte, error) {
	out := limitedBuffer{limit: maxGitOutput, failOver: true}
	if err := runGit(ctx, r.timeout, r.dir, nil, &out, r.redact, args...); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// resolve returns the commit ref names; ErrNotFound if none.
func (r *repo) resolve(ctx context.Context, ref string) (string, error) {
	if err := checkRef(ref); err != nil {
		return "", err
	}
	out, err := r.output(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if exitCode(err) == 1 {
		return "", fmt.Errorf("resolve %q: %w", ref, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", ref, err)
	}
	sha := strings.TrimSpace(string(out))
	if !isFullSHA(sha) {
		return "", fmt.Errorf("resolve %q: git printed %q, not a commit sha", ref, sha)
	}
	return strings.ToLower(sha), nil
}

// hasCommit reports whether the repository holds commit sha.
func (r *repo) hasCommit(ctx context.Context, sha string) (bool, error) {
	_, err := r.output(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", sha+"^{commit}")
	if exitCode(err) == 1 {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up commit %q: %w", sha, err)
	}
	return true, nil
}

// needCommit returns an error wrapping ErrNotFound unless the repository
// holds commit sha.
func (r *repo) needCommit(ctx context.Context, sha string) error {
	ok, err := r.hasCommit(ctx, sha)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("commit %q: %w", sha, ErrNotFound)
	}
	return nil
}

// treeEntry is one line of git ls-tree -l.
type treeEntry struct {
	mode, typ, object string
	size              int64
	path              string
}

// workflows reads the workflow files and the lock at sha.
func (r *repo) workflows(ctx context.Context, sha string) ([]workflow.File, []byte, error) {
	if err := checkSHA("commit", sha); err != nil {
		return nil, nil, err
	}
	out, err := r.output(ctx, "ls-tree", "-z", "-l", "--end-of-options", sha, "--", workflow.WorkflowsDir+"/", workflow.LockPath)
	if err != nil {
		// Only now ask whether the commit exists, so that the usual case
		// (it does) costs one git process fewer on every trigger.
		if nerr := r.needCommit(ctx, sha); nerr != nil {
			return nil, nil, fmt.Errorf("read workflows: %w", nerr)
		}
		return nil, nil, fmt.Errorf("read workflows at %q: %w", sha, err)
	}
	entries, err := parseTree(out)
	if err != nil {
		return nil, nil, fmt.Errorf("read workflows at %q: %w", sha, err)
	}
	var wanted []treeEntry
	for _, e := range entries {
		// Regular files only: a symlink's blob is its target, a gitlink
		// is a submodule.
		if e.typ != "blob" || (e.mode != "100644" && e.mode != "100755") {
			continue
		}
		if e.path != workflow.LockPath && !workflow.IsWorkflowFile(e.path) {
			continue
		}
		if e.size > MaxFileBytes {
			return nil, nil, fmt.Errorf("read workflows at %q: %s is %d bytes, over the limit of %d", sha, e.path, e.size, MaxFileBytes)
		}
		wanted = append(wanted, e)
	}
	count := 0
	for _, e := range wanted {
		if e.path != workflow.LockPath {
			count++
		}
	}
	if err := workflow.CheckFileCount(count); err != nil {
		return nil, nil, fmt.Errorf("read workflows at %q: %w", sha, err)
	}
	blobs, err := r.catBlobs(ctx, wanted)
	if err != nil {
		return nil, nil, fmt.Errorf("read workflows at %q: %w", sha, err)
	}
	files := []workflow.File{}
	var lock []byte
	for i, e := range wanted {
		if e.path == workflow.LockPath {
			lock = blobs[i]
			continue
		}
		files = append(files, workflow.File{Path: e.path, Data: blobs[i]})
	}
	slices.SortFunc(files, func(a, b workflow.File) int { return strings.Compare(a.Path, b.Path) })
	return files, lock, nil
}

// parseTree parses the output of git ls-tree -z -l.
func parseTree(out []byte) ([]treeEntry, error) {
	var entries []treeEntry
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		meta, path, ok := bytes.Cut(rec, []byte{'\t'})
		fields := strings.Fields(string(meta))
		if !ok || len(fields) != 4 {
			return nil, fmt.Errorf("unexpected ls-tree line %q", rec)
		}
		e := treeEntry{mode: fields[0], typ: fields[1], object: fields[2], path: string(path), size: -1}
		if fields[3] != "-" {
			n, err := strconv.ParseInt(fields[3], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("unexpected ls-tree size in %q", rec)
			}
			e.size = n
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// catBlobs reads the blobs of entries with one git cat-file --batch.
func (r *repo) catBlobs(ctx context.Context, entries []treeEntry) ([][]byte, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	var in bytes.Buffer
	for _, e := range entries {
		if !isHex(e.object) {
			return nil, fmt.Errorf("unexpected object name %q", e.object)
		}
		in.WriteString(e.object + "\n")
	}
	out := limitedBuffer{limit: maxGitOutput, failOver: true}
	if err := runGit(ctx, r.timeout, r.dir, &in, &out, r.redact, "cat-file", "--batch"); err != nil {
		return nil, err
	}
	br := bufio.NewReader(&out)
	blobs := make([][]byte, len(entries))
	for i, e := range entries {
		head, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("cat-file: short output for %s", e.path)
		}
		f := strings.Fields(head)
		if len(f) != 3 || f[1] != "blob" {
			return nil, fmt.Errorf("cat-file: unexpected header %q for %s", strings.TrimSpace(head), e.path)
		}
		n, err := strconv.Atoi(f[2])
		if err != nil || n > MaxFileBytes {
			return nil, fmt.Errorf("cat-file: unexpected size in %q for %s", strings.TrimSpace(head), e.path)
		}
		data := make([]byte, n+1) // the content and its trailing newline
		if _, err := io.ReadFull(br, data); err != nil {
			return nil, fmt.Errorf("cat-file: short content for %s", e.path)
		}
		blobs[i] = data[:n]
	}
	return blobs, nil
}

// archive writes a tar.gz of the tree at sha. git writes the tar; the
// compression is done here, so no configured tar filter command runs.
func (r *repo) archive(ctx context.Context, sha string, w io.Writer) error {
	if err := checkSHA("commit", sha); err != nil {
		return err
	}
	if err := r.needCommit(ctx, sha); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	gz := gzip.NewWriter(w)
	if err := runGit(ctx, r.archiveTimeout, r.dir, nil, gz, r.redact, "archive", "--format=tar", "--end-of-options", sha); err != nil {
		// No gzip trailer: the reader sees a broken archive, not a short one.
		return fmt.Errorf("archive %q: %w", sha, err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("archive %q: %w", sha, err)
	}
	return nil
}

// changedFiles lists the paths that differ between two commits.
func (r *repo) changedFiles(ctx context.Context, before, after string) ([]string, error) {
	if err := checkSHA("after", after); err != nil {
		return nil, err
	}
	if unknownBefore(before) {
		return nil, nil
	}
	if err := checkSHA("before", before); err != nil {
		return nil, err
	}
	for _, sha := range []string{before, after} {
		if err := r.needCommit(ctx, sha); err != nil {
			return nil, fmt.Errorf("list changed files: %w", err)
		}
	}
	return r.diffNames(ctx, before, after)
}

// mergeBaseFiles lists the paths head changes since its merge base with
// base; nil when they share no history.
func (r *repo) mergeBaseFiles(ctx context.Context, base, head string) ([]string, error) {
	if err := checkSHA("base", base); err != nil {
		return nil, err
	}
	if err := checkSHA("head", head); err != nil {
		return nil, err
	}
	for _, sha := range []string{base, head} {
		if err := r.needCommit(ctx, sha); err != nil {
			return nil, fmt.Errorf("list changed files: %w", err)
		}
	}
	out, err := r.output(ctx, "merge-base", "--end-of-options", base, head)
	if exitCode(err) == 1 {
		return nil, nil // no common ancestor
	}
	if err != nil {
		return nil, fmt.Errorf("merge base of %s and %s: %w", base, head, err)
	}
	mb := strings.TrimSpace(string(out))
	if !isFullSHA(mb) {
		return nil, fmt.Errorf("merge base of %s and %s: git printed %q, not a commit sha", base, head, mb)
	}
	return r.diffNames(ctx, mb, head)
}

// diffNames lists the paths that differ between two commits, a rename as
// its two paths.
func (r *repo) diffNames(ctx context.Context, before, after string) ([]string, error) {
	out, err := r.output(ctx, "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv",
		"--end-of-options", before, after, "--")
	if err != nil {
		return nil, fmt.Errorf("list changed files %s..%s: %w", before, after, err)
	}
	var paths []string
	for _, p := range bytes.Split(out, []byte{0}) {
		if len(p) > 0 {
			paths = append(paths, string(p))
		}
	}
	return sortedUnique(paths), nil
}
