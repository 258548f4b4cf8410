package admincli

import (
	"strings"
	"testing"
)

func TestSecretsRotateKey(t *testing.T) {
	t.Parallel()
	key := strings.Repeat("ab", 32)
	runGolden(t, []goldenCase{
		{name: "secrets-rotate-key", args: []string{"secrets", "rotate-key"}, stdin: key + "\n", code: 0},
		{name: "secrets-rotate-key-json", args: []string{"secrets", "rotate-key", "-o", "json"}, stdin: key, code: 0},
		{name: "secrets-rotate-key-bad-key", args: []string{"secrets", "rotate-key"}, stdin: "not-a-key", code: 2},
		{name: "secrets-rotate-key-no-key", args: []string{"secrets", "rotate-key"}, code: 2},
	})
}
