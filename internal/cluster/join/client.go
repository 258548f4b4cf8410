package join

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/cluster/pki"
)

// The routes of the first join, relative to a coordinator's base URL.
const (
	CAPath   = "/api/v1/cluster/ca"
	JoinPath = "/api/v1/cluster/join"
)

// Bounds of what JoinCluster reads from a coordinator: a CA certificate
// is about 1 KiB, a join answer two certificates and a few names.
const (
	maxCABody   = 64 << 10
	maxJoinBody = 256 << 10
)

// RefusedError is a coordinator's refusal of a join, with its HTTP status
// and message: 401 for a token it does not recognise, 403 for an expired
// or revoked one, 409 for a used one, 400 for a request it will not sign.
// None of those gets better by retrying with the same token; a 5xx may.
type RefusedError struct {
	// Status is the HTTP status of the answer.
	Status int
	// Message is the coordinator's error message.
	Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the coordinator refused the join (%d %s): %s", e.Status, http.StatusText(e.Status), e.Message)
}

// JoinCluster makes a worker's first join at the coordinator at baseURL
// (e.g. "https://ci.example.com"), under nodeID, with tok, and returns
// the worker's new credential. It bounds every answer it reads; ctx
// bounds the whole exchange. A nil client means http.DefaultClient.
//
// It fetches the CA certificate first and checks it against the hash tok
// pins (pki.JoinToken.VerifyCA). A CA that does not match gives an error
// wrapping pki.ErrCAMismatch, and the secret is never sent. Only then
// does it make a key and a certificate request and send them with the
// token's id and secret. A refusal is a *RefusedError.
//
// The secret travels in the request body: the client's transport must
// keep it confidential (https to the coordinator).
func JoinCluster(ctx context.Context, client *http.Client, baseURL string, tok pki.JoinToken, nodeID string) (*pki.Credential, error) {
	if client == nil {
		client = http.DefaultClient
	}
	base := strings.TrimRight(baseURL, "/")
	caCert, err := FetchVerifiedCA(ctx, client, base, tok)
	if err != nil {
		return nil, err
	}
	key, err := pki.NewNodeKey()
	if err != nil {
		return nil, fmt.Errorf("join cluster at %s: %w", base, err)
	}
	csr, err := pki.NewCSR(key, nodeID)
	if err != nil {
		return nil, fmt.Errorf("join cluster at %s: %w", base, err)
	}
	resp, err := postJoin(ctx, client, base, apiv1.ClusterJoinRequest{TokenID: tok.ID, Secret: tok.Secret, NodeID: nodeID, CSRPEM: string(csr)})
	if err != nil {
		return nil, fmt.Errorf("join cluster at %s as node %q: %w", base, nodeID, err)
	}
	if resp.NodeID != nodeID {
		return nil, fmt.Errorf("join cluster at %s as node %q: the coordinator answered for node %q", base, nodeID, resp.NodeID)
	}
	if resp.CAPEM != "" {
		if block, _ := pem.Decode([]byte(resp.CAPEM)); block == nil || !bytes.Equal(block.Bytes, caCert.Raw) {
			return nil, fmt.Errorf("join cluster at %s as node %q: the coordinator answered with another CA than the one it served before", base, nodeID)
		}
	}
	cred, err := pki.NewCredential(key, []byte(resp.CertificatePEM), caCert)
	if err != nil {
		return nil, fmt.Errorf("join cluster at %s as node %q: %w", base, nodeID, err)
	}
	return cred, nil
}

// fetchCA gets the CA certificate a coordinator offers. It is not yet
// trusted: the caller checks it against the token.
func fetchCA(ctx context.Context, client *http.Client, base string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+CAPath, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch cluster CA: %w", err)
	}
	req.Header.Set("Accept", "application/x-pem-file")
	res, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch cluster CA: %w", err)
	}
	defer res.Body.Close()
	body, err := readBounded(res.Body, maxCABody)
	if err != nil {
		return nil, fmt.Errorf("fetch cluster CA: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch cluster CA: %w", refused(res.StatusCode, body))
	}
	return body, nil
}

// postJoin sends the join request and reads the answer.
func postJoin(ctx context.Context, client *http.Client, base string, in apiv1.ClusterJoinRequest) (apiv1.ClusterJoinResponse, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return apiv1.ClusterJoinResponse{}, fmt.Errorf("encode join request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+JoinPath, bytes.NewReader(b))
	if err != nil {
		return apiv1.ClusterJoinResponse{}, fmt.Errorf("send join request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return apiv1.ClusterJoinResponse{}, fmt.Errorf("send join request: %w", err)
	}
	defer res.Body.Close()
	body, err := readBounded(res.Body, maxJoinBody)
	if err != nil {
		return apiv1.ClusterJoinResponse{}, fmt.Errorf("read join answer: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return apiv1.ClusterJoinResponse{}, refused(res.StatusCode, body)
	}
	var out apiv1.ClusterJoinResponse
	if err := json.Unmarshal(body, &out); err != nil {
		return apiv1.ClusterJoinResponse{}, fmt.Errorf("decode join answer: %w", err)
	}
	return out, nil
}

// readBounded reads all of r, refusing more than limit bytes.
func readBounded(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("answer over %d bytes", limit)
	}
	return b, nil
}

// refused builds the RefusedError of an error answer: the API's JSON
// error message, or the start of the body when it is not one.
func refused(status int, body []byte) error {
	var e apiv1.Error
	msg := ""
	if json.Unmarshal(body, &e) == nil {
		msg = e.Error
	}
	if msg == "" {
		msg = strings.TrimSpace(string(body[:min(len(body), 200)]))
	}
	return &RefusedError{Status: status, Message: msg}
}

// Permanent reports whether err is a coordinator's refusal that retrying
// with the same token cannot overcome: a RefusedError with any 4xx status
// but 408 and 429. A CA mismatch (pki.ErrCAMismatch) is not a refusal;
// the caller decides on it alone.
func Permanent(err error) bool {
	var r *RefusedError
	if !errors.As(err, &r) {
		return false
	}
	return r.Status >= 400 && r.Status < 500 && r.Status != http.StatusRequestTimeout && r.Status != http.StatusTooManyRequests
}

// FetchVerifiedCA gets the CA certificate the coordinator at baseURL
// offers (over a channel not trusted yet) and checks it against the hash
// tok pins: a CA that does not match gives an error wrapping
// pki.ErrCAMismatch. A nil client means http.DefaultClient.
func FetchVerifiedCA(ctx context.Context, client *http.Client, baseURL string, tok pki.JoinToken) (*x509.Certificate, error) {
	if client == nil {
		client = http.DefaultClient
	}
	base := strings.TrimRight(baseURL, "/")
	caPEM, err := fetchCA(ctx, client, base)
	if err != nil {
		return nil, fmt.Errorf("join cluster at %s: %w", base, err)
	}
	ca, err := tok.VerifyCA(caPEM)
	if err != nil {
		return nil, fmt.Errorf("join cluster at %s: %w", base, err)
	}
	return ca, nil
}
