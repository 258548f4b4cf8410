package admincli

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// environmentsRoutes adds the environments endpoints to the fake API.
func (f *fakeAPI) environmentsRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/environments", func(w http.ResponseWriter, r *http.Request) {
		el := apiv1.EnvironmentList{Environments: []apiv1.Environment{}}
		if !f.empty {
			el.Environments = []apiv1.Environment{
				{Name: "production", RequireApproval: true, Branches: []string{"main"}, UpdatedAt: before(2 * time.Hour), UpdatedBy: "alice"},
				{Name: "staging", Branches: []string{"main", "release/*"}, UpdatedAt: before(24 * time.Hour), UpdatedBy: "bob"},
			}
		}
		writeJSONStatus(w, http.StatusOK, el)
	})
	mux.HandleFunc("PUT /api/v1/environments/{name}", func(w http.ResponseWriter, r *http.Request) {
		var in apiv1.EnvironmentRequest
		if !decode(w, r, &in) {
			return
		}
		name := r.PathValue("name")
		if strings.ContainsAny(name, " /") {
			writeError(w, http.StatusBadRequest, `environment "`+name+`": use up to 64 letters, digits, _, . and -, starting with a letter or digit`)
			return
		}
		writeJSONStatus(w, http.StatusOK, apiv1.Environment{Name: name, RequireApproval: in.RequireApproval, Branches: in.Branches, UpdatedAt: fakeNow, UpdatedBy: "tok-1"})
	})
	mux.HandleFunc("DELETE /api/v1/environments/{name}", func(w http.ResponseWriter, r *http.Request) {
		if name := r.PathValue("name"); name != "staging" {
			writeError(w, http.StatusNotFound, `environment "`+name+`": not found`)
			return
		}
		writeJSONStatus(w, http.StatusOK, apiv1.Environment{Name: "staging", Branches: []string{}})
	})
}

func TestEnvironments(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "environments-list", args: []string{"environments", "list"}, code: 0},
		{name: "environments-list-empty", args: []string{"environments", "list"}, empty: true, code: 0},
		{name: "environments-set", args: []string{"environments", "set", "production", "--require-approval", "--branches", "main,release/*"}, code: 0},
		{name: "environments-set-json", args: []string{"env", "set", "staging", "-o", "json"}, code: 0},
		{name: "environments-set-bad-name", args: []string{"environments", "set", "prod env"}, code: 1},
		{name: "environments-delete", args: []string{"environments", "delete", "staging"}, code: 0},
		{name: "environments-delete-unknown", args: []string{"environments", "delete", "nope"}, code: 1},
		{name: "secrets-set-environment", args: []string{"secrets", "set", "DEPLOY_KEY", "--environment", "production"}, stdin: "ssh-deploy-key", code: 0},
		{name: "secrets-set-source-and-environment", args: []string{"secrets", "set", "DEPLOY_KEY", "--environment", "production", "--source", "web"}, stdin: "k", code: 2},
		{name: "secrets-delete-environment", args: []string{"secrets", "delete", "DEPLOY_KEY", "--environment", "production"}, code: 0},
	})
}

// TestEnvironmentsSetSendsTheProtection: the flags become the request's
// body, the branches split at commas.
func TestEnvironmentsSetSendsTheProtection(t *testing.T) {
	t.Parallel()
	fake := newFakeAPI(t, false)
	_, stderr, code := runCLIInput(t.Context(), []string{"environments", "set", "production", "--require-approval", "--branches", "main,release/*"},
		map[string]string{envURL: fake.URL(), envToken: fakeToken}, "")
	if code != 0 {
		t.Fatalf("exit status %d (stderr %q), want 0", code, stderr)
	}
	got := fake.received()
	if len(got) != 1 || got[0].Method != http.MethodPut || got[0].Path != "/api/v1/environments/production" {
		t.Fatalf("requests: %+v, want one PUT of production", got)
	}
	body := got[0].Body.(map[string]any)
	branches, _ := body["branches"].([]any)
	if body["require_approval"] != true || !slices.Equal(branches, []any{"main", "release/*"}) {
		t.Errorf("body %v, want require_approval and the two branches", body)
	}
}
