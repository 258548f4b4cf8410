package fcapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// maxResponseBytes bounds how much of a response body is read.
const maxResponseBytes = 64 << 10

// APIError is a refusal of the Firecracker API: an answer with a 4xx or 5xx
// status, whose body (normally {"fault_message": "..."}) says why.
type APIError struct {
	// Method and Path are the refused request's.
	Method, Path string
	// Status is the HTTP status code.
	Status int
	// FaultMessage is the body's fault_message, or the body's text (up to
	// 64 KiB) when it is not such a document.
	FaultMessage string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("firecracker api %s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.FaultMessage)
}

// Client calls the Firecracker API of one VMM through its unix socket.
type Client struct {
	socketPath string
	http       *http.Client
}

// New returns a client of the API served on socketPath (a host path, such as
// <jail root>/run/firecracker.socket). It does not connect yet.
func New(socketPath string) *Client {
	dialer := &net.Dialer{}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socketPath)
		},
		// Firecracker serves one connection at a time well; keep one.
		MaxIdleConns:        1,
		MaxIdleConnsPerHost: 1,
		DisableCompression:  true,
	}
	return &Client{socketPath: socketPath, http: &http.Client{Transport: transport}}
}

// SocketPath returns the socket the client talks to.
func (c *Client) SocketPath() string { return c.socketPath }

// Close closes the client's idle connection. The client stays usable.
func (c *Client) Close() {
	c.http.CloseIdleConnections()
}

// do sends method path with body (marshalled as JSON unless nil) and, when
// out is not nil, decodes a 200 answer into it.
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("firecracker api %s %s: encode body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	// The host part is ignored: DialContext always dials the socket.
	req, err := http.NewRequestWithContext(ctx, method, "http://localhost"+path, rd)
	if err != nil {
		return fmt.Errorf("firecracker api %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("firecracker api %s %s: %w", method, path, err)
	}
	defer func() {
		// Drain what is left of a bounded body so the connection is reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes))
		resp.Body.Close()
	}()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("firecracker api %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 400 {
		return &APIError{Method: method, Path: path, Status: resp.StatusCode, FaultMessage: faultMessage(data)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("firecracker api %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// faultMessage extracts fault_message from an error body, or returns the
// body itself.
func faultMessage(data []byte) string {
	var f faultBody
	if err := json.Unmarshal(data, &f); err == nil && f.FaultMessage != "" {
		return f.FaultMessage
	}
	return strings.TrimSpace(string(data))
}

// IsStatus reports whether err is an *APIError with the given status.
func IsStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status
}
