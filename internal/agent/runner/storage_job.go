package runner

import (
	"context"
	"fmt"
)

// kept is what the stage before the steps leaves for the stage after.
type kept struct {
	c      *storageClient
	caches []*jobCache
}

// beforeSteps puts the job's inputs in place, after the checkout (and
// the job's containers) and before its first step: the artifacts of the
// jobs it needs (a failure fails the job), then its caches (a failure is
// noted only). The workspace is the host's directory whether the steps
// run on the host or in an image.
func (j *jobRun) beforeSteps(ctx context.Context) (*kept, error) {
	job := j.spec.Job
	if len(job.Needs) == 0 && len(job.Cache) == 0 && job.Artifacts == nil {
		return nil, nil
	}
	c := j.storage()
	if c == nil {
		if len(job.Cache) > 0 || job.Artifacts != nil {
			j.out.note("artifacts and caches are kept by an orchestrator; this run keeps none")
		}
		return nil, nil
	}
	k := &kept{c: c}
	if len(job.Needs) > 0 {
		if err := j.fetchArtifacts(ctx, c); err != nil {
			return nil, err
		}
	}
	if len(job.Cache) > 0 {
		k.caches = j.prepareCaches()
		j.restoreCaches(ctx, c, k.caches)
	}
	return k, nil
}

// afterSteps keeps the job's outputs once its steps ended with res: its
// artifacts (after a success, or also after a failure with when: always)
// and, after a success, the caches whose exact key missed. An artifact
// upload that fails turns a success into a failure (the jobs downstream
// would miss them); a cache that is not saved is noted only. Nothing is
// kept after a cancel or a timeout.
func (j *jobRun) afterSteps(ctx context.Context, k *kept, res Result) Result {
	if k == nil || ctx.Err() != nil {
		return res
	}
	if j.wantsArtifacts(ctx, res) {
		if err := j.uploadArtifacts(ctx, k.c); err != nil {
			j.out.note("%v", err)
			switch {
			case ctx.Err() != nil: // the job was cancelled or timed out meanwhile
				cause := causeOf(ctx)
				return Result{Status: statusOf(cause), Err: cause}
			case res.Status == StatusSuccess:
				res = Result{Status: StatusFailure, Err: fmt.Errorf("artifacts: %w", err)}
			}
		}
	}
	if res.Status == StatusSuccess && len(k.caches) > 0 {
		j.saveCaches(ctx, k.c, k.caches)
	}
	return res
}
