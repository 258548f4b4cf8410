package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// Storage is the orchestrator that keeps a job's artifacts and caches.
type Storage struct {
	// APIURL is the orchestrator's API root, ending in "/api/v1/" (e.g.
	// "https://ci.example.com/api/v1/"). Empty keeps nothing: the job's
	// artifacts: and cache: are skipped, with a note (`kici run`).
	APIURL string
	// RunID is the job's run.
	RunID string
}

// maxTransfers bounds the uploads and downloads of artifacts and caches
// one Runner makes at once, over all its jobs: the others wait for a
// slot, so a busy agent does not flood its link or the orchestrator.
const maxTransfers = 4

// transferRetryDelays are the pauses between attempts of a transfer after
// a network error, a 5xx or a 429 answer (the orchestrator restarting, or
// busy): about 15 s in all. Other answers are final.
var transferRetryDelays = []time.Duration{250 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}

// transferSlots is the semaphore of maxTransfers; its zero value is ready.
type transferSlots struct {
	once sync.Once
	ch   chan struct{}
}

// acquire waits for a slot; release it with the returned func.
func (t *transferSlots) acquire(ctx context.Context) (func(), error) {
	t.once.Do(func() { t.ch = make(chan struct{}, maxTransfers) })
	select {
	case t.ch <- struct{}{}:
		return func() { <-t.ch }, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// statusError is an answer of the orchestrator other than the one wanted.
type statusError struct {
	Status  int
	Message string
}

func (e *statusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
}

// transient reports whether a failed request is worth another attempt.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var se *statusError
	if errors.As(err, &se) {
		return se.Status >= 500 || se.Status == http.StatusTooManyRequests
	}
	var ue *url.Error
	return errors.As(err, &ue) // the request did not get an answer
}

// storageClient makes one job's requests for its artifacts and caches,
// with its job token.
type storageClient struct {
	http  *http.Client
	api   string // Storage.APIURL
	run   string
	token string
	slots *transferSlots
	out   *output // where retries are noted
}

// storage returns the job's storage client, or nil when the job's
// orchestrator keeps nothing.
func (j *jobRun) storage() *storageClient {
	if j.spec.Storage.APIURL == "" {
		return nil
	}
	return &storageClient{http: j.r.cfg.HTTPClient, api: j.spec.Storage.APIURL, run: j.spec.Storage.RunID,
		token: j.spec.Token, slots: &j.r.transfers, out: j.out}
}

// retry runs attempt until it succeeds, fails for good, or the retries
// run out.
func (c *storageClient) retry(ctx context.Context, what string, attempt func() error) error {
	for i := 0; ; i++ {
		err := attempt()
		if err == nil || !transient(ctx, err) || i >= len(transferRetryDelays) {
			return err
		}
		delay := transferRetryDelays[i]
		c.out.note("%s failed (%v); retrying in %s", what, err, delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

// request sends one request to path (under the API root) with the job
// token; the caller closes the answer's body.
func (c *storageClient) request(ctx context.Context, method, path string, query url.Values, body io.Reader, size int64, header http.Header) (*http.Response, error) {
	target := c.api + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.ContentLength = size
		// Let the orchestrator refuse a body over its limits before it is
		// sent.
		req.Header.Set("Expect", "100-continue")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	return c.http.Do(req)
}

// answerError turns an unwanted answer into a *statusError with the
// orchestrator's message, and closes its body.
func answerError(resp *http.Response) error {
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var e apiv1.Error
	msg := strings.TrimSpace(string(data))
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	return &statusError{Status: resp.StatusCode, Message: msg}
}

// getJSON asks path and decodes a 200 answer into out. It returns the
// answer's status (0 when there was none).
func (c *storageClient) getJSON(ctx context.Context, what, path string, query url.Values, out any) (int, error) {
	status := 0
	err := c.retry(ctx, what, func() error {
		resp, err := c.request(ctx, http.MethodGet, path, query, nil, 0, nil)
		if err != nil {
			return err
		}
		status = resp.StatusCode
		if resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotFound {
			resp.Body.Close()
			return nil
		}
		if resp.StatusCode != http.StatusOK {
			return answerError(resp)
		}
		defer resp.Body.Close()
		return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out)
	})
	return status, err
}

// upload sends the file f (size bytes, digest sum) to path and decodes
// the 201 answer into out.
func (c *storageClient) upload(ctx context.Context, what, path string, query url.Values, f *os.File, size int64, sum string, out any) error {
	release, err := c.slots.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	header := http.Header{apiv1.HeaderSHA256: {sum}, "Content-Type": {"application/gzip"}}
	return c.retry(ctx, what, func() error {
		resp, err := c.request(ctx, http.MethodPut, path, query, io.NewSectionReader(f, 0, size), size, header)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusCreated {
			return answerError(resp)
		}
		defer resp.Body.Close()
		return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out)
	})
}

// download fetches path into a new temporary file in dir, reading at
// most limit bytes, and checks the bytes have the digest the answer
// names. It returns the file, rewound (the caller closes and removes
// it), or ok false when the orchestrator answered 404.
func (c *storageClient) download(ctx context.Context, what, path, dir string, limit int64) (f *os.File, ok bool, err error) {
	release, err := c.slots.acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	defer release()
	err = c.retry(ctx, what, func() error {
		if f != nil {
			f.Close()
			os.Remove(f.Name())
			f = nil
		}
		resp, err := c.request(ctx, http.MethodGet, path, nil, nil, 0, nil)
		if err != nil {
			return err
		}
		if resp.StatusCode == http.StatusNotFound {
			resp.Body.Close()
			return nil
		}
		if resp.StatusCode != http.StatusOK {
			return answerError(resp)
		}
		defer resp.Body.Close()
		ok = true
		if f, err = os.CreateTemp(dir, "transfer-*.tgz"); err != nil {
			return err
		}
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, limit+1))
		switch {
		case err != nil:
			return &url.Error{Op: "read", URL: path, Err: err} // a broken-off answer: worth another attempt
		case n > limit:
			return fmt.Errorf("the bundle is over %s", formatBytes(limit))
		}
		if want, got := resp.Header.Get(apiv1.HeaderSHA256), hex.EncodeToString(h.Sum(nil)); got != want {
			return fmt.Errorf("the bundle is corrupt: %d bytes with sha256 %s, want %s", n, got, want)
		}
		_, err = f.Seek(0, io.SeekStart)
		return err
	})
	if err != nil || !ok {
		if f != nil {
			f.Close()
			os.Remove(f.Name())
		}
		return nil, false, err
	}
	return f, true, nil
}

// tempBundle makes a temporary file in the job's directory for a bundle
// being written; remove it with discard.
func (j *jobRun) tempBundle() (*os.File, error) {
	return os.CreateTemp(j.dirs.root, "transfer-*.tgz")
}

// discard closes and removes a temporary file; nil is fine.
func discard(f *os.File) {
	if f != nil {
		f.Close()
		os.Remove(f.Name())
	}
}
