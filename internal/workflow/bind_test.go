package workflow

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBind(t *testing.T) {
	t.Parallel()
	plan, err := Compile([]File{{Path: ".kici/workflows/b.yml", Data: []byte(`
on: {push: {}, manual: {inputs: {who: {default: world}}}}
env:
  LABEL: "branch-${{ event.branch }}"
jobs:
  j:
    steps:
      - name: "for ${{ inputs.who }}"
        run: echo "${{ event.branch }}"
        working-directory: "dirs/${{ event.branch }}"
        env: {WHO: "${{ inputs.who }}"}
`)}})
	if err != nil {
		t.Fatal(err)
	}
	wf := plan.Workflows[0]
	// A hostile branch name must stay data: it may not be re-expanded.
	ev := EventVars{Kind: "push", Branch: "x${{ inputs.who }}$(rm -rf /)"}
	job := wf.Jobs[0].Bind(ev, wf.DefaultInputs())

	if got, want := job.Env["LABEL"], "branch-x${{ inputs.who }}$(rm -rf /)"; got != want {
		t.Errorf("LABEL: got %q, want %q", got, want)
	}
	if got, want := job.Env["KICI_EVENT_BRANCH"], ev.Branch; got != want {
		t.Errorf("KICI_EVENT_BRANCH: got %q, want %q", got, want)
	}
	if got, want := job.Env["KICI_INPUT_WHO"], "world"; got != want {
		t.Errorf("KICI_INPUT_WHO: got %q, want %q", got, want)
	}
	want := Step{
		Name:             "for world",
		Run:              "echo \"${KICI_EVENT_BRANCH}\"",
		WorkingDirectory: "dirs/" + ev.Branch,
		Env:              map[string]string{"WHO": "world"},
	}
	if diff := cmp.Diff(want, job.Steps[0]); diff != "" {
		t.Errorf("bound step differs (-want +got):\n%s", diff)
	}
	// Binding must not change the plan it came from.
	if got := wf.Jobs[0].Steps[0].Name; got != "for ${{ inputs.who }}" {
		t.Errorf("plan was modified: step name now %q", got)
	}
}
