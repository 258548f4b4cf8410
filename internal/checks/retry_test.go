package checks

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-github/v84/github"
)

func formatUnix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	answer := func(code int, header http.Header) *http.Response {
		return &http.Response{StatusCode: code, Header: header, Request: &http.Request{Method: "POST"}}
	}
	tests := []struct {
		name          string
		err           error
		attempts      int
		want          time.Time
		wantPermanent bool
	}{
		{name: "502 backs off", err: &github.ErrorResponse{Response: answer(502, http.Header{})}, attempts: 1, want: now.Add(backoffBase)},
		{name: "back-off doubles", err: &github.ErrorResponse{Response: answer(503, http.Header{})}, attempts: 3, want: now.Add(4 * backoffBase)},
		{name: "back-off is capped", err: &github.ErrorResponse{Response: answer(500, http.Header{})}, attempts: 40, want: now.Add(backoffCap)},
		{name: "Retry-After seconds", err: &github.ErrorResponse{Response: answer(503, http.Header{"Retry-After": {"90"}})}, attempts: 1, want: now.Add(90 * time.Second)},
		{name: "Retry-After date", err: &github.ErrorResponse{Response: answer(429, http.Header{"Retry-After": {now.Add(time.Hour).Format(http.TimeFormat)}})}, attempts: 1, want: now.Add(time.Hour)},
		{name: "primary rate limit", err: &github.RateLimitError{Rate: github.Rate{Reset: github.Timestamp{Time: now.Add(20 * time.Minute)}}}, attempts: 1, want: now.Add(20 * time.Minute)},
		{name: "secondary rate limit", err: &github.AbuseRateLimitError{RetryAfter: new(45 * time.Second)}, attempts: 1, want: now.Add(45 * time.Second)},
		{name: "404 is permanent", err: &github.ErrorResponse{Response: answer(404, http.Header{})}, attempts: 1, want: now.Add(backoffBase), wantPermanent: true},
		{name: "422 is permanent", err: &github.ErrorResponse{Response: answer(422, http.Header{})}, attempts: 2, want: now.Add(2 * backoffBase), wantPermanent: true},
		{name: "transport error backs off", err: errors.New("dial tcp: connection refused"), attempts: 1, want: now.Add(backoffBase)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, permanent := retryAfter(tt.err, now, tt.attempts)
			if !got.Equal(tt.want) || permanent != tt.wantPermanent {
				t.Errorf("got (%v, permanent %v), want (%v, permanent %v)", got, permanent, tt.want, tt.wantPermanent)
			}
		})
	}
}
