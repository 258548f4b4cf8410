package trigger

import (
	"encoding/json"
	"fmt"
	"strings"
)

// genericBody is the generic git push payload (docs/events.md):
//
//	{
//	  "ref": "refs/heads/main",
//	  "before": "<sha before the push>",
//	  "after": "<sha after the push>",
//	  "repository": "owner/repo",
//	  "actor": "alice",
//	  "changed_files": ["src/main.go"]
//	}
//
// Only ref and after are required. repository may also be an object with a
// "full_name", as Gitea and Gogs send it; so may "created" and "commits"
// (each with added, modified and removed lists), as they and GitHub send
// them. Unknown fields are ignored.
type genericBody struct {
	Ref          string          `json:"ref"`
	Before       string          `json:"before"`
	After        string          `json:"after"`
	Created      bool            `json:"created"`
	Repository   json.RawMessage `json:"repository"`
	Actor        string          `json:"actor"`
	ChangedFiles *[]string       `json:"changed_files"`
	Commits      []githubCommit  `json:"commits"`
}

// NormalizeGeneric turns a generic git push payload into a push event (for a
// ref under refs/heads/) or a tag event (under refs/tags/). The changed files
// are known when the payload has a "changed_files" array, even an empty one
// (sorted and deduplicated), or, for the first push of a branch ("created",
// or an all-zero "before"; Before is then all zeros), when it lists
// "commits": the union of their added, modified and removed files. Either
// list over the bounds of BoundChangedFiles leaves them unknown, with
// ChangedFilesWarning saying why. An all-zero "after" (a
// deleted ref) and a full ref that is neither a branch nor a tag give an
// *IgnoredError. A body over MaxBodySize, a body that is not such a JSON
// object, a missing "ref" or "after", or a "ref" that is not a full ref give
// an error naming the problem. NormalizeGeneric does not panic on any input.
func NormalizeGeneric(body []byte) (Event, error) {
	const what = "generic push payload"
	if err := checkBodySize(what, body); err != nil {
		return Event{}, err
	}
	var p genericBody
	if err := json.Unmarshal(body, &p); err != nil {
		return Event{}, fmt.Errorf("%s: decode body: %w", what, err)
	}
	if p.Ref == "" {
		return Event{}, missingField(what, "ref")
	}
	if !strings.HasPrefix(p.Ref, "refs/") {
		return Event{}, fmt.Errorf("%s: \"ref\" must be a full ref such as refs/heads/main, got %q", what, p.Ref)
	}
	if p.After == "" {
		return Event{}, missingField(what, "after")
	}
	repo, err := genericRepo(p.Repository)
	if err != nil {
		return Event{}, fmt.Errorf("%s: %w", what, err)
	}
	ev, err := refEvent("generic", ProviderGeneric, p.Ref)
	if err != nil {
		return Event{}, err
	}
	if isZeroSHA(p.After) {
		return Event{}, &IgnoredError{Kind: "generic", Reason: deletedReason(ev)}
	}
	ev.SHA = p.After
	ev.Before = p.Before
	ev.Repo = repo
	ev.Actor = p.Actor
	if p.Created && ev.Kind == KindPush && !isZeroSHA(ev.Before) {
		ev.Before = zeroSHA
	}
	switch {
	case p.ChangedFiles != nil:
		ev.SetChangedFiles(*p.ChangedFiles)
	case ev.IsNewBranch() && len(p.Commits) > 0 && len(p.Commits) < githubMaxCommits:
		// A new branch's commits are what it adds. On a later push the
		// source's diff of before and after is exact, so it is preferred
		// to a commit list the sender may have cut short.
		ev.SetChangedFiles(commitFiles(p.Commits)...)
	}
	return ev, nil
}

// genericRepo reads "repository": absent, null, a string, or an object with
// a "full_name".
func genericRepo(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var name string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &name); err != nil {
			return "", fmt.Errorf("decode \"repository\": %w", err)
		}
		return name, nil
	}
	var obj struct {
		FullName string `json:"full_name"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("\"repository\" must be a string or an object with \"full_name\": %w", err)
	}
	return obj.FullName, nil
}
