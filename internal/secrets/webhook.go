package secrets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kici-dev/kici/internal/store"
)

// sealedWebhookPrefix marks a stored webhook secret as sealed:
// "kici-sealed:<key version>:<envelope>". A stored value without it was
// written before webhook secrets were sealed, and is sealed at the next
// start (SealStoredWebhookSecrets).
const sealedWebhookPrefix = "kici-sealed:"

// webhookAAD binds a sealed webhook secret to its source, so a value
// copied onto another source's row does not open there.
func webhookAAD(source string) []byte { return []byte("kici webhook secret\x00" + source) }

// SealWebhookSecrets seals the webhook secrets of source for storage.
// Webhook secrets are HMAC keys: whoever reads one from a database dump can
// sign deliveries and start runs, so they are kept under the secret key
// like job secrets.
func (s *Service) SealWebhookSecrets(source string, plain []string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.sealWebhookSecrets(s.src.key, s.version, source, plain)
}

func (s *Service) sealWebhookSecrets(k Key, version int, source string, plain []string) ([]string, error) {
	out := make([]string, 0, len(plain))
	for _, p := range plain {
		env, err := seal(k, webhookAAD(source), []byte(p))
		if err != nil {
			return nil, fmt.Errorf("seal webhook secret of source %q: %w", source, err)
		}
		out = append(out, sealedWebhookPrefix+strconv.Itoa(version)+":"+env)
	}
	return out, nil
}

// OpenWebhookSecrets returns the webhook secrets of source as they were
// set. A value stored before sealing existed is returned as it is.
func (s *Service) OpenWebhookSecrets(source string, stored []string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.openWebhookSecrets(source, stored)
}

// openWebhookSecrets opens under the current key; s.mu must be held.
func (s *Service) openWebhookSecrets(source string, stored []string) ([]string, error) {
	out := make([]string, 0, len(stored))
	for i, v := range stored {
		rest, sealed := strings.CutPrefix(v, sealedWebhookPrefix)
		if !sealed {
			out = append(out, v)
			continue
		}
		ver, env, ok := strings.Cut(rest, ":")
		version, err := strconv.Atoi(ver)
		if !ok || err != nil {
			return nil, fmt.Errorf("open webhook secret %d of source %q: malformed sealed value", i+1, source)
		}
		if version != s.version {
			return nil, fmt.Errorf("open webhook secret %d of source %q: sealed under key version %d, the key in use is version %d", i+1, source, version, s.version)
		}
		p, err := open(s.src.key, webhookAAD(source), env)
		if err != nil {
			return nil, fmt.Errorf("open webhook secret %d of source %q: %w", i+1, source, err)
		}
		out = append(out, string(p))
	}
	return out, nil
}

// SealStoredWebhookSecrets seals, in one transaction, every webhook secret
// still stored in plaintext (written by a version of kici that did not seal
// them), and returns how many sources it changed.
func (s *Service) SealStoredWebhookSecrets(ctx context.Context) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		n = 0
		return s.resealWebhookSecrets(ctx, tx, s.src.key, s.version, func(v string) bool {
			return !strings.HasPrefix(v, sealedWebhookPrefix)
		}, &n)
	})
	if err != nil {
		return 0, fmt.Errorf("seal stored webhook secrets: %w", err)
	}
	if n > 0 {
		s.log.Info("sealed webhook secrets stored in plaintext", "sources", n)
	}
	return n, nil
}

// resealWebhookSecrets re-seals, inside tx, the webhook secrets of every
// source that has a value for which need is true, under key k of version
// version, counting the sources changed in *n. Values are opened with the
// key in use; s.mu must be held.
func (s *Service) resealWebhookSecrets(ctx context.Context, tx *store.Tx, k Key, version int, need func(string) bool, n *int) error {
	sources, err := tx.ListSources(ctx)
	if err != nil {
		return err
	}
	for _, src := range sources {
		if !slices.ContainsFunc(src.WebhookSecrets, need) {
			continue
		}
		plain, err := s.openWebhookSecrets(src.Name, src.WebhookSecrets)
		if err != nil {
			return err
		}
		if src.WebhookSecrets, err = s.sealWebhookSecrets(k, version, src.Name, plain); err != nil {
			return err
		}
		if err := tx.UpdateSource(ctx, src); errors.Is(err, store.ErrNotFound) {
			continue // removed since it was listed: nothing left to seal
		} else if err != nil {
			return err
		}
		*n++
	}
	return nil
}
