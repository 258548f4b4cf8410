package store

import (
	"context"
	"fmt"
	"time"
)

// Secret is one stored secret. The store sees only the sealed value;
// sealing and opening are the secrets package's business.
type Secret struct {
	// Scope is "" for a secret every source's jobs may receive, or the
	// name of the one source whose jobs may.
	Scope string
	// Name is the environment variable name the job receives it as.
	Name string
	// Ciphertext is the sealed value (text-safe, e.g. base64).
	Ciphertext string
	// KeyVersion is the generation of the key Ciphertext is sealed under.
	KeyVersion int
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// UpdatedBy is the ID of the admin token that last set it.
	UpdatedBy string
}

const secretColumns = "scope, name, ciphertext, key_version, created_at, updated_at, updated_by"

func scanSecret(row interface{ Scan(...any) error }) (Secret, error) {
	var s Secret
	err := row.Scan(&s.Scope, &s.Name, &s.Ciphertext, &s.KeyVersion, timeCol{&s.CreatedAt}, timeCol{&s.UpdatedAt}, &s.UpdatedBy)
	return s, err
}

// PutSecret creates the secret (Scope, Name), or replaces its value,
// keeping CreatedAt. It reports whether the secret is new.
func (q *queries) PutSecret(ctx context.Context, s Secret) (bool, error) {
	now := q.clock.Now()
	var created bool
	err := q.writeRow(ctx,
		"INSERT INTO secrets ("+secretColumns+") VALUES (?, ?, ?, ?, ?, ?, ?) "+
			"ON CONFLICT (scope, name) DO UPDATE SET ciphertext = excluded.ciphertext, key_version = excluded.key_version, "+
			"updated_at = excluded.updated_at, updated_by = excluded.updated_by "+
			"RETURNING created_at = updated_at",
		s.Scope, s.Name, s.Ciphertext, s.KeyVersion, timeArg(now), timeArg(now), s.UpdatedBy).Scan(&created)
	if err != nil {
		return false, fmt.Errorf("put secret %q: %w", s.Name, classify(err))
	}
	return created, nil
}

// ListSecrets returns every secret, ordered by scope and name.
func (q *queries) ListSecrets(ctx context.Context) ([]Secret, error) {
	return q.listSecrets(ctx, "list secrets", "SELECT "+secretColumns+" FROM secrets ORDER BY scope, name")
}

// LookupSecrets returns the secrets whose scope is one of scopes and whose
// name is one of names, ordered by scope and name.
func (q *queries) LookupSecrets(ctx context.Context, scopes, names []string) ([]Secret, error) {
	if len(scopes) == 0 || len(names) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(scopes)+len(names))
	for _, s := range scopes {
		args = append(args, s)
	}
	for _, n := range names {
		args = append(args, n)
	}
	query := "SELECT " + secretColumns + " FROM secrets WHERE scope IN (" + placeholders(len(scopes)) +
		") AND name IN (" + placeholders(len(names)) + ") ORDER BY scope, name"
	return q.listSecrets(ctx, "look up secrets", query, args...)
}

func (q *queries) listSecrets(ctx context.Context, what, query string, args ...any) ([]Secret, error) {
	// Read through the write side, so that a rotation sees its own
	// transaction and nothing sneaks in between its read and its writes.
	rows, err := q.w.QueryContext(ctx, q.d.rebind(query), args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []Secret
	for rows.Next() {
		s, err := scanSecret(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// DeleteSecret removes a secret. A missing one gives ErrNotFound.
func (q *queries) DeleteSecret(ctx context.Context, scope, name string) error {
	changed, err := q.execChanged(ctx, "DELETE FROM secrets WHERE scope = ? AND name = ?", scope, name)
	if err == nil && !changed {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete secret %q: %w", name, classify(err))
	}
	return nil
}

// ResealSecret replaces the sealed value and key version of a secret,
// leaving its times and author alone (a key rotation is not an edit). A
// missing secret gives ErrNotFound.
func (q *queries) ResealSecret(ctx context.Context, scope, name, ciphertext string, keyVersion int) error {
	changed, err := q.execChanged(ctx, "UPDATE secrets SET ciphertext = ?, key_version = ? WHERE scope = ? AND name = ?",
		ciphertext, keyVersion, scope, name)
	if err == nil && !changed {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("reseal secret %q: %w", name, err)
	}
	return nil
}

// SecretKeyCheck is a known value sealed under the current secret key,
// so that a process can tell at start whether it holds the right key.
type SecretKeyCheck struct {
	// KeyVersion is the generation of the current key: 1 for the first,
	// one more at each rotation.
	KeyVersion int
	// Sealed is the known value, sealed.
	Sealed    string
	UpdatedAt time.Time
}

// GetSecretKeyCheck returns the key check, or ErrNotFound before the
// first start with secrets.
func (q *queries) GetSecretKeyCheck(ctx context.Context) (SecretKeyCheck, error) {
	var c SecretKeyCheck
	err := q.w.QueryRowContext(ctx, q.d.rebind("SELECT key_version, sealed, updated_at FROM secret_key_check WHERE id = 1")).
		Scan(&c.KeyVersion, &c.Sealed, timeCol{&c.UpdatedAt})
	if err != nil {
		return SecretKeyCheck{}, fmt.Errorf("read secret key check: %w", classify(err))
	}
	return c, nil
}

// PutSecretKeyCheck creates or replaces the key check; UpdatedAt is
// stamped by the store.
func (q *queries) PutSecretKeyCheck(ctx context.Context, c SecretKeyCheck) error {
	_, err := q.exec(ctx,
		"INSERT INTO secret_key_check (id, key_version, sealed, updated_at) VALUES (1, ?, ?, ?) "+
			"ON CONFLICT (id) DO UPDATE SET key_version = excluded.key_version, sealed = excluded.sealed, updated_at = excluded.updated_at",
		c.KeyVersion, c.Sealed, timeArg(q.clock.Now()))
	if err != nil {
		return fmt.Errorf("write secret key check: %w", err)
	}
	return nil
}
