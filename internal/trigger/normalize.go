package trigger

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// MaxBodySize is the largest delivery body, in bytes, that the normalisers
// accept: 25 MiB, the cap GitHub puts on its own webhook payloads.
const MaxBodySize = 25 << 20

// ErrBodyTooLarge is returned (wrapped) for a delivery body over MaxBodySize.
// An HTTP handler answers it with 413.
var ErrBodyTooLarge = errors.New("delivery body too large")

// IgnoredError is returned by a normaliser for a delivery it recognises but
// that can start nothing: a ping, a deleted branch or tag, a ref that is
// neither a branch nor a tag, or an event kind kici does not act on. It is
// not a failure; a webhook handler answers the provider with success and
// records Reason. Detect it with errors.As.
type IgnoredError struct {
	// Kind is the delivery's kind as the provider named it ("ping",
	// "push", "issues", ...).
	Kind string
	// Reason says in words why nothing runs, e.g. "branch deleted".
	Reason string
}

// Error implements error.
func (e *IgnoredError) Error() string {
	return fmt.Sprintf("%s delivery ignored: %s", e.Kind, e.Reason)
}

// checkBodySize rejects a body over MaxBodySize; what names the delivery.
func checkBodySize(what string, body []byte) error {
	if len(body) > MaxBodySize {
		return fmt.Errorf("%s: %d bytes: %w (limit %d)", what, len(body), ErrBodyTooLarge, MaxBodySize)
	}
	return nil
}

// isZeroSHA reports whether sha is git's "no commit" object name (40 zeros
// for SHA-1 repositories, 64 for SHA-256 ones).
func isZeroSHA(sha string) bool {
	return sha != "" && strings.Trim(sha, "0") == ""
}

// refKind classifies a full ref: its branch or tag name, or neither.
func refKind(ref string) (branch, tag string) {
	switch {
	case strings.HasPrefix(ref, BranchRefPrefix):
		return ref[len(BranchRefPrefix):], ""
	case strings.HasPrefix(ref, TagRefPrefix):
		return "", ref[len(TagRefPrefix):]
	}
	return "", ""
}

// refEvent returns a push or tag event for a full ref, or an *IgnoredError
// (kind names the delivery) when the ref is neither a branch nor a tag.
func refEvent(kind, provider, ref string) (Event, error) {
	branch, tag := refKind(ref)
	ev := Event{Provider: provider, Ref: ref, Branch: branch, Tag: tag}
	switch {
	case branch != "":
		ev.Kind = KindPush
	case tag != "":
		ev.Kind = KindTag
	default:
		return Event{}, &IgnoredError{Kind: kind, Reason: fmt.Sprintf("ref %q is neither a branch nor a tag", ref)}
	}
	return ev, nil
}

// deletedReason is the IgnoredError reason for a deleted ref.
func deletedReason(ev Event) string {
	if ev.Kind == KindTag {
		return "tag deleted"
	}
	return "branch deleted"
}

// sortedFiles returns the union of lists, sorted, without duplicates and
// without empty names. It never returns nil.
func sortedFiles(lists ...[]string) []string {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	files := make([]string, 0, n)
	for _, l := range lists {
		for _, f := range l {
			if f != "" {
				files = append(files, f)
			}
		}
	}
	slices.Sort(files)
	return slices.Compact(files)
}
