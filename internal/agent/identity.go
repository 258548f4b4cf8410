package agent

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// idFile is the file in the work dir that keeps a generated agent id.
const idFile = "agent-id"

// loadOrCreateID returns the agent id kept in dir, generating and saving one
// (<hostname>-<8 random hex digits>) the first time.
func loadOrCreateID(dir, hostname string) (string, error) {
	path := filepath.Join(dir, idFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if id == "" || strings.ContainsAny(id, " \t\r\n/") {
			return "", fmt.Errorf("agent id file %q: holds %q, want one word (delete the file to get a new id)", path, id)
		}
		return id, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read agent id: %w", err)
	}
	var r [4]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(r[:])
	if host := safeHost(hostname); host != "" {
		id = host + "-" + id
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("save agent id: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("save agent id: %w", err)
	}
	return id, nil
}

// safeHost keeps the characters of a host name that make a readable id.
func safeHost(h string) string {
	h, _, _ = strings.Cut(h, ".")
	var b strings.Builder
	for _, c := range strings.ToLower(h) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteRune(c)
		}
	}
	return b.String()
}
