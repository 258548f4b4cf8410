package scaler

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// TokenPrefix starts the single-use tokens of scaler-spawned agents.
const TokenPrefix = "ksa_"

// agentToken mints the token a spawned agent authenticates with: bound to
// its agent id, valid only while the manager tracks that agent (so it is
// worthless once the agent's job is done).
func (m *Manager) agentToken(agentID string) string {
	mac := hmac.New(sha256.New, m.tokenKey)
	mac.Write([]byte(agentID))
	return TokenPrefix + hex.EncodeToString(mac.Sum(nil))
}

func (m *Manager) checkToken(agentID, token string) bool {
	want := m.agentToken(agentID)
	return strings.HasPrefix(token, TokenPrefix) && hmac.Equal([]byte(token), []byte(want))
}

// IsScalerToken reports whether a bearer token is a scaler agent's.
func IsScalerToken(token string) bool { return strings.HasPrefix(token, TokenPrefix) }
