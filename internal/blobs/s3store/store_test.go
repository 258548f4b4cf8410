package s3store

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kici-dev/kici/internal/blobs"
	"github.com/kici-dev/kici/internal/blobs/blobstest"
	"github.com/kici-dev/kici/internal/blobs/s3store/s3fake"
)

// testSecret is the secret key of every test store; no error may show it.
const testSecret = "test-secret-never-shown"

// testPartSize cuts blobstest's large blobs into many parts.
const testPartSize = 64 << 10

// newStore returns a Store on the fake server's bucket, under prefix.
func newStore(t *testing.T, fake *s3fake.Server, prefix string) *Store {
	t.Helper()
	s, err := New(Config{Bucket: fake.Bucket, Prefix: prefix, Endpoint: fake.URL,
		AccessKeyID: "test-key", SecretAccessKey: testSecret, PartSize: testPartSize})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// putObject stores an object under a raw key, as something other than
// the store would.
func putObject(t *testing.T, s *Store, key string) {
	t.Helper()
	if _, err := s.client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key),
		Body: strings.NewReader("foreign"), ContentLength: aws.Int64(7)}); err != nil {
		t.Fatal(err)
	}
}

// TestContract runs the Store conformance suite against a fake S3 server:
// each store alone at the top of its own bucket, and stores that share a
// bucket under prefixes of their own, beside objects that are not blobs.
func TestContract(t *testing.T) {
	t.Parallel()
	t.Run("bucket top", func(t *testing.T) {
		t.Parallel()
		blobstest.Run(t, func(t *testing.T) blobs.Store {
			return newStore(t, s3fake.Start(t, "kici-blobs"), "")
		})
	})
	t.Run("prefix", func(t *testing.T) {
		t.Parallel()
		fake := s3fake.Start(t, "kici-shared")
		var n atomic.Int64
		blobstest.Run(t, func(t *testing.T) blobs.Store {
			prefix := fmt.Sprintf("site/k%d", n.Add(1))
			s := newStore(t, fake, prefix)
			putObject(t, s, prefix+"x")               // beside the prefix, not under it
			putObject(t, s, prefix+"/.hidden/object") // under it, but not a blob key
			return s
		})
	})
}

// TestRefusedPutsLeaveNoUpload: a large Put refused for its size or its
// digest, or cancelled, after some of its parts were sent, aborts its
// multipart upload, so no parts are left taking space.
func TestRefusedPutsLeaveNoUpload(t *testing.T) {
	t.Parallel()
	s := newStore(t, s3fake.Start(t, "kici-aborts"), "p")
	body := bytes.Repeat([]byte("0123456789abcdef"), 40<<10) // 10 parts
	if _, err := s.Put(t.Context(), "k", bytes.NewReader(body), int64(len(body))-1, ""); !errors.Is(err, blobs.ErrTooLarge) {
		t.Errorf("put over the limit: got %v, want ErrTooLarge", err)
	}
	if _, err := s.Put(t.Context(), "k", bytes.NewReader(body), int64(len(body)), blobstest.Digest(nil)); !errors.Is(err, blobs.ErrDigestMismatch) {
		t.Errorf("put with the wrong digest: got %v, want ErrDigestMismatch", err)
	}
	out, err := s.client.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(s.bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Uploads) != 0 {
		t.Errorf("multipart uploads in progress: got %d, want none", len(out.Uploads))
	}
	if _, err := s.Stat(t.Context(), "k"); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("stat after the refused puts: got %v, want ErrNotFound", err)
	}
}

// TestCheck: Check passes on a bucket the server has, and otherwise fails
// naming the store; no error shows the secret key.
func TestCheck(t *testing.T) {
	t.Parallel()
	fake := s3fake.Start(t, "kici-check")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	tests := []struct {
		name     string
		bucket   string
		endpoint string
		wantErr  string
	}{
		{name: "reachable", bucket: "kici-check", endpoint: fake.URL},
		{name: "no such bucket", bucket: "kici-other", endpoint: fake.URL, wantErr: "reach bucket s3://kici-other at " + fake.URL},
		{name: "nothing listening", bucket: "kici-check", endpoint: closed, wantErr: "reach bucket s3://kici-check at " + closed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := New(Config{Bucket: tt.bucket, Endpoint: tt.endpoint, AccessKeyID: "test-key", SecretAccessKey: testSecret})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Check(t.Context())
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("check: got %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("check: got %v, want an error containing %q", err, tt.wantErr)
			case err != nil && strings.Contains(err.Error(), testSecret):
				t.Errorf("check: got %v, which shows the secret key", err)
			}
		})
	}
}

// TestIsNotFound: the S3 answers that mean "no object at this key" are
// told apart from the others.
func TestIsNotFound(t *testing.T) {
	t.Parallel()
	fake := s3fake.Start(t, "kici-errors")
	s := newStore(t, fake, "")
	other, err := New(Config{Bucket: "kici-missing", Endpoint: fake.URL, AccessKeyID: "k", SecretAccessKey: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	_, getErr := s.client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String("none")})
	_, headErr := s.client.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String("none")})
	_, bucketErr := other.client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("kici-missing"), Key: aws.String("none")})
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "get of a missing key", err: getErr, want: true},
		{name: "head of a missing key", err: headErr, want: true},
		{name: "get in a missing bucket", err: bucketErr, want: false},
		{name: "not an S3 error", err: errors.New("connection reset"), want: false},
		{name: "nil", err: nil, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := isNotFound(tt.err); got != tt.want {
				t.Errorf("isNotFound(%v): got %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
