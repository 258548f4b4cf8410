package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/pipeline"
	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/source"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/trigger"
)

var sourceNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// commitSHARE is a full commit sha: SHA-1 or SHA-256.
var commitSHARE = regexp.MustCompile(`^(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64})$`)

// githubRepoRE is a GitHub OWNER/NAME: both parts non-empty, in the
// characters GitHub allows.
var githubRepoRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9._-]+$`)

func toAPISource(s store.Source) apiv1.Source {
	out := apiv1.Source{Name: s.Name, Kind: string(s.Kind), ForkPullRequests: string(s.ForkPullRequests), GitHubRepo: s.GitHubRepo, CreatedAt: s.CreatedAt}
	if out.ForkPullRequests == "" {
		out.ForkPullRequests = string(store.ForkApprove)
	}
	switch string(s.Kind) {
	case source.KindLocal:
		out.Path = s.Location
	case source.KindGit:
		out.URL = s.Location
	default:
		out.Repo = s.Location
	}
	return out
}

func (s *Server) listSources(w http.ResponseWriter, r *http.Request) {
	rows, err := s.db.ListSources(r.Context())
	if err != nil {
		s.storeError(w, "list sources", err)
		return
	}
	out := apiv1.SourceList{Sources: []apiv1.Source{}}
	for _, row := range rows {
		out.Sources = append(out.Sources, toAPISource(row))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createSource(w http.ResponseWriter, r *http.Request) {
	var in apiv1.Source
	if !decodeJSON(w, r, &in) {
		return
	}
	audited(r, "source:"+in.Name, fmt.Sprintf("kind %s, fork_pull_requests %s", in.Kind, cmp.Or(in.ForkPullRequests, string(store.ForkApprove))))
	if !sourceNameRE.MatchString(in.Name) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("source name %q: use 1 to 63 lower-case letters, digits, '.', '_' and '-'", in.Name))
		return
	}
	row := store.Source{Name: in.Name, Kind: store.SourceKind(in.Kind), ForkPullRequests: store.ForkApprove}
	if in.ForkPullRequests != "" {
		row.ForkPullRequests = store.ForkPolicy(in.ForkPullRequests)
		if !slices.Contains(store.ForkPolicies, row.ForkPullRequests) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("fork_pull_requests %q: want approve, run or ignore", in.ForkPullRequests))
			return
		}
	}
	if in.GitHubRepo != "" {
		if in.Kind == source.KindGitHub {
			writeError(w, http.StatusBadRequest, "github_repo is for local and git sources: a github source's runs are reported to its own \"repo\"")
			return
		}
		if !githubRepoRE.MatchString(in.GitHubRepo) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("github_repo %q: want OWNER/NAME", in.GitHubRepo))
			return
		}
		row.GitHubRepo = in.GitHubRepo
	}
	switch in.Kind {
	case source.KindLocal:
		if in.Path == "" {
			writeError(w, http.StatusBadRequest, "a local source needs \"path\"")
			return
		}
		abs, err := filepath.Abs(in.Path)
		if err != nil {
			writeError(w, http.StatusBadRequest, "path: "+err.Error())
			return
		}
		if st, err := os.Stat(filepath.Join(abs, ".git")); err != nil || st == nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("path %q is not a git repository on the orchestrator host", abs))
			return
		}
		row.Location = abs
	case source.KindGit:
		if in.URL == "" {
			writeError(w, http.StatusBadRequest, "a git source needs \"url\"")
			return
		}
		if err := source.CheckCloneURL(in.URL); err != nil {
			writeError(w, http.StatusBadRequest, "url: "+err.Error())
			return
		}
		if strings.HasPrefix(strings.ToLower(in.URL), "file:") && !s.cfg.AllowFileGitURLs {
			writeError(w, http.StatusBadRequest, fmt.Sprintf(
				"url: %q reads a repository on the orchestrator's own disk; add it as a local source (kind local, path) instead, or set KICI_GIT_ALLOW_FILE_URLS=true", in.URL))
			return
		}
		row.Location = in.URL
	case source.KindGitHub:
		if !githubRepoRE.MatchString(in.Repo) {
			writeError(w, http.StatusBadRequest, "a github source needs \"repo\" as OWNER/NAME")
			return
		}
		row.Location = in.Repo
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("kind %q: want local, git or github", in.Kind))
		return
	}
	if in.WebhookSecret != "" {
		row.WebhookSecrets = []string{in.WebhookSecret}
		if s.cfg.Secrets != nil {
			sealed, err := s.cfg.Secrets.SealWebhookSecrets(in.Name, row.WebhookSecrets)
			if err != nil {
				s.log.Error("seal webhook secret failed", "source", in.Name, "error", err)
				writeError(w, http.StatusInternalServerError, "could not seal the webhook secret; see the orchestrator's log")
				return
			}
			row.WebhookSecrets = sealed
		}
	}
	created, err := s.db.CreateSource(r.Context(), row)
	if err != nil {
		s.storeError(w, fmt.Sprintf("source %q", in.Name), err)
		return
	}
	s.pipe.Forget(in.Name)
	writeJSON(w, http.StatusCreated, toAPISource(created))
}

func (s *Server) deleteSource(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	audited(r, "source:"+name, "")
	if err := s.db.DeleteSource(r.Context(), name); err != nil {
		s.storeError(w, fmt.Sprintf("source %q", name), err)
		return
	}
	s.pipe.Forget(name)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) trigger(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	audited(r, "source:"+name, "")
	var in apiv1.TriggerRequest
	if !decodeJSON(w, r, &in) {
		return
	}
	var ev trigger.Event
	switch in.Event {
	case "", trigger.KindPush:
		ref := in.Ref
		if ref == "" {
			ref = "main"
		}
		ev = trigger.PushEvent(ref, in.SHA)
	case trigger.KindTag:
		if in.Ref == "" {
			writeError(w, http.StatusBadRequest, "a tag event needs \"ref\" (the tag)")
			return
		}
		ev = trigger.TagEvent(in.Ref, in.SHA)
	case trigger.KindManual:
		ev = trigger.ManualEvent(in.Ref, in.Inputs)
		ev.SHA = in.SHA
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("event %q: want push, tag or manual", in.Event))
		return
	}
	if in.SHA != "" && !commitSHARE.MatchString(in.SHA) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("sha %q: want a full commit sha (40 or 64 hex digits), or none to resolve the ref", in.SHA))
		return
	}
	if in.Event != trigger.KindManual && len(in.Inputs) > 0 {
		writeError(w, http.StatusBadRequest, "inputs are only for manual events")
		return
	}
	if len(in.ChangedFiles) > 0 {
		if ev.Kind != trigger.KindPush {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("changed_files are only for push events (this is a %s event)", ev.Kind))
			return
		}
		files, err := checkChangedFiles(in.ChangedFiles)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		ev.ChangedFiles, ev.ChangedFilesKnown = files, true
	}
	only, err := checkTriggerWorkflows(in.Workflows)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// The run records who asked for it: the admin token's name.
	ev.Actor = principal(r).Name
	if err := ev.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	res, err := s.pipe.TriggerWorkflows(r.Context(), name, ev, only)
	if err != nil {
		s.pipelineError(w, name, err)
		return
	}
	out := triggerResponse(res)
	runs := make([]string, len(out.Runs))
	for i, run := range out.Runs {
		runs[i] = run.ID
	}
	audited(r, "", fmt.Sprintf("%s %s: runs [%s]", ev.Kind, in.Ref, strings.Join(runs, ", ")))
	writeJSON(w, http.StatusOK, out)
}

func triggerResponse(res pipeline.Result) apiv1.TriggerResponse {
	out := apiv1.TriggerResponse{Runs: []apiv1.RunRef{}}
	for _, run := range res.Runs {
		out.Runs = append(out.Runs, apiv1.RunRef{ID: run.ID, Workflow: run.Workflow})
	}
	for _, d := range res.Decisions {
		out.Decisions = append(out.Decisions, apiv1.Decision{Workflow: d.Workflow, Matched: d.Matched, Reason: d.Reason})
	}
	if res.Invalid != nil {
		out.Problems = strings.Split(res.Invalid.Err.Error(), "\n")
	}
	return out
}

func (s *Server) pipelineError(w http.ResponseWriter, name string, err error) {
	var wfErr *pipeline.WorkflowError
	var unknownErr *pipeline.UnknownWorkflowError
	switch {
	case errors.As(err, &unknownErr):
		writeError(w, http.StatusUnprocessableEntity, err.Error())
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("source %q: not found", name))
	case errors.As(err, &wfErr):
		// The error is one line; the problems, one per line of the
		// wrapped error (FILE:LINE:COL: message), go in the details.
		problems := strings.Split(wfErr.Err.Error(), "\n")
		writeError(w, http.StatusUnprocessableEntity,
			fmt.Sprintf("workflows at commit %.12s are invalid: %d problem(s), listed in details", wfErr.SHA, len(problems)), problems...)
	case errors.Is(err, pipeline.ErrNoWorkflows), errors.Is(err, source.ErrNotFound), errors.Is(err, source.ErrInvalidRef):
		writeError(w, http.StatusUnprocessableEntity, err.Error())
	default:
		s.log.Error("trigger failed", "source", name, "error", err)
		writeError(w, http.StatusBadGateway, err.Error())
	}
}

// archive serves a tar.gz of a source at a commit to the agent running a
// job of that source at that commit.
func (s *Server) archive(w http.ResponseWriter, r *http.Request) {
	name, sha := r.PathValue("name"), r.PathValue("sha")
	token, _ := bearerToken(r)
	jobID, attempt, err := s.tokens.Check(token)
	if err != nil {
		writeError(w, http.StatusUnauthorized, "job token missing or invalid")
		return
	}
	// A store error is the orchestrator's fault, not the token's: it gets
	// a 5xx, which the agent retries, never a 403, which fails the job.
	job, err := s.db.GetJobHead(r.Context(), jobID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.storeError(w, fmt.Sprintf("job %q", jobID), err)
		return
	}
	if err != nil || job.Attempt != attempt || runstate.JobTerminal(job.Status) {
		writeError(w, http.StatusForbidden, "the job token's job is not running")
		return
	}
	run, err := s.db.GetRunHead(r.Context(), job.RunID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.storeError(w, fmt.Sprintf("run %q", job.RunID), err)
		return
	}
	if err != nil || run.Source != name || run.SHA != sha {
		writeError(w, http.StatusForbidden, "the job token does not grant this source and commit")
		return
	}
	_, src, err := s.pipe.Source(r.Context(), name)
	if err != nil {
		s.storeError(w, fmt.Sprintf("source %q", name), err)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	produce := func(ctx context.Context, w io.Writer) error { return src.Archive(ctx, sha, w) }
	if s.cfg.Archives == nil {
		err = produce(r.Context(), w)
	} else {
		_, err = s.cfg.Archives.Serve(r.Context(), name, sha, w, produce)
	}
	if err != nil {
		s.log.Error("archive failed", "source", name, "sha", sha, "error", err)
	}
}
