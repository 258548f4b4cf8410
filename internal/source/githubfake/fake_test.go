package githubfake_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kici-dev/kici/internal/source/githubfake"
)

// TestShapes checks the fake's answers against the shapes GitHub documents.
func TestShapes(t *testing.T) {
	t.Parallel()
	s := githubfake.New("tok")
	defer s.Close()
	c1 := s.AddCommit("o/r", map[string]string{".kici/workflows/ci.yml": strings.Repeat("x", 100), "a.txt": "a"})
	c2 := s.AddCommit("o/r", map[string]string{"a.txt": "b"})
	s.SetBranch("o/r", "main", c1)

	get := func(path, token string, v any) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		if v != nil {
			if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
				t.Fatalf("GET %s: decode: %v", path, err)
			}
		}
		return resp.StatusCode
	}

	var msg struct{ Message string }
	if code := get("/repos/o/r/commits/main", "", &msg); code != 401 || msg.Message != "Bad credentials" {
		t.Errorf("without a token: got %d %q, want 401 \"Bad credentials\"", code, msg.Message)
	}
	var commit struct{ SHA string }
	if code := get("/repos/o/r/commits/main", "tok", &commit); code != 200 || commit.SHA != c1 {
		t.Errorf("commit of main: got %d %s, want 200 %s", code, commit.SHA, c1)
	}
	if code := get("/repos/o/r/commits/nope", "tok", &msg); code != 422 {
		t.Errorf("commit of an unknown ref: got %d, want 422", code)
	}
	var file struct{ Type, Encoding, Content, Path string }
	if code := get("/repos/o/r/contents/.kici/workflows/ci.yml?ref="+c1, "tok", &file); code != 200 {
		t.Fatalf("file: got %d, want 200", code)
	}
	data, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(file.Content, "\n", ""))
	if file.Type != "file" || file.Encoding != "base64" || err != nil || string(data) != strings.Repeat("x", 100) ||
		!strings.Contains(file.Content, "\n") {
		t.Errorf("file: got %+v (decode error %v), want base64 content wrapped in lines", file, err)
	}
	var listing []struct{ Type, Name, Path string }
	if code := get("/repos/o/r/contents/.kici?ref="+c1, "tok", &listing); code != 200 || len(listing) != 1 ||
		listing[0].Type != "dir" || listing[0].Path != ".kici/workflows" {
		t.Errorf("listing: got %d %+v, want one dir .kici/workflows", code, listing)
	}
	if code := get("/repos/o/r/contents/.kici?ref="+c2, "tok", nil); code != 404 {
		t.Errorf("missing path: got %d, want 404", code)
	}
	var cmp struct {
		Files []struct{ Filename, Status string }
	}
	if code := get("/repos/o/r/compare/"+c1+"..."+c2, "tok", &cmp); code != 200 || len(cmp.Files) != 2 {
		t.Errorf("compare: got %d %+v, want 2 files", code, cmp.Files)
	}
	s.SetRateLimited(true)
	if code := get("/repos/o/r/commits/main", "tok", &msg); code != 403 || !strings.Contains(msg.Message, "rate limit") {
		t.Errorf("rate limited: got %d %q, want 403 and a rate-limit message", code, msg.Message)
	}
}
