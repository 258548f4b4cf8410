package pipeline

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kici-dev/kici/internal/workflow"
)

// UnknownWorkflowError is returned by TriggerWorkflows when a named
// workflow is not among the workflows of the commit. Valid lists the names
// there, so the caller can say what it could have asked for.
type UnknownWorkflowError struct {
	// SHA is the commit whose workflows were read.
	SHA string
	// Unknown are the names asked for that the commit does not have, in
	// the order given.
	Unknown []string
	// Valid are the names of the commit's workflows, sorted.
	Valid []string
}

func (e *UnknownWorkflowError) Error() string {
	quoted := make([]string, len(e.Unknown))
	for i, n := range e.Unknown {
		quoted[i] = strconv.Quote(n)
	}
	return fmt.Sprintf("no workflow named %s at commit %s; the workflows there are: %s",
		strings.Join(quoted, ", "), short(e.SHA), strings.Join(e.Valid, ", "))
}

// selectWorkflows returns the plan narrowed to the workflows named in only,
// in the plan's order; plan itself when only is empty. A name the plan does
// not have gives an *UnknownWorkflowError naming every such name. The plan
// is not modified (it may be shared).
func selectWorkflows(plan *workflow.Plan, sha string, only []string) (*workflow.Plan, error) {
	if len(only) == 0 {
		return plan, nil
	}
	valid := make([]string, len(plan.Workflows))
	for i, wf := range plan.Workflows {
		valid[i] = wf.Name
	}
	var unknown []string
	for _, n := range only {
		if !slices.Contains(valid, n) && !slices.Contains(unknown, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(valid)
		return nil, &UnknownWorkflowError{SHA: sha, Unknown: unknown, Valid: valid}
	}
	out := &workflow.Plan{SchemaVersion: plan.SchemaVersion}
	for _, wf := range plan.Workflows {
		if slices.Contains(only, wf.Name) {
			out.Workflows = append(out.Workflows, wf)
		}
	}
	return out, nil
}
