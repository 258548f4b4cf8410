package s3store

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/kici-dev/kici/internal/blobs"
)

// DefaultRegion is the region requests are signed for when Config.Region
// is empty; S3-compatible servers that have no regions accept it.
const DefaultRegion = "us-east-1"

// DefaultPartSize is the size of the parts a large blob is uploaded in,
// and so the most memory one Put holds: 8 MiB.
const DefaultPartSize = 8 << 20

// maxParts is the most parts S3 takes in one multipart upload.
const maxParts = 10000

// Config says where a Store keeps its blobs and how it reaches them.
type Config struct {
	// Bucket is the bucket's name (required).
	Bucket string
	// Prefix, when not empty, is put before every key with a slash
	// between: the blob of key K is the object PREFIX/K. It follows the
	// rules of a blob key (blobs.ValidKey), so several kici installations
	// (or other data) can share a bucket.
	Prefix string
	// Endpoint is the base URL of the S3 API, https://HOST[:PORT], or
	// http://HOST[:PORT] to send requests unencrypted. Empty means AWS S3
	// itself, in Region. With an endpoint, buckets are addressed by path
	// (ENDPOINT/BUCKET/KEY), which every S3-compatible server accepts.
	Endpoint string
	// Region is the region requests are signed for; empty means
	// DefaultRegion.
	Region string
	// AccessKeyID and SecretAccessKey sign the requests (both required).
	// The Store never logs or returns the secret.
	AccessKeyID     string
	SecretAccessKey string
	// PartSize is the size in bytes of the parts a blob longer than one
	// part is uploaded in; zero means DefaultPartSize. S3 refuses parts
	// under 5 MiB (but the last), so only tests set less. A Put whose
	// limit needs more than 10,000 parts uses larger ones.
	PartSize int64
	// HTTPClient sends the requests; nil means the AWS SDK's default
	// client (which honours HTTPS_PROXY and NO_PROXY).
	HTTPClient *http.Client
}

// bucketRE is an S3 bucket name: 3 to 63 lowercase letters, digits, dots
// and hyphens, starting and ending with a letter or digit.
var bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// ParseURL reads a store URL, s3://BUCKET or s3://BUCKET/PREFIX, into its
// bucket and prefix (without the slashes around it).
func ParseURL(v string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(v, "s3://")
	if !ok {
		return "", "", errors.New("want s3://BUCKET or s3://BUCKET/PREFIX")
	}
	if strings.ContainsAny(rest, "?#") {
		return "", "", errors.New("want s3://BUCKET or s3://BUCKET/PREFIX, with no query or fragment")
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	prefix = strings.TrimSuffix(prefix, "/")
	if err := checkBucket(bucket); err != nil {
		return "", "", err
	}
	if err := checkPrefix(prefix); err != nil {
		return "", "", err
	}
	return bucket, prefix, nil
}

func checkBucket(bucket string) error {
	if !bucketRE.MatchString(bucket) || strings.Contains(bucket, "..") {
		return fmt.Errorf("bucket %q: want 3 to 63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit", bucket)
	}
	return nil
}

func checkPrefix(prefix string) error {
	if prefix != "" && !blobs.ValidKey(prefix) {
		return fmt.Errorf("prefix %q: want slash-separated names of letters, digits, '.', '_' and '-', none of them empty, '.' or '..'", prefix)
	}
	return nil
}

// ParseEndpoint checks an S3 endpoint and returns it as a base URL
// without a trailing slash. A bare HOST[:PORT] means https://HOST[:PORT];
// plain http is used only when v says http://.
func ParseEndpoint(v string) (string, error) {
	if !strings.Contains(v, "://") {
		v = "https://" + v
	}
	u, err := url.Parse(v)
	if err != nil {
		return "", fmt.Errorf("want https://HOST[:PORT]: %w", err)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return "", fmt.Errorf("scheme %q: want https:// (or http:// to send requests unencrypted)", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return "", errors.New("want https://HOST[:PORT]: no host")
	case u.User != nil:
		return "", errors.New("want https://HOST[:PORT]: credentials do not go in the URL")
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return "", errors.New("want https://HOST[:PORT] with no path, query or fragment (the bucket goes in the s3:// URL)")
	}
	return u.Scheme + "://" + u.Host, nil
}

// Validate names the first bad field of c.
func (c *Config) Validate() error {
	if err := checkBucket(c.Bucket); err != nil {
		return fmt.Errorf("s3 store config: %w", err)
	}
	if err := checkPrefix(c.Prefix); err != nil {
		return fmt.Errorf("s3 store config: %w", err)
	}
	if c.Endpoint != "" {
		if _, err := ParseEndpoint(c.Endpoint); err != nil {
			return fmt.Errorf("s3 store config: Endpoint %q: %w", c.Endpoint, err)
		}
	}
	if c.AccessKeyID == "" {
		return errors.New("s3 store config: AccessKeyID is required")
	}
	if c.SecretAccessKey == "" {
		return errors.New("s3 store config: SecretAccessKey is required")
	}
	if c.PartSize < 0 {
		return fmt.Errorf("s3 store config: PartSize %d is negative", c.PartSize)
	}
	return nil
}

// String names the store for logs and errors, as s3://BUCKET/PREFIX and
// the endpoint when there is one. It shows no credential, so that
// printing a Config (with %v or %+v) never shows the secret key.
func (c Config) String() string {
	d := "s3://" + c.Bucket
	if c.Prefix != "" {
		d += "/" + c.Prefix
	}
	if c.Endpoint != "" {
		d += " at " + c.Endpoint
	}
	return d
}
