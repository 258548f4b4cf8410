package trigger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// githubMaxCommits is the most commits GitHub lists in a push delivery. A
// push that lists this many may have had more, so its changed files are
// taken as unknown rather than guessed from a truncated list.
const githubMaxCommits = 2048

// NormalizeGitHub turns a GitHub webhook delivery into an Event. kind is the
// delivery's X-GitHub-Event header and body its JSON body, exactly as GitHub
// sent it (an HTTP handler decodes a form-encoded "payload=" body first).
//
// The mapping (docs/events.md has it as a table):
//
//   - push to refs/heads/X: a push event on branch X; to refs/tags/X: a tag
//     event for tag X. SHA is "after", Repo is repository.full_name, Actor is
//     pusher.name (else sender.login). ChangedFiles are the sorted union of
//     every listed commit's added, modified and removed files (within the
//     bounds of BoundChangedFiles). They are unknown when GitHub's list of
//     2048 commits may be truncated, for a new tag, and for a new branch
//     (created, or an all-zero "before"; Before is then all zeros) that
//     lists no commits: the pipeline then diffs the branch against the
//     default branch. A push with "deleted": true is ignored ("branch
//     deleted" or "tag deleted").
//   - pull_request: a pull_request event. Action is "action"; BaseBranch and
//     Branch are pull_request.base.ref (branch filters of a pull_request
//     trigger match the base branch); HeadBranch is pull_request.head.ref;
//     SHA is pull_request.head.sha; BaseSHA is pull_request.base.sha; Ref
//     is refs/pull/<number>/head; Fork is true when the head repository
//     (pull_request.head.repo.full_name) is not the base repository
//     (pull_request.base.repo.full_name), or is gone. A fork's pull request
//     needs BaseSHA: its workflows are read there. Changed files are
//     unknown: the delivery does not list them, and the pipeline asks the
//     source (Source.PullRequestFiles).
//   - create: a create event for the new branch or tag. It matches no
//     trigger: GitHub sends a push delivery for the same ref, and kici runs
//     on that one.
//   - workflow_dispatch: a manual event on "ref", with "inputs" as strings
//     (booleans as true/false, numbers as written, null inputs left out).
//   - ping, and every other kind: an *IgnoredError.
//
// A body over MaxBodySize gives an error wrapping ErrBodyTooLarge. A body
// that is not JSON of the right shape, or that lacks a field the event needs,
// gives an error that names the field. NormalizeGitHub does not panic on
// any input.
func NormalizeGitHub(kind string, body []byte) (Event, error) {
	if kind == "" {
		return Event{}, errors.New("github delivery: missing event kind (the X-GitHub-Event header)")
	}
	if err := checkBodySize("github "+kind+" delivery", body); err != nil {
		return Event{}, err
	}
	switch kind {
	case "push":
		return githubPush(body)
	case "pull_request":
		return githubPullRequest(body)
	case "create":
		return githubCreate(body)
	case "workflow_dispatch":
		return githubDispatch(body)
	case "ping":
		return Event{}, &IgnoredError{Kind: kind, Reason: "ping (the webhook is set up)"}
	default:
		return Event{}, &IgnoredError{Kind: kind, Reason: fmt.Sprintf("kici does not act on github %q events", kind)}
	}
}

// The shapes below hold only the fields kici reads. Nested objects are
// values, not pointers, so a missing or null object reads as empty.

type githubRepo struct {
	FullName string `json:"full_name"`
}

type githubUser struct {
	Login string `json:"login"`
}

type githubCommit struct {
	Added    []string `json:"added"`
	Modified []string `json:"modified"`
	Removed  []string `json:"removed"`
}

type githubPushBody struct {
	Ref        string     `json:"ref"`
	Before     string     `json:"before"`
	After      string     `json:"after"`
	Created    bool       `json:"created"`
	Deleted    bool       `json:"deleted"`
	Repository githubRepo `json:"repository"`
	Pusher     struct {
		Name string `json:"name"`
	} `json:"pusher"`
	Sender  githubUser     `json:"sender"`
	Commits []githubCommit `json:"commits"`
}

type githubPRRef struct {
	Ref  string      `json:"ref"`
	SHA  string      `json:"sha"`
	Repo *githubRepo `json:"repo"`
}

type githubPullRequestBody struct {
	Action      string `json:"action"`
	Number      int64  `json:"number"`
	Before      string `json:"before"`
	PullRequest *struct {
		Number int64       `json:"number"`
		Head   githubPRRef `json:"head"`
		Base   githubPRRef `json:"base"`
	} `json:"pull_request"`
	Repository githubRepo `json:"repository"`
	Sender     githubUser `json:"sender"`
}

type githubCreateBody struct {
	Ref        string     `json:"ref"`
	RefType    string     `json:"ref_type"`
	Repository githubRepo `json:"repository"`
	Sender     githubUser `json:"sender"`
}

type githubDispatchBody struct {
	Ref        string                     `json:"ref"`
	Inputs     map[string]json.RawMessage `json:"inputs"`
	Repository githubRepo                 `json:"repository"`
	Sender     githubUser                 `json:"sender"`
}

// missingField is the error for a required field that is absent or empty.
func missingField(what, field string) error {
	return fmt.Errorf("%s: missing %q", what, field)
}

func githubPush(body []byte) (Event, error) {
	const what = "github push delivery"
	var p githubPushBody
	if err := json.Unmarshal(body, &p); err != nil {
		return Event{}, fmt.Errorf("%s: decode body: %w", what, err)
	}
	if p.Ref == "" {
		return Event{}, missingField(what, "ref")
	}
	ev, err := refEvent("push", ProviderGitHub, p.Ref)
	if err != nil {
		return Event{}, err
	}
	if p.Deleted {
		return Event{}, &IgnoredError{Kind: "push", Reason: deletedReason(ev)}
	}
	if p.After == "" {
		return Event{}, missingField(what, "after")
	}
	if isZeroSHA(p.After) {
		return Event{}, &IgnoredError{Kind: "push", Reason: deletedReason(ev)}
	}
	ev.SHA = p.After
	ev.Before = p.Before
	ev.Repo = p.Repository.FullName
	ev.Actor = p.Pusher.Name
	if ev.Actor == "" {
		ev.Actor = p.Sender.Login
	}
	created := p.Created || isZeroSHA(p.Before)
	if created && ev.Kind == KindPush {
		// The first push of a branch: GitHub lists the commits new to
		// the repository, whose files are what the branch adds. With none
		// listed, the pipeline diffs against the default branch instead.
		if !isZeroSHA(ev.Before) {
			ev.Before = zeroSHA
		}
		if len(p.Commits) > 0 && len(p.Commits) < githubMaxCommits {
			ev.SetChangedFiles(commitFiles(p.Commits)...)
		}
		return ev, nil
	}
	if !created && len(p.Commits) < githubMaxCommits {
		ev.SetChangedFiles(commitFiles(p.Commits)...)
	}
	return ev, nil
}

func githubPullRequest(body []byte) (Event, error) {
	const what = "github pull_request delivery"
	var p githubPullRequestBody
	if err := json.Unmarshal(body, &p); err != nil {
		return Event{}, fmt.Errorf("%s: decode body: %w", what, err)
	}
	pr := p.PullRequest
	switch {
	case p.Action == "":
		return Event{}, missingField(what, "action")
	case pr == nil:
		return Event{}, missingField(what, "pull_request")
	case pr.Base.Ref == "":
		return Event{}, missingField(what, "pull_request.base.ref")
	case pr.Head.Ref == "":
		return Event{}, missingField(what, "pull_request.head.ref")
	case pr.Head.SHA == "":
		return Event{}, missingField(what, "pull_request.head.sha")
	}
	number := p.Number
	if number == 0 {
		number = pr.Number
	}
	if number <= 0 {
		return Event{}, missingField(what, "number")
	}
	baseRepo := p.Repository.FullName
	if pr.Base.Repo != nil && pr.Base.Repo.FullName != "" {
		baseRepo = pr.Base.Repo.FullName
	}
	repo := p.Repository.FullName
	if repo == "" {
		repo = baseRepo
	}
	// A head repository that is gone (null) was a fork: the base
	// repository cannot be deleted while its pull request is delivered.
	fork := pr.Head.Repo == nil || pr.Head.Repo.FullName != baseRepo
	headRepo := ""
	if pr.Head.Repo != nil {
		headRepo = pr.Head.Repo.FullName
	}
	if fork && pr.Base.SHA == "" {
		return Event{}, fmt.Errorf("%s: missing %q (a pull request from a fork runs the base commit's workflows)", what, "pull_request.base.sha")
	}
	return Event{
		Kind:       KindPullRequest,
		Provider:   ProviderGitHub,
		Repo:       repo,
		Ref:        pullRefPrefix + strconv.FormatInt(number, 10) + "/head",
		Branch:     pr.Base.Ref,
		SHA:        pr.Head.SHA,
		Before:     p.Before,
		BaseSHA:    pr.Base.SHA,
		Number:     int(number),
		BaseBranch: pr.Base.Ref,
		HeadBranch: pr.Head.Ref,
		Action:     p.Action,
		Fork:       fork,
		HeadRepo:   headRepo,
		Actor:      p.Sender.Login,
	}, nil
}

func githubCreate(body []byte) (Event, error) {
	const what = "github create delivery"
	var p githubCreateBody
	if err := json.Unmarshal(body, &p); err != nil {
		return Event{}, fmt.Errorf("%s: decode body: %w", what, err)
	}
	if p.Ref == "" {
		return Event{}, missingField(what, "ref")
	}
	var ref string
	switch p.RefType {
	case "branch":
		ref = BranchRefPrefix + p.Ref
	case "tag":
		ref = TagRefPrefix + p.Ref
	case "":
		return Event{}, missingField(what, "ref_type")
	default:
		return Event{}, &IgnoredError{Kind: "create", Reason: fmt.Sprintf("ref_type %q is neither branch nor tag", p.RefType)}
	}
	ev := Event{Kind: KindCreate, Provider: ProviderGitHub, Repo: p.Repository.FullName, Actor: p.Sender.Login}
	ev.setRef(ref)
	return ev, nil
}

func githubDispatch(body []byte) (Event, error) {
	const what = "github workflow_dispatch delivery"
	var p githubDispatchBody
	if err := json.Unmarshal(body, &p); err != nil {
		return Event{}, fmt.Errorf("%s: decode body: %w", what, err)
	}
	if p.Ref == "" {
		return Event{}, missingField(what, "ref")
	}
	var inputs map[string]string
	for name, raw := range p.Inputs {
		v, ok, err := inputString(raw)
		if err != nil {
			return Event{}, fmt.Errorf("%s: input %q: %w", what, name, err)
		}
		if !ok {
			continue
		}
		if inputs == nil {
			inputs = make(map[string]string, len(p.Inputs))
		}
		inputs[name] = v
	}
	ev := ManualEvent(p.Ref, inputs)
	ev.Provider = ProviderGitHub
	ev.Repo = p.Repository.FullName
	ev.Actor = p.Sender.Login
	return ev, nil
}

// inputString renders one JSON input value as the string a manual trigger
// reads: a string as is, true/false and numbers as written, an object or
// array as its JSON text. ok is false for null.
func inputString(raw json.RawMessage) (v string, ok bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", false, err
		}
		return v, true, nil
	}
	if raw[0] == '{' || raw[0] == '[' {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return "", false, err
		}
		return b.String(), true, nil
	}
	// A boolean or a number, already checked by json.Unmarshal.
	return string(raw), true, nil
}
