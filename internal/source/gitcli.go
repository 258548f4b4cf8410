package source

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
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
	// cat reads objects without a fork per read.
	cat *catFile
}

// newRepo returns a repo of dir, its cat-file process not yet started.
func newRepo(dir string, timeout, archiveTimeout time.Duration, redact func(string) string) *repo {
	return &repo{dir: dir, timeout: timeout, archiveTimeout: archiveTimeout, redact: redact,
		cat: &catFile{dir: dir, timeout: timeout, idle: catFileIdle, redact: redact}}
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
	o, err := r.lookup(ctx, ref+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", ref, err)
	}
	if o.missing {
		return "", fmt.Errorf("resolve %q: %w", ref, ErrNotFound)
	}
	if o.typ != "commit" {
		return "", fmt.Errorf("resolve %q: git gave a %s, not a commit", ref, o.typ)
	}
	return o.oid, nil
}

// lookup asks the cat-file process for one object, its content read
// through and dropped. An answer of "missing" is asked again of a new
// process before it is returned.
func (r *repo) lookup(ctx context.Context, name string) (catObject, error) {
	for attempt := 0; ; attempt++ {
		objs, err := r.cat.get(ctx, []catRequest{{name: name, max: maxGitOutput}})
		var tooLarge *objectTooLargeError
		if errors.As(err, &tooLarge) {
			return tooLarge.obj, nil // the header says all that is wanted
		}
		if err != nil {
			return catObject{}, err
		}
		if objs[0].missing && attempt == 0 {
			r.cat.restart()
			continue
		}
		return objs[0], nil
	}
}

// hasCommit reports whether the repository holds commit sha.
func (r *repo) hasCommit(ctx context.Context, sha string) (bool, error) {
	if err := checkSHA("commit", sha); err != nil {
		return false, err
	}
	o, err := r.lookup(ctx, sha+"^{commit}")
	if err != nil {
		return false, fmt.Errorf("look up commit %q: %w", sha, err)
	}
	return !o.missing, nil
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

// The directory of the workflows and of the lock, and their names in it.
var (
	kiciDir       = path.Dir(workflow.WorkflowsDir)
	workflowsName = path.Base(workflow.WorkflowsDir)
	lockName      = path.Base(workflow.LockPath)
)

// treeEntry is one entry of a tree, its mode canonical as git ls-tree
// prints it.
type treeEntry struct {
	mode   uint32
	object string
	path   string
}

// regular reports whether e is a regular file: a symlink's blob is its
// target, a gitlink is a submodule.
func (e treeEntry) regular() bool { return e.mode == 0o100644 || e.mode == 0o100755 }

// workflows reads the workflow files and the lock at sha, from the trees
// and blobs the cat-file process gives: the tree at sha:.kici, the tree
// of its workflows directory, then the blobs wanted, in one exchange.
func (r *repo) workflows(ctx context.Context, sha string) ([]workflow.File, []byte, error) {
	if err := checkSHA("commit", sha); err != nil {
		return nil, nil, err
	}
	files, lock, err := r.readWorkflows(ctx, sha)
	if err != nil {
		return nil, nil, fmt.Errorf("read workflows at %q: %w", sha, err)
	}
	return files, lock, nil
}

func (r *repo) readWorkflows(ctx context.Context, sha string) ([]workflow.File, []byte, error) {
	kici, err := r.kiciTree(ctx, sha)
	if err != nil || kici == nil {
		return []workflow.File{}, nil, err
	}
	var wanted []treeEntry
	var lockEntry *treeEntry
	for _, e := range kici {
		switch {
		case e.path == lockName && e.regular():
			lockEntry = &treeEntry{mode: e.mode, object: e.object, path: workflow.LockPath}
		case e.path == workflowsName && e.mode == 0o040000:
			dir, err := r.tree(ctx, e.object, workflow.WorkflowsDir)
			if err != nil {
				return nil, nil, err
			}
			for _, f := range dir {
				f.path = workflow.WorkflowsDir + "/" + f.path
				if f.regular() && workflow.IsWorkflowFile(f.path) {
					wanted = append(wanted, f)
				}
			}
		}
	}
	if err := workflow.CheckFileCount(len(wanted)); err != nil {
		return nil, nil, err
	}
	if lockEntry != nil {
		wanted = append(wanted, *lockEntry)
	}
	blobs, err := r.catBlobs(ctx, wanted)
	if err != nil {
		return nil, nil, err
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

// kiciTree returns the entries of the tree at sha:.kici; nil when the
// commit has no such directory, an error wrapping ErrNotFound when the
// repository does not hold sha.
func (r *repo) kiciTree(ctx context.Context, sha string) ([]treeEntry, error) {
	for attempt := 0; ; attempt++ {
		name := sha + ":" + kiciDir
		objs, err := r.cat.get(ctx, []catRequest{{name: name, max: maxGitOutput, keep: true}})
		if err != nil {
			return nil, err
		}
		o := objs[0]
		if !o.missing {
			if o.typ != "tree" {
				return nil, nil // a file or a symlink: no workflows
			}
			return parseTree(o.data, len(o.oid)/2, kiciDir)
		}
		// No .kici, or no commit: the root tree says which.
		root, err := r.cat.get(ctx, []catRequest{{name: sha + "^{tree}", max: maxGitOutput}})
		var tooLarge *objectTooLargeError
		if errors.As(err, &tooLarge) {
			return nil, nil // the tree is there (its content is not needed)
		}
		if err != nil {
			return nil, err
		}
		if !root[0].missing {
			return nil, nil
		}
		if attempt > 0 {
			return nil, fmt.Errorf("commit %q: %w", sha, ErrNotFound)
		}
		r.cat.restart() // ask a new process before believing it
	}
}

// tree reads the entries of tree object oid, at path dir (for errors).
func (r *repo) tree(ctx context.Context, oid, dir string) ([]treeEntry, error) {
	objs, err := r.cat.get(ctx, []catRequest{{name: oid, max: maxGitOutput, keep: true}})
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", dir, err)
	}
	if objs[0].missing || objs[0].typ != "tree" {
		return nil, fmt.Errorf("tree %s: object %s is missing or not a tree", dir, oid)
	}
	return parseTree(objs[0].data, len(oid)/2, dir)
}

// parseTree parses a tree object: entries of "<octal mode> <name>\0"
// and the entry's raw object name, hashLen bytes.
func parseTree(data []byte, hashLen int, dir string) ([]treeEntry, error) {
	var entries []treeEntry
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		nul := bytes.IndexByte(data, 0)
		if sp <= 0 || nul < sp+2 || len(data) < nul+1+hashLen {
			return nil, fmt.Errorf("tree %s: malformed entry", dir)
		}
		mode, err := strconv.ParseUint(string(data[:sp]), 8, 32)
		if err != nil {
			return nil, fmt.Errorf("tree %s: malformed mode %q", dir, data[:sp])
		}
		entries = append(entries, treeEntry{
			mode:   canonMode(uint32(mode)),
			path:   string(data[sp+1 : nul]),
			object: hex.EncodeToString(data[nul+1 : nul+1+hashLen]),
		})
		data = data[nul+1+hashLen:]
	}
	return entries, nil
}

// canonMode is git's canon_mode: the mode git ls-tree prints for a tree
// entry's mode.
func canonMode(mode uint32) uint32 {
	switch mode & 0o170000 {
	case 0o100000:
		if mode&0o100 != 0 {
			return 0o100755
		}
		return 0o100644
	case 0o120000:
		return 0o120000
	case 0o040000:
		return 0o040000
	}
	return 0o160000
}

// catBlobs reads the blobs of entries in one exchange with the cat-file
// process, each at most MaxFileBytes.
func (r *repo) catBlobs(ctx context.Context, entries []treeEntry) ([][]byte, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	reqs := make([]catRequest, len(entries))
	for i, e := range entries {
		if !isFullSHA(e.object) {
			return nil, fmt.Errorf("unexpected object name %q", e.object)
		}
		reqs[i] = catRequest{name: e.object, max: MaxFileBytes, keep: true}
	}
	objs, err := r.cat.get(ctx, reqs)
	var tooLarge *objectTooLargeError
	if errors.As(err, &tooLarge) {
		e := entries[len(objs)]
		return nil, fmt.Errorf("%s is %d bytes, over the limit of %d", e.path, tooLarge.obj.size, MaxFileBytes)
	}
	if err != nil {
		return nil, err
	}
	blobs := make([][]byte, len(entries))
	for i, e := range entries {
		if objs[i].missing || objs[i].typ != "blob" {
			return nil, fmt.Errorf("cat-file: object %s of %s is missing or not a blob", e.object, e.path)
		}
		blobs[i] = objs[i].data
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
