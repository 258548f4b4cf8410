package trigger

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBoundChangedFiles(t *testing.T) {
	t.Parallel()
	many := func(n int) []string {
		files := make([]string, n)
		for i := range files {
			files[i] = fmt.Sprintf("f/%05d", i)
		}
		return files
	}
	long := strings.Repeat("p", MaxChangedPathLen)
	// Paths of the longest length: enough of them to pass the byte bound
	// while staying under the count bound.
	heavy := make([]string, MaxChangedFilesBytes/MaxChangedPathLen+1)
	for i := range heavy {
		heavy[i] = fmt.Sprintf("%05d", i) + long[5:]
	}
	tests := []struct {
		name        string
		lists       [][]string
		want        []string
		wantWarning string
	}{
		{name: "union sorted without repeats or empties", lists: [][]string{{"b", "a", ""}, {"a", "c"}}, want: []string{"a", "b", "c"}},
		{name: "nothing is known and empty", lists: nil, want: []string{}},
		{name: "the most files", lists: [][]string{many(MaxChangedFiles)}, want: many(MaxChangedFiles)},
		{
			name:        "one file too many",
			lists:       [][]string{many(MaxChangedFiles + 1)},
			wantWarning: fmt.Sprintf("%d changed files, over the limit of %d", MaxChangedFiles+1, MaxChangedFiles),
		},
		{name: "repeats bring it within the bound", lists: [][]string{many(MaxChangedFiles), many(MaxChangedFiles)}, want: many(MaxChangedFiles)},
		{name: "the longest path", lists: [][]string{{long}}, want: []string{long}},
		{
			name:        "a path too long",
			lists:       [][]string{{"a", long + "x"}},
			wantWarning: fmt.Sprintf("a path of %d bytes is over the limit of %d", MaxChangedPathLen+1, MaxChangedPathLen),
		},
		{
			name:        "too many bytes",
			lists:       [][]string{heavy},
			wantWarning: fmt.Sprintf("%d bytes of changed paths, over the limit of %d", len(heavy)*MaxChangedPathLen, MaxChangedFilesBytes),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, warning := BoundChangedFiles(tc.lists...)
			if warning != tc.wantWarning {
				t.Errorf("got warning %q, want %q", warning, tc.wantWarning)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("files mismatch (-want +got):\n%s", diff)
			}
			var ev Event
			ev.SetChangedFiles(tc.lists...)
			if ev.ChangedFilesKnown != (tc.want != nil) || ev.ChangedFilesWarning != tc.wantWarning {
				t.Errorf("SetChangedFiles: got known %v, warning %q; want known %v, warning %q",
					ev.ChangedFilesKnown, ev.ChangedFilesWarning, tc.want != nil, tc.wantWarning)
			}
		})
	}
}

// TestNormalizeGitHubNewBranchHostile feeds a first push whose commits list
// more files than the bound, or a path too long: the changed files are
// unknown, with a warning, and the delivery is still a push.
func TestNormalizeGitHubNewBranchHostile(t *testing.T) {
	t.Parallel()
	body := func(files []string) []byte {
		var b strings.Builder
		b.WriteString(`{"ref": "refs/heads/new", "before": "` + zeroSHA + `", "after": "` + shaB + `", "created": true, "commits": [{"added": [`)
		for i, f := range files {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%q", f)
		}
		b.WriteString(`]}]}`)
		return []byte(b.String())
	}
	tooMany := make([]string, MaxChangedFiles+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("src/%d.go", i)
	}
	tests := []struct {
		name, wantWarning string
		files             []string
	}{
		{"too many files", fmt.Sprintf("%d changed files, over the limit of %d", MaxChangedFiles+1, MaxChangedFiles), tooMany},
		{"path too long", fmt.Sprintf("a path of %d bytes is over the limit of %d", MaxChangedPathLen+1, MaxChangedPathLen),
			[]string{"README.md", strings.Repeat("d/", MaxChangedPathLen/2) + "x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev, err := NormalizeGitHub("push", body(tc.files))
			if err != nil {
				t.Fatalf("NormalizeGitHub: %v", err)
			}
			if ev.Kind != KindPush || ev.ChangedFilesKnown || ev.ChangedFiles != nil || ev.ChangedFilesWarning != tc.wantWarning {
				t.Errorf("got kind %q, files %d known %v warning %q; want a push with unknown files and warning %q",
					ev.Kind, len(ev.ChangedFiles), ev.ChangedFilesKnown, ev.ChangedFilesWarning, tc.wantWarning)
			}
			if err := ev.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}
