package protocol_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kici-dev/kici/internal/protocol"
)

// TestDocsCoverProtocol checks that docs/protocol.md describes every message
// type and every close code, so the page and the package change together.
func TestDocsCoverProtocol(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "protocol.md"))
	if err != nil {
		t.Fatalf("read docs/protocol.md: %v", err)
	}
	var headings, rows strings.Builder
	for line := range strings.Lines(string(page)) {
		switch {
		case strings.HasPrefix(line, "### "):
			headings.WriteString(line)
		case strings.HasPrefix(line, "| "):
			rows.WriteString(line)
		}
	}
	for _, typ := range protocol.RegisteredTypes() {
		if w := fmt.Sprintf("`%s`", typ); !strings.Contains(headings.String(), w) {
			t.Errorf("docs/protocol.md: got no section heading with %s, want one", w)
		}
	}
	for _, code := range protocol.CloseCodes() {
		if w := fmt.Sprintf("| %d |", code); !strings.Contains(rows.String(), w) {
			t.Errorf("docs/protocol.md: got no close code row %q, want one", w)
		}
	}
}
