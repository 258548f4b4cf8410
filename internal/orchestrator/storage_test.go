package orchestrator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/blobs/s3store"
	"github.com/kici-dev/kici/internal/blobs/s3store/s3fake"
)

// testS3Secret is the secret key of the tests' S3 settings; no error may
// show it.
const testS3Secret = "s3-secret-never-shown"

// TestBlobStoreFromEnv: KICI_BLOB_STORE picks the data dir (unset or dir)
// or an S3 bucket with the KICI_S3_* settings; each bad setting fails at
// start naming its variable, and no error shows the secret key.
func TestBlobStoreFromEnv(t *testing.T) {
	t.Parallel()
	s3 := func(extra map[string]string) map[string]string {
		env := map[string]string{"KICI_BLOB_STORE": "s3://kici-blobs/ci", "KICI_S3_ACCESS_KEY_ID": "AKIDTEST", "KICI_S3_SECRET_ACCESS_KEY": testS3Secret}
		for k, v := range extra {
			env[k] = v
		}
		return env
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    *s3store.Config
		wantErr string
	}{
		{name: "default", env: map[string]string{}},
		{name: "dir", env: map[string]string{"KICI_BLOB_STORE": "dir"}},
		{name: "s3 on AWS", env: s3(nil), want: &s3store.Config{Bucket: "kici-blobs", Prefix: "ci", AccessKeyID: "AKIDTEST", SecretAccessKey: testS3Secret}},
		{name: "s3 compatible", env: s3(map[string]string{"KICI_S3_ENDPOINT": "minio.internal:9000", "KICI_S3_REGION": "eu-1"}),
			want: &s3store.Config{Bucket: "kici-blobs", Prefix: "ci", Endpoint: "https://minio.internal:9000", Region: "eu-1", AccessKeyID: "AKIDTEST", SecretAccessKey: testS3Secret}},
		{name: "plain http when written", env: s3(map[string]string{"KICI_S3_ENDPOINT": "http://127.0.0.1:9000"}),
			want: &s3store.Config{Bucket: "kici-blobs", Prefix: "ci", Endpoint: "http://127.0.0.1:9000", AccessKeyID: "AKIDTEST", SecretAccessKey: testS3Secret}},
		{name: "unknown store", env: map[string]string{"KICI_BLOB_STORE": "gs://bucket"}, wantErr: `KICI_BLOB_STORE="gs://bucket": want dir`},
		{name: "bad bucket", env: s3(map[string]string{"KICI_BLOB_STORE": "s3://Kici_Blobs"}), wantErr: `KICI_BLOB_STORE="s3://Kici_Blobs": bucket "Kici_Blobs"`},
		{name: "bad prefix", env: s3(map[string]string{"KICI_BLOB_STORE": "s3://kici-blobs/../x"}), wantErr: `KICI_BLOB_STORE="s3://kici-blobs/../x": prefix`},
		{name: "bad endpoint", env: s3(map[string]string{"KICI_S3_ENDPOINT": "ftp://minio"}), wantErr: `KICI_S3_ENDPOINT="ftp://minio"`},
		{name: "endpoint with a path", env: s3(map[string]string{"KICI_S3_ENDPOINT": "https://minio/kici-blobs"}), wantErr: `KICI_S3_ENDPOINT="https://minio/kici-blobs"`},
		{name: "no access key", env: s3(map[string]string{"KICI_S3_ACCESS_KEY_ID": ""}), wantErr: "KICI_S3_ACCESS_KEY_ID: required"},
		{name: "no secret key", env: s3(map[string]string{"KICI_S3_SECRET_ACCESS_KEY": ""}), wantErr: "KICI_S3_SECRET_ACCESS_KEY: required"},
		{name: "s3 settings without s3", env: map[string]string{"KICI_S3_SECRET_ACCESS_KEY": testS3Secret},
			wantErr: "KICI_S3_SECRET_ACCESS_KEY is set, but KICI_BLOB_STORE is not an s3:// URL"},
		{name: "worker with s3", env: s3(map[string]string{"KICI_CLUSTER_ROLE": "worker", "KICI_CLUSTER_COORDINATOR_URLS": "http://c:4000"}),
			wantErr: "KICI_BLOB_STORE: a worker keeps no artifacts or caches"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _, err := ConfigFromEnv(func(k string) string { return tt.env[k] }, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), testS3Secret) {
					t.Errorf("got %v, which shows the secret key", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if diff := cmp.Diff(tt.want, c.Storage.S3); diff != "" {
				t.Errorf("S3 config (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOpenBlobStore: with no S3 settings the blobs go under the data
// dir; with a bucket on a fake S3 server they go to the bucket, under the
// prefix, and nothing to the data dir; a bucket the server lacks fails
// the start, naming the store and the variables to check, and not the
// secret.
func TestOpenBlobStore(t *testing.T) {
	t.Parallel()
	fake := s3fake.Start(t, "kici-blobs")
	cfg := func(bucket string) *s3store.Config {
		return &s3store.Config{Bucket: bucket, Prefix: "ci", Endpoint: fake.URL, AccessKeyID: "AKIDTEST", SecretAccessKey: testS3Secret}
	}

	t.Run("dir", func(t *testing.T) {
		t.Parallel()
		dataDir := t.TempDir()
		bs, err := openBlobStore(t.Context(), dataDir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bs.Put(t.Context(), "caches/1.tgz", strings.NewReader("x"), 10, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dataDir, "blobs", "caches", "1.tgz")); err != nil {
			t.Errorf("blob in the data dir: %v", err)
		}
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		dataDir := t.TempDir()
		bs, err := openBlobStore(t.Context(), dataDir, cfg("kici-blobs"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bs.Put(t.Context(), "caches/1.tgz", strings.NewReader("x"), 10, ""); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"ci/caches/1.tgz"}, fake.Keys(t, "")); diff != "" {
			t.Errorf("objects in the bucket (-want +got):\n%s", diff)
		}
		if _, err := os.Stat(filepath.Join(dataDir, "blobs")); !os.IsNotExist(err) {
			t.Errorf("data dir blobs: got %v, want no directory", err)
		}
	})
	t.Run("missing bucket", func(t *testing.T) {
		t.Parallel()
		_, err := openBlobStore(t.Context(), t.TempDir(), cfg("kici-nowhere"))
		want := "blob store s3://kici-nowhere/ci at " + fake.URL + " is not reachable; check KICI_BLOB_STORE, KICI_S3_ENDPOINT"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want an error containing %q", err, want)
		}
		if strings.Contains(err.Error(), testS3Secret) {
			t.Errorf("got %v, which shows the secret key", err)
		}
	})
}
