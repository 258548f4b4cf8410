package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/auth"
)

func TestSecretsAPI(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, _ := ciRepo(t)
		h.addSource(t, "scoped", dir, "")
		const value = "super-secret-value-123"
		var set apiv1.Secret
		h.mustAdmin(t, http.MethodPut, "/api/v1/secrets/DEPLOY_TOKEN", apiv1.SecretRequest{Value: value}, http.StatusCreated, &set)
		if set.Name != "DEPLOY_TOKEN" || set.Source != "" || set.UpdatedBy != "bootstrap" || set.KeyVersion != 1 {
			t.Errorf("set: got %+v", set)
		}
		h.mustAdmin(t, http.MethodPut, "/api/v1/secrets/DEPLOY_TOKEN", apiv1.SecretRequest{Value: value + "2"}, http.StatusOK, nil)
		h.mustAdmin(t, http.MethodPut, "/api/v1/secrets/DEPLOY_TOKEN?source=scoped", apiv1.SecretRequest{Value: value + "3"}, http.StatusCreated, nil)

		tests := []struct {
			name, path, body string
			wantStatus       int
			wantError        string
		}{
			{name: "lower-case name", path: "/api/v1/secrets/deploy", body: `{"value": "v"}`, wantStatus: http.StatusBadRequest, wantError: "upper-case"},
			{name: "reserved name", path: "/api/v1/secrets/KICI_X", body: `{"value": "v"}`, wantStatus: http.StatusBadRequest, wantError: "reserved"},
			{name: "empty value", path: "/api/v1/secrets/X", body: `{"value": ""}`, wantStatus: http.StatusBadRequest, wantError: "empty"},
			{name: "short value", path: "/api/v1/secrets/X", body: `{"value": "abc"}`, wantStatus: http.StatusBadRequest, wantError: "secret value: 3 character(s), at least 4"},
			{name: "unknown source", path: "/api/v1/secrets/X?source=nope", body: `{"value": "v123"}`, wantStatus: http.StatusNotFound, wantError: `source "nope"`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				resp := h.admin(t, http.MethodPut, tt.path, tt.body)
				if resp.status != tt.wantStatus || !strings.Contains(resp.apiError(t).Error, tt.wantError) {
					t.Errorf("got %d %s, want %d saying %q", resp.status, resp.body, tt.wantStatus, tt.wantError)
				}
			})
		}

		resp := h.admin(t, http.MethodGet, "/api/v1/secrets", nil)
		if strings.Contains(string(resp.body), value) {
			t.Errorf("the secret list holds a value: %s", resp.body)
		}
		var list apiv1.SecretList
		resp.decode(t, &list)
		var got []string
		for _, s := range list.Secrets {
			got = append(got, s.Source+"/"+s.Name)
		}
		if diff := cmp.Diff([]string{"/DEPLOY_TOKEN", "scoped/DEPLOY_TOKEN"}, got); diff != "" {
			t.Errorf("secrets (-want +got):\n%s", diff)
		}

		auditor := h.newAdminToken(t, "eve", auth.Auditor)
		if resp := h.call(t, auditor.Token, http.MethodGet, "/api/v1/secrets", ""); resp.status != http.StatusForbidden {
			t.Errorf("auditor lists secrets: got %d, want 403", resp.status)
		}
		admin := h.newAdminToken(t, "ann", auth.Admin)
		if resp := h.call(t, admin.Token, http.MethodPost, "/api/v1/secrets/rotate-key", `{"new_key": "`+strings.Repeat("1", 64)+`"}`); resp.status != http.StatusForbidden {
			t.Errorf("admin rotates the key: got %d, want 403 (key.rotate is the owner's)", resp.status)
		}
		for _, tt := range []struct {
			body      string
			want      int
			wantError string
		}{
			{body: `{"new_key": "short"}`, want: http.StatusBadRequest, wantError: "want 64 hex digits"},
			{body: `{"new_key": "` + testSecretKey + `"}`, want: http.StatusConflict, wantError: "already in use"},
		} {
			resp := h.admin(t, http.MethodPost, "/api/v1/secrets/rotate-key", tt.body)
			if resp.status != tt.want || !strings.Contains(resp.apiError(t).Error, tt.wantError) {
				t.Errorf("rotate %s: got %d %s, want %d saying %q", tt.body, resp.status, resp.body, tt.want, tt.wantError)
			}
		}

		h.mustAdmin(t, http.MethodDelete, "/api/v1/secrets/DEPLOY_TOKEN?source=scoped", nil, http.StatusOK, nil)
		h.mustAdmin(t, http.MethodDelete, "/api/v1/secrets/DEPLOY_TOKEN?source=scoped", nil, http.StatusNotFound, nil)

		var audit apiv1.AuditList
		h.mustAdmin(t, http.MethodGet, "/api/v1/audit?action=secret.", nil, http.StatusOK, &audit)
		raw := h.admin(t, http.MethodGet, "/api/v1/audit", nil).body
		if strings.Contains(string(raw), value) {
			t.Errorf("the audit log holds a secret value: %s", raw)
		}
		var actions []string
		for _, e := range audit.Entries {
			actions = append(actions, e.Action+" "+e.Target+" "+e.Outcome)
		}
		want := []string{
			"secret.delete secret:scoped/DEPLOY_TOKEN failed",
			"secret.delete secret:scoped/DEPLOY_TOKEN allowed",
			"secret.list /api/v1/secrets denied",
			"secret.set secret:nope/X failed",
			"secret.set secret:X failed",
			"secret.set secret:X failed",
			"secret.set secret:KICI_X failed",
			"secret.set secret:deploy failed",
			"secret.set secret:scoped/DEPLOY_TOKEN allowed",
			"secret.set secret:DEPLOY_TOKEN allowed",
			"secret.set secret:DEPLOY_TOKEN allowed",
		}
		if diff := cmp.Diff(want, actions); diff != "" {
			t.Errorf("audit (-want +got):\n%s", diff)
		}
	})
}
