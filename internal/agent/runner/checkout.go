package runner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// checkout puts the job's code in place and returns the directory the steps
// run in. Its output and notes go to the job-level log. pre is the archive
// request already under way (SourceArchive), or nil.
func (j *jobRun) checkout(ctx context.Context, pre *prefetch) (string, error) {
	src := j.spec.Source
	switch src.Kind {
	case SourceDir:
		dir, err := filepath.Abs(src.Dir)
		if err != nil {
			return "", err
		}
		fi, err := os.Stat(dir)
		if err != nil {
			return "", err
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("%q is not a directory", dir)
		}
		j.out.note("running in %s", dir)
		return dir, nil
	case SourceArchive:
		if len(src.ArchiveInline) > 0 {
			return j.dirs.src, j.extractInline(src.ArchiveInline, src.ArchiveSHA256)
		}
		return j.dirs.src, j.fetchArchive(ctx, src.ArchiveURL, pre)
	case SourceGit:
		return j.dirs.src, j.gitCheckout(ctx, src)
	}
	return "", fmt.Errorf("unknown source kind %q", src.Kind)
}

// archiveRetryDelays are the pauses between attempts to fetch a source
// archive after a network error or a 5xx answer: the orchestrator may be
// restarting, or its database briefly unreachable. About 8 s in all. A 4xx
// answer (the job token refused, the archive unknown) is final.
var archiveRetryDelays = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}

// prefetch is the first request for a job's archive, sent before the job's
// directory exists: its answer waits in done until fetchArchive extracts it
// (or discard closes it).
type prefetch struct {
	done chan struct{}
	resp *http.Response
	err  error
}

// startFetch notes the fetch in the job-level log and sends the first
// request for the archive at url in the background.
func (j *jobRun) startFetch(ctx context.Context, url string) *prefetch {
	j.out.note("fetching %s", url)
	p := &prefetch{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.resp, p.err = j.request(ctx, url)
	}()
	return p
}

// discard drops a prefetch nobody will extract, closing its answer once it
// comes. It may be called on nil.
func (p *prefetch) discard() {
	if p == nil {
		return
	}
	go func() {
		<-p.done
		if p.resp != nil {
			p.resp.Body.Close()
		}
	}()
}

// fetchArchive downloads the tar.gz at url with the job token and extracts
// it into the checkout directory, retrying what the orchestrator may
// answer better a moment later. pre, if not nil, is the first attempt's
// request, already sent by startFetch.
func (j *jobRun) fetchArchive(ctx context.Context, url string, pre *prefetch) error {
	if pre == nil {
		j.out.note("fetching %s", url)
	}
	for attempt := 0; ; attempt++ {
		var err error
		if attempt == 0 && pre != nil {
			<-pre.done
			err = j.extractAnswer(ctx, url, pre.resp, pre.err)
		} else {
			resp, reqErr := j.request(ctx, url)
			err = j.extractAnswer(ctx, url, resp, reqErr)
		}
		var transient *transientFetchError
		if !errors.As(err, &transient) || attempt >= len(archiveRetryDelays) {
			return err
		}
		delay := archiveRetryDelays[attempt]
		j.out.note("fetching the archive failed (%v); retrying in %s", transient.err, delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("fetch archive: %w", context.Cause(ctx))
		case <-t.C:
		}
	}
}

// extractInline extracts the archive sent with the dispatch into the
// checkout directory, with the same checks and limits as a downloaded one,
// once its SHA-256 is the one the dispatch named.
func (j *jobRun) extractInline(data []byte, want string) error {
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("inline archive is corrupt: %d bytes with sha256 %s, want %s", len(data), got, want)
	}
	st, err := extractTarGz(bytes.NewReader(data), j.dirs.src, j.r.cfg.MaxArchiveBytes)
	if err != nil {
		return fmt.Errorf("extract archive: %w", err)
	}
	j.out.note("extracted %d entries (%s)", st.entries, formatBytes(st.bytes))
	return nil
}

// transientFetchError is a failed fetch worth another attempt: nothing was
// extracted yet, and the cause may pass.
type transientFetchError struct{ err error }

func (e *transientFetchError) Error() string { return e.err.Error() }
func (e *transientFetchError) Unwrap() error { return e.err }

// badRequestError is a request that could not even be built (a malformed
// URL): no attempt can do better.
type badRequestError struct{ err error }

func (e *badRequestError) Error() string { return e.err.Error() }
func (e *badRequestError) Unwrap() error { return e.err }

// request sends one GET for the archive at url with the job token.
func (j *jobRun) request(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, &badRequestError{err}
	}
	if j.spec.Token != "" {
		req.Header.Set("Authorization", "Bearer "+j.spec.Token)
	}
	return j.r.cfg.HTTPClient.Do(req)
}

// extractAnswer extracts the archive of one answer to request (resp, or
// the request's err) into the checkout directory. A failure worth another
// attempt is a *transientFetchError.
func (j *jobRun) extractAnswer(ctx context.Context, url string, resp *http.Response, err error) error {
	if err != nil {
		var bad *badRequestError
		if errors.As(err, &bad) {
			return fmt.Errorf("fetch archive: %w", bad.err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("fetch archive: %w", err)
		}
		return &transientFetchError{fmt.Errorf("fetch archive: %w", err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("fetch archive %q: HTTP %s", url, resp.Status)
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return &transientFetchError{err}
		}
		return err
	}
	st, err := extractTarGz(resp.Body, j.dirs.src, j.r.cfg.MaxArchiveBytes)
	if err != nil {
		return fmt.Errorf("extract archive: %w", err)
	}
	j.out.note("extracted %d entries (%s)", st.entries, formatBytes(st.bytes))
	return nil
}

// gitCheckout fetches src.SHA (or src.Ref, or the default branch) from
// src.CloneURL into the checkout directory and checks it out detached. It
// asks for the single commit first and falls back to fetching every branch
// (and src.Ref) when the server refuses to serve a commit by its id.
func (j *jobRun) gitCheckout(ctx context.Context, src Source) error {
	if src.CloneURL == "" {
		return errors.New("git source without a clone URL")
	}
	want := src.SHA
	if want == "" {
		want = src.Ref
	}
	if want == "" {
		want = "HEAD"
	}
	j.out.note("fetching %s from %s", want, src.CloneURL)
	steps := [][]string{
		{"init", "--quiet", "."},
		{"remote", "add", "origin", src.CloneURL},
	}
	for _, args := range steps {
		if err := j.git(ctx, args...); err != nil {
			return err
		}
	}
	if err := j.git(ctx, "fetch", "--quiet", "--no-tags", "--depth=1", "origin", want); err != nil {
		if ctx.Err() != nil {
			return err
		}
		j.out.note("fetching %s alone failed; fetching all branches", want)
		args := []string{"fetch", "--quiet", "--no-tags", "origin", "+refs/heads/*:refs/remotes/origin/*"}
		if src.Ref != "" {
			args = append(args, src.Ref)
		}
		if err := j.git(ctx, args...); err != nil {
			return err
		}
		if src.SHA == "" {
			want = "FETCH_HEAD"
		}
	} else {
		want = "FETCH_HEAD"
		if src.SHA != "" {
			want = src.SHA
		}
	}
	return j.git(ctx, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", want)
}

// git runs one git command in the checkout directory.
func (j *jobRun) git(ctx context.Context, args ...string) error {
	argv := append([]string{j.r.cfg.Git}, args...)
	res := j.r.runProcess(ctx, j.kill, argv, j.dirs.src, gitEnv(), j.out, nil)
	name := gitSubcommand(args)
	switch {
	case res.startErr != nil:
		return fmt.Errorf("git %s: %w", name, res.startErr)
	case res.stopped:
		return causeOf(ctx)
	case res.exitCode != 0:
		return fmt.Errorf("git %s: exited with code %d", name, res.exitCode)
	}
	return nil
}

// gitSubcommand returns the subcommand of a git command line, skipping
// "-c name=value" options, for error messages.
func gitSubcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		if args[i] == "-c" {
			i++
			continue
		}
		return args[i]
	}
	return ""
}
