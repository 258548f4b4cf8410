package auth

import (
	"errors"
	"testing"
)

func TestJobTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := LoadJobTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok := a.Mint("job-1", 2)
	job, attempt, err := a.Check(tok)
	if err != nil || job != "job-1" || attempt != 2 {
		t.Fatalf("Check(own token) = %q, %d, %v; want job-1, 2, nil", job, attempt, err)
	}
	// The key persists: a restarted orchestrator accepts its tokens.
	b, err := LoadJobTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Check(tok); err != nil {
		t.Errorf("token rejected after reload: %v", err)
	}
	other, err := LoadJobTokens(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		token string
		by    *JobTokens
	}{
		{name: "other key", token: tok, by: other},
		{name: "other attempt", token: "kjt_job-1.3." + tok[len("kjt_job-1.2."):], by: a},
		{name: "other job", token: "kjt_job-2.2." + tok[len("kjt_job-1.2."):], by: a},
		{name: "no prefix", token: tok[4:], by: a},
		{name: "empty", token: "", by: a},
		{name: "garbage", token: "kjt_a.b.c", by: a},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, _, err := tt.by.Check(tt.token); !errors.Is(err, ErrBadJobToken) {
				t.Errorf("Check(%q): got %v, want ErrBadJobToken", tt.token, err)
			}
		})
	}
}
