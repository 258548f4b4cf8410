package orchestrator

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// TestDocsNameOnlyKnownVariables: every KICI_ variable the docs (and the
// README) name is one some kici component reads (knownVars) or one a job's
// steps get (jobVariable), so an operator is never told to set a variable
// nothing reads, as docs/metrics.md once named KICI_SCALERS_FILE for
// KICI_SCALER_CONFIG_PATH.
func TestDocsNameOnlyKnownVariables(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "..", "README.md"))
	if len(files) < 2 {
		t.Fatalf("got %d doc files, want the docs and the README", len(files))
	}
	// Names the docs give as examples of what not to set.
	examples := []string{
		"KICI_LABEL", // docs/agent.md: a misspelling the agent warns about
	}
	name := regexp.MustCompile(`\bKICI_[A-Z0-9_]*[A-Z0-9]\b`)
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, v := range name.FindAllString(string(text), -1) {
			if !seen[v] && !slices.Contains(knownVars, v) && !jobVariable(v) && !slices.Contains(examples, v) {
				t.Errorf("%s names %s, which no kici component reads (knownVars in config.go)", filepath.Base(f), v)
			}
			seen[v] = true
		}
	}
}
