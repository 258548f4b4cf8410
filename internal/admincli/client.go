package admincli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// apiError is a non-2xx answer of the orchestrator. Its one line is
// "<code> <status text>: <the server's message>", with a hint on 401.
type apiError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Message is the server's apiv1.Error line, or the start of a body
	// that was not an apiv1.Error; empty when the body was empty.
	Message string
	// Details are the server's individual problems.
	Details []string
	// hint tells the user what to check, when the status alone says it.
	hint string
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("%d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.hint != "" {
		s += " (" + e.hint + ")"
	}
	return s
}

func (e *apiError) details() []string { return e.Details }

// unreachableError says the orchestrator could not be reached at all:
// nothing listens at the URL, the name does not resolve, or the dial timed
// out.
type unreachableError struct {
	url string
	err error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("the orchestrator at %s is not reachable (%s); check %s or --url", e.url, dialCause(e.err), envURL)
}

func (e *unreachableError) Unwrap() error { return e.err }

// timeoutError says a request got no complete answer within --timeout.
type timeoutError struct {
	url     string
	timeout time.Duration
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("no answer from the orchestrator at %s within %s (raise --timeout, or check the server)", e.url, e.timeout)
}

// client calls the orchestrator's /api/v1. It is safe for concurrent use:
// nothing in it changes after newClient.
type client struct {
	// base is the orchestrator's base URL without a trailing slash, e.g.
	// http://127.0.0.1:4000 or https://ci.example.com/kici.
	base string
	// token is sent as "Authorization: Bearer <token>"; empty sends none.
	token string
	// timeout bounds each request of do, from dial to the end of the body;
	// 0 means none. Streams are bounded only until their headers arrive.
	timeout time.Duration
	http    *http.Client
}

// client builds the API client from the global flags and the environment.
func (a *app) client() (*client, error) {
	base := a.global.url
	if base == "" {
		base = a.env.getenv(envURL)
	}
	if base == "" {
		base = defaultURL
	}
	token := a.global.token
	if token == "" {
		token = a.env.getenv(envToken)
	}
	if a.global.timeout < 0 {
		return nil, usagef("--timeout %s: want a duration of 0 or more", a.global.timeout)
	}
	return newClient(base, token, a.global.timeout)
}

func newClient(base, token string, timeout time.Duration) (*client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, usagef("orchestrator URL %q: want http://HOST[:PORT][/PATH] or https://…", base)
	}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          8,
		IdleConnTimeout:       90 * time.Second,
	}
	return &client{
		base:    strings.TrimSuffix(u.String(), "/"),
		token:   token,
		timeout: timeout,
		http:    &http.Client{Transport: transport},
	}, nil
}

// do sends one request and decodes a 2xx JSON answer into out (which may
// be nil). in, when not nil, is sent as the JSON body. path is the
// escaped path under the base URL, e.g. "/api/v1/runs/" + url.PathEscape(id).
func (c *client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	resp, err := c.send(ctx, method, path, query, in, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return c.transportError(ctx, fmt.Errorf("read answer of %s %s: %w", method, path, err))
	}
	if err := json.Unmarshal(body, out); err != nil {
		if ct := mediaType(resp.Header.Get("Content-Type")); ct != "" && ct != "application/json" {
			return fmt.Errorf("answer of %s %s is %s, not JSON: is %s a kici orchestrator?", method, path, ct, c.base)
		}
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

// stream opens a text/event-stream at path. The caller reads and closes
// the body; ctx bounds the whole stream.
func (c *client) stream(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, http.MethodGet, path, nil, nil, "text/event-stream")
	if err != nil {
		return nil, err
	}
	if ct := mediaType(resp.Header.Get("Content-Type")); ct != "text/event-stream" {
		resp.Body.Close()
		return nil, fmt.Errorf("answer of GET %s is %q, not an event stream: is %s a kici orchestrator?", path, ct, c.base)
	}
	return resp.Body, nil
}

// send makes the request and returns a 2xx response; any other status
// becomes an *apiError.
func (c *client) send(ctx context.Context, method, path string, query url.Values, in any, accept string) (*http.Response, error) {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode request body: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, fmt.Errorf("build request %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "kici-admin")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, c.readError(resp)
	}
	return resp, nil
}

// transportError names what went wrong below HTTP: the orchestrator is
// unreachable, took too long, or the caller gave up.
func (c *client) transportError(ctx context.Context, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the URL is in our own message already
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return &unreachableError{url: c.base, err: err}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return &unreachableError{url: c.base, err: err}
	}
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil || isTimeout(err) {
		return &timeoutError{url: c.base, timeout: c.timeout}
	}
	return fmt.Errorf("talk to the orchestrator at %s: %w", c.base, err)
}

// readError turns a non-2xx response into an *apiError.
func (c *client) readError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &apiError{StatusCode: resp.StatusCode}
	var body apiv1.Error
	if err := json.Unmarshal(raw, &body); err == nil && body.Error != "" {
		e.Message, e.Details = body.Error, body.Details
	} else {
		e.Message = firstLine(raw)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		if c.token == "" {
			e.hint = "no token given: set " + envToken + " or pass --token"
		} else {
			e.hint = "check " + envToken + " or --token"
		}
	}
	return e
}

// firstLine is the first line of a non-JSON error body, if it looks like
// text worth showing (not an HTML page), cut to a readable length.
func firstLine(raw []byte) string {
	s := strings.TrimSpace(string(raw))
	if s == "" || strings.HasPrefix(s, "<") {
		return ""
	}
	s, _, _ = strings.Cut(s, "\n")
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// dialCause is the short reason a dial failed.
func dialCause(err error) string {
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dns) && dns.IsNotFound:
		return fmt.Sprintf("no such host %q", dns.Name)
	case isTimeout(err):
		return "connection timed out"
	}
	return err.Error()
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

func mediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return strings.TrimSpace(contentType)
	}
	return mt
}

// The API's paths. Every variable part is escaped here.

func sourcesPath() string           { return "/api/v1/sources" }
func sourcePath(name string) string { return "/api/v1/sources/" + url.PathEscape(name) }
func runsPath() string              { return "/api/v1/runs" }
func runPath(id string) string      { return "/api/v1/runs/" + url.PathEscape(id) }
func jobLogsPath(runID, job string) string {
	return runPath(runID) + "/jobs/" + url.PathEscape(job) + "/logs"
}

// getRun fetches one run with its jobs and steps.
func (c *client) getRun(ctx context.Context, id string) (apiv1.Run, error) {
	var r apiv1.Run
	err := c.do(ctx, http.MethodGet, runPath(id), nil, nil, &r)
	return r, err
}
