package workflow

import (
	"strings"
	"testing"
)

func TestBindGroupFillsTheEvent(t *testing.T) {
	t.Parallel()
	c := &Concurrency{Group: "deploy-${{ event.branch }}-${{ inputs.target }}"}
	got := c.BindGroup(EventVars{Branch: "main"}, map[string]string{"target": "eu"})
	if got != "deploy-main-eu" {
		t.Errorf("group %q, want deploy-main-eu", got)
	}
	long := c.BindGroup(EventVars{Branch: strings.Repeat("b", 500)}, nil)
	if len(long) != maxGroupLen {
		t.Errorf("a group filled past the limit has %d bytes, want %d", len(long), maxGroupLen)
	}
	j := Job{Name: "a", Concurrency: c, Steps: []Step{{Run: "true"}}}
	if b := j.Bind(EventVars{Branch: "dev"}, nil); b.Concurrency.Group != "deploy-dev-" || c.Group != "deploy-${{ event.branch }}-${{ inputs.target }}" {
		t.Errorf("Bind: group %q (the plan's now %q), want deploy-dev- and the plan's unchanged", b.Concurrency.Group, c.Group)
	}
	if got := (Job{}).EffectiveRetry(); got.Max != 1 || len(got.When) != 2 {
		t.Errorf("default retry %+v, want one more attempt after agent-lost or infrastructure", got)
	}
}

// TestLockCheckRefusesBadFeatures: a committed lock file is read without
// the parser, so Check holds it to the same rules.
func TestLockCheckRefusesBadFeatures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		job  Job
		want string
	}{
		{"image", Job{Image: &Container{Image: "a b; rm -rf /"}}, "not an image reference"},
		{"pull", Job{Image: &Container{Image: "alpine", Pull: "sometimes"}}, "pull policy"},
		{"service name", Job{Services: []Service{{Name: "Bad.Name", Container: Container{Image: "alpine"}}}}, "not a host name"},
		{"service twice", Job{Services: []Service{{Name: "db", Container: Container{Image: "a"}}, {Name: "db", Container: Container{Image: "a"}}}}, "appears twice"},
		{"retry max", Job{Retry: &Retry{Max: 50}}, "retry max 50"},
		{"retry cause", Job{Retry: &Retry{Max: 1, When: []string{"crash"}}}, "retry cause"},
		{"environment", Job{Environment: "../prod"}, "environment name"},
		{"group", Job{Concurrency: &Concurrency{Group: strings.Repeat("g", 300)}}, "concurrency group"},
		{"max-parallel", Job{MaxParallel: -1}, "max-parallel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.job.Name, tc.job.Steps = "j", []Step{{Run: "true"}}
			wf := Workflow{Name: "w", Jobs: []Job{tc.job}}
			err := wf.Check()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check: %v, want an error about %s", err, tc.want)
			}
		})
	}
	ok := Workflow{Name: "w", Jobs: []Job{{Name: "j", Steps: []Step{{Run: "true"}}, Image: &Container{Image: "golang:1.26"},
		Services: []Service{{Name: "db", Container: Container{Image: "postgres:16"}}}, Retry: &Retry{Max: 2, When: []string{RetryFailure}}}}}
	if err := ok.Check(); err != nil {
		t.Errorf("a good workflow: %v", err)
	}
}
