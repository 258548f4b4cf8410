package pipeline

import (
	"context"
	"fmt"

	"github.com/kici-dev/kici/internal/source"
	"github.com/kici-dev/kici/internal/trigger"
)

// maxWarning bounds the source's error kept as an event's
// ChangedFilesWarning.
const maxWarning = 512

// fillChangedFiles asks the source for the changed files an event did not
// carry: a pull request's diff from the merge base of its base and head
// (Source.PullRequestFiles), a new branch's diff from its merge base with
// the default branch (the source's HEAD), a later push's diff of before
// and after. They go through trigger.BoundChangedFiles; when the source
// cannot list them they stay unknown, and the reason is logged and kept in
// ev.ChangedFilesWarning, which the run records with its event.
func (p *Pipeline) fillChangedFiles(ctx context.Context, sourceName string, src source.Source, ev *trigger.Event) {
	var files []string
	var err error
	switch {
	case ev.Kind == trigger.KindPullRequest:
		base := ev.BaseSHA
		if base == "" {
			base, err = src.Resolve(ctx, trigger.BranchRefPrefix+ev.BaseBranch)
		}
		if err == nil {
			files, err = src.PullRequestFiles(ctx, ev.Number, base, ev.SHA)
		}
	case ev.IsNewBranch():
		var def string
		def, err = src.Resolve(ctx, "HEAD")
		if err == nil {
			files, err = src.MergeBaseFiles(ctx, def, ev.SHA)
		}
	case ev.Before != "":
		files, err = src.ChangedFiles(ctx, ev.Before, ev.SHA)
	default:
		return
	}
	if err != nil {
		p.log.Warn("changed files unknown", "source", sourceName, "kind", ev.Kind, "ref", ev.Ref, "error", err)
		msg := err.Error()
		if len(msg) > maxWarning {
			msg = msg[:maxWarning] + "…"
		}
		ev.ChangedFilesWarning = fmt.Sprintf("the source could not list them: %s", msg)
		return
	}
	if files == nil {
		return
	}
	ev.SetChangedFiles(files)
	if ev.ChangedFilesWarning != "" {
		p.log.Warn("changed files unknown", "source", sourceName, "kind", ev.Kind, "ref", ev.Ref, "reason", ev.ChangedFilesWarning)
	}
}
