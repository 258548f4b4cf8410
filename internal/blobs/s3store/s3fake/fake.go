// Package s3fake is a fake S3 server for tests. It is not S3: it runs
// github.com/johannesboyne/gofakes3 with its in-memory backend on an
// httptest server bound to 127.0.0.1, speaks enough of the S3 API for the
// s3store package (objects, listings, multipart uploads), accepts any
// credentials without checking a signature, and forgets everything when
// the test ends. Only tests import it; a Server is safe for concurrent
// use.
package s3fake

import (
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is a running fake S3 server.
type Server struct {
	// URL is its endpoint, http://127.0.0.1:PORT.
	URL string
	// Bucket is the bucket Start created.
	Bucket string

	backend *s3mem.Backend
}

// Start starts a fake S3 server holding one empty bucket named bucket.
// The test's cleanup stops it.
func Start(t testing.TB, bucket string) *Server {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatalf("fake s3: create bucket %q: %v", bucket, err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	return &Server{URL: srv.URL, Bucket: bucket, backend: backend}
}

// Keys returns the keys of the objects in the bucket that start with
// prefix, sorted.
func (s *Server) Keys(t testing.TB, prefix string) []string {
	t.Helper()
	p := gofakes3.NewPrefix(&prefix, nil)
	list, err := s.backend.ListBucket(s.Bucket, &p, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatalf("fake s3: list %q: %v", prefix, err)
	}
	var keys []string
	for _, o := range list.Contents {
		keys = append(keys, o.Key)
	}
	slices.Sort(keys)
	return keys
}
