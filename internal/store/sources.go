package store

import (
	"context"
	"fmt"
	"time"
)

// Source is a registered place that workflows and code come from.
type Source struct {
	// Name identifies the source in URLs and runs.
	Name string
	Kind SourceKind
	// Location is a directory (local), a clone URL (git) or OWNER/REPO
	// (github).
	Location string
	// WebhookSecrets are the secrets a webhook signature may be made with,
	// newest first; more than one while a secret is being rotated. The
	// store keeps them as given: the orchestrator seals them first (see
	// secrets.Service.SealWebhookSecrets).
	WebhookSecrets []string
	// ForkPullRequests is what a pull request from a fork does; empty
	// means ForkApprove (the column's default).
	ForkPullRequests ForkPolicy
	// GitHubRepo is the GitHub repository (OWNER/NAME) a local or git
	// source mirrors, whose check runs report its runs; empty for none. A
	// github source reports to its Location and leaves this empty.
	GitHubRepo string
	// CreatedAt is stamped by CreateSource.
	CreatedAt time.Time
}

const sourceColumns = "name, kind, location, webhook_secrets, fork_pull_requests, github_repo, created_at"

func scanSource(row interface{ Scan(...any) error }) (Source, error) {
	var s Source
	err := row.Scan(&s.Name, &s.Kind, &s.Location, jsonCol[[]string]{&s.WebhookSecrets}, &s.ForkPullRequests, &s.GitHubRepo, timeCol{&s.CreatedAt})
	return s, err
}

// CreateSource adds a source and returns it as stored. A source with the
// same name gives ErrConflict.
func (q *queries) CreateSource(ctx context.Context, s Source) (Source, error) {
	s.CreatedAt = q.clock.Now()
	if s.WebhookSecrets == nil {
		s.WebhookSecrets = []string{}
	}
	if s.ForkPullRequests == "" {
		s.ForkPullRequests = ForkApprove
	}
	_, err := q.exec(ctx,
		"INSERT INTO sources ("+sourceColumns+") VALUES (?, ?, ?, ?, ?, ?, ?)",
		s.Name, string(s.Kind), s.Location, stringsArg(s.WebhookSecrets), string(s.ForkPullRequests), s.GitHubRepo, timeArg(s.CreatedAt))
	if err != nil {
		return Source{}, fmt.Errorf("create source %q: %w", s.Name, classify(err))
	}
	return s, nil
}

// GetSource returns the source named name, or ErrNotFound.
func (q *queries) GetSource(ctx context.Context, name string) (Source, error) {
	s, err := scanSource(q.queryRow(ctx, "SELECT "+sourceColumns+" FROM sources WHERE name = ?", name))
	if err != nil {
		return Source{}, fmt.Errorf("get source %q: %w", name, classify(err))
	}
	return s, nil
}

// ListSources returns every source, by name.
func (q *queries) ListSources(ctx context.Context) ([]Source, error) {
	rows, err := q.query(ctx, "SELECT "+sourceColumns+" FROM sources ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	defer rows.Close()
	var out []Source
	for rows.Next() {
		s, err := scanSource(rows)
		if err != nil {
			return nil, fmt.Errorf("list sources: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	return out, nil
}

// UpdateSource replaces the kind, location, webhook secrets, fork policy
// (empty: ForkApprove) and GitHub repository of the source named s.Name; CreatedAt is kept. A
// missing source gives ErrNotFound.
func (q *queries) UpdateSource(ctx context.Context, s Source) error {
	if s.ForkPullRequests == "" {
		s.ForkPullRequests = ForkApprove
	}
	changed, err := q.execChanged(ctx,
		"UPDATE sources SET kind = ?, location = ?, webhook_secrets = ?, fork_pull_requests = ?, github_repo = ? WHERE name = ?",
		string(s.Kind), s.Location, stringsArg(s.WebhookSecrets), string(s.ForkPullRequests), s.GitHubRepo, s.Name)
	if err == nil && !changed {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("update source %q: %w", s.Name, classify(err))
	}
	return nil
}

// GitHubRepository is the OWNER/NAME whose check runs report this
// source's runs: a github source's location, else GitHubRepo (empty for
// none).
func (s Source) GitHubRepository() string {
	if s.Kind == SourceGitHub {
		return s.Location
	}
	return s.GitHubRepo
}

// DeleteSource removes the source named name; its runs stay. A missing
// source gives ErrNotFound.
func (q *queries) DeleteSource(ctx context.Context, name string) error {
	changed, err := q.execChanged(ctx, "DELETE FROM sources WHERE name = ?", name)
	if err == nil && !changed {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete source %q: %w", name, classify(err))
	}
	return nil
}
