package fakevm

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of the MMDS token flow (Firecracker and the AWS aliases).
const (
	hdrToken       = "X-metadata-token"
	hdrTokenAWS    = "X-aws-ec2-metadata-token"
	hdrTokenTTL    = "X-metadata-token-ttl-seconds"
	hdrTokenTTLAWS = "X-aws-ec2-metadata-token-ttl-seconds"
	hdrForwarded   = "X-Forwarded-For"
	pathToken      = "/latest/api/token"
)

// Limits of the guest endpoint.
const (
	mmdsMaxHeaderBytes = 8 << 10
	mmdsMaxBodyBytes   = 4 << 10
	mmdsReadTimeout    = 10 * time.Second
)

// mmdsGuestHandler is the HTTP endpoint the guest reaches at the MMDS
// address (169.254.169.254 by default), serving store as Firecracker's
// MMDS does: under V2 a PUT /latest/api/token with a TTL header opens a
// session, and every GET needs a valid X-metadata-token (401 otherwise);
// under V1 tokens are optional. A GET path is a JSON pointer into the data
// store; Accept: application/json answers JSON, anything else the IMDS
// text form. Only GET and PUT are allowed.
func mmdsGuestHandler(store *mmdsStore) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, mmdsMaxBodyBytes)
		uri := r.URL.Path
		if uri == "" {
			mmdsText(w, http.StatusBadRequest, "Invalid URI.")
			return
		}
		switch r.Method {
		case http.MethodGet:
			mmdsGet(w, r, store)
		case http.MethodPut:
			mmdsPut(w, r, store)
		default:
			w.Header().Set("Allow", "GET, PUT")
			mmdsText(w, http.StatusMethodNotAllowed, "Not allowed HTTP method.")
		}
	})
}

func mmdsGet(w http.ResponseWriter, r *http.Request, store *mmdsStore) {
	tok := headerOf(r, hdrToken, hdrTokenAWS)
	if store.mmdsVersion() == "V2" {
		if tok == "" {
			mmdsText(w, http.StatusUnauthorized, "No MMDS token provided. Use `X-metadata-token` or `X-aws-ec2-metadata-token` header to specify the session token.")
			return
		}
		if !store.validToken(tok) {
			mmdsText(w, http.StatusUnauthorized, "MMDS token not valid.")
			return
		}
	}
	asJSON := strings.Contains(r.Header.Get("Accept"), "application/json")
	body, err := store.lookup(dedupSlashes(r.URL.Path), asJSON)
	switch {
	case errors.Is(err, errMMDSNotFound):
		mmdsText(w, http.StatusNotFound, fmt.Sprintf("Resource not found: %s.", r.URL.Path))
	case errors.Is(err, errMMDSUnsupported):
		mmdsText(w, http.StatusNotImplemented, err.Error())
	case err != nil:
		mmdsText(w, http.StatusInternalServerError, err.Error())
	case asJSON:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(body))
	default:
		mmdsText(w, http.StatusOK, body)
	}
}

func mmdsPut(w http.ResponseWriter, r *http.Request, store *mmdsStore) {
	if r.Header.Get(hdrForwarded) != "" {
		mmdsText(w, http.StatusBadRequest, "Invalid header. Reason: Unsupported header name. Key: X-Forwarded-For")
		return
	}
	if dedupSlashes(r.URL.Path) != pathToken {
		mmdsText(w, http.StatusNotFound, fmt.Sprintf("Resource not found: %s.", r.URL.Path))
		return
	}
	name, val := hdrTokenTTL, r.Header.Get(hdrTokenTTL)
	if val == "" {
		name, val = hdrTokenTTLAWS, r.Header.Get(hdrTokenTTLAWS)
	}
	if val == "" {
		mmdsText(w, http.StatusBadRequest, "Token time to live value not found. Use `X-metadata-token-ttl-seconds` or `X-aws-ec2-metadata-token-ttl-seconds` header to specify the token's lifetime.")
		return
	}
	ttl, err := strconv.ParseUint(val, 10, 32)
	if err != nil {
		mmdsText(w, http.StatusBadRequest, fmt.Sprintf("Invalid header. Reason: Invalid value. Key:%s; Value:%s", name, val))
		return
	}
	if ttl < minTokenTTL || ttl > maxTokenTTL {
		mmdsText(w, http.StatusBadRequest, fmt.Sprintf("Invalid time to live value provided for token: %d. Please provide a value between %d and %d.", ttl, minTokenTTL, maxTokenTTL))
		return
	}
	w.Header().Set(name, strconv.FormatUint(ttl, 10))
	mmdsText(w, http.StatusOK, store.newToken(int(ttl)))
}

// headerOf returns the first of the named headers that is set.
func headerOf(r *http.Request, names ...string) string {
	for _, n := range names {
		if v := r.Header.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// dedupSlashes collapses runs of slashes, as Firecracker sanitises the URI
// into a JSON pointer.
func dedupSlashes(p string) string {
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	return p
}

func mmdsText(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// newMMDSServer returns the http.Server of the guest endpoint.
func newMMDSServer(store *mmdsStore) *http.Server {
	return &http.Server{
		Handler:           mmdsGuestHandler(store),
		MaxHeaderBytes:    mmdsMaxHeaderBytes,
		ReadHeaderTimeout: mmdsReadTimeout,
		ReadTimeout:       mmdsReadTimeout,
	}
}
