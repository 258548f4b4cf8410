package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/secrets"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/workflow"
)

// No handler here ever writes a secret's value, in an answer, a log line
// or the audit log.

func (s *Server) secretsConfigured(w http.ResponseWriter) bool {
	if s.cfg.Secrets == nil {
		writeError(w, http.StatusServiceUnavailable, "secrets are not configured on this orchestrator")
		return false
	}
	return true
}

// secretTarget names a secret in the audit log.
func secretTarget(source, name string) string {
	if source == "" {
		return "secret:" + name
	}
	return "secret:" + source + "/" + name
}

func secretOut(sec store.Secret) apiv1.Secret {
	out := apiv1.Secret{Name: sec.Name, Source: sec.Scope, CreatedAt: sec.CreatedAt, UpdatedAt: sec.UpdatedAt,
		UpdatedBy: sec.UpdatedBy, KeyVersion: sec.KeyVersion}
	if env, ok := strings.CutPrefix(sec.Scope, secrets.EnvironmentScope("")); ok {
		out.Source, out.Environment = "", env
	}
	return out
}

// scopeParam reads the scope a secrets route names: ?source=NAME,
// ?environment=NAME, or neither (every source); not both.
func scopeParam(r *http.Request) (scope string, err error) {
	source, env := r.URL.Query().Get("source"), r.URL.Query().Get("environment")
	switch {
	case source != "" && env != "":
		return "", fmt.Errorf("give source or environment, not both: a secret belongs to one scope")
	case env != "":
		if !workflow.ValidEnvironment(env) {
			return "", fmt.Errorf("environment %q: use up to 64 letters, digits, _, . and -, starting with a letter or digit", env)
		}
		return secrets.EnvironmentScope(env), nil
	}
	return source, nil
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) {
	if !s.secretsConfigured(w) {
		return
	}
	list, err := s.cfg.Secrets.List(r.Context())
	if err != nil {
		s.storeError(w, "list secrets", err)
		return
	}
	out := apiv1.SecretList{Secrets: []apiv1.Secret{}}
	for _, sec := range list {
		out.Secrets = append(out.Secrets, secretOut(sec))
	}
	writeJSON(w, http.StatusOK, out)
}

// secretScope reads ?source= or ?environment= and checks that a source
// named exists (an environment need not be configured to hold secrets).
func (s *Server) secretScope(w http.ResponseWriter, r *http.Request) (string, bool) {
	source, err := scopeParam(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return "", false
	}
	if source == "" || strings.HasPrefix(source, secrets.EnvironmentScope("")) {
		return source, true
	}
	if _, err := s.db.GetSource(r.Context(), source); err != nil {
		s.storeError(w, fmt.Sprintf("source %q", source), err)
		return "", false
	}
	return source, true
}

func (s *Server) setSecret(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	scope, _ := scopeParam(r)
	audited(r, secretTarget(scope, name), "")
	if !s.secretsConfigured(w) {
		return
	}
	var in apiv1.SecretRequest
	if !decodeJSON(w, r, &in) {
		return
	}
	if err := errors.Join(secrets.CheckName(name), secrets.CheckValue(in.Value)); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	source, ok := s.secretScope(w, r)
	if !ok {
		return
	}
	created, err := s.cfg.Secrets.Set(r.Context(), source, name, in.Value, principal(r).ID)
	if err != nil {
		s.storeError(w, "set secret "+name, err)
		return
	}
	status, detail := http.StatusOK, "value replaced"
	if created {
		status, detail = http.StatusCreated, "created"
	}
	audited(r, "", detail)
	list, err := s.cfg.Secrets.List(r.Context())
	if err != nil {
		s.storeError(w, "read secret "+name, err)
		return
	}
	for _, sec := range list {
		if sec.Scope == source && sec.Name == name {
			writeJSON(w, status, secretOut(sec))
			return
		}
	}
	writeJSON(w, status, secretOut(store.Secret{Name: name, Scope: source}))
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	source, err := scopeParam(r)
	audited(r, secretTarget(source, name), "")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !s.secretsConfigured(w) {
		return
	}
	if err := s.cfg.Secrets.Delete(r.Context(), source, name); err != nil {
		what := fmt.Sprintf("secret %q", name)
		if env, ok := strings.CutPrefix(source, secrets.EnvironmentScope("")); ok {
			what = fmt.Sprintf("secret %q of environment %q", name, env)
		} else if source != "" {
			what = fmt.Sprintf("secret %q of source %q", name, source)
		}
		s.storeError(w, what, err)
		return
	}
	writeJSON(w, http.StatusOK, secretOut(store.Secret{Name: name, Scope: source}))
}

func (s *Server) rotateKey(w http.ResponseWriter, r *http.Request) {
	audited(r, "secret_key", "")
	if !s.secretsConfigured(w) {
		return
	}
	var in apiv1.RotateKeyRequest
	if !decodeJSON(w, r, &in) {
		return
	}
	key, err := secrets.ParseKey(in.NewKey)
	if err != nil {
		writeError(w, http.StatusBadRequest, "new_key: "+err.Error())
		return
	}
	res, err := s.cfg.Secrets.Rotate(r.Context(), key)
	if errors.Is(err, secrets.ErrSameKey) {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	if err != nil {
		s.storeError(w, "rotate secret key", err)
		return
	}
	out := apiv1.RotateKeyResponse{Resealed: res.Resealed, KeyVersion: res.KeyVersion, Fingerprint: res.Fingerprint, KeyFile: res.KeyFile}
	if res.KeyFile != "" {
		out.Note = "the new key replaced " + res.KeyFile + "; back it up with the database"
	} else {
		out.Note = "set KICI_SECRET_KEY to the new key on every orchestrator before it next starts: the old key no longer opens the secrets"
	}
	audited(r, "", fmt.Sprintf("key version %d (fingerprint %s), %d secret(s) resealed", res.KeyVersion, res.Fingerprint, res.Resealed))
	writeJSON(w, http.StatusOK, out)
}
