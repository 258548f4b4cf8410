package config

import (
	"os"
	"strings"
	"testing"
)

// TestDocsExamples loads every complete example of docs/scaler.md: each
// yaml block that starts with "version:" as a main file, and each that
// starts with "scalers:" as a drop-in beside an empty main file.
// Fragments (a single key) are not checked.
func TestDocsExamples(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../../docs/scaler.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(doc), "```yaml\n")[1:]
	if len(blocks) == 0 {
		t.Fatal("no yaml blocks in docs/scaler.md")
	}
	checked := 0
	for i, b := range blocks {
		src, _, ok := strings.Cut(b, "```")
		if !ok {
			t.Fatalf("block %d is not closed", i)
		}
		var err error
		switch {
		case strings.HasPrefix(src, "version:"):
			_, err = Parse("docs/scaler.md", []byte(src))
		case strings.HasPrefix(src, "scalers:"):
			_, err = Parse("scalers.yaml", []byte("version: 1\nscalers: []\n"), NamedFile{Name: "docs/scaler.md", Data: []byte(src)})
		default:
			continue
		}
		checked++
		if err != nil {
			t.Errorf("example %d of docs/scaler.md does not load:\n%s\n%v", i, src, err)
		}
	}
	if checked < 3 {
		t.Errorf("checked %d examples, want at least the bare-metal, container and drop-in ones", checked)
	}
}
