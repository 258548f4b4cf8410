package apiv1

import "time"

// HeaderSHA256 carries the lowercase hex SHA-256 of an artifact or cache
// bundle: sent with an upload (the orchestrator refuses a body without
// that digest), and with a download (the client checks the body has it).
const HeaderSHA256 = "X-Kici-Sha256"

// ArtifactFile is one regular file of a job's artifacts.
type ArtifactFile struct {
	// Path is its workspace-relative, slash-separated path.
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// Artifact is the artifacts one job of a run uploaded: one bundle (a
// tar.gz) of files.
type Artifact struct {
	ID string `json:"id"`
	// Job is the job's name, JobID its id.
	Job   string `json:"job"`
	JobID string `json:"job_id"`
	// Size is the bundle's length as stored (compressed), SHA256 its
	// digest.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// FileCount and ContentBytes count its files and their bytes.
	FileCount    int            `json:"file_count"`
	ContentBytes int64          `json:"content_bytes"`
	Files        []ArtifactFile `json:"files"`
	CreatedAt    time.Time      `json:"created_at"`
	// ExpiresAt is when it is deleted; null keeps it as long as the run.
	ExpiresAt *time.Time `json:"expires_at"`
}

// ArtifactList is GET /api/v1/runs/{id}/artifacts.
type ArtifactList struct {
	Artifacts []Artifact `json:"artifacts"`
}

// CacheHit is GET /api/v1/caches when an entry matched (204 No Content
// when none did).
type CacheHit struct {
	// ID names the entry for GET /api/v1/caches/{id}.
	ID string `json:"id"`
	// Key is the entry's key: the one asked for when Exact, else one a
	// restore key is a prefix of.
	Key   string `json:"key"`
	Exact bool   `json:"exact"`
	// Scope is the scope it was found in ("branch:main", "pull:7", …).
	Scope  string `json:"scope"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// CacheSaved is PUT /api/v1/caches.
type CacheSaved struct {
	ID    string `json:"id"`
	Scope string `json:"scope"`
	Size  int64  `json:"size"`
}
