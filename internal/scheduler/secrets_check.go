package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kici-dev/kici/internal/workflow"
)

// unsetSecrets maps each secret a job of the run declares but that is not
// set to the jobs that declare it. A run whose secrets are withheld (a
// fork's run under the "run" policy) reads every secret empty, so nothing
// is missing for it; neither is anything without a checker.
type unsetSecrets map[string][]string

func (s *Scheduler) unsetSecrets(ctx context.Context, in RunInput, rec Record) (unsetSecrets, error) {
	if s.cfg.Secrets == nil || rec.SecretsWithheld {
		return nil, nil
	}
	// Jobs of one environment read the same scopes: ask once per
	// environment.
	byEnv := map[string][]string{}
	var envs []string
	for _, j := range in.Workflow.Jobs {
		if _, ok := byEnv[j.Environment]; !ok {
			envs = append(envs, j.Environment)
		}
		for _, n := range j.Secrets {
			if !slices.Contains(byEnv[j.Environment], n) {
				byEnv[j.Environment] = append(byEnv[j.Environment], n)
			}
		}
	}
	out := unsetSecrets{}
	for _, env := range envs {
		if len(byEnv[env]) == 0 {
			continue
		}
		missing, err := s.cfg.Secrets.Missing(ctx, in.Source, env, byEnv[env])
		if err != nil {
			return nil, err
		}
		for _, j := range in.Workflow.Jobs {
			if j.Environment != env {
				continue
			}
			for _, n := range j.Secrets {
				if slices.Contains(missing, n) && !slices.Contains(out[n], j.Name) {
					out[n] = append(out[n], j.Name)
				}
			}
		}
	}
	return out, nil
}

// jobError is the error of a job that declares one of the unset secrets.
func (u unsetSecrets) jobError(j workflow.Job) (string, bool) {
	var mine []string
	for _, n := range j.Secrets {
		if _, ok := u[n]; ok && !slices.Contains(mine, n) {
			mine = append(mine, n)
		}
	}
	if len(mine) == 0 {
		return "", false
	}
	return fmt.Sprintf("not run: it declares %s, which %s not set", plural(mine, "secret", "secrets"), isAre(len(mine))), true
}

// unsetMessage is the run's error: which secrets are missing, who declares
// them, and how to set them.
func unsetMessage(u unsetSecrets, source string) string {
	names := make([]string, 0, len(u))
	for n := range u {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s (declared by %s)", n, strings.Join(u[n], ", ")))
	}
	return fmt.Sprintf("%s %s not set: %s; set %s with `kici-admin secrets set NAME --source %s` (--environment ENV for a job's environment, neither for every source) and run again",
		plural(names, "secret", "secrets"), isAre(len(names)), strings.Join(parts, ", "), itThem(len(names)), source)
}

func plural(names []string, one, many string) string {
	if len(names) == 1 {
		return one + " " + names[0]
	}
	return many + " " + strings.Join(names, ", ")
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func itThem(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
