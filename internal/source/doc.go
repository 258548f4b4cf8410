// Package source is where kici gets workflows and code from. A source is
// one repository, reached in one of three ways:
//
//   - [Local]: a git repository on the orchestrator's host, read with the
//     git CLI.
//   - [Git]: a clone URL, mirrored into a bare cache directory with the git
//     CLI and read like a local repository.
//   - [GitHub]: a repository on GitHub or GitHub Enterprise, read through the
//     REST API (commits, contents, compare, tarball).
//
// Each implements [Source]: resolve a ref to a commit, read the workflow
// files and the committed lock at a commit, list the files two commits
// changed, and write a tar.gz of a commit's tree. [Source.CloneURL] says how
// agents get the code: for local and git sources they download the archive
// from the orchestrator (with their job token), for GitHub they clone. The
// page docs/sources.md describes this for operators, with the security
// notes.
//
// Every ref or sha a caller passes is checked before it reaches git or a
// URL: nothing that starts with "-" or holds control characters or spaces
// is accepted, shas must be full hex object names, and git is also told
// where its options end. Errors that drive decisions wrap the sentinels
// below ([ErrNotFound], [ErrInvalidRef], [ErrUnauthorized], ...).
//
// The package imports internal/workflow (for [workflow.File] and the paths
// of workflows and the lock) and the standard library; the pipeline and the
// API import it. Package githubfake holds a fake GitHub API for tests.
//
// GitHub values hold no mutable state: use them from any number of
// goroutines. A *Local and a *Git each keep one long-lived git cat-file
// --batch process for the reads of a trigger (resolve, workflows), so
// they cost no fork: it serves one request at a time, is restarted when
// it dies or a caller's ctx ends mid-request, and is stopped after a
// minute unused or by Close; use them by pointer, never copied. A *Git
// serializes its fetches (and reads never overlap a fetch, after which
// its cat-file process restarts); use one *Git per cache directory.
package source
