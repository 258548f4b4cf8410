package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/bundle"
	"github.com/kici-dev/kici/internal/workflow"
)

// fetchArtifacts puts the artifacts of the jobs this one needs into its
// workspace, before its steps: each upstream's bundle is downloaded, its
// digest checked, and extracted (regular files only, every name inside
// the workspace, through no link that leads out of it). An upstream
// without artifacts is skipped. Any other failure fails the job as an
// infrastructure failure.
func (j *jobRun) fetchArtifacts(ctx context.Context, c *storageClient) error {
	for _, n := range j.spec.Job.Needs {
		path := fmt.Sprintf("runs/%s/jobs/%s/artifacts", url.PathEscape(c.run), url.PathEscape(n.Job))
		what := fmt.Sprintf("fetching the artifacts of %q", n.Job)
		f, ok, err := c.download(ctx, what, path, j.dirs.root, bundle.ArtifactLimits.MaxBytes)
		if err != nil {
			return infrastructure(fmt.Errorf("fetch the artifacts of %q: %w", n.Job, err))
		}
		if !ok {
			continue
		}
		fi, _ := f.Stat()
		st, err := bundle.Extract(f, j.src, bundle.ArtifactLimits, bundle.ExtractOptions{})
		discard(f)
		if err != nil {
			return infrastructure(fmt.Errorf("extract the artifacts of %q: %w", n.Job, err))
		}
		j.out.note("artifacts of %s: %d files (%s) extracted into the workspace, from %s", n.Job, st.Files, bundle.FormatBytes(st.Bytes), bundle.FormatBytes(fi.Size()))
	}
	return nil
}

// wantsArtifacts reports whether the job uploads its artifacts after
// steps that ended with res.
func (j *jobRun) wantsArtifacts(ctx context.Context, res Result) bool {
	a := j.spec.Job.Artifacts
	switch {
	case a == nil || ctx.Err() != nil:
		return false
	case res.Status == StatusSuccess:
		return true
	}
	return a.When == workflow.ArtifactsAlways && res.Status == StatusFailure
}

// uploadArtifacts collects the workspace's files that the job's artifacts
// paths match (regular files only: symbolic links are left out, never
// followed), writes them into a bundle within bundle.ArtifactLimits, and
// uploads it. Nothing matching is no error.
func (j *jobRun) uploadArtifacts(ctx context.Context, c *storageClient) error {
	paths := j.spec.Job.Artifacts.Paths
	m, err := matchFiles(j.src, paths, bundle.ArtifactLimits.MaxEntries)
	if err != nil {
		return fmt.Errorf("collect artifacts: %w", err)
	}
	if m.links > 0 {
		j.out.note("artifacts: %d symbolic links left out (artifacts hold regular files only)", m.links)
	}
	if len(m.files) == 0 {
		j.out.note("artifacts: no file matches %s; nothing uploaded", strings.Join(paths, ", "))
		return nil
	}
	f, err := j.tempBundle()
	if err != nil {
		return err
	}
	defer discard(f)
	h := sha256.New()
	w := bundle.NewWriter(io.MultiWriter(f, h), bundle.ArtifactLimits)
	for _, rel := range m.files {
		if err := w.AddFile(rel, filepath.Join(j.src, filepath.FromSlash(rel))); err != nil {
			return fmt.Errorf("collect artifacts: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("collect artifacts: %w", err)
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	st := w.Stats()
	j.out.note("artifacts: uploading %d files (%s, %s compressed)", st.Files, bundle.FormatBytes(st.Bytes), bundle.FormatBytes(size))
	var got apiv1.Artifact
	path := fmt.Sprintf("runs/%s/jobs/%s/artifacts", url.PathEscape(c.run), url.PathEscape(j.spec.ID))
	if err := c.upload(ctx, "uploading the artifacts", path, nil, f, size, sum, &got); err != nil {
		var se *statusError
		if errors.As(err, &se) {
			return fmt.Errorf("upload artifacts: the orchestrator refused them: %w", err)
		}
		return fmt.Errorf("upload artifacts: %w", err)
	}
	expiry := "kept as long as the run"
	if got.ExpiresAt != nil {
		expiry = "kept until " + got.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	j.out.note("artifacts uploaded: %d files, %s, sha256 %.12s…, %s", got.FileCount, bundle.FormatBytes(got.Size), got.SHA256, expiry)
	return nil
}
