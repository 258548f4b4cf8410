package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kici-dev/kici/internal/workflow"
)

// maxHashFiles bounds the files one hashFiles call digests.
const maxHashFiles = 100_000

// hashFiles returns the digest of the workspace files the patterns match
// (as matchFiles finds them): the hex SHA-256 of, for each file in path
// order, its path, a NUL, the hex SHA-256 of its content and a newline.
// It depends on the files' paths and contents only, never on their times
// or on the order the file system lists them. No file matched gives "",
// as in other CI systems, so a key of such a call still works.
func hashFiles(dir string, patterns []string) (string, error) {
	m, err := matchFiles(dir, patterns, maxHashFiles)
	if err != nil {
		return "", err
	}
	if len(m.files) == 0 {
		return "", nil
	}
	outer := sha256.New()
	for _, rel := range m.files {
		f, err := os.Open(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return "", err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("read %s: %w", rel, err)
		}
		fmt.Fprintf(outer, "%s\x00%s\n", rel, hex.EncodeToString(h.Sum(nil)))
	}
	return hex.EncodeToString(outer.Sum(nil)), nil
}

// fillHashFiles replaces each `${{ hashFiles(...) }}` of a cache key with
// the digest of the files its patterns match in dir.
func fillHashFiles(dir, key string) (string, error) {
	calls, patterns, err := workflow.HashFilesPatterns(key)
	if err != nil || len(calls) == 0 {
		return key, err
	}
	var b strings.Builder
	last := 0
	for i, span := range calls {
		sum, err := hashFiles(dir, patterns[i])
		if err != nil {
			return "", fmt.Errorf("hashFiles(%s): %w", strings.Join(patterns[i], ", "), err)
		}
		b.WriteString(key[last:span[0]])
		b.WriteString(sum)
		last = span[1]
	}
	b.WriteString(key[last:])
	return b.String(), nil
}
