package trigger

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/workflow"
)

// Event kinds. A trigger of type T matches only events of kind T; KindCreate
// matches no trigger (see NormalizeGitHub).
const (
	KindPush        = "push"
	KindTag         = "tag"
	KindPullRequest = "pull_request"
	KindManual      = "manual"
	KindSchedule    = "schedule"
	KindCreate      = "create"
)

// Providers: where an Event came from.
const (
	// ProviderGitHub marks an event normalised from a GitHub delivery.
	ProviderGitHub = "github"
	// ProviderGeneric marks an event normalised from a generic push payload.
	ProviderGeneric = "generic"
	// ProviderManual marks an event a person asked for through the API or
	// the CLI (including a push or tag event built by PushEvent or TagEvent).
	ProviderManual = "manual"
	// ProviderSchedule marks an event the cron scheduler fired.
	ProviderSchedule = "schedule"
)

// Ref prefixes of branches, tags and pull-request heads.
const (
	BranchRefPrefix = "refs/heads/"
	TagRefPrefix    = "refs/tags/"
	pullRefPrefix   = "refs/pull/"
)

// zeroSHA is the object name git and GitHub use for "no commit": the before
// of a created ref and the after of a deleted one.
const zeroSHA = "0000000000000000000000000000000000000000"

// Event is the provider-neutral description of something that may start
// workflows. It is what the matcher reads, what a run records as its event,
// and what `kici preview -o json` prints under "event".
//
// Branch and Tag always agree with Ref: a Ref under refs/heads/ sets Branch,
// one under refs/tags/ sets Tag. A pull_request event is the exception that
// the matcher needs: its Ref is the pull request's head (refs/pull/N/head)
// and its Branch is the base branch, the branch the pull request targets,
// because that is what the branch filters of a pull_request trigger match.
// Validate checks these rules.
type Event struct {
	// Kind is one of KindPush, KindTag, KindPullRequest, KindManual,
	// KindSchedule and KindCreate.
	Kind string `json:"kind"`
	// Provider is one of ProviderGitHub, ProviderGeneric, ProviderManual and
	// ProviderSchedule.
	Provider string `json:"provider"`
	// Repo is the repository as the provider names it (owner/name on
	// GitHub), or the source name; empty when the delivery did not say.
	Repo string `json:"repo,omitempty"`
	// Ref is the full git ref the event is about, such as refs/heads/main,
	// refs/tags/v1.0 or refs/pull/7/head. Empty for a manual or schedule
	// event means the repository's default branch.
	Ref string `json:"ref,omitempty"`
	// Branch is the branch name of Ref, or the base branch of a pull request.
	Branch string `json:"branch,omitempty"`
	// Tag is the tag name of Ref.
	Tag string `json:"tag,omitempty"`
	// SHA is the commit to build: the pushed head, or the pull request's
	// head commit. Empty when the provider did not say (manual runs resolve
	// it from Ref later).
	SHA string `json:"sha,omitempty"`
	// Before is the commit Ref pointed at before a push (all zeros for a
	// new ref), or before a pull request's synchronize.
	Before string `json:"before,omitempty"`
	// BaseSHA is the commit a pull request's base branch was at when the
	// delivery was sent (pull_request.base.sha). The workflows of a pull
	// request from a fork are read at this commit, never at SHA.
	BaseSHA string `json:"base_sha,omitempty"`
	// Number is the pull request's number.
	Number int `json:"number,omitempty"`
	// BaseBranch is the branch a pull request targets.
	BaseBranch string `json:"base_branch,omitempty"`
	// HeadBranch is the branch a pull request comes from (in the fork, for
	// a pull request from a fork).
	HeadBranch string `json:"head_branch,omitempty"`
	// Action is the pull-request action (opened, synchronize, closed, ...).
	Action string `json:"action,omitempty"`
	// Fork is true when a pull request comes from another repository than
	// its base (or from a fork that has since been deleted).
	Fork bool `json:"fork,omitempty"`
	// HeadRepo is the repository a pull request comes from
	// (pull_request.head.repo.full_name); empty when it is gone.
	HeadRepo string `json:"head_repo,omitempty"`
	// ChangedFiles are the repository-relative paths the event changed,
	// sorted and without duplicates. Meaningful only with ChangedFilesKnown.
	ChangedFiles []string `json:"changed_files,omitempty"`
	// ChangedFilesKnown is false when nothing told which files changed (a
	// manual run, a schedule, a pull request or new branch the source could
	// not diff, a list over the bounds of BoundChangedFiles). A trigger with
	// a path filter never matches such an event; see docs/events.md.
	ChangedFilesKnown bool `json:"changed_files_known"`
	// ChangedFilesWarning says why the changed files are unknown when that
	// is worth a warning: a list over the bounds, or a source that failed to
	// list them. Empty otherwise.
	ChangedFilesWarning string `json:"changed_files_warning,omitempty"`
	// Actor is the user who caused the event.
	Actor string `json:"actor,omitempty"`
	// Inputs are the values given for a manual run's inputs, as strings.
	Inputs map[string]string `json:"inputs,omitempty"`
	// Cron is the spec of the schedule trigger that fired (schedule events).
	Cron string `json:"cron,omitempty"`
	// Tick is, for a schedule event, the tick (UTC, to the minute) that
	// fired: the run records which tick started it.
	Tick time.Time `json:"tick,omitzero"`
}

// PushEvent returns the event of a push of sha to ref, as the API and
// `kici preview` build it: a ref under refs/tags/ gives a tag event, any
// other ref a branch push. A ref without a "refs/" prefix is a branch name
// ("main" means refs/heads/main). Changed files are unknown. A ref that is
// neither a branch nor a tag (refs/notes/x, or an empty name) gives an event
// that Validate rejects.
func PushEvent(ref, sha string) Event {
	ev := Event{Kind: KindPush, Provider: ProviderManual, SHA: sha}
	ev.setRef(fullBranchRef(ref))
	if ev.Tag != "" {
		ev.Kind = KindTag
	}
	return ev
}

// TagEvent returns the event of pushing tag (a name like "v1.0" or a full
// refs/tags/ ref) at sha, as the API and `kici preview` build it.
func TagEvent(tag, sha string) Event {
	if !strings.HasPrefix(tag, TagRefPrefix) {
		tag = TagRefPrefix + tag
	}
	ev := Event{Kind: KindTag, Provider: ProviderManual, SHA: sha}
	ev.setRef(tag)
	return ev
}

// PullRequestEvent returns the event of a pull request from branch head into
// branch base with the given action (opened when empty), as `kici preview`
// builds it. Changed files are unknown; set ChangedFiles and
// ChangedFilesKnown to preview a path filter.
func PullRequestEvent(base, head, action string) Event {
	if action == "" {
		action = "opened"
	}
	base = strings.TrimPrefix(base, BranchRefPrefix)
	head = strings.TrimPrefix(head, BranchRefPrefix)
	return Event{
		Kind:       KindPullRequest,
		Provider:   ProviderManual,
		Branch:     base,
		BaseBranch: base,
		HeadBranch: head,
		Action:     action,
	}
}

// ManualEvent returns the event of a person starting the manual trigger on
// ref with the given inputs. An empty ref means the default branch; a ref
// without a "refs/" prefix is a branch name. The inputs map is used as is,
// not copied.
func ManualEvent(ref string, inputs map[string]string) Event {
	ev := Event{Kind: KindManual, Provider: ProviderManual, Inputs: inputs}
	if ref != "" {
		ev.setRef(fullBranchRef(ref))
	}
	return ev
}

// ScheduleEvent returns the event of the schedule trigger with spec cron
// firing on ref (empty means the default branch) at tick (zero when not
// known, as in kici preview).
func ScheduleEvent(cron, ref string, tick time.Time) Event {
	ev := Event{Kind: KindSchedule, Provider: ProviderSchedule, Cron: cron}
	if !tick.IsZero() {
		ev.Tick = tick.UTC()
	}
	if ref != "" {
		ev.setRef(fullBranchRef(ref))
	}
	return ev
}

// setRef sets Ref and derives Branch and Tag from it.
func (ev *Event) setRef(ref string) {
	ev.Ref = ref
	ev.Branch, ev.Tag = "", ""
	switch {
	case strings.HasPrefix(ref, BranchRefPrefix):
		ev.Branch = ref[len(BranchRefPrefix):]
	case strings.HasPrefix(ref, TagRefPrefix):
		ev.Tag = ref[len(TagRefPrefix):]
	}
}

// fullBranchRef returns ref unchanged when it is a full ref and the ref of
// branch ref otherwise.
func fullBranchRef(ref string) string {
	if strings.HasPrefix(ref, "refs/") {
		return ref
	}
	return BranchRefPrefix + ref
}

// Validate reports the first way ev breaks the rules of the Event type: an
// unknown kind, a Branch or Tag that disagrees with Ref, a push that is not
// to a branch, a tag event that is not a tag, a pull request without a base
// branch, or changed files listed while ChangedFilesKnown is false. Every
// event the normalisers and constructors of this package return is valid.
func (ev Event) Validate() error {
	switch ev.Kind {
	case KindPush, KindTag, KindPullRequest, KindManual, KindSchedule, KindCreate:
	case "":
		return errors.New("event kind is empty")
	default:
		return fmt.Errorf("unknown event kind %q", ev.Kind)
	}
	if !ev.ChangedFilesKnown && len(ev.ChangedFiles) > 0 {
		return errors.New("changed files listed but changed_files_known is false")
	}
	if ev.Kind == KindPullRequest {
		if ev.BaseBranch == "" {
			return errors.New("pull_request event without base branch")
		}
		if ev.Branch != ev.BaseBranch || ev.Tag != "" {
			return fmt.Errorf("pull_request event: branch %q, tag %q, want branch %q (the base branch) and no tag",
				ev.Branch, ev.Tag, ev.BaseBranch)
		}
		if ev.Ref != "" && !strings.HasPrefix(ev.Ref, pullRefPrefix) {
			return fmt.Errorf("pull_request event: ref %q is not under %s", ev.Ref, pullRefPrefix)
		}
		return nil
	}
	var branch, tag string
	switch {
	case strings.HasPrefix(ev.Ref, BranchRefPrefix):
		branch = ev.Ref[len(BranchRefPrefix):]
	case strings.HasPrefix(ev.Ref, TagRefPrefix):
		tag = ev.Ref[len(TagRefPrefix):]
	}
	if ev.Branch != branch || ev.Tag != tag {
		return fmt.Errorf("ref %q does not agree with branch %q and tag %q", ev.Ref, ev.Branch, ev.Tag)
	}
	switch ev.Kind {
	case KindPush:
		if branch == "" {
			return fmt.Errorf("push event: ref %q is not a branch", ev.Ref)
		}
	case KindTag:
		if tag == "" {
			return fmt.Errorf("tag event: ref %q is not a tag", ev.Ref)
		}
	case KindCreate:
		if branch == "" && tag == "" {
			return fmt.Errorf("create event: ref %q is neither a branch nor a tag", ev.Ref)
		}
	}
	return nil
}

// Vars returns what `event.*` means in the workflow's expressions and
// interpolations for this event.
func (ev Event) Vars() workflow.EventVars {
	return workflow.EventVars{
		Kind:         ev.Kind,
		Repo:         ev.Repo,
		Ref:          ev.Ref,
		Branch:       ev.Branch,
		Tag:          ev.Tag,
		SHA:          ev.SHA,
		Before:       ev.Before,
		Number:       ev.Number,
		Fork:         ev.Fork,
		BaseBranch:   ev.BaseBranch,
		HeadBranch:   ev.HeadBranch,
		Action:       ev.Action,
		Actor:        ev.Actor,
		ChangedFiles: ev.ChangedFiles,
	}
}
