package admincli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/bundle"
	"github.com/spf13/cobra"
)

// runsArtifactsFlags are the options of `kici-admin runs artifacts`.
type runsArtifactsFlags struct {
	job      string
	download string
	output   string
}

func newRunsArtifactsCmd(a *app) *cobra.Command {
	var f runsArtifactsFlags
	cmd := &cobra.Command{
		Use:   "artifacts ID [--job J] [--download DIR]",
		Short: "List the artifacts of a run's jobs, or download and extract them",
		Long: `List the artifacts the jobs of run ID uploaded: per job, its files with their
sizes, the bundle's size as stored and SHA-256, and when it expires (or
"with the run" when it is kept as long as the run).

With --download DIR each job's bundle is downloaded, its SHA-256 checked
against the one recorded at upload, and extracted into DIR/JOB/ (a job
name's "/" becomes "_"). Nothing is written outside DIR: a bundle is
refused if any of its names would leave DIR/JOB/.

--job (a job's name, as runs show lists it, or its id) keeps one job's.`,
		Example: `  kici-admin runs artifacts r-102
  kici-admin runs artifacts r-102 --job build --download ./out
  kici-admin runs artifacts r-102 -o json`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			id := args[0]
			q := url.Values{}
			if f.job != "" {
				q.Set("job", f.job)
			}
			var list apiv1.ArtifactList
			if err := c.do(cmd.Context(), http.MethodGet, runPath(id)+"/artifacts", q, nil, &list); err != nil {
				return fmt.Errorf("list the artifacts of run %q: %w", id, err)
			}
			if f.job != "" && len(list.Artifacts) == 0 {
				return fmt.Errorf("job %q of run %q has no artifacts (or the run has no such job)", f.job, id)
			}
			out := cmd.OutOrStdout()
			if f.download != "" {
				for _, art := range list.Artifacts {
					dir, st, err := downloadArtifact(cmd.Context(), c, id, art, f.download)
					if err != nil {
						return fmt.Errorf("download the artifacts of job %q of run %q: %w", art.Job, id, err)
					}
					if f.output != formatJSON {
						fmt.Fprintf(out, "%s: %d files (%s) extracted into %s\n", escapeControls(art.Job), st.Files, bundle.FormatBytes(st.Bytes), dir)
					}
				}
			}
			if f.output == formatJSON {
				list.Artifacts = nonNil(list.Artifacts)
				return writeJSON(out, list)
			}
			if f.download != "" {
				if len(list.Artifacts) == 0 {
					fmt.Fprintf(out, "run %s has no artifacts\n", id)
				}
				return nil
			}
			return printArtifacts(out, id, list.Artifacts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.job, "job", "", "only the artifacts of this `JOB` (its name or id)")
	fl.StringVar(&f.download, "download", "", "download the artifacts and extract each job's into `DIR`/JOB/, checking their SHA-256")
	addOutputFlag(cmd, &f.output)
	return cmd
}

// printArtifacts prints a table of jobs, then each job's files.
func printArtifacts(w io.Writer, id string, list []apiv1.Artifact) error {
	if len(list) == 0 {
		fmt.Fprintf(w, "run %s has no artifacts\n", id)
		return nil
	}
	t := newTable(w)
	t.row("JOB", "FILES", "SIZE", "STORED", "SHA256", "EXPIRES")
	for _, art := range list {
		expires := "with the run"
		if art.ExpiresAt != nil {
			expires = art.ExpiresAt.UTC().Format(time.DateTime) + " UTC"
		}
		t.row(art.Job, strconv.Itoa(art.FileCount), bundle.FormatBytes(art.ContentBytes), bundle.FormatBytes(art.Size), shortSHA(art.SHA256), expires)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, art := range list {
		fmt.Fprintf(w, "\n%s (sha256 %s):\n", escapeControls(art.Job), art.SHA256)
		t := newTable(w)
		for _, file := range art.Files {
			t.row("  "+file.Path, bundle.FormatBytes(file.Size))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

// artifactDir is the directory under dir a job's artifacts go to: its
// name, with path separators replaced, never "." or "..".
func artifactDir(dir, job string) string {
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, job)
	if name == "." || name == ".." || name == "" {
		name = "_" + name
	}
	return filepath.Join(dir, name)
}

// downloadArtifact fetches art's bundle into a temporary file, checks its
// SHA-256 (against the answer's header and the listing's), and extracts
// it into its job's directory under dir.
func downloadArtifact(ctx context.Context, c *client, runID string, art apiv1.Artifact, dir string) (string, bundle.Stats, error) {
	path := runPath(runID) + "/artifacts/" + url.PathEscape(art.Job)
	resp, err := c.send(ctx, http.MethodGet, path, nil, nil, "application/gzip")
	if err != nil {
		return "", bundle.Stats{}, err
	}
	defer resp.Body.Close()
	tmp, err := os.CreateTemp("", "kici-artifacts-*.tgz")
	if err != nil {
		return "", bundle.Stats{}, err
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(resp.Body, bundle.ArtifactLimits.MaxBytes+1))
	if err != nil {
		return "", bundle.Stats{}, c.transportError(ctx, fmt.Errorf("read the bundle: %w", err))
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if sum != art.SHA256 || sum != resp.Header.Get(apiv1.HeaderSHA256) {
		return "", bundle.Stats{}, fmt.Errorf("the bundle is corrupt: %d bytes with sha256 %s, want %s", n, sum, art.SHA256)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return "", bundle.Stats{}, err
	}
	target := artifactDir(dir, art.Job)
	st, err := bundle.Extract(tmp, target, bundle.ArtifactLimits, bundle.ExtractOptions{})
	if err != nil {
		return "", bundle.Stats{}, fmt.Errorf("extract into %s: %w", target, err)
	}
	return target, st, nil
}
