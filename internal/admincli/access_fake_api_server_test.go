package admincli

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// accessRoutes adds the endpoints of admin tokens, agent tokens, secrets
// and the audit log.
func (f *fakeAPI) accessRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/tokens", f.createAdminToken)
	mux.HandleFunc("GET /api/v1/tokens", f.listAdminTokens)
	mux.HandleFunc("DELETE /api/v1/tokens/{id}", f.revokeAdminToken)
	mux.HandleFunc("GET /api/v1/agent-tokens", f.listAgentTokens)
	mux.HandleFunc("DELETE /api/v1/agent-tokens/{id}", f.revokeAgentToken)
	mux.HandleFunc("GET /api/v1/secrets", f.listSecrets)
	mux.HandleFunc("PUT /api/v1/secrets/{name}", f.setSecret)
	mux.HandleFunc("DELETE /api/v1/secrets/{name}", f.deleteSecret)
	mux.HandleFunc("POST /api/v1/secrets/rotate-key", f.rotateKey)
	mux.HandleFunc("GET /api/v1/audit", f.audit)
}

// fakeExpiry reads an expires_in as the orchestrator does: a duration or
// a number of days.
func fakeExpiry(s string) (*time.Time, bool) {
	if s == "" {
		return nil, true
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return nil, false
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return nil, false
		}
	}
	t := fakeNow.Add(d)
	return &t, true
}

func (f *fakeAPI) createAdminToken(w http.ResponseWriter, r *http.Request) {
	var req apiv1.AdminTokenRequest
	if !decode(w, r, &req) {
		return
	}
	expires, ok := fakeExpiry(req.ExpiresIn)
	if !ok {
		writeError(w, http.StatusBadRequest, `expires_in "`+req.ExpiresIn+`": want a duration such as 720h or 30d`)
		return
	}
	const token = "kadm_8c1f0e9d2b7a4c6e5f3a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e"
	writeJSONStatus(w, http.StatusCreated, apiv1.AdminToken{
		ID: "tok-4", Name: req.Name, Role: req.Role, Token: token, Prefix: token[:12],
		CreatedBy: "tok-1", CreatedAt: fakeNow, ExpiresAt: expires,
	})
}

func (f *fakeAPI) listAdminTokens(w http.ResponseWriter, r *http.Request) {
	tl := apiv1.AdminTokenList{Tokens: []apiv1.AdminToken{}}
	if !f.empty {
		tl.Tokens = []apiv1.AdminToken{
			{ID: "tok-1", Name: "ops lead", Role: "owner", Prefix: "kadm_1a2b3c4", CreatedBy: "bootstrap",
				CreatedAt: before(30 * 24 * time.Hour), LastUsedAt: beforeP(2 * time.Minute)},
			{ID: "tok-2", Name: "alice laptop", Role: "admin", Prefix: "kadm_5d6e7f8", CreatedBy: "tok-1",
				CreatedAt: before(7 * 24 * time.Hour), LastUsedAt: beforeP(3 * 24 * time.Hour), RevokedAt: beforeP(24 * time.Hour)},
			{ID: "tok-3", Name: "dashboards", Role: "auditor", Prefix: "kadm_9a0b1c2", CreatedBy: "tok-1",
				CreatedAt: before(100 * 24 * time.Hour), ExpiresAt: beforeP(10 * 24 * time.Hour)},
		}
	}
	writeJSONStatus(w, http.StatusOK, tl)
}

func (f *fakeAPI) revokeAdminToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id != "tok-2" {
		writeError(w, http.StatusNotFound, `admin token "`+id+`" (or it is revoked already): not found`)
		return
	}
	writeJSONStatus(w, http.StatusOK, map[string]string{"id": id, "status": "revoked"})
}

func (f *fakeAPI) listAgentTokens(w http.ResponseWriter, r *http.Request) {
	tl := apiv1.AgentTokenList{Tokens: []apiv1.AgentTokenInfo{}}
	if !f.empty {
		tl.Tokens = []apiv1.AgentTokenInfo{
			{ID: "at-7", Labels: []string{"linux", "docker"}, CreatedBy: "tok-1", CreatedAt: before(14 * 24 * time.Hour),
				LastUsedAt: beforeP(5 * time.Minute), Agents: 2},
			{ID: "at-8", Labels: []string{"gpu"}, CreatedBy: "bootstrap", CreatedAt: before(3 * time.Hour),
				ExpiresAt: timeP(fakeNow.Add(27 * 24 * time.Hour))},
			{ID: "at-9", Labels: []string{}, CreatedBy: "tok-1", CreatedAt: before(60 * 24 * time.Hour),
				LastUsedAt: beforeP(40 * 24 * time.Hour), RevokedAt: beforeP(30 * 24 * time.Hour)},
		}
	}
	writeJSONStatus(w, http.StatusOK, tl)
}

func (f *fakeAPI) revokeAgentToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id != "at-7" {
		writeError(w, http.StatusNotFound, `agent token "`+id+`" (or it is revoked already): not found`)
		return
	}
	writeJSONStatus(w, http.StatusOK, apiv1.AgentTokenRevoked{ID: id, Disconnected: 2})
}

var fakeSecrets = []apiv1.Secret{
	{Name: "DEPLOY_TOKEN", CreatedAt: before(20 * 24 * time.Hour), UpdatedAt: before(2 * time.Hour), UpdatedBy: "tok-1", KeyVersion: 2},
	{Name: "NPM_TOKEN", Source: "web", CreatedAt: before(5 * 24 * time.Hour), UpdatedAt: before(5 * 24 * time.Hour), UpdatedBy: "bootstrap", KeyVersion: 2},
	{Name: "DEPLOY_KEY", Environment: "production", CreatedAt: before(3 * 24 * time.Hour), UpdatedAt: before(3 * 24 * time.Hour), UpdatedBy: "tok-1", KeyVersion: 2},
}

func (f *fakeAPI) listSecrets(w http.ResponseWriter, r *http.Request) {
	sl := apiv1.SecretList{Secrets: []apiv1.Secret{}}
	if !f.empty {
		sl.Secrets = fakeSecrets
	}
	writeJSONStatus(w, http.StatusOK, sl)
}

var fakeSecretName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

func (f *fakeAPI) setSecret(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req apiv1.SecretRequest
	if !decode(w, r, &req) {
		return
	}
	if !fakeSecretName.MatchString(name) {
		writeError(w, http.StatusBadRequest, `secret name "`+name+`": use upper-case letters, digits and _ (not starting with a digit)`)
		return
	}
	source, env := r.URL.Query().Get("source"), r.URL.Query().Get("environment")
	if source != "" && source != "web" {
		writeError(w, http.StatusNotFound, `source "`+source+`": not found`)
		return
	}
	writeJSONStatus(w, http.StatusCreated, apiv1.Secret{Name: name, Source: source, Environment: env, CreatedAt: fakeNow, UpdatedAt: fakeNow, UpdatedBy: "tok-1", KeyVersion: 2})
}

func (f *fakeAPI) deleteSecret(w http.ResponseWriter, r *http.Request) {
	name, source, env := r.PathValue("name"), r.URL.Query().Get("source"), r.URL.Query().Get("environment")
	for _, s := range fakeSecrets {
		if s.Name == name && s.Source == source && s.Environment == env {
			writeJSONStatus(w, http.StatusOK, apiv1.Secret{Name: name, Source: source, Environment: env})
			return
		}
	}
	writeError(w, http.StatusNotFound, `secret "`+name+`": not found`)
}

func (f *fakeAPI) rotateKey(w http.ResponseWriter, r *http.Request) {
	var req apiv1.RotateKeyRequest
	if !decode(w, r, &req) {
		return
	}
	writeJSONStatus(w, http.StatusOK, apiv1.RotateKeyResponse{
		Resealed: 2, KeyVersion: 3, Fingerprint: "5e884898da280471",
		Note: "set KICI_SECRET_KEY to the new key on every orchestrator before it next starts: the old key no longer opens the secrets",
	})
}

var fakeAudit = []apiv1.AuditEntry{
	{ID: "au-6", Time: before(time.Minute), ActorType: "admin_token", ActorID: "tok-1", ActorName: "ops lead", Role: "owner",
		Action: "secret.set", Target: "secret:DEPLOY_TOKEN", Outcome: "allowed", Status: 200, Detail: "value replaced", ClientAddr: "10.0.0.5"},
	{ID: "au-5", Time: before(10 * time.Minute), ActorType: "admin_token", ActorID: "tok-3", ActorName: "dashboards", Role: "auditor",
		Action: "run.cancel", Target: "/api/v1/runs/r-104/cancel", Outcome: "denied", Status: 403,
		Detail: `role "auditor" does not have permission "run.cancel"`, ClientAddr: "10.0.0.9"},
	{ID: "au-4", Time: before(time.Hour), ActorType: "anonymous", Action: "source.list", Target: "/api/v1/sources",
		Outcome: "denied", Status: 401, Detail: "invalid admin token: unknown token", ClientAddr: "203.0.113.7"},
	{ID: "au-3", Time: before(2 * time.Hour), ActorType: "agent_token", ActorID: "at-7", Action: "agent.register",
		Target: "agent:rogue", Outcome: "denied", Detail: `close 4003: label "gpu" is not allowed by this agent token (it allows linux, docker)`, ClientAddr: "10.0.1.2"},
	{ID: "au-2", Time: before(3 * time.Hour), ActorType: "bootstrap", ActorID: "bootstrap", ActorName: "bootstrap", Role: "owner",
		Action: "source.delete", Target: "source:old", Outcome: "failed", Status: 404, Detail: `source "old": not found`, ClientAddr: "127.0.0.1"},
	{ID: "au-1", Time: before(4 * time.Hour), ActorType: "bootstrap", ActorID: "bootstrap", ActorName: "bootstrap", Role: "owner",
		Action: "token.create", Target: "token:tok-1", Outcome: "allowed", Status: 201, Detail: `name "ops lead", role owner`, ClientAddr: "127.0.0.1"},
}

func (f *fakeAPI) audit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	al := apiv1.AuditList{Entries: []apiv1.AuditEntry{}}
	if f.empty {
		writeJSONStatus(w, http.StatusOK, al)
		return
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	started := q.Get("before") == ""
	for _, e := range fakeAudit {
		if !started {
			started = e.ID == q.Get("before")
			continue
		}
		if o := q.Get("outcome"); o != "" && e.Outcome != o {
			continue
		}
		if len(al.Entries) == limit {
			al.Next = al.Entries[len(al.Entries)-1].ID
			break
		}
		al.Entries = append(al.Entries, e)
	}
	writeJSONStatus(w, http.StatusOK, al)
}
