package secrets

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kici-dev/kici/internal/durable"
	"github.com/kici-dev/kici/internal/store"
)

// MaxValueBytes bounds a secret's value.
const MaxValueBytes = 64 << 10

// MinValueChars is the fewest characters a secret's value may have. The
// agent replaces every place a value shows in a job's output with "***";
// a shorter value would match all over ordinary output, so the agent masks
// one that short (set before this limit existed) only where it stands as a
// whole word.
const MinValueChars = 4

// ErrWrongKey is a secret key that does not open the key check stored in
// the database: it is not the key the stored secrets are sealed with.
var ErrWrongKey = errors.New("the secret key does not open the stored secrets")

// ErrSameKey is a rotation to the key already in use.
var ErrSameKey = errors.New("the new key is the key already in use")

// MissingError names the secrets a job declares that are not set.
type MissingError struct {
	Names []string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("secret(s) %s not set (kici-admin secrets set NAME)", strings.Join(e.Names, ", "))
}

var nameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// CheckName checks a secret's name: an upper-case environment variable
// name (as workflows declare it under `secrets:`) of at most 128
// characters, not in the KICI_ namespace.
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("secret name: required")
	case len(name) > 128:
		return fmt.Errorf("secret name %q: at most 128 characters", name)
	case !nameRE.MatchString(name):
		return fmt.Errorf("secret name %q: use upper-case letters, digits and _ (not starting with a digit)", name)
	case strings.HasPrefix(name, "KICI_"):
		return fmt.Errorf("secret name %q: the KICI_ prefix is reserved", name)
	}
	return nil
}

// CheckScope checks a scope: "" (every source) or a source name.
func CheckScope(scope string) error {
	if len(scope) > 200 {
		return errors.New("secret scope: at most 200 characters")
	}
	for _, r := range scope {
		if unicode.IsControl(r) {
			return fmt.Errorf("secret scope %q: control characters are not allowed", scope)
		}
	}
	return nil
}

// CheckValue checks a secret's value: not empty, at least MinValueChars
// characters, at most MaxValueBytes, and without NUL (an environment
// variable cannot hold one).
func CheckValue(value string) error {
	switch {
	case value == "":
		return errors.New("secret value: empty")
	case utf8.RuneCountInString(value) < MinValueChars:
		return fmt.Errorf("secret value: %d character(s), at least %d (a shorter value could not be masked in job output)", utf8.RuneCountInString(value), MinValueChars)
	case len(value) > MaxValueBytes:
		return fmt.Errorf("secret value: %d bytes, at most %d", len(value), MaxValueBytes)
	case strings.ContainsRune(value, 0):
		return errors.New("secret value: contains a NUL byte")
	}
	return nil
}

// Service stores and resolves secrets: each value is sealed with AES-256-GCM
// under the secret key, with its scope and name bound as additional data,
// and opened only to hand it to a job that declares it. It never logs a
// value. It is safe for concurrent use; a key rotation waits for, and
// holds off, every other use of the key.
type Service struct {
	log *slog.Logger
	db  *store.DB

	mu      sync.RWMutex
	src     keySource
	version int
	dataDir string
}

// Open loads the secret key (KICI_SECRET_KEY, or the key file in the data
// dir, generated on first use when allowed), and checks it against the
// key check in the database, which it writes on first use. A key that
// does not open the stored secrets fails with ErrWrongKey: the orchestrator
// must not start and seal new secrets under a key the old ones do not
// share.
func Open(ctx context.Context, logger *slog.Logger, db *store.DB, cfg KeyConfig) (*Service, error) {
	src, err := loadKey(cfg)
	if err != nil {
		return nil, err
	}
	if src.generated {
		logger.Warn("secret key generated; back it up with the database, or set KICI_SECRET_KEY to manage it yourself",
			"file", src.file, "key", src.key)
	}
	s := &Service{log: logger, db: db, src: src, dataDir: cfg.DataDir}
	check, err := db.GetSecretKeyCheck(ctx)
	if errors.Is(err, store.ErrNotFound) {
		if err := s.writeCheck(ctx, db, src.key, 1); err != nil {
			return nil, err
		}
		s.version = 1
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	if _, err := open(src.key, keyCheckAAD, check.Sealed); err != nil {
		if !s.finishRotation(check) {
			return nil, fmt.Errorf("%w: %s (%s) is not the key in use since %s (key version %d); if the key was rotated with `kici-admin secrets rotate-key`, use the new key",
				ErrWrongKey, src, src.key, check.UpdatedAt.Format(time.RFC3339), check.KeyVersion)
		}
	}
	if s.src.file != "" {
		// A rotation that did not commit left its new key behind.
		_ = os.Remove(filepath.Join(cfg.DataDir, PendingKeyFile))
	}
	s.version = check.KeyVersion
	logger.Info("secret key loaded", "source", s.src.String(), "key", s.src.key, "key_version", s.version)
	return s, nil
}

// finishRotation handles a rotation that committed but crashed before
// the key file was replaced: if the pending key opens the check, it
// becomes the key file.
func (s *Service) finishRotation(check store.SecretKeyCheck) bool {
	if s.src.file == "" {
		return false
	}
	pending := filepath.Join(filepath.Dir(s.src.file), PendingKeyFile)
	k, err := readKeyFile(pending)
	if err != nil {
		return false
	}
	if _, err := open(k, keyCheckAAD, check.Sealed); err != nil {
		return false
	}
	if err := os.Rename(pending, s.src.file); err != nil {
		s.log.Error("finish key rotation failed", "file", s.src.file, "error", err)
		return false
	}
	s.log.Warn("finished an interrupted key rotation: the new key is now the key file", "file", s.src.file, "key", k)
	s.src.key = k
	return true
}

type keyCheckWriter interface {
	PutSecretKeyCheck(ctx context.Context, c store.SecretKeyCheck) error
}

func (s *Service) writeCheck(ctx context.Context, w keyCheckWriter, k Key, version int) error {
	sealed, err := seal(k, keyCheckAAD, keyCheckValue)
	if err != nil {
		return err
	}
	return w.PutSecretKeyCheck(ctx, store.SecretKeyCheck{KeyVersion: version, Sealed: sealed})
}

// KeyVersion is the generation of the key in use.
func (s *Service) KeyVersion() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.version
}

// Set seals value and stores it as the secret (scope, name), replacing
// any value it had. by is the ID of the token that sets it. It reports
// whether the secret is new.
func (s *Service) Set(ctx context.Context, scope, name, value, by string) (bool, error) {
	if err := errors.Join(CheckScope(scope), CheckName(name), CheckValue(value)); err != nil {
		return false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	sealed, err := seal(s.src.key, secretAAD(scope, name), []byte(value))
	if err != nil {
		return false, err
	}
	return s.db.PutSecret(ctx, store.Secret{Scope: scope, Name: name, Ciphertext: sealed, KeyVersion: s.version, UpdatedBy: by})
}

// List returns every secret's metadata; the sealed values are blanked.
func (s *Service) List(ctx context.Context) ([]store.Secret, error) {
	list, err := s.db.ListSecrets(ctx)
	for i := range list {
		list[i].Ciphertext = ""
	}
	return list, err
}

// Delete removes a secret; a missing one gives store.ErrNotFound. It waits
// for a key rotation under way, as Set does.
func (s *Service) Delete(ctx context.Context, scope, name string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.db.DeleteSecret(ctx, scope, name)
}

// EnvironmentScope is the scope of the secrets of a deployment
// environment. Source names cannot hold a ':', so it never names a source.
func EnvironmentScope(environment string) string { return "env:" + environment }

// scopes lists the scopes a job of source in environment (may be "")
// receives secrets from, most specific last: every source, the source,
// the environment.
func scopes(source, environment string) []string {
	out := []string{"", source}
	if environment != "" {
		out = append(out, EnvironmentScope(environment))
	}
	return out
}

// Resolve returns the values of the named secrets for a job of source in
// environment (may be ""): a secret of the environment wins over one of
// the source, which wins over one for every source; a job without an
// environment never receives an environment's secrets. Names that are not
// set give a *MissingError.
func (s *Service) Resolve(ctx context.Context, source, environment string, names []string) (map[string]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	sc := scopes(source, environment)
	rows, err := s.db.LookupSecrets(ctx, sc, names)
	if err != nil {
		return nil, err
	}
	chosen := map[string]store.Secret{}
	for _, r := range rows {
		if prev, ok := chosen[r.Name]; !ok || slices.Index(sc, r.Scope) > slices.Index(sc, prev.Scope) {
			chosen[r.Name] = r
		}
	}
	out := make(map[string]string, len(chosen))
	var missing []string
	for _, n := range names {
		r, ok := chosen[n]
		if !ok {
			if !slices.Contains(missing, n) {
				missing = append(missing, n)
			}
			continue
		}
		v, err := s.openSecret(r)
		if err != nil {
			return nil, err
		}
		out[n] = v
	}
	if len(missing) > 0 {
		return nil, &MissingError{Names: missing}
	}
	return out, nil
}

// Missing returns those of names that a job of source in environment
// (may be "") could not receive because no secret of that name is set in
// any scope it reads (see Resolve), in the order of names. It opens
// nothing.
func (s *Service) Missing(ctx context.Context, source, environment string, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	rows, err := s.db.LookupSecrets(ctx, scopes(source, environment), names)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, r := range rows {
		set[r.Name] = true
	}
	var missing []string
	for _, n := range names {
		if !set[n] && !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	return missing, nil
}

// openSecret opens a row under the current key; s.mu must be held.
func (s *Service) openSecret(r store.Secret) (string, error) {
	if r.KeyVersion != s.version {
		return "", fmt.Errorf("open secret %q: sealed under key version %d, the key in use is version %d", r.Name, r.KeyVersion, s.version)
	}
	v, err := open(s.src.key, secretAAD(r.Scope, r.Name), r.Ciphertext)
	if err != nil {
		return "", fmt.Errorf("open secret %q: %w", r.Name, err)
	}
	return string(v), nil
}

// RotateResult is what a key rotation did.
type RotateResult struct {
	// Resealed is how many secrets, and sources' webhook secrets, were
	// re-encrypted.
	Resealed int
	// KeyVersion is the new key's generation.
	KeyVersion int
	// Fingerprint names the new key.
	Fingerprint string
	// KeyFile is the key file that now holds the new key; empty when the
	// key comes from KICI_SECRET_KEY, which the operator must now change
	// before the next start.
	KeyFile string
}

// Rotate re-encrypts every secret and every source's webhook secrets under
// newKey, and the key check with it, in one transaction: either all of them move to the new key or none
// does. When the key lives in the data dir, the new key replaces it
// there; when it comes from KICI_SECRET_KEY, the operator must set the
// variable to the new key before the next start (which refuses the old
// one with ErrWrongKey).
func (s *Service) Rotate(ctx context.Context, newKey Key) (RotateResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if newKey == s.src.key {
		return RotateResult{}, ErrSameKey
	}
	version := s.version + 1
	var pending string
	if s.src.file != "" {
		pending = filepath.Join(filepath.Dir(s.src.file), PendingKeyFile)
		if err := writeKeyFile(pending, newKey); err != nil {
			return RotateResult{}, err
		}
	}
	var n int
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		n = 0
		rows, err := tx.ListSecrets(ctx)
		if err != nil {
			return err
		}
		for _, r := range rows {
			v, err := s.openSecret(r)
			if err != nil {
				return err
			}
			sealed, err := seal(newKey, secretAAD(r.Scope, r.Name), []byte(v))
			if err != nil {
				return err
			}
			if err := tx.ResealSecret(ctx, r.Scope, r.Name, sealed, version); errors.Is(err, store.ErrNotFound) {
				continue // deleted since it was listed (its source was removed, say)
			} else if err != nil {
				return err
			}
			n++
		}
		var sources int
		if err := s.resealWebhookSecrets(ctx, tx, newKey, version, func(string) bool { return true }, &sources); err != nil {
			return err
		}
		n += sources
		if err := s.resealClusterCA(ctx, tx, newKey, version); err != nil {
			return err
		}
		return s.writeCheck(ctx, tx, newKey, version)
	})
	if err != nil {
		if pending != "" {
			os.Remove(pending)
		}
		return RotateResult{}, fmt.Errorf("rotate secret key: %w", err)
	}
	res := RotateResult{Resealed: n, KeyVersion: version, Fingerprint: newKey.Fingerprint()}
	if pending != "" {
		if err := os.Rename(pending, s.src.file); err != nil {
			// Committed: the next start finishes the rename (finishRotation).
			s.log.Error("replace key file after rotation failed; the next start retries", "file", s.src.file, "error", err)
		} else {
			_ = durable.Sync(filepath.Dir(s.src.file))
		}
		res.KeyFile = s.src.file
	}
	s.src.key, s.version = newKey, version
	if s.src.file == "" {
		s.log.Warn("secret key rotated: set KICI_SECRET_KEY to the new key before the next start", "key", newKey, "key_version", version, "resealed", n)
	} else {
		s.log.Info("secret key rotated", "file", s.src.file, "key", newKey, "key_version", version, "resealed", n)
	}
	return res, nil
}

// Masks returns further forms in which a job's output may show the given
// secret values, for the agent to mask as well as the values themselves:
// their base64 and URL-escaped encodings, where those differ.
func Masks(values map[string]string) []string {
	var out []string
	add := func(s, v string) {
		if s != v && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, v := range values {
		add(base64.StdEncoding.EncodeToString([]byte(v)), v)
		add(base64.URLEncoding.EncodeToString([]byte(v)), v)
		add(url.QueryEscape(v), v)
	}
	slices.Sort(out)
	return out
}

// CheckKey opens the key check stored in the database with the key in
// use and says where that key comes from; an error means the key does not
// match (ErrWrongKey) or the check could not be read.
func (s *Service) CheckKey(ctx context.Context) (string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	desc := fmt.Sprintf("%s (%s), key version %d", s.src, s.src.key, s.version)
	check, err := s.db.GetSecretKeyCheck(ctx)
	if err != nil {
		return desc, err
	}
	if _, err := open(s.src.key, keyCheckAAD, check.Sealed); err != nil {
		return desc, fmt.Errorf("%w: %s does not open the key check stored for key version %d", ErrWrongKey, s.src, check.KeyVersion)
	}
	return desc, nil
}
