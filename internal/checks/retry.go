package checks

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/google/go-github/v84/github"
)

// Back-off of failed reports: the first retry after backoffBase, doubling
// up to backoffCap. A report that fails with a permanent error (a 4xx
// other than a rate limit) is given up on after maxPermanentAttempts
// attempts, any other after maxAttempts.
const (
	backoffBase          = 5 * time.Second
	backoffCap           = 10 * time.Minute
	maxAttempts          = 60
	maxPermanentAttempts = 5
)

// retryAfter says when a report that failed with err at now, its
// attempts-th failure, is tried again, and whether err is permanent. It is
// the one classifier of report failures:
//
//   - GitHub's primary rate limit (403 or 429, X-RateLimit-Remaining: 0):
//     at X-RateLimit-Reset;
//   - a secondary rate limit, or any answer with Retry-After (in seconds or
//     as an HTTP date): after it;
//   - 5xx, 429 and transport errors: exponential back-off;
//   - any other answer (401, 404, 422…): back-off, permanent.
func retryAfter(err error, now time.Time, attempts int) (time.Time, bool) {
	backoff := now.Add(backoffFor(attempts))
	var rate *github.RateLimitError
	if errors.As(err, &rate) {
		if reset := rate.Rate.Reset.Time; reset.After(now) {
			return reset, false
		}
		return backoff, false
	}
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &abuse) {
		if abuse.RetryAfter != nil {
			return now.Add(*abuse.RetryAfter), false
		}
		if at, ok := retryAfterHeader(abuse.Response, now); ok {
			return at, false
		}
		return backoff, false
	}
	var resp *github.ErrorResponse
	if errors.As(err, &resp) && resp.Response != nil {
		if at, ok := retryAfterHeader(resp.Response, now); ok {
			return at, false
		}
		code := resp.Response.StatusCode
		if code >= 500 || code == http.StatusTooManyRequests {
			return backoff, false
		}
		return backoff, true
	}
	return backoff, false
}

// backoffFor is the wait after the attempts-th failure (1 or more).
func backoffFor(attempts int) time.Duration {
	d := backoffBase
	for i := 1; i < attempts && d < backoffCap; i++ {
		d *= 2
	}
	return min(d, backoffCap)
}

// retryAfterHeader reads Retry-After, else a rate limit's reset, from an
// answer.
func retryAfterHeader(r *http.Response, now time.Time) (time.Time, bool) {
	if r == nil {
		return time.Time{}, false
	}
	if v := r.Header.Get("Retry-After"); v != "" {
		if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
			return now.Add(time.Duration(min(secs, 24*3600)) * time.Second), true
		}
		if at, err := http.ParseTime(v); err == nil {
			return later(at, now), true
		}
	}
	if r.Header.Get("X-RateLimit-Remaining") == "0" {
		if secs, err := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return later(time.Unix(secs, 0), now), true
		}
	}
	return time.Time{}, false
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
