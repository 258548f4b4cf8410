package runner_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/kici-dev/kici/internal/apiv1"
)

// fakeStorage is an orchestrator's artifact and cache routes, as the
// agent sees them: bundles kept in memory by job name and cache key. It
// refuses a request without the job token and a body without its digest.
type fakeStorage struct {
	t     *testing.T
	token string
	srv   *httptest.Server

	mu        sync.Mutex
	artifacts map[string][]byte // by job, as uploaded
	// served, when set for a job, is sent instead of its upload, with
	// servedSHA as its digest header (a corrupt or crafted bundle).
	served    map[string][]byte
	servedSHA map[string]string
	caches    map[string][]byte // by key
	lookups   []string          // "key|restore,restore" per lookup
}

func newFakeStorage(t *testing.T, token string) *fakeStorage {
	f := &fakeStorage{t: t, token: token, artifacts: map[string][]byte{}, served: map[string][]byte{},
		servedSHA: map[string]string{}, caches: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /api/v1/runs/{id}/jobs/{job}/artifacts", f.putArtifacts)
	mux.HandleFunc("GET /api/v1/runs/{id}/jobs/{job}/artifacts", f.getArtifacts)
	mux.HandleFunc("GET /api/v1/caches", f.lookup)
	mux.HandleFunc("GET /api/v1/caches/{id}", f.getCache)
	mux.HandleFunc("PUT /api/v1/caches", f.putCache)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			http.Error(w, `{"error": "job token missing or invalid"}`, http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// apiURL is what runner.Storage.APIURL names.
func (f *fakeStorage) apiURL() string { return f.srv.URL + "/api/v1/" }

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// body reads an upload and checks its digest header.
func (f *fakeStorage) body(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, false
	}
	if got := digest(data); got != r.Header.Get(apiv1.HeaderSHA256) {
		http.Error(w, `{"error": "sha256 mismatch"}`, http.StatusBadRequest)
		return nil, false
	}
	return data, true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeStorage) putArtifacts(w http.ResponseWriter, r *http.Request) {
	data, ok := f.body(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	f.artifacts[r.PathValue("job")] = data
	f.mu.Unlock()
	writeJSON(w, http.StatusCreated, apiv1.Artifact{Job: r.PathValue("job"), Size: int64(len(data)), SHA256: digest(data), FileCount: 1})
}

func (f *fakeStorage) getArtifacts(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	job := r.PathValue("job")
	data, ok := f.artifacts[job]
	sum := digest(data)
	if s, crafted := f.served[job]; crafted {
		data, ok, sum = s, true, f.servedSHA[job]
	}
	f.mu.Unlock()
	if !ok {
		http.Error(w, `{"error": "no artifacts"}`, http.StatusNotFound)
		return
	}
	w.Header().Set(apiv1.HeaderSHA256, sum)
	_, _ = w.Write(data)
}

func (f *fakeStorage) lookup(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	key := q.Get("key") + "@" + q.Get("version")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups = append(f.lookups, q.Get("key")+"|"+strings.Join(q["restore"], ","))
	if _, ok := f.caches[key]; ok {
		writeJSON(w, http.StatusOK, apiv1.CacheHit{ID: key, Key: q.Get("key"), Exact: true, Scope: "branch:main"})
		return
	}
	for _, prefix := range q["restore"] {
		for k := range f.caches {
			if strings.HasPrefix(k, prefix) && strings.HasSuffix(k, "@"+q.Get("version")) {
				writeJSON(w, http.StatusOK, apiv1.CacheHit{ID: k, Key: strings.TrimSuffix(k, "@"+q.Get("version")), Scope: "branch:main"})
				return
			}
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (f *fakeStorage) getCache(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	data, ok := f.caches[r.PathValue("id")]
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set(apiv1.HeaderSHA256, digest(data))
	_, _ = w.Write(data)
}

func (f *fakeStorage) putCache(w http.ResponseWriter, r *http.Request) {
	data, ok := f.body(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f.mu.Lock()
	f.caches[q.Get("key")+"@"+q.Get("version")] = data
	f.mu.Unlock()
	writeJSON(w, http.StatusCreated, apiv1.CacheSaved{ID: q.Get("key"), Scope: "branch:main", Size: int64(len(data))})
}
