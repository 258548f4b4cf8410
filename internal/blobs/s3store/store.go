// Package s3store is a [blobs.Store] on an S3-compatible object store (AWS
// S3, MinIO, Ceph RGW, Garage, Cloudflare R2 and the like), so that every
// coordinator of a cluster reads the artifacts and caches any of them
// stored. It talks to the S3 API through the AWS SDK for Go v2, with
// static credentials from its Config (never from the AWS_* environment or
// files) and the request checksums S3-compatible servers may not know
// turned off: the blob's SHA-256 is checked here, and on the way out by
// blobs.Verify.
//
// The orchestrator imports it when KICI_BLOB_STORE names an s3:// URL. A
// Store is safe for concurrent use.
package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/kici-dev/kici/internal/blobs"
)

// Store keeps each blob as one object: key K is the object PREFIX/K of
// the bucket (K without a prefix).
//
// Atomicity comes from S3: an object appears whole when its PUT, or the
// completion of its multipart upload, succeeds, and not before; a Put that
// fails never completes its upload (and aborts it), so the object keeps
// what it held. A blob is uploaded in one PUT when it fits in one part,
// else in parts of Config.PartSize held in memory one at a time, so one
// Put holds at most a part. An Open reader is the body of one GET: S3 and
// the common compatible servers go on serving the object the GET started
// on when the key is replaced or deleted meanwhile, and a reader through
// blobs.Verify catches one that does not.
//
// Several orchestrators may share a bucket and prefix when they share a
// database (a cluster's coordinators): keys name database rows, so they do
// not collide.
type Store struct {
	client *s3.Client
	bucket string
	// keyPrefix is Config.Prefix and a slash, or empty.
	keyPrefix string
	partSize  int64
	describe  string
}

var _ blobs.Store = (*Store)(nil)

// New returns a Store on the bucket cfg names. It sends no request: call
// Check to learn whether the bucket is reachable.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := s3.Options{
		Region: cfg.Region,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: cfg.AccessKeyID, SecretAccessKey: cfg.SecretAccessKey, Source: "kici s3store config"}, nil
		}),
		// Ask for checksums only where S3 requires them: the newer
		// default (CRC32 in a trailer of an aws-chunked body) is refused
		// by S3-compatible servers that do not know it.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if cfg.Endpoint != "" {
		endpoint, _ := ParseEndpoint(cfg.Endpoint) // Validate checked it
		opts.BaseEndpoint = aws.String(endpoint)
		opts.UsePathStyle = true
	}
	if cfg.HTTPClient != nil {
		opts.HTTPClient = cfg.HTTPClient
	}
	s := &Store{client: s3.New(opts), bucket: cfg.Bucket, partSize: cfg.PartSize, describe: cfg.String()}
	if cfg.Prefix != "" {
		s.keyPrefix = cfg.Prefix + "/"
	}
	if s.partSize == 0 {
		s.partSize = DefaultPartSize
	}
	return s, nil
}

// String names the store (s3://BUCKET/PREFIX at ENDPOINT), without
// credentials.
func (s *Store) String() string { return s.describe }

// Check asks for the bucket (HEAD bucket) and returns an error saying why
// it is not reachable: no such host or no answer, no such bucket, or
// credentials it refuses.
func (s *Store) Check(ctx context.Context) error {
	if _, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.bucket)}); err != nil {
		return fmt.Errorf("reach bucket %s: %w", s, err)
	}
	return nil
}

// object returns the object key of a blob key.
func (s *Store) object(key string) *string { return aws.String(s.keyPrefix + key) }

// checkKey returns blobs.ErrBadKey, naming key, when it is not valid.
func checkKey(key string) error {
	if !blobs.ValidKey(key) {
		return fmt.Errorf("%w: %q", blobs.ErrBadKey, key)
	}
	return nil
}

// Open implements blobs.Store.
func (s *Store) Open(ctx context.Context, key string) (io.ReadCloser, blobs.Info, error) {
	if err := checkKey(key); err != nil {
		return nil, blobs.Info{}, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: s.object(key)})
	if isNotFound(err) {
		return nil, blobs.Info{}, fmt.Errorf("open blob %q: %w", key, blobs.ErrNotFound)
	}
	if err != nil {
		return nil, blobs.Info{}, fmt.Errorf("open blob %q: %w", key, err)
	}
	return out.Body, blobs.Info{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

// Stat implements blobs.Store.
func (s *Store) Stat(ctx context.Context, key string) (blobs.Info, error) {
	if err := checkKey(key); err != nil {
		return blobs.Info{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: s.object(key)})
	if isNotFound(err) {
		return blobs.Info{}, fmt.Errorf("stat blob %q: %w", key, blobs.ErrNotFound)
	}
	if err != nil {
		return blobs.Info{}, fmt.Errorf("stat blob %q: %w", key, err)
	}
	return blobs.Info{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

// Delete implements blobs.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: s.object(key)})
	if err != nil && !isNotFound(err) { // S3 answers 204 for a missing key; some servers 404
		return fmt.Errorf("delete blob %q: %w", key, err)
	}
	return nil
}

// List implements blobs.Store. It skips objects under the store's prefix
// whose names are not blob keys (put there by something else).
func (s *Store) List(ctx context.Context, prefix string, fn func(blobs.Info) error) error {
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket), Prefix: aws.String(s.keyPrefix + prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list blobs %q: %w", prefix, err)
		}
		for _, o := range page.Contents {
			key, ok := strings.CutPrefix(aws.ToString(o.Key), s.keyPrefix)
			if !ok || !strings.HasPrefix(key, prefix) || !blobs.ValidKey(key) {
				continue
			}
			if err := fn(blobs.Info{Key: key, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)}); err != nil {
				return fmt.Errorf("list blobs %q: %w", prefix, err)
			}
		}
	}
	return nil
}

// isNotFound reports whether err is S3's answer for a key that holds no
// object: NoSuchKey from GET (and some servers' DELETE), NotFound from
// HEAD, whose answer has no body to say more.
func isNotFound(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "NoSuchKey", "NotFound":
		return true
	}
	return false
}

// abortTimeout bounds the abort of a failed multipart upload, which runs
// after the Put's ctx may have ended.
const abortTimeout = 30 * time.Second
