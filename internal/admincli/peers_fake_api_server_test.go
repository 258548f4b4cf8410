package admincli

import (
	"net/http"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// fakeJoinToken is what the fake coordinator issues: a token of the
// documented form, for a CA and with a secret nobody uses.
const fakeJoinToken = "kjoin1.5f0c3b9e2a71d84c6e0f19a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6.q7wjz2k4m6np." +
	"3a9f1c7e5b2d8046f1e3c5a7b9d0e2f4a6c8e0f2b4d6f8a0c2e4a6b8d0f2e4c6"

// fakeJoinTokens are the join tokens the fake coordinator has issued.
var fakeJoinTokens = []apiv1.JoinTokenInfo{
	{ID: "c5h2x7lq3vna", State: apiv1.JoinTokenUsed, CreatedBy: "tok-ops", CreatedAt: before(50 * time.Hour),
		ExpiresAt: beforeP(26 * time.Hour), UsedAt: beforeP(49 * time.Hour), UsedBy: "edge-worker-1"},
	{ID: "w2m7rj4d6kzq", State: apiv1.JoinTokenExpired, CreatedBy: "bootstrap", CreatedAt: before(30 * time.Hour),
		ExpiresAt: beforeP(6 * time.Hour)},
	{ID: "b6t3y5n2p7fe", State: apiv1.JoinTokenRevoked, CreatedBy: "tok-ops", CreatedAt: before(3 * time.Hour),
		ExpiresAt: fakeTime(fakeNow.Add(21 * time.Hour)), RevokedAt: beforeP(2 * time.Hour)},
	{ID: "q7wjz2k4m6np", State: apiv1.JoinTokenActive, CreatedBy: "tok-ops", CreatedAt: before(10 * time.Minute),
		ExpiresAt: fakeTime(fakeNow.Add(time.Hour - 10*time.Minute))},
}

func (f *fakeAPI) peersRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/peers/join-tokens", f.createJoinToken)
	mux.HandleFunc("GET /api/v1/peers/join-tokens", f.listJoinTokens)
}

// createJoinToken issues fakeJoinToken for the ttl asked (24h when none),
// refusing what the coordinator refuses: a ttl that does not parse or is
// over 30 days, and the auditor role. ttl "standalone" stands for an
// orchestrator that is not a coordinator.
func (f *fakeAPI) createJoinToken(w http.ResponseWriter, r *http.Request) {
	if f.auditor(w, r, "peer.manage") {
		return
	}
	var req apiv1.JoinTokenRequest
	if !decode(w, r, &req) {
		return
	}
	if req.TTL == "standalone" {
		writeError(w, http.StatusConflict, "this orchestrator is not a cluster coordinator (KICI_CLUSTER_ROLE=coordinator): only coordinators of a cluster issue join tokens and admit workers")
		return
	}
	ttl := 24 * time.Hour
	if req.TTL != "" {
		expires, ok := fakeExpiry(req.TTL)
		if !ok || expires.Sub(fakeNow) <= 0 {
			writeError(w, http.StatusBadRequest, `ttl "`+req.TTL+`": want a duration such as 24h or 7d`)
			return
		}
		ttl = expires.Sub(fakeNow)
	}
	if ttl > 30*24*time.Hour {
		writeError(w, http.StatusBadRequest, `ttl "`+req.TTL+`": join token lifetime out of range: `+ttl.String()+`, want more than 0 and at most 720h0m0s (30 days)`)
		return
	}
	writeJSONStatus(w, http.StatusCreated, apiv1.JoinTokenCreated{Token: fakeJoinToken, ID: "q7wjz2k4m6np", ExpiresAt: fakeNow.Add(ttl)})
}

// listJoinTokens serves fakeJoinTokens; an empty fake has issued none.
func (f *fakeAPI) listJoinTokens(w http.ResponseWriter, r *http.Request) {
	if f.auditor(w, r, "peer.manage") {
		return
	}
	if f.empty {
		writeJSONStatus(w, http.StatusOK, apiv1.JoinTokenList{Tokens: []apiv1.JoinTokenInfo{}})
		return
	}
	writeJSONStatus(w, http.StatusOK, apiv1.JoinTokenList{Tokens: fakeJoinTokens})
}
