package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kici-dev/kici/internal/durable"
)

// JobTokenPrefix starts every job token.
const JobTokenPrefix = "kjt_"

// ErrBadJobToken is a job token that is malformed or not signed by us.
var ErrBadJobToken = errors.New("invalid job token")

// JobTokens mints and checks job tokens: bearer tokens scoped to one
// dispatch of one job, which an agent uses to download its job's source.
// A token is "kjt_<job id>.<attempt>.<hmac>", signed with a key kept in the
// data dir, so tokens stay valid across orchestrator restarts and need no
// table. The orchestrator checks that the job is still running before
// honouring one.
type JobTokens struct {
	key []byte
}

// LoadJobTokens reads the signing key from dir/job-token.key, creating it
// (32 random bytes, mode 0600) on first use.
func LoadJobTokens(dir string) (*JobTokens, error) {
	path := filepath.Join(dir, "job-token.key")
	key, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("generate job token key: %w", err)
		}
		if err := durable.WriteFile(path, key, os.O_CREATE|os.O_EXCL, 0o600); err != nil {
			return nil, fmt.Errorf("write job token key %s: %w", path, err)
		}
		return &JobTokens{key: key}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read job token key %s: %w", path, err)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("job token key %s: %d bytes, want 32", path, len(key))
	}
	return &JobTokens{key: key}, nil
}

func (t *JobTokens) mac(jobID string, attempt int) string {
	h := hmac.New(sha256.New, t.key)
	fmt.Fprintf(h, "%s.%d", jobID, attempt)
	return hex.EncodeToString(h.Sum(nil))
}

// Mint returns the token of one dispatch.
func (t *JobTokens) Mint(jobID string, attempt int) string {
	return fmt.Sprintf("%s%s.%d.%s", JobTokenPrefix, jobID, attempt, t.mac(jobID, attempt))
}

// Check verifies a token and returns the job and attempt it is for.
func (t *JobTokens) Check(token string) (jobID string, attempt int, err error) {
	rest, ok := strings.CutPrefix(token, JobTokenPrefix)
	if !ok {
		return "", 0, ErrBadJobToken
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return "", 0, ErrBadJobToken
	}
	attempt, err = strconv.Atoi(parts[1])
	if err != nil {
		return "", 0, ErrBadJobToken
	}
	if !hmac.Equal([]byte(parts[2]), []byte(t.mac(parts[0], attempt))) {
		return "", 0, ErrBadJobToken
	}
	return parts[0], attempt, nil
}
