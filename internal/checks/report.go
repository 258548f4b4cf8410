package checks

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v84/github"

	"github.com/kici-dev/kici/internal/store"
)

// maxLookupPages bounds the pages of a commit's check runs read when
// looking for one created by an earlier attempt.
const maxLookupPages = 10

// checkName is the name of a run's check run on GitHub.
func checkName(run store.Run) string { return "kici/" + run.Workflow }

// report sends row's desired state to GitHub and records it.
func (r *Reporter) report(ctx context.Context, row store.CheckReport) error {
	run, err := r.db.GetRun(ctx, row.RunID)
	if err != nil {
		return fmt.Errorf("read run %q: %w", row.RunID, err)
	}
	owner, name, _ := strings.Cut(row.Repo, "/")
	gh, err := r.clients.forRepo(ctx, row.Repo)
	if err != nil {
		return err
	}
	state := max(row.Desired, stateOf(run.Status))
	p := r.payload(run, state)
	id := row.CheckRunID
	if id == 0 {
		// An earlier attempt may have created it and lost the answer.
		if id, err = findCheckRun(ctx, gh, owner, name, run); err != nil {
			return err
		}
	}
	if id == 0 {
		created, _, err := gh.Checks.CreateCheckRun(ctx, owner, name, github.CreateCheckRunOptions{
			Name: checkName(run), HeadSHA: run.SHA, ExternalID: new(run.ID), DetailsURL: p.detailsURL,
			Status: new(p.status), Conclusion: p.conclusion, StartedAt: &github.Timestamp{Time: run.CreatedAt},
			CompletedAt: p.completedAt, Output: p.output,
		})
		if err != nil {
			return fmt.Errorf("create check run of run %q on %q: %w", run.ID, row.Repo, err)
		}
		id = created.GetID()
	} else {
		_, _, err := gh.Checks.UpdateCheckRun(ctx, owner, name, id, github.UpdateCheckRunOptions{
			Name: checkName(run), ExternalID: new(run.ID), DetailsURL: p.detailsURL,
			Status: new(p.status), Conclusion: p.conclusion, CompletedAt: p.completedAt, Output: p.output,
		})
		if err != nil {
			return fmt.Errorf("update check run %d of run %q on %q: %w", id, run.ID, row.Repo, err)
		}
	}
	if err := r.db.RecordCheckReport(ctx, run.ID, id, state, r.now()); err != nil {
		return fmt.Errorf("record check run %d of run %q: %w", id, run.ID, err)
	}
	r.log.Debug("check run reported", "run_id", run.ID, "repo", row.Repo, "check_run_id", id, "state", state.String())
	return nil
}

// findCheckRun returns the id of the check run of run on its commit (the
// one whose external_id is the run's id), or 0.
func findCheckRun(ctx context.Context, gh *github.Client, owner, repo string, run store.Run) (int64, error) {
	opts := &github.ListCheckRunsOptions{CheckName: new(checkName(run)), Filter: new("all"), ListOptions: github.ListOptions{PerPage: 100}}
	for page := 1; page <= maxLookupPages; page++ {
		opts.Page = page
		res, resp, err := gh.Checks.ListCheckRunsForRef(ctx, owner, repo, run.SHA, opts)
		if err != nil {
			return 0, fmt.Errorf("look for the check run of run %q on %s/%s: %w", run.ID, owner, repo, err)
		}
		for _, c := range res.CheckRuns {
			if c.GetExternalID() == run.ID {
				return c.GetID(), nil
			}
		}
		if resp.NextPage == 0 && len(res.CheckRuns) < opts.PerPage {
			break
		}
	}
	return 0, nil
}

// checkPayload is what a check run is told for one state.
type checkPayload struct {
	status      string
	conclusion  *string
	completedAt *github.Timestamp
	detailsURL  *string
	output      *github.CheckRunOutput
}

// Bounds of a check run's summary: GitHub takes 65535 characters.
const (
	maxSummaryJobs  = 50
	maxJobErrorLen  = 500
	maxSummaryBytes = 60000
)

// payload builds the check run of run in state.
func (r *Reporter) payload(run store.Run, state store.CheckState) checkPayload {
	var p checkPayload
	if r.cfg.PublicURL != "" {
		p.detailsURL = new(strings.TrimSuffix(r.cfg.PublicURL, "/") + "/runs/" + run.ID)
	}
	title, summary := "", ""
	switch state {
	case store.CheckQueued:
		p.status, title, summary = "queued", "Queued", fmt.Sprintf("Run %s of workflow %s is queued.", run.ID, run.Workflow)
	case store.CheckInProgress:
		p.status, title, summary = "in_progress", "Running", fmt.Sprintf("Run %s of workflow %s is running.", run.ID, run.Workflow)
	case store.CheckActionRequired:
		p.status, p.conclusion = "completed", new("action_required")
		title = "Awaiting approval"
		summary = fmt.Sprintf("Run %s of workflow %s awaits approval: %s\n\nAn owner or admin approves it with `kici-admin runs approve %s`.",
			run.ID, run.Workflow, run.Error, run.ID)
	default:
		p.status = "completed"
		conclusion := string(run.Status)
		switch run.Status {
		case store.RunSuccess:
			title = "Succeeded"
		case store.RunCancelled:
			title = "Cancelled"
		default:
			conclusion, title = "failure", "Failed"
		}
		p.conclusion = &conclusion
		at := r.now()
		if run.FinishedAt != nil {
			at = *run.FinishedAt
		}
		p.completedAt = &github.Timestamp{Time: at.UTC().Truncate(time.Second)}
		summary = completedSummary(run)
	}
	p.output = &github.CheckRunOutput{Title: new(title), Summary: new(bound(summary, maxSummaryBytes))}
	return p
}

// completedSummary names the run's outcome and each failed job with its
// error, bounded.
func completedSummary(run store.Run) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s of workflow %s: %s.\n", run.ID, run.Workflow, run.Status)
	if run.Error != "" {
		fmt.Fprintf(&b, "\n%s\n", bound(run.Error, maxJobErrorLen))
	}
	var failed []store.Job
	for _, j := range run.Jobs {
		if j.Status == store.JobFailure {
			failed = append(failed, j)
		}
	}
	if len(failed) > 0 {
		b.WriteString("\nFailed jobs:\n\n")
	}
	for i, j := range failed {
		if i == maxSummaryJobs {
			fmt.Fprintf(&b, "- … and %d more\n", len(failed)-i)
			break
		}
		msg := j.Error
		if msg == "" {
			msg = "failed"
		}
		fmt.Fprintf(&b, "- **%s**: %s\n", j.Name, strings.ReplaceAll(bound(msg, maxJobErrorLen), "\n", " "))
	}
	return b.String()
}
