package trigger

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kici-dev/kici/internal/workflow"
)

// Triggers used across the tests.
func push(branches, ignore, paths []string) workflow.Trigger {
	return workflow.Trigger{Type: workflow.TriggerPush, Branches: branches, BranchesIgnore: ignore, Paths: paths}
}

func pullRequest(branches, types, paths []string) workflow.Trigger {
	return workflow.Trigger{Type: workflow.TriggerPullRequest, Branches: branches, Types: types, Paths: paths}
}

func tag(tags ...string) workflow.Trigger {
	return workflow.Trigger{Type: workflow.TriggerTag, Tags: tags}
}

func manual(inputs ...workflow.Input) workflow.Trigger {
	return workflow.Trigger{Type: workflow.TriggerManual, Inputs: inputs}
}

func schedule(cron string) workflow.Trigger {
	return workflow.Trigger{Type: workflow.TriggerSchedule, Cron: cron}
}

func list(s ...string) []string { return s }

func withFiles(ev Event, files ...string) Event {
	ev.ChangedFiles, ev.ChangedFilesKnown = files, true
	return ev
}

func withAction(ev Event, action string) Event {
	ev.Action = action
	return ev
}

func TestMatch(t *testing.T) {
	t.Parallel()
	var (
		pushMain    = githubEvent(t, "push", "push_branch.json")                // main: README.md, src/main.go
		pushFeature = githubEvent(t, "push", "push_commits.json")               // feature/login: docs/login.md go.mod src/login/* src/old/handler.go
		pushDocs    = githubEvent(t, "push", "push_docs_only.json")             // main: docs/index.md docs/setup.md
		newBranch   = githubEvent(t, "push", "push_new_branch.json")            // release/2.0: src/version.go
		newEmpty    = githubEvent(t, "push", "push_new_branch_no_commits.json") // release/2.1, no commits listed
		tagPush     = githubEvent(t, "push", "push_tag.json")                   // v1.2.0
		prOpened    = githubEvent(t, "pull_request", "pull_request_opened.json")
		prFork      = githubEvent(t, "pull_request", "pull_request_synchronize_fork.json")
		prClosed    = githubEvent(t, "pull_request", "pull_request_closed.json")
		prRelease   = githubEvent(t, "pull_request", "pull_request_reopened_deleted_fork.json") // into release/1.0
		createTag   = githubEvent(t, "create", "create_tag.json")
		dispatch    = githubEvent(t, "workflow_dispatch", "workflow_dispatch.json")
	)
	envInput := workflow.Input{Name: "env", Type: workflow.InputChoice, Options: list("dev", "prod"), Required: true}
	debugInput := workflow.Input{Name: "debug", Type: workflow.InputBoolean, Default: "false"}
	countInput := workflow.Input{Name: "count", Type: workflow.InputNumber}

	tests := []struct {
		name     string
		triggers []workflow.Trigger
		ev       Event
		want     Decision // Workflow, File and Checks are not compared
	}{
		// Workflow-level rules.
		{
			name: "no triggers never matches",
			ev:   pushMain,
			want: Decision{Reason: "workflow has no triggers"},
		},
		{
			name:     "trigger of another kind",
			triggers: []workflow.Trigger{push(nil, nil, nil), pullRequest(nil, nil, nil)},
			ev:       tagPush,
			want:     Decision{Reason: "no trigger for event kind tag"},
		},
		{
			name:     "create matches no trigger",
			triggers: []workflow.Trigger{push(nil, nil, nil), tag()},
			ev:       createTag,
			want:     Decision{Reason: "no trigger for event kind create: kici runs on the push delivery GitHub sends for the same ref"},
		},
		{
			name:     "unknown trigger type matches nothing",
			triggers: []workflow.Trigger{{Type: "comment"}},
			ev:       pushMain,
			want:     Decision{Reason: "no trigger for event kind push"},
		},
		{
			name:     "first matching trigger wins",
			triggers: []workflow.Trigger{manual(), push(list("dev"), nil, nil), push(list("main"), nil, nil), push(nil, nil, nil)},
			ev:       pushMain,
			want:     Decision{Matched: true, Trigger: "push", Reason: "push to main matched branches [main]"},
		},
		{
			name:     "every failing trigger of the kind is explained",
			triggers: []workflow.Trigger{push(list("dev"), nil, nil), push(nil, nil, list("src/**"))},
			ev:       pushDocs,
			want: Decision{Reason: `push trigger: branch "main" not in branches [dev]; ` +
				`push trigger: path filter: no changed file matched [src/**]`},
		},

		// push: branches and branches-ignore.
		{
			name:     "push without filters",
			triggers: []workflow.Trigger{push(nil, nil, nil)},
			ev:       pushMain,
			want:     Decision{Matched: true, Trigger: "push", Reason: "push to main matched the push trigger"},
		},
		{
			name:     "push branch not in branches",
			triggers: []workflow.Trigger{push(list("main"), nil, nil)},
			ev:       pushFeature,
			want:     Decision{Reason: `push trigger: branch "feature/login" not in branches [main]`},
		},
		{
			name:     "push star stays in one segment",
			triggers: []workflow.Trigger{push(list("release/*"), nil, nil)},
			ev:       PushEvent("release/1.0/x", shaA),
			want:     Decision{Reason: `push trigger: branch "release/1.0/x" not in branches [release/*]`},
		},
		{
			name:     "push star matches one segment",
			triggers: []workflow.Trigger{push(list("main", "release/*"), nil, nil)},
			ev:       newBranch,
			want:     Decision{Matched: true, Trigger: "push", Reason: "push to release/2.0 matched branches [main release/*]"},
		},
		{
			name:     "push double star crosses segments",
			triggers: []workflow.Trigger{push(list("release/**"), nil, nil)},
			ev:       PushEvent("release/1.0/x", shaA),
			want:     Decision{Matched: true, Trigger: "push", Reason: "push to release/1.0/x matched branches [release/**]"},
		},
		{
			name:     "push branch ignored",
			triggers: []workflow.Trigger{push(nil, list("feature/**"), nil)},
			ev:       pushFeature,
			want:     Decision{Reason: `push trigger: branch "feature/login" matched branches-ignore [feature/**]`},
		},
		{
			name:     "push branch not ignored",
			triggers: []workflow.Trigger{push(list("**"), list("feature/**"), nil)},
			ev:       pushMain,
			want: Decision{Matched: true, Trigger: "push",
				Reason: "push to main matched branches [**], branches-ignore [feature/**] (not ignored)"},
		},
		{
			name:     "push branches-ignore wins over branches",
			triggers: []workflow.Trigger{push(list("feature/*"), list("feature/login"), nil)},
			ev:       pushFeature,
			want:     Decision{Reason: `push trigger: branch "feature/login" matched branches-ignore [feature/login]`},
		},

		// push: paths.
		{
			name:     "push path included",
			triggers: []workflow.Trigger{push(list("main"), nil, list("src/**"))},
			ev:       pushMain,
			want:     Decision{Matched: true, Trigger: "push", Reason: "push to main matched branches [main], paths [src/**] (src/main.go)"},
		},
		{
			name:     "push path not included",
			triggers: []workflow.Trigger{push(nil, nil, list("src/**", "go.mod"))},
			ev:       pushDocs,
			want:     Decision{Reason: "push trigger: path filter: no changed file matched [src/** go.mod]"},
		},
		{
			name:     "push only exclusions with a file left",
			triggers: []workflow.Trigger{push(nil, nil, list("!docs/**"))},
			ev:       pushMain,
			want:     Decision{Matched: true, Trigger: "push", Reason: "push to main matched paths [!docs/**] (README.md)"},
		},
		{
			name:     "push only exclusions with every file excluded",
			triggers: []workflow.Trigger{push(nil, nil, list("!docs/**"))},
			ev:       pushDocs,
			want:     Decision{Reason: "push trigger: path filter: every changed file is excluded by [!docs/**]"},
		},
		{
			name:     "push exclusion before inclusion",
			triggers: []workflow.Trigger{push(nil, nil, list("!docs/**", "**/*.md", "src/**"))},
			ev:       pushFeature,
			want:     Decision{Matched: true, Trigger: "push", Reason: "push to feature/login matched paths [!docs/** **/*.md src/**] (src/login/form.go)"},
		},
		{
			name:     "push exclusion removes the only included file",
			triggers: []workflow.Trigger{push(nil, nil, list("src/old/**", "!src/old/**"))},
			ev:       pushFeature,
			want:     Decision{Reason: "push trigger: path filter: no changed file matched [src/old/** !src/old/**]"},
		},
		{
			name:     "push every file excluded despite inclusions",
			triggers: []workflow.Trigger{push(nil, nil, list("docs/**", "!**/*.md"))},
			ev:       pushDocs,
			want:     Decision{Reason: "push trigger: path filter: every changed file is excluded by [docs/** !**/*.md]"},
		},
		{
			name:     "push path filter on a new branch matches its commits' files",
			triggers: []workflow.Trigger{push(nil, nil, list("src/**"))},
			ev:       newBranch,
			want:     Decision{Matched: true, Trigger: "push", Reason: "push to release/2.0 matched paths [src/**] (src/version.go)"},
		},
		{
			name:     "push path filter on a new branch that lists no commits",
			triggers: []workflow.Trigger{push(nil, nil, list("src/**"))},
			ev:       newEmpty,
			want:     Decision{Reason: "push trigger: path filter [src/**]: the changed files are unknown, so a path filter cannot match"},
		},
		{
			name:     "push only exclusions on a new branch that lists no commits",
			triggers: []workflow.Trigger{push(nil, nil, list("!docs/**"))},
			ev:       newEmpty,
			want:     Decision{Reason: "push trigger: path filter [!docs/**]: the changed files are unknown, so a path filter cannot match"},
		},
		{
			name:     "path filter on files over the bounds names the bound",
			triggers: []workflow.Trigger{push(nil, nil, list("src/**"))},
			ev: func() Event {
				ev := PushEvent("main", shaA)
				ev.SetChangedFiles([]string{strings.Repeat("a", MaxChangedPathLen+1)})
				return ev
			}(),
			want: Decision{Reason: fmt.Sprintf("push trigger: path filter [src/**]: the changed files are unknown "+
				"(a path of %d bytes is over the limit of %d), so a path filter cannot match", MaxChangedPathLen+1, MaxChangedPathLen)},
		},
		{
			name:     "push path filter with an empty list of changed files",
			triggers: []workflow.Trigger{push(nil, nil, list("!docs/**"))},
			ev:       withFiles(PushEvent("main", shaA)),
			want:     Decision{Reason: "push trigger: path filter [!docs/**]: no files changed, so a path filter cannot match"},
		},
		{
			name:     "push without path filter on a new branch",
			triggers: []workflow.Trigger{push(list("release/**"), nil, nil)},
			ev:       newBranch,
			want:     Decision{Matched: true, Trigger: "push", Reason: "push to release/2.0 matched branches [release/**]"},
		},

		// tag.
		{
			name:     "tag without filter",
			triggers: []workflow.Trigger{push(nil, nil, nil), tag()},
			ev:       tagPush,
			want:     Decision{Matched: true, Trigger: "tag", Reason: "tag v1.2.0 matched the tag trigger"},
		},
		{
			name:     "tag pattern",
			triggers: []workflow.Trigger{tag("v1.*")},
			ev:       tagPush,
			want:     Decision{Matched: true, Trigger: "tag", Reason: "tag v1.2.0 matched tags [v1.*]"},
		},
		{
			name:     "tag not in tags",
			triggers: []workflow.Trigger{tag("v2.*", "release-*")},
			ev:       tagPush,
			want:     Decision{Reason: `tag trigger: tag "v1.2.0" not in tags [v2.* release-*]`},
		},
		{
			name:     "tag trigger ignores branch pushes",
			triggers: []workflow.Trigger{tag()},
			ev:       pushMain,
			want:     Decision{Reason: "no trigger for event kind push"},
		},

		// pull_request.
		{
			name:     "pull request default types include opened",
			triggers: []workflow.Trigger{push(nil, nil, nil), pullRequest(nil, nil, nil)},
			ev:       prOpened,
			want: Decision{Matched: true, Trigger: "pull_request",
				Reason: "pull_request opened into main from feature/login matched the pull_request trigger"},
		},
		{
			name:     "pull request from a fork matches base branch",
			triggers: []workflow.Trigger{pullRequest(list("main"), nil, nil)},
			ev:       prFork,
			want: Decision{Matched: true, Trigger: "pull_request",
				Reason: "pull_request synchronize into main from patch-1 matched branches [main]"},
		},
		{
			name:     "pull request default types exclude closed",
			triggers: []workflow.Trigger{pullRequest(nil, nil, nil)},
			ev:       prClosed,
			want: Decision{Reason: `pull_request trigger: action "closed" not in types ` +
				`[opened synchronize reopened] (default)`},
		},
		{
			name:     "pull request explicit types",
			triggers: []workflow.Trigger{pullRequest(list("main"), list("closed"), nil)},
			ev:       prClosed,
			want: Decision{Matched: true, Trigger: "pull_request",
				Reason: "pull_request closed into main from feature/login matched branches [main], types [closed]"},
		},
		{
			name:     "pull request action not in explicit types",
			triggers: []workflow.Trigger{pullRequest(nil, list("closed"), nil)},
			ev:       prOpened,
			want:     Decision{Reason: `pull_request trigger: action "opened" not in types [closed]`},
		},
		{
			name:     "pull request branches are base branches",
			triggers: []workflow.Trigger{pullRequest(list("feature/**"), nil, nil)},
			ev:       prOpened,
			want:     Decision{Reason: `pull_request trigger: base branch "main" not in branches [feature/**]`},
		},
		{
			name:     "pull request into release branch",
			triggers: []workflow.Trigger{pullRequest(list("main"), nil, nil), pullRequest(list("release/**"), nil, nil)},
			ev:       prRelease,
			want: Decision{Matched: true, Trigger: "pull_request",
				Reason: "pull_request reopened into release/1.0 from patch-2 matched branches [release/**]"},
		},
		{
			name: "pull request base branch ignored",
			triggers: []workflow.Trigger{{
				Type: workflow.TriggerPullRequest, BranchesIgnore: list("main"),
			}},
			ev:   prOpened,
			want: Decision{Reason: `pull_request trigger: base branch "main" matched branches-ignore [main]`},
		},
		{
			name:     "pull request path filter with unknown files",
			triggers: []workflow.Trigger{pullRequest(nil, nil, list("src/**"))},
			ev:       prOpened,
			want: Decision{Reason: "pull_request trigger: path filter [src/**]: the changed files are unknown" +
				", so a path filter cannot match"},
		},
		{
			name:     "pull request path filter with known files",
			triggers: []workflow.Trigger{pullRequest(nil, nil, list("src/**"))},
			ev:       withFiles(prOpened, "README.md", "src/x.go"),
			want: Decision{Matched: true, Trigger: "pull_request",
				Reason: "pull_request opened into main from feature/login matched paths [src/**] (src/x.go)"},
		},
		{
			name:     "pull request built for preview",
			triggers: []workflow.Trigger{pullRequest(list("main"), nil, nil)},
			ev:       PullRequestEvent("main", "topic", "reopened"),
			want: Decision{Matched: true, Trigger: "pull_request",
				Reason: "pull_request reopened into main from topic matched branches [main]"},
		},

		// manual.
		{
			name:     "manual without inputs",
			triggers: []workflow.Trigger{push(nil, nil, nil), manual()},
			ev:       ManualEvent("", nil),
			want:     Decision{Matched: true, Trigger: "manual", Reason: "manual run on the default branch matched the manual trigger"},
		},
		{
			name: "manual from workflow_dispatch with every input type",
			triggers: []workflow.Trigger{manual(
				workflow.Input{Name: "environment", Type: workflow.InputChoice, Options: list("staging", "prod"), Required: true},
				workflow.Input{Name: "debug", Type: workflow.InputBoolean},
				workflow.Input{Name: "replicas", Type: workflow.InputNumber, Default: "1"},
				workflow.Input{Name: "extra", Type: workflow.InputString},
				workflow.Input{Name: "note", Default: "none"},
			)},
			ev: dispatch,
			want: Decision{Matched: true, Trigger: "manual", Reason: "manual run on main matched the manual trigger",
				Inputs: map[string]string{
					"environment": "prod", "debug": "true", "replicas": "3", "extra": `{"a":[1,2]}`, "note": "none",
				},
			},
		},
		{
			name:     "manual defaults and empty values",
			triggers: []workflow.Trigger{manual(envInput, debugInput, countInput)},
			ev:       ManualEvent("main", map[string]string{"env": "dev", "debug": "", "count": "-1.5e3"}),
			want: Decision{Matched: true, Trigger: "manual", Reason: "manual run on main matched the manual trigger",
				Inputs: map[string]string{"env": "dev", "debug": "false", "count": "-1.5e3"}},
		},
		{
			name:     "manual required input with a default",
			triggers: []workflow.Trigger{manual(workflow.Input{Name: "env", Required: true, Default: "dev"})},
			ev:       ManualEvent("refs/tags/v1", nil),
			want: Decision{Matched: true, Trigger: "manual", Reason: "manual run on tag v1 matched the manual trigger",
				Inputs: map[string]string{"env": "dev"}},
		},
		{
			name:     "manual boolean is canonical",
			triggers: []workflow.Trigger{manual(debugInput)},
			ev:       ManualEvent("main", map[string]string{"debug": "TRUE"}),
			want: Decision{Matched: true, Trigger: "manual", Reason: "manual run on main matched the manual trigger",
				Inputs: map[string]string{"debug": "true"}},
		},
		{
			name:     "manual unknown input",
			triggers: []workflow.Trigger{manual()},
			ev:       ManualEvent("main", map[string]string{"foo": "1"}),
			want:     Decision{Reason: `manual trigger: unknown input "foo"`},
		},
		{
			name:     "manual missing required input",
			triggers: []workflow.Trigger{manual(envInput)},
			ev:       ManualEvent("main", nil),
			want:     Decision{Reason: `manual trigger: missing required input "env"`},
		},
		{
			name:     "manual required input given empty",
			triggers: []workflow.Trigger{manual(envInput)},
			ev:       ManualEvent("main", map[string]string{"env": ""}),
			want:     Decision{Reason: `manual trigger: missing required input "env"`},
		},
		{
			name:     "manual bad boolean",
			triggers: []workflow.Trigger{manual(debugInput)},
			ev:       ManualEvent("main", map[string]string{"debug": "yes"}),
			want:     Decision{Reason: `manual trigger: input "debug": "yes" is not a boolean (true or false)`},
		},
		{
			name:     "manual bad number",
			triggers: []workflow.Trigger{manual(countInput)},
			ev:       ManualEvent("main", map[string]string{"count": "three"}),
			want:     Decision{Reason: `manual trigger: input "count": "three" is not a number`},
		},
		{
			name:     "manual bad choice",
			triggers: []workflow.Trigger{manual(envInput)},
			ev:       ManualEvent("main", map[string]string{"env": "qa"}),
			want:     Decision{Reason: `manual trigger: input "env": "qa" is not one of [dev prod]`},
		},
		{
			name:     "manual reports every problem",
			triggers: []workflow.Trigger{manual(envInput, debugInput, countInput)},
			ev:       ManualEvent("main", map[string]string{"zz": "1", "aa": "2", "debug": "1", "count": "NaN"}),
			want: Decision{Reason: `manual trigger: unknown input "aa"; unknown input "zz"; ` +
				`missing required input "env"; input "debug": "1" is not a boolean (true or false); ` +
				`input "count": "NaN" is not a number`},
		},
		{
			name:     "manual trigger ignores pushes",
			triggers: []workflow.Trigger{manual()},
			ev:       pushMain,
			want:     Decision{Reason: "no trigger for event kind push"},
		},

		// schedule.
		{
			name:     "schedule cron fired",
			triggers: []workflow.Trigger{schedule("*/5 * * * *"), schedule("0 3 * * *")},
			ev:       ScheduleEvent("0 3 * * *", "main", time.Time{}),
			want:     Decision{Matched: true, Trigger: "schedule", Reason: `schedule "0 3 * * *" on main matched cron "0 3 * * *"`},
		},
		{
			name:     "schedule cron spacing does not matter",
			triggers: []workflow.Trigger{schedule("0  3 * *\t*")},
			ev:       ScheduleEvent(" 0 3 * * * ", "", time.Time{}),
			want: Decision{Matched: true, Trigger: "schedule",
				Reason: `schedule " 0 3 * * * " on the default branch matched cron "0  3 * *\t*"`},
		},
		{
			name:     "schedule other cron fired",
			triggers: []workflow.Trigger{schedule("0 3 * * *")},
			ev:       ScheduleEvent("*/5 * * * *", "", time.Time{}),
			want:     Decision{Reason: `schedule trigger: cron "0 3 * * *" is not the schedule that fired ("*/5 * * * *")`},
		},
		{
			name:     "schedule with an extra field",
			triggers: []workflow.Trigger{schedule("0 3 * * *")},
			ev:       ScheduleEvent("0 3 * * * *", "", time.Time{}),
			want:     Decision{Reason: `schedule trigger: cron "0 3 * * *" is not the schedule that fired ("0 3 * * * *")`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wf := &workflow.Workflow{Name: "ci", File: ".kici/workflows/ci.yml", Triggers: tt.triggers}
			got := Match(wf, tt.ev)
			if got.Workflow != "ci" || got.File != ".kici/workflows/ci.yml" {
				t.Errorf("got workflow %q file %q, want %q and %q", got.Workflow, got.File, "ci", ".kici/workflows/ci.yml")
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Decision{}, "Workflow", "File", "Checks")); diff != "" {
				t.Errorf("Decision mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatchChecks(t *testing.T) {
	t.Parallel()
	pushDocs := githubEvent(t, "push", "push_docs_only.json")
	tests := []struct {
		name     string
		triggers []workflow.Trigger
		ev       Event
		want     []Check
	}{
		{
			name: "failing path filter after passing branch filter",
			triggers: []workflow.Trigger{
				pullRequest(list("main"), nil, nil),
				push(list("main"), list("wip/**"), list("src/**", "!docs/**")),
			},
			ev: pushDocs,
			want: []Check{
				{Trigger: "pull_request", Field: "kind", Expected: "pull_request", Actual: "push"},
				{Trigger: "push", Field: "kind", Expected: "push", Actual: "push", OK: true},
				{Trigger: "push", Field: "branches", Expected: "[main]", Actual: "main", OK: true},
				{Trigger: "push", Field: "branches-ignore", Expected: "[wip/**]", Actual: "main", OK: true},
				{Trigger: "push", Field: "paths", Expected: "[src/** !docs/**]", Actual: "2 changed files"},
			},
		},
		{
			name:     "filters after the first failure are skipped",
			triggers: []workflow.Trigger{push(list("dev"), nil, list("src/**"))},
			ev:       pushDocs,
			want: []Check{
				{Trigger: "push", Field: "kind", Expected: "push", Actual: "push", OK: true},
				{Trigger: "push", Field: "branches", Expected: "[dev]", Actual: "main"},
			},
		},
		{
			name:     "pull request types",
			triggers: []workflow.Trigger{pullRequest(nil, nil, list("src/**"))},
			ev:       withAction(PullRequestEvent("main", "x", ""), "edited"),
			want: []Check{
				{Trigger: "pull_request", Field: "kind", Expected: "pull_request", Actual: "pull_request", OK: true},
				{Trigger: "pull_request", Field: "types", Expected: "[opened synchronize reopened] (default)", Actual: "edited"},
			},
		},
		{
			name:     "unknown changed files",
			triggers: []workflow.Trigger{pullRequest(nil, list("opened"), list("src/**"))},
			ev:       PullRequestEvent("main", "x", ""),
			want: []Check{
				{Trigger: "pull_request", Field: "kind", Expected: "pull_request", Actual: "pull_request", OK: true},
				{Trigger: "pull_request", Field: "types", Expected: "[opened]", Actual: "opened", OK: true},
				{Trigger: "pull_request", Field: "paths", Expected: "[src/**]", Actual: "(changed files unknown)"},
			},
		},
		{
			name: "manual inputs",
			triggers: []workflow.Trigger{manual(
				workflow.Input{Name: "env", Type: workflow.InputChoice, Options: list("dev", "prod"), Required: true},
				workflow.Input{Name: "n", Type: workflow.InputNumber, Default: "1"},
			)},
			ev: ManualEvent("main", map[string]string{"env": "prod", "x": "y"}),
			want: []Check{
				{Trigger: "manual", Field: "kind", Expected: "manual", Actual: "manual", OK: true},
				{Trigger: "manual", Field: "inputs.x", Expected: "a declared input", Actual: "y"},
				{Trigger: "manual", Field: "inputs.env", Expected: "choice of [dev prod], required", Actual: "prod", OK: true},
			},
		},
		{
			name:     "schedule and unknown type",
			triggers: []workflow.Trigger{{Type: "nightly"}, schedule("@daily")},
			ev:       ScheduleEvent("@daily", "", time.Time{}),
			want: []Check{
				{Trigger: "nightly", Field: "kind", Expected: "(unknown trigger type)", Actual: "schedule"},
				{Trigger: "schedule", Field: "kind", Expected: "schedule", Actual: "schedule", OK: true},
				{Trigger: "schedule", Field: "cron", Expected: "@daily", Actual: "@daily", OK: true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Match(&workflow.Workflow{Name: "ci", Triggers: tt.triggers}, tt.ev)
			if diff := cmp.Diff(tt.want, got.Checks); diff != "" {
				t.Errorf("Checks mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatchAll(t *testing.T) {
	t.Parallel()
	plan := &workflow.Plan{
		SchemaVersion: workflow.SchemaVersion,
		Workflows: []workflow.Workflow{
			{Name: "ci", File: ".kici/workflows/ci.yml", Triggers: []workflow.Trigger{push(nil, nil, list("src/**"))}},
			{Name: "docs", File: ".kici/workflows/docs.yml", Triggers: []workflow.Trigger{push(nil, nil, list("docs/**"))}},
			{Name: "none", File: ".kici/workflows/none.yml"},
		},
	}
	tests := []struct {
		name string
		plan *workflow.Plan
		ev   Event
		want []Decision
	}{
		{
			name: "one decision per workflow in plan order",
			plan: plan,
			ev:   githubEvent(t, "push", "push_branch.json"),
			want: []Decision{
				{Workflow: "ci", File: ".kici/workflows/ci.yml", Matched: true, Trigger: "push",
					Reason: "push to main matched paths [src/**] (src/main.go)"},
				{Workflow: "docs", File: ".kici/workflows/docs.yml",
					Reason: "push trigger: path filter: no changed file matched [docs/**]"},
				{Workflow: "none", File: ".kici/workflows/none.yml", Reason: "workflow has no triggers"},
			},
		},
		{name: "nil plan", plan: nil, ev: PushEvent("main", ""), want: nil},
		{name: "empty plan", plan: &workflow.Plan{}, ev: PushEvent("main", ""), want: []Decision{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := MatchAll(tt.plan, tt.ev)
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Decision{}, "Checks")); diff != "" {
				t.Errorf("Decisions mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatchNilWorkflow(t *testing.T) {
	t.Parallel()
	got := Match(nil, PushEvent("main", ""))
	want := Decision{Reason: "no workflow"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Decision mismatch (-want +got):\n%s", diff)
	}
}

func TestSameFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b string
		want bool
	}{
		{name: "equal", a: "0 3 * * *", b: "0 3 * * *", want: true},
		{name: "spacing", a: " 0\t3  * * * ", b: "0 3 * * *", want: true},
		{name: "both empty", a: "", b: "  ", want: true},
		{name: "one empty", a: "", b: "0", want: false},
		{name: "different field", a: "0 3 * * *", b: "0 4 * * *", want: false},
		{name: "prefix field", a: "0 3", b: "0 30", want: false},
		{name: "more fields", a: "0 3 * * *", b: "0 3 * * * *", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := sameFields(tt.a, tt.b); got != tt.want {
				t.Errorf("sameFields(%q, %q): got %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestIsDecimal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    string
		want bool
	}{
		{name: "integer", v: "42", want: true},
		{name: "negative fraction", v: "-1.5", want: true},
		{name: "exponent", v: "2e10", want: true},
		{name: "empty", v: "", want: false},
		{name: "word", v: "three", want: false},
		{name: "hex", v: "0x10", want: false},
		{name: "underscore", v: "1_000", want: false},
		{name: "nan", v: "NaN", want: false},
		{name: "inf", v: "Inf", want: false},
		{name: "overflow", v: "1e400", want: false},
		{name: "space", v: " 1", want: false},
		{name: "two points", v: "1.2.3", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := isDecimal(tt.v); got != tt.want {
				t.Errorf("isDecimal(%q): got %v, want %v", tt.v, got, tt.want)
			}
		})
	}
}
