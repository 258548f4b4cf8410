package api

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kici-dev/kici/internal/auth"
)

// TestRouteDeclarations: every route declares a valid access and, when it
// takes an admin token, a known permission; check refuses a route that
// does not (New panics on it).
func TestRouteDeclarations(t *testing.T) {
	t.Parallel()
	for _, r := range (&Server{}).routes() {
		if err := r.check(); err != nil {
			t.Errorf("route %q: %v", r.pattern, err)
		}
	}
	var h http.HandlerFunc = func(http.ResponseWriter, *http.Request) {}
	tests := []struct {
		name    string
		r       route
		wantErr string
	}{
		{name: "admin route without permission", r: route{"GET /x", adminToken, "", "x.read", h}, wantErr: "declares no known permission"},
		{name: "admin route with an unknown permission", r: route{"GET /x", adminToken, "x.read", "x.read", h}, wantErr: "declares no known permission"},
		{name: "public route with a permission", r: route{"GET /x", public, auth.RunRead, "", h}, wantErr: "does not take an admin token"},
		{name: "unknown access", r: route{"GET /x", access(42), "", "x", h}, wantErr: "unknown access"},
		{name: "authenticated route without audit action", r: route{"POST /x", adminToken, auth.RunRead, "", h}, wantErr: "no audit action"},
		{name: "fine", r: route{"GET /x", adminToken, auth.RunRead, "x.read", h}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.r.check()
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("got %v, want no error", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got %v, want an error saying %q", err, tt.wantErr)
			}
		})
	}
}

// TestOperationsDocListsEveryRoute: docs/operations.md names every route
// with the permission it declares, so the documented table cannot drift
// from the code.
func TestOperationsDocListsEveryRoute(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(doc), "\n")
	for _, r := range Routes() {
		var line string
		for _, l := range lines {
			if strings.HasPrefix(l, "| ") && strings.Contains(l, "`"+r.Pattern+"`") {
				line = l
				break
			}
		}
		if line == "" {
			t.Errorf("docs/operations.md has no table row for %q", r.Pattern)
			continue
		}
		if r.Permission != "" && !strings.Contains(line, "`"+string(r.Permission)+"`") {
			t.Errorf("docs/operations.md: the row of %q does not name its permission %q", r.Pattern, r.Permission)
		}
		if r.Action != "" && !strings.Contains(line, "`"+r.Action+"`") {
			t.Errorf("docs/operations.md: the row of %q does not name its audit action %q", r.Pattern, r.Action)
		}
	}
}
