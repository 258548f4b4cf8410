package s3store

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		in         string
		wantBucket string
		wantPrefix string
		wantErr    string
	}{
		{name: "bucket", in: "s3://kici-blobs", wantBucket: "kici-blobs"},
		{name: "bucket and slash", in: "s3://kici-blobs/", wantBucket: "kici-blobs"},
		{name: "prefix", in: "s3://kici-blobs/ci/prod/", wantBucket: "kici-blobs", wantPrefix: "ci/prod"},
		{name: "dotted bucket", in: "s3://blobs.example.com/x", wantBucket: "blobs.example.com", wantPrefix: "x"},
		{name: "other scheme", in: "https://kici-blobs", wantErr: "want s3://BUCKET"},
		{name: "no bucket", in: "s3:///x", wantErr: `bucket ""`},
		{name: "upper case bucket", in: "s3://Kici", wantErr: `bucket "Kici"`},
		{name: "short bucket", in: "s3://ab", wantErr: `bucket "ab"`},
		{name: "dot-dot prefix", in: "s3://kici-blobs/a/../b", wantErr: `prefix "a/../b"`},
		{name: "empty prefix element", in: "s3://kici-blobs/a//b", wantErr: `prefix "a//b"`},
		{name: "query", in: "s3://kici-blobs?region=x", wantErr: "no query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, p, err := ParseURL(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseURL(%q): got %v, want an error containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || b != tt.wantBucket || p != tt.wantPrefix {
				t.Errorf("ParseURL(%q): got %q, %q, %v; want %q, %q", tt.in, b, p, err, tt.wantBucket, tt.wantPrefix)
			}
		})
	}
}

func TestParseEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr string
	}{
		{name: "https", in: "https://minio.internal:9000", want: "https://minio.internal:9000"},
		{name: "trailing slash", in: "https://minio.internal:9000/", want: "https://minio.internal:9000"},
		{name: "bare host is https", in: "minio.internal:9000", want: "https://minio.internal:9000"},
		{name: "http when written", in: "http://127.0.0.1:9000", want: "http://127.0.0.1:9000"},
		{name: "other scheme", in: "ftp://minio", wantErr: `scheme "ftp"`},
		{name: "no host", in: "https://", wantErr: "no host"},
		{name: "credentials", in: "https://key:secret@minio", wantErr: "credentials do not go in the URL"},
		{name: "path", in: "https://minio/kici-blobs", wantErr: "no path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseEndpoint(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseEndpoint(%q): got %q, %v, want an error containing %q", tt.in, got, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("ParseEndpoint(%q): got %v, which shows the password", tt.in, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseEndpoint(%q): got %q, %v, want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	good := Config{Bucket: "kici-blobs", AccessKeyID: "k", SecretAccessKey: "s"}
	tests := []struct {
		name    string
		edit    func(c *Config)
		wantErr string
	}{
		{name: "good", edit: func(*Config) {}},
		{name: "no bucket", edit: func(c *Config) { c.Bucket = "" }, wantErr: `bucket ""`},
		{name: "bad prefix", edit: func(c *Config) { c.Prefix = "/x" }, wantErr: `prefix "/x"`},
		{name: "bad endpoint", edit: func(c *Config) { c.Endpoint = "ftp://x" }, wantErr: `Endpoint "ftp://x"`},
		{name: "no access key", edit: func(c *Config) { c.AccessKeyID = "" }, wantErr: "AccessKeyID is required"},
		{name: "no secret", edit: func(c *Config) { c.SecretAccessKey = "" }, wantErr: "SecretAccessKey is required"},
		{name: "negative part size", edit: func(c *Config) { c.PartSize = -1 }, wantErr: "PartSize -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := good
			tt.edit(&c)
			err := c.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Validate: got %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestConfigPrintsNoSecret: a Config printed with %v or %+v (as a log
// line or a test failure might) names the store, not the credentials.
func TestConfigPrintsNoSecret(t *testing.T) {
	t.Parallel()
	c := Config{Bucket: "kici-blobs", Prefix: "ci", Endpoint: "https://minio:9000", AccessKeyID: "k", SecretAccessKey: "hunter2-secret"}
	for _, format := range []string{"%v", "%+v", "%s"} {
		got := fmt.Sprintf(format, c)
		if strings.Contains(got, "hunter2-secret") || got != "s3://kici-blobs/ci at https://minio:9000" {
			t.Errorf("Sprintf(%q): got %q, want %q", format, got, "s3://kici-blobs/ci at https://minio:9000")
		}
	}
}
