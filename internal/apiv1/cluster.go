package apiv1

import "time"

// JoinTokenRequest is POST /api/v1/peers/join-tokens.
type JoinTokenRequest struct {
	// TTL is how long the token may be used, as a Go duration ("24h") or
	// a whole number of days ("7d"); empty means 24 hours, and at most
	// 30 days is allowed.
	TTL string `json:"ttl,omitempty"`
}

// JoinTokenCreated is the answer to JoinTokenRequest. Token, which holds
// the secret, is shown only this once.
type JoinTokenCreated struct {
	// Token is the whole join token a worker is given.
	Token string `json:"token"`
	// ID names the token in listings and the audit log; it is not secret.
	ID        string    `json:"id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Join token states, as JoinTokenInfo.State gives them.
const (
	JoinTokenActive  = "active"  // may still be used
	JoinTokenUsed    = "used"    // a worker joined with it
	JoinTokenExpired = "expired" // never used, and now past its expiry
	JoinTokenRevoked = "revoked" // an operator revoked it before it was used
)

// JoinTokenInfo is one element of GET /api/v1/peers/join-tokens: never
// the token's secret.
type JoinTokenInfo struct {
	ID string `json:"id"`
	// State is active, used, expired or revoked.
	State string `json:"state"`
	// CreatedBy is the ID of the admin token that created it, or
	// "bootstrap".
	CreatedBy string     `json:"created_by"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	UsedAt    *time.Time `json:"used_at"`
	// UsedBy is the id of the node that joined with it; "" while unused.
	UsedBy    string     `json:"used_by"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// JoinTokenList is GET /api/v1/peers/join-tokens, oldest first.
type JoinTokenList struct {
	Tokens []JoinTokenInfo `json:"tokens"`
}

// ClusterJoinRequest is POST /api/v1/cluster/join: a worker's first join.
// The token's secret authenticates it; the worker sends it only after the
// CA it fetched from GET /api/v1/cluster/ca matched the hash its token
// pins.
type ClusterJoinRequest struct {
	// TokenID and Secret are the id and secret parts of the join token.
	TokenID string `json:"token_id"`
	Secret  string `json:"secret"`
	// NodeID is the id the worker joins under; the certificate request
	// must name it.
	NodeID string `json:"node_id"`
	// CSRPEM is the worker's certificate signing request, one PEM block.
	CSRPEM string `json:"csr_pem"`
}

// ClusterJoinResponse is the answer to ClusterJoinRequest.
type ClusterJoinResponse struct {
	NodeID string `json:"node_id"`
	// CertificatePEM is the worker's client certificate, signed by the
	// cluster CA.
	CertificatePEM string `json:"certificate_pem"`
	// CAPEM is the cluster CA certificate.
	CAPEM string `json:"ca_pem"`
}
