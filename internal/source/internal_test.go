package source

import (
	"errors"
	"net/http"
	"testing"
)

func TestClassifyStatus(t *testing.T) {
	t.Parallel()
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		status  int
		header  http.Header
		message string
		want    error
	}{
		{name: "401", status: 401, want: ErrUnauthorized},
		{name: "404", status: 404, want: ErrNotFound},
		{name: "429", status: 429, want: ErrRateLimited},
		{name: "403 exhausted", status: 403, header: h("X-RateLimit-Remaining", "0"), want: ErrRateLimited},
		{name: "403 secondary", status: 403, header: h("Retry-After", "60"), want: ErrRateLimited},
		{name: "403 message", status: 403, message: "You have exceeded a secondary rate limit.", want: ErrRateLimited},
		{name: "403 with quota left", status: 403, header: h("X-RateLimit-Remaining", "4999"), message: "Resource not accessible by integration", want: ErrForbidden},
		{name: "422", status: 422, want: nil},
		{name: "500", status: 500, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.header == nil {
				tc.header = http.Header{}
			}
			if got := classifyStatus(tc.status, tc.header, tc.message); !errors.Is(got, tc.want) || (tc.want == nil) != (got == nil) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheckRef(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ref string
		ok  bool
	}{
		{"main", true}, {"refs/heads/release/1.x", true}, {"v1.0.0", true}, {"HEAD", true},
		{"0123456789abcdef0123456789abcdef01234567", true},
		{"", false}, {"-main", false}, {"--upload-pack=x", false}, {"a b", false}, {"a\tb", false},
		{"a\x00b", false}, {"a\x7fb", false}, {`a\b`, false},
	} {
		if err := checkRef(tc.ref); (err == nil) != tc.ok {
			t.Errorf("checkRef(%q): got %v, want ok=%v", tc.ref, err, tc.ok)
		}
	}
}

func TestStripFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"o-r-abc1234/", "", true},
		{"o-r-abc1234/src/main.go", "src/main.go", true},
		{"o-r-abc1234/src/", "src/", true},
		{"o-r-abc1234/../../etc/passwd", "", false},
		{"../x", "", false},
		{"/etc/passwd", "", false},
		{"pax_global_header", "", true},
	} {
		got, ok := stripFirst(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("stripFirst(%q): got %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRedactor(t *testing.T) {
	t.Parallel()
	r := redactor("https://user:p%40ss@example.com/r.git")
	if got := r("clone https://user:p%40ss@example.com/r.git: p@ss"); got != "clone https://***@example.com/r.git: ***" {
		t.Errorf("got %q", got)
	}
	if got := redactor("git@example.com:o/r.git")("x"); got != "x" {
		t.Errorf("got %q, want x", got)
	}
}
