package trigger

import "fmt"

// Bounds on the changed files of one event, whatever reported them (a
// delivery, the source's git diff, GitHub's pull request files API). An
// event over any of them has its changed files unknown, with a warning
// saying why, rather than a list cut short: a path filter must not match on
// part of a change.
const (
	// MaxChangedFiles is the most changed files an event may list: 3000,
	// the most GitHub's pull request files API returns.
	MaxChangedFiles = 3000
	// MaxChangedPathLen is the longest changed path, in bytes.
	MaxChangedPathLen = 4096
	// MaxChangedFilesBytes bounds the changed paths' total length, in bytes.
	MaxChangedFilesBytes = 2 << 20
)

// BoundChangedFiles returns the union of lists, sorted, without duplicates
// and without empty names, when it keeps within MaxChangedFiles,
// MaxChangedPathLen and MaxChangedFilesBytes. Otherwise it returns nil and
// a warning naming the bound, for Event.ChangedFilesWarning: the changed
// files are then unknown. It never returns nil with an empty warning.
func BoundChangedFiles(lists ...[]string) (files []string, warning string) {
	n, total := 0, 0
	for _, l := range lists {
		for _, f := range l {
			if len(f) > MaxChangedPathLen {
				return nil, fmt.Sprintf("a path of %d bytes is over the limit of %d", len(f), MaxChangedPathLen)
			}
			n++
			total += len(f)
		}
	}
	files = sortedFiles(lists...)
	if n > MaxChangedFiles || total > MaxChangedFilesBytes {
		// Repeats may have brought the list back within the bounds.
		if len(files) > MaxChangedFiles {
			return nil, fmt.Sprintf("%d changed files, over the limit of %d", len(files), MaxChangedFiles)
		}
		if size := pathBytes(files); size > MaxChangedFilesBytes {
			return nil, fmt.Sprintf("%d bytes of changed paths, over the limit of %d", size, MaxChangedFilesBytes)
		}
	}
	return files, ""
}

func pathBytes(files []string) int {
	n := 0
	for _, f := range files {
		n += len(f)
	}
	return n
}

// SetChangedFiles records the changed files lists report on ev (see
// BoundChangedFiles): known and listed when within the bounds, unknown
// with ev.ChangedFilesWarning set otherwise.
func (ev *Event) SetChangedFiles(lists ...[]string) {
	files, warning := BoundChangedFiles(lists...)
	ev.ChangedFiles, ev.ChangedFilesKnown, ev.ChangedFilesWarning = files, files != nil, warning
}

// IsNewBranch reports whether ev is the first push of a branch: a push
// whose before commit is all zeros (GitHub also says "created": true).
func (ev Event) IsNewBranch() bool {
	return ev.Kind == KindPush && isZeroSHA(ev.Before)
}

// commitFiles returns the added, modified and removed lists of commits.
func commitFiles(commits []githubCommit) [][]string {
	lists := make([][]string, 0, 3*len(commits))
	for _, c := range commits {
		lists = append(lists, c.Added, c.Modified, c.Removed)
	}
	return lists
}
