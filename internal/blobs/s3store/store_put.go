package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/kici-dev/kici/internal/blobs"
)

// Put implements blobs.Store. It reads r one part at a time, counting and
// hashing as it goes. A blob that ends within its first part is sent in
// one PUT once it is whole and checked. A longer one becomes a multipart
// upload: each part is sent as soon as it is read, the last only after the
// size and digest of the whole were checked, and the upload is completed
// (which makes the object appear) only then; on any failure it is aborted
// instead, so the key keeps what it held.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, limit int64, wantSHA256 string) (blobs.Info, error) {
	if err := checkKey(key); err != nil {
		return blobs.Info{}, err
	}
	if limit < 0 {
		return blobs.Info{}, fmt.Errorf("put blob %q: negative limit %d", key, limit)
	}
	src := &countingReader{ctx: ctx, r: io.LimitReader(r, limit+1), h: sha256.New()}
	p := &put{s: s, key: key, src: src, limit: limit, want: wantSHA256, partSize: s.partSizeFor(limit)}
	info, err := p.run(ctx)
	if err != nil {
		return blobs.Info{}, fmt.Errorf("put blob %q: %w", key, err)
	}
	return info, nil
}

// partSizeFor returns the part size for a Put of at most limit bytes: the
// store's, or more when the store's would need over maxParts parts.
func (s *Store) partSizeFor(limit int64) int64 {
	return max(s.partSize, (limit+1+maxParts-1)/maxParts)
}

// put is one Put under way.
type put struct {
	s        *Store
	key      string
	src      *countingReader
	limit    int64
	want     string
	partSize int64
	// buf holds the part read last.
	buf bytes.Buffer
}

// fill reads the next part into p.buf and reports whether r has ended
// (the part may then be short, or empty). It fails with a *LimitError as
// soon as more than the limit was read.
func (p *put) fill() (end bool, err error) {
	p.buf.Reset()
	n, err := p.buf.ReadFrom(io.LimitReader(p.src, p.partSize))
	if err != nil {
		return false, err
	}
	if p.src.n > p.limit {
		return false, &blobs.LimitError{Limit: p.limit}
	}
	return n < p.partSize, nil
}

// check returns the digest of everything read, or ErrDigestMismatch when
// it is not the one wanted.
func (p *put) check() (string, error) {
	sum := hex.EncodeToString(p.src.h.Sum(nil))
	if p.want != "" && sum != p.want {
		return "", fmt.Errorf("%w: got %d bytes with sha256 %s, want %s", blobs.ErrDigestMismatch, p.src.n, sum, p.want)
	}
	return sum, nil
}

func (p *put) run(ctx context.Context) (blobs.Info, error) {
	end, err := p.fill()
	if err != nil {
		return blobs.Info{}, err
	}
	if end {
		sum, err := p.check()
		if err != nil {
			return blobs.Info{}, err
		}
		if _, err := p.s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(p.s.bucket), Key: p.s.object(p.key),
			Body: bytes.NewReader(p.buf.Bytes()), ContentLength: aws.Int64(int64(p.buf.Len())),
		}); err != nil {
			return blobs.Info{}, err
		}
		return blobs.Info{Key: p.key, Size: p.src.n, SHA256: sum, ModTime: time.Now()}, nil
	}
	return p.multipart(ctx)
}

// multipart uploads the blob in parts, p.buf holding the first, full one.
func (p *put) multipart(ctx context.Context) (_ blobs.Info, err error) {
	up, err := p.s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(p.s.bucket), Key: p.s.object(p.key)})
	if err != nil {
		return blobs.Info{}, fmt.Errorf("start multipart upload: %w", err)
	}
	defer func() {
		if err != nil {
			p.abort(ctx, up.UploadId)
		}
	}()
	var parts []types.CompletedPart
	var sum string
	for end := false; ; {
		if err := ctx.Err(); err != nil {
			return blobs.Info{}, context.Cause(ctx)
		}
		num := int32(len(parts) + 1)
		if end {
			// The last part: send it only if the whole blob is good.
			if sum, err = p.check(); err != nil {
				return blobs.Info{}, err
			}
			if p.buf.Len() == 0 {
				break // r ended on a part boundary
			}
		}
		out, err := p.s.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: aws.String(p.s.bucket), Key: p.s.object(p.key), UploadId: up.UploadId, PartNumber: aws.Int32(num),
			Body: bytes.NewReader(p.buf.Bytes()), ContentLength: aws.Int64(int64(p.buf.Len())),
		})
		if err != nil {
			return blobs.Info{}, fmt.Errorf("upload part %d: %w", num, err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
		if end {
			break
		}
		if end, err = p.fill(); err != nil {
			return blobs.Info{}, err
		}
	}
	if _, err := p.s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(p.s.bucket), Key: p.s.object(p.key), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}); err != nil {
		return blobs.Info{}, fmt.Errorf("complete multipart upload: %w", err)
	}
	return blobs.Info{Key: p.key, Size: p.src.n, SHA256: sum, ModTime: time.Now()}, nil
}

// abort ends a multipart upload that will not be completed, so that its
// parts stop taking space. It runs even when ctx has ended. An abort
// that fails leaves the parts to the bucket's lifecycle rule for
// incomplete uploads (docs/orchestrator.md); the object is unaffected
// either way.
func (p *put) abort(ctx context.Context, uploadID *string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	_, _ = p.s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: aws.String(p.s.bucket), Key: p.s.object(p.key), UploadId: uploadID})
}

// countingReader counts and hashes what it reads, and fails once ctx is
// done, so that a Put of a slow body stops when its caller gives up.
type countingReader struct {
	ctx context.Context
	r   io.Reader
	h   hash.Hash
	n   int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, context.Cause(c.ctx)
	}
	n, err := c.r.Read(b)
	c.h.Write(b[:n])
	c.n += int64(n)
	return n, err
}
