package source

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/workflow"
)

// DefaultGitHubAPI is the API base URL of github.com.
const DefaultGitHubAPI = "https://api.github.com"

// Defaults of the GitHub timeouts and limits.
const (
	defaultAPITimeout = 30 * time.Second
	// maxAPIBody bounds a JSON response read from the API.
	maxAPIBody = 16 << 20
	// compareFileCap is the most files GitHub's compare API lists; a
	// comparison that reaches it may have more.
	compareFileCap = 300
)

// GitHub is a repository on GitHub (or GitHub Enterprise Server) read
// through its REST API: commits to resolve refs, contents for workflows and
// the lock, compare for changed files, and tarball for archives. Agents
// clone it with the URL CloneURL returns. A GitHub holds no mutable state.
type GitHub struct {
	// Repo is "owner/name"; required.
	Repo string
	// Token is sent as a bearer token: a personal access token, or a GitHub
	// App installation token. Empty means anonymous requests (public
	// repositories, low rate limit). It must never be logged.
	Token string
	// APIBaseURL is the API root; empty means DefaultGitHubAPI. For GitHub
	// Enterprise Server it is https://HOST/api/v3.
	APIBaseURL string
	// CloneBaseURL is the web root clone URLs are made from; empty means
	// https://github.com for github.com, and the API's scheme and host
	// otherwise.
	CloneBaseURL string
	// HTTPClient sends the requests; nil means a client of its own. It must
	// follow redirects (tarball downloads are redirected).
	HTTPClient *http.Client
	// Timeout bounds each API request; zero means 30 seconds.
	Timeout time.Duration
	// ArchiveTimeout bounds an archive download; zero means 30 minutes.
	ArchiveTimeout time.Duration
}

var defaultHTTPClient = &http.Client{}

// Validate reports the first bad field.
func (g *GitHub) Validate() error {
	if err := checkRepo(g.Repo); err != nil {
		return fmt.Errorf("github source: Repo: %w", err)
	}
	if g.APIBaseURL != "" {
		u, err := url.Parse(g.APIBaseURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("github source: APIBaseURL %q is not an http(s) URL", g.APIBaseURL)
		}
	}
	if g.CloneBaseURL != "" {
		u, err := url.Parse(g.CloneBaseURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
			return fmt.Errorf("github source: CloneBaseURL %q is not an http(s) URL without credentials", g.CloneBaseURL)
		}
	}
	if g.Timeout < 0 || g.ArchiveTimeout < 0 {
		return errors.New("github source: timeouts must not be negative")
	}
	return nil
}

// checkRepo accepts "owner/name" with GitHub's characters.
func checkRepo(repo string) error {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || !safeSegment(owner) || !safeSegment(name) {
		return fmt.Errorf("%q is not owner/name", repo)
	}
	return nil
}

func safeSegment(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 100 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (g *GitHub) apiBase() string {
	if g.APIBaseURL == "" {
		return DefaultGitHubAPI
	}
	return strings.TrimSuffix(g.APIBaseURL, "/")
}

func (g *GitHub) client() *http.Client {
	if g.HTTPClient != nil {
		return g.HTTPClient
	}
	return defaultHTTPClient
}

// APIError is an unsuccessful GitHub API response. It wraps ErrNotFound,
// ErrUnauthorized, ErrForbidden or ErrRateLimited where one applies.
type APIError struct {
	// Repo is the repository and What the thing being fetched
	// ("commit for ref main", ".kici/workflows at 1a2b…").
	Repo, What string
	// StatusCode is the HTTP status, and Message GitHub's "message".
	StatusCode int
	Message    string
	// RateLimitReset is when the primary rate limit resets (from
	// X-RateLimit-Reset), and RetryAfter how long to wait (from
	// Retry-After, a secondary limit); zero when not sent.
	RateLimitReset time.Time
	RetryAfter     time.Duration

	kind error
}

// Error names what was fetched from which repository, the status and
// GitHub's message, and a hint for the common cases.
func (e *APIError) Error() string {
	msg := fmt.Sprintf("fetch %s of github repo %q: HTTP %d", e.What, e.Repo, e.StatusCode)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	switch {
	case e.kind == ErrUnauthorized:
		msg += " (check the source's token)"
	case e.kind == ErrNotFound:
		msg += " (missing, or the token may not read the repository)"
	case e.kind == ErrRateLimited && !e.RateLimitReset.IsZero():
		msg += " (rate limited until " + e.RateLimitReset.UTC().Format(time.RFC3339) + ")"
	case e.kind == ErrRateLimited && e.RetryAfter > 0:
		msg += " (rate limited; retry after " + e.RetryAfter.String() + ")"
	}
	return msg
}

// Unwrap returns the sentinel the status maps to, or nil.
func (e *APIError) Unwrap() error { return e.kind }

// classifyStatus maps an unsuccessful response to its sentinel: 401 is
// ErrUnauthorized; 429, and 403 with an exhausted rate limit, a
// Retry-After or a rate-limit message, are ErrRateLimited; other 403s are
// ErrForbidden; 404 is ErrNotFound; anything else none.
func classifyStatus(status int, h http.Header, message string) error {
	switch {
	case status == http.StatusUnauthorized:
		return ErrUnauthorized
	case status == http.StatusTooManyRequests:
		return ErrRateLimited
	case status == http.StatusForbidden &&
		(h.Get("X-RateLimit-Remaining") == "0" || h.Get("Retry-After") != "" ||
			strings.Contains(strings.ToLower(message), "rate limit")):
		return ErrRateLimited
	case status == http.StatusForbidden:
		return ErrForbidden
	case status == http.StatusNotFound:
		return ErrNotFound
	}
	return nil
}

// apiError builds the *APIError of a response, reading its body.
func (g *GitHub) apiError(resp *http.Response, what string) *APIError {
	var body struct {
		Message string `json:"message"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body) // a body that is not JSON has no message
	e := &APIError{Repo: g.Repo, What: what, StatusCode: resp.StatusCode, Message: body.Message}
	e.kind = classifyStatus(resp.StatusCode, resp.Header, body.Message)
	if e.kind == ErrRateLimited {
		var sec int64
		if _, err := fmt.Sscan(resp.Header.Get("X-RateLimit-Reset"), &sec); err == nil && sec > 0 {
			e.RateLimitReset = time.Unix(sec, 0)
		}
		if _, err := fmt.Sscan(resp.Header.Get("Retry-After"), &sec); err == nil && sec > 0 {
			e.RetryAfter = time.Duration(sec) * time.Second
		}
	}
	return e
}

// get sends GET {api}/repos/{repo}/{path}. A non-2xx response becomes an
// *APIError; otherwise the caller closes the body.
func (g *GitHub) get(ctx context.Context, what, path string, query url.Values) (*http.Response, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	u := g.apiBase() + "/repos/" + g.Repo + "/" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch %s of github repo %q: %w", what, g.Repo, err)
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", "kici")
	if g.Token != "" {
		req.Header.Set("Authorization", "Bearer "+g.Token)
	}
	resp, err := g.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s of github repo %q: %w", what, g.Repo, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, g.apiError(resp, what)
	}
	return resp, nil
}

// getJSON fetches path and decodes its JSON body into v.
func (g *GitHub) getJSON(ctx context.Context, what, path string, query url.Values, v any) error {
	ctx, cancel := context.WithTimeout(ctx, orDefault(g.Timeout, defaultAPITimeout))
	defer cancel()
	resp, err := g.get(ctx, what, path, query)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAPIBody)).Decode(v); err != nil {
		return fmt.Errorf("fetch %s of github repo %q: decode the response: %w", what, g.Repo, err)
	}
	return nil
}

// refPath turns a ref into the path segment of the commits API: a leading
// "refs/" is dropped ("heads/main", "tags/v1" and plain names are what the
// API takes) and each segment is escaped.
func refPath(ref string) (string, error) {
	segs := strings.Split(strings.TrimPrefix(ref, "refs/"), "/")
	for i, s := range segs {
		if s == "" || s == "." || s == ".." {
			return "", fmt.Errorf("%w: %q", ErrInvalidRef, ref)
		}
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/"), nil
}

// short abbreviates a sha for messages.
func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// Resolve implements Source with GET /repos/{repo}/commits/{ref}.
func (g *GitHub) Resolve(ctx context.Context, ref string) (string, error) {
	if err := checkRef(ref); err != nil {
		return "", err
	}
	p, err := refPath(ref)
	if err != nil {
		return "", err
	}
	var commit struct {
		SHA string `json:"sha"`
	}
	what := fmt.Sprintf("commit for ref %q", ref)
	err = g.getJSON(ctx, what, "commits/"+p, nil, &commit)
	var ae *APIError
	if errors.As(err, &ae) && ae.StatusCode == http.StatusUnprocessableEntity {
		// "No commit found for SHA: …"
		ae.kind = ErrNotFound
	}
	if err != nil {
		return "", err
	}
	if !isFullSHA(commit.SHA) {
		return "", fmt.Errorf("fetch %s of github repo %q: response has no commit sha", what, g.Repo)
	}
	return strings.ToLower(commit.SHA), nil
}

// contentEntry is an item of the contents API: a file (with its content
// when fetched alone) or an entry of a directory listing.
type contentEntry struct {
	Type     string `json:"type"`
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Encoding string `json:"encoding"`
	Content  string `json:"content"`
}

// fileContent fetches one file at sha; found is false on a 404.
func (g *GitHub) fileContent(ctx context.Context, path, sha string) (data []byte, found bool, err error) {
	what := fmt.Sprintf("%s at %s", path, short(sha))
	var e contentEntry
	err = g.getJSON(ctx, what, "contents/"+path, url.Values{"ref": {sha}}, &e)
	if errors.Is(err, ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	switch {
	case e.Type != "file":
		return nil, false, fmt.Errorf("fetch %s of github repo %q: a %s, not a file", what, g.Repo, e.Type)
	case e.Size > MaxFileBytes || e.Encoding == "none":
		return nil, false, fmt.Errorf("fetch %s of github repo %q: %d bytes, over the limit of %d", what, g.Repo, e.Size, MaxFileBytes)
	case e.Encoding != "base64":
		return nil, false, fmt.Errorf("fetch %s of github repo %q: unexpected encoding %q", what, g.Repo, e.Encoding)
	}
	data, err = base64.StdEncoding.DecodeString(strings.NewReplacer("\n", "", "\r", "").Replace(e.Content))
	if err != nil {
		return nil, false, fmt.Errorf("fetch %s of github repo %q: decode content: %w", what, g.Repo, err)
	}
	return data, true, nil
}

// Workflows implements Source with the contents API: the listing of
// .kici/workflows at sha, then each workflow file, then the lock.
func (g *GitHub) Workflows(ctx context.Context, sha string) ([]workflow.File, []byte, error) {
	if err := checkSHA("commit", sha); err != nil {
		return nil, nil, err
	}
	what := fmt.Sprintf("%s at %s", workflow.WorkflowsDir, short(sha))
	var raw json.RawMessage
	err := g.getJSON(ctx, what, "contents/"+workflow.WorkflowsDir, url.Values{"ref": {sha}}, &raw)
	if errors.Is(err, ErrNotFound) {
		// No workflows directory, or no such commit: tell them apart.
		var commit struct{}
		if err := g.getJSON(ctx, "commit "+short(sha), "commits/"+sha, nil, &commit); err != nil {
			var ae *APIError
			if errors.As(err, &ae) && ae.StatusCode == http.StatusUnprocessableEntity {
				ae.kind = ErrNotFound
			}
			return nil, nil, err
		}
		raw = nil
	} else if err != nil {
		return nil, nil, err
	}
	var listing []contentEntry
	if len(raw) > 0 && raw[0] == '[' { // an object means .kici/workflows is a file
		if err := json.Unmarshal(raw, &listing); err != nil {
			return nil, nil, fmt.Errorf("fetch %s of github repo %q: decode the listing: %w", what, g.Repo, err)
		}
	}
	count := 0
	for _, e := range listing {
		if e.Type == "file" && workflow.IsWorkflowFile(e.Path) {
			count++
		}
	}
	if err := workflow.CheckFileCount(count); err != nil {
		return nil, nil, fmt.Errorf("fetch %s of github repo %q: %w", what, g.Repo, err)
	}
	files := []workflow.File{}
	for _, e := range listing {
		if e.Type != "file" || !workflow.IsWorkflowFile(e.Path) {
			continue
		}
		data, found, err := g.fileContent(ctx, e.Path, sha)
		if err != nil {
			return nil, nil, err
		}
		if !found {
			return nil, nil, fmt.Errorf("fetch %s at %s of github repo %q: listed but %w", e.Path, short(sha), g.Repo, ErrNotFound)
		}
		files = append(files, workflow.File{Path: e.Path, Data: data})
	}
	slices.SortFunc(files, func(a, b workflow.File) int { return strings.Compare(a.Path, b.Path) })
	lock, _, err := g.fileContent(ctx, workflow.LockPath, sha)
	if err != nil {
		return nil, nil, err
	}
	return files, lock, nil
}

// ChangedFiles implements Source with GET /repos/{repo}/compare/{before}...{after}.
// A comparison listing GitHub's cap of 300 files gives nil (unknown).
func (g *GitHub) ChangedFiles(ctx context.Context, before, after string) ([]string, error) {
	if err := checkSHA("after", after); err != nil {
		return nil, err
	}
	if unknownBefore(before) {
		return nil, nil
	}
	if err := checkSHA("before", before); err != nil {
		return nil, err
	}
	paths, err := g.compareFiles(ctx, before, after)
	if errors.Is(err, ErrTooManyChangedFiles) {
		return nil, nil
	}
	return paths, err
}

// MergeBaseFiles implements Source with GET /repos/{repo}/compare/{base}...{head},
// which compares head with its merge base with base. A comparison listing
// GitHub's cap of 300 files gives ErrTooManyChangedFiles.
func (g *GitHub) MergeBaseFiles(ctx context.Context, base, head string) ([]string, error) {
	if err := checkSHA("base", base); err != nil {
		return nil, err
	}
	if err := checkSHA("head", head); err != nil {
		return nil, err
	}
	return g.compareFiles(ctx, base, head)
}

// changedFile is an entry of the compare and pull request files APIs.
type changedFile struct {
	Filename         string `json:"filename"`
	PreviousFilename string `json:"previous_filename"`
}

// appendPaths appends each file's path and, for a rename, its old path.
func appendPaths(paths []string, files []changedFile) []string {
	for _, f := range files {
		paths = append(paths, f.Filename)
		if f.PreviousFilename != "" {
			paths = append(paths, f.PreviousFilename)
		}
	}
	return paths
}

func (g *GitHub) compareFiles(ctx context.Context, base, head string) ([]string, error) {
	var cmp struct {
		Files []changedFile `json:"files"`
	}
	what := fmt.Sprintf("comparison %s...%s", short(base), short(head))
	if err := g.getJSON(ctx, what, "compare/"+base+"..."+head, url.Values{"per_page": {"1"}}, &cmp); err != nil {
		return nil, err
	}
	if len(cmp.Files) >= compareFileCap {
		return nil, fmt.Errorf("fetch %s of github repo %q: %w (GitHub lists at most %d)", what, g.Repo, ErrTooManyChangedFiles, compareFileCap)
	}
	return sortedUnique(appendPaths(make([]string, 0, 2*len(cmp.Files)), cmp.Files)), nil
}

// Bounds of the pull request files API: GitHub pages it by at most 100 and
// lists at most 3000 files.
const (
	pullFilesPerPage = 100
	pullFilesCap     = 3000
)

// PullRequestFiles implements Source with GET /repos/{repo}/pulls/{number}/files,
// page by page (per_page=100) until a short page. GitHub lists at most 3000
// files; when it lists that many, GET /repos/{repo}/pulls/{number} says
// whether there are more (its "changed_files"), and more gives
// ErrTooManyChangedFiles. base and head are not sent: GitHub diffs the pull
// request's current head with its merge base.
func (g *GitHub) PullRequestFiles(ctx context.Context, number int, base, head string) ([]string, error) {
	if number <= 0 {
		return nil, fmt.Errorf("github repo %q: pull request number %d is not positive", g.Repo, number)
	}
	var paths []string
	listed := 0
	for page := 1; listed < pullFilesCap; page++ {
		var files []changedFile
		what := fmt.Sprintf("files of pull request #%d (page %d)", number, page)
		q := url.Values{"per_page": {strconv.Itoa(pullFilesPerPage)}, "page": {strconv.Itoa(page)}}
		if err := g.getJSON(ctx, what, "pulls/"+strconv.Itoa(number)+"/files", q, &files); err != nil {
			return nil, err
		}
		if len(files) > pullFilesPerPage {
			return nil, fmt.Errorf("fetch %s of github repo %q: %d files on a page of %d", what, g.Repo, len(files), pullFilesPerPage)
		}
		listed += len(files)
		paths = appendPaths(paths, files)
		if len(files) < pullFilesPerPage {
			return sortedUnique(paths), nil
		}
	}
	var pr struct {
		ChangedFiles int `json:"changed_files"`
	}
	what := fmt.Sprintf("pull request #%d", number)
	if err := g.getJSON(ctx, what, "pulls/"+strconv.Itoa(number), nil, &pr); err != nil {
		return nil, err
	}
	if pr.ChangedFiles > listed {
		return nil, fmt.Errorf("fetch files of pull request #%d of github repo %q: %d changed files: %w (GitHub lists at most %d)",
			number, g.Repo, pr.ChangedFiles, ErrTooManyChangedFiles, pullFilesCap)
	}
	return sortedUnique(paths), nil
}

// Archive implements Source with GET /repos/{repo}/tarball/{sha}, which
// redirects to the download. GitHub's tarball holds the tree under one
// top directory ("owner-repo-abc1234/"); it is re-packed without it, so
// the archive has the same shape as a local source's.
func (g *GitHub) Archive(ctx context.Context, sha string, w io.Writer) error {
	if err := checkSHA("commit", sha); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, orDefault(g.ArchiveTimeout, defaultArchiveTimeout))
	defer cancel()
	what := "tarball of " + short(sha)
	resp, err := g.get(ctx, what, "tarball/"+sha, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := stripTopDir(w, resp.Body); err != nil {
		return fmt.Errorf("fetch %s of github repo %q: %w", what, g.Repo, err)
	}
	return nil
}

// CloneURL returns https://x-access-token:TOKEN@HOST/OWNER/NAME.git (or
// the URL without credentials when there is no token) and the token as
// the string to mask. The token is a secret: the URL must only reach the
// agent inside its dispatch, with the token in the dispatch's masks.
func (g *GitHub) CloneURL() (string, []string) {
	base := g.CloneBaseURL
	if base == "" {
		base = "https://github.com"
		if api := g.apiBase(); api != DefaultGitHubAPI {
			if u, err := url.Parse(api); err == nil {
				base = u.Scheme + "://" + u.Host
			}
		}
	}
	u, err := url.Parse(strings.TrimSuffix(base, "/") + "/" + g.Repo + ".git")
	if err != nil {
		return "", nil
	}
	if g.Token == "" {
		return u.String(), nil
	}
	u.User = url.UserPassword("x-access-token", g.Token)
	return u.String(), []string{g.Token}
}
