// Package githubfake is a fake of the GitHub REST API, for tests. It is
// not GitHub: it serves, from repositories held in memory, the few
// endpoints kici uses, with the response shapes GitHub documents:
//
//	GET /repos/{owner}/{repo}/commits/{ref}          {"sha": …}; unknown ref: 422
//	GET /repos/{owner}/{repo}/contents/{path}?ref=   a file (base64 "content",
//	                                                 "encoding") or a directory
//	                                                 listing; missing: 404
//	GET /repos/{owner}/{repo}/compare/{base}...{head} {"files": [{"filename", "status"}]}
//	GET /repos/{owner}/{repo}/tarball/{ref}          302 to a tar.gz whose entries
//	                                                 sit under "owner-repo-abc1234/"
//	GET /repos/{owner}/{repo}/pulls/{number}         {"number", "changed_files", "head": {"sha"}, "base": {"sha"}, …}
//	GET /repos/{owner}/{repo}/pulls/{number}/files   [{"filename", "status", "previous_filename"?, …}],
//	                                                 per_page (default 30, at most 100) and page,
//	                                                 a Link header, at most 3000 files in all
//
// A pull request (SetPullRequest) changes what its head commit's tree holds
// differently from its base commit's: the fake keeps no history, so the base
// commit stands for the merge base. A ref of "HEAD" names the default branch.
//
//	POST /repos/{owner}/{repo}/check-runs            201 with the check run; 422
//	                                                 for a missing name or head_sha,
//	                                                 a bad status or conclusion, or
//	                                                 completed without a conclusion
//	PATCH /repos/{owner}/{repo}/check-runs/{id}      200 with the check run
//	GET /repos/{owner}/{repo}/commits/{ref}/check-runs {"total_count", "check_runs"}
//	                                                 (check_name, status, filter,
//	                                                 per_page, page)
//
// Every request must carry the server's token (Authorization: Bearer or
// token), or an installation token minted for a GitHub App (EnableApp);
// otherwise the answer is 401 "Bad credentials", as GitHub gives. With
// EnableApp it also serves the App's own endpoints, which take its JWT:
//
//	GET /repos/{owner}/{repo}/installation           the App's installation
//	POST /app/installations/{id}/access_tokens       201 {"token", "expires_at"}
//
// Tests steer it with SetRateLimited (every answer becomes GitHub's 403 for
// an exhausted rate limit), FailCheckRuns (the next check-run requests
// fail, e.g. with 502 and Retry-After) and LoseCreateAnswers (a check run
// is created but its answer is lost); CheckRuns shows what was reported.
// The tarball download authenticates with a
// token in its query, as GitHub's codeload URLs do, so a client that drops
// Authorization on the redirect still gets it.
//
// Only test code imports this package. A Server is safe for concurrent
// use: tests may add commits while requests are being served.
package githubfake

import (
	"archive/tar"
	"compress/gzip"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is a running fake GitHub API.
type Server struct {
	// URL is the API base URL (like https://api.github.com), for
	// source.GitHub.APIBaseURL.
	URL string

	srv   *httptest.Server
	token string

	mu          sync.Mutex
	repos       map[string]*repo
	commitSeq   int
	rateLimited bool
	requests    []string

	checkRunSeq     int
	checkFailures   int
	checkFailStatus int
	checkFailHeader http.Header
	lostCreates     int

	appID         int64
	appKey        *rsa.PublicKey
	installTokens map[string]time.Time // minted installation token → expiry
}

type repo struct {
	pulls         map[int]pullRequest
	defaultBranch string
	commits       map[string]map[string]string // sha → path → content
	branches      map[string]string
	tags          map[string]string
	checkRuns     []*CheckRun
}

// New starts a fake whose requests must carry token. Close it when done.
func New(token string) *Server {
	s := &Server{token: token, repos: map[string]*repo{}, installTokens: map[string]time.Time{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/{owner}/{repo}/commits/{ref...}", s.commit)
	mux.HandleFunc("GET /repos/{owner}/{repo}/contents/{path...}", s.contents)
	mux.HandleFunc("GET /repos/{owner}/{repo}/compare/{basehead}", s.compare)
	mux.HandleFunc("GET /repos/{owner}/{repo}/tarball/{ref...}", s.tarball)
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{number}", s.pull)
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{number}/files", s.pullFiles)
	mux.HandleFunc("POST /repos/{owner}/{repo}/check-runs", s.createCheckRun)
	mux.HandleFunc("PATCH /repos/{owner}/{repo}/check-runs/{id}", s.updateCheckRun)
	mux.HandleFunc("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", s.listCheckRuns)
	mux.HandleFunc("GET /repos/{owner}/{repo}/installation", s.repoInstallation)
	mux.HandleFunc("POST /app/installations/{id}/access_tokens", s.createInstallationToken)
	mux.HandleFunc("GET /_codeload/{owner}/{repo}/legacy.tar.gz/{sha}", s.download)
	s.srv = httptest.NewServer(s.authenticate(mux))
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// AddCommit adds a commit holding files (path → content) to repo
// ("owner/name", created on first use) and returns its sha. It moves no
// branch; see SetBranch.
func (s *Server) AddCommit(repoName string, files map[string]string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(repoName)
	s.commitSeq++
	h := sha1.New()
	fmt.Fprintf(h, "commit %d\x00", s.commitSeq)
	paths := make([]string, 0, len(files))
	tree := make(map[string]string, len(files))
	for p, c := range files {
		paths = append(paths, p)
		tree[p] = c
	}
	slices.Sort(paths)
	for _, p := range paths {
		fmt.Fprintf(h, "%s\x00%s\x00", p, files[p])
	}
	sha := hex.EncodeToString(h.Sum(nil))
	r.commits[sha] = tree
	return sha
}

// SetBranch points branch at sha; the first branch set is the default.
func (s *Server) SetBranch(repoName, branch, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(repoName)
	if r.defaultBranch == "" {
		r.defaultBranch = branch
	}
	r.branches[branch] = sha
}

// SetTag points tag at sha.
func (s *Server) SetTag(repoName, tag, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repo(repoName).tags[tag] = sha
}

// pullRequest is a pull request: its base and head commits, and the
// renames it lists (new path → old path).
type pullRequest struct {
	base, head string
	renames    map[string]string
}

// SetPullRequest makes pull request number of repoName go from commit base
// to commit head. renames (new path → old path, may be nil) are listed as
// "renamed" with their previous_filename instead of an add and a removal.
func (s *Server) SetPullRequest(repoName string, number int, base, head string, renames map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repo(repoName).pulls[number] = pullRequest{base: base, head: head, renames: renames}
}

// SetRateLimited makes every later request fail as GitHub does when the
// rate limit is exhausted (403, X-RateLimit-Remaining: 0), or stops that.
func (s *Server) SetRateLimited(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimited = on
}

// Requests returns the method and path (with query) of every request
// received so far, oldest first.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// repo returns the named repository, creating it; s.mu is held.
func (s *Server) repo(name string) *repo {
	r := s.repos[name]
	if r == nil {
		r = &repo{pulls: map[int]pullRequest{}, commits: map[string]map[string]string{}, branches: map[string]string{}, tags: map[string]string{}}
		s.repos[name] = r
	}
	return r
}

// authenticate records each request and checks its token (the download
// checks its own) and the rate limit.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, req.Method+" "+req.URL.RequestURI())
		limited := s.rateLimited
		s.mu.Unlock()
		w.Header().Set("X-GitHub-Media-Type", "github.v3; format=json")
		if limited {
			w.Header().Set("X-RateLimit-Limit", "5000")
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
			writeMessage(w, http.StatusForbidden, "API rate limit exceeded for installation ID 1.")
			return
		}
		if !strings.HasPrefix(req.URL.Path, "/_codeload/") && !s.authorized(req.Header.Get("Authorization"), req.URL.Path) {
			writeMessage(w, http.StatusUnauthorized, "Bad credentials")
			return
		}
		next.ServeHTTP(w, req)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client going away is not the fake's problem
}

func writeMessage(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest"})
}

// lookup finds the request's repository and resolves ref in it (empty ref:
// the default branch). It writes GitHub's error and returns false if
// either is unknown; unknownRef is the status for an unknown ref.
func (s *Server) lookup(w http.ResponseWriter, req *http.Request, ref string, unknownRef int) (r *repo, sha string, tree map[string]string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r = s.repos[req.PathValue("owner")+"/"+req.PathValue("repo")]
	if r == nil {
		writeMessage(w, http.StatusNotFound, "Not Found")
		return nil, "", nil, false
	}
	if ref == "" {
		ref = r.defaultBranch
	}
	sha = r.resolve(ref)
	if sha == "" {
		if unknownRef == http.StatusUnprocessableEntity {
			writeMessage(w, unknownRef, "No commit found for SHA: "+ref)
		} else {
			writeMessage(w, unknownRef, "No commit found for the ref "+ref)
		}
		return nil, "", nil, false
	}
	return r, sha, r.commits[sha], true
}

// resolve returns the commit ref names: a sha (or a prefix of at least 7),
// heads/B, tags/T, or a bare branch or tag name.
func (r *repo) resolve(ref string) string {
	if ref == "HEAD" {
		ref = r.defaultBranch
	}
	if _, ok := r.commits[ref]; ok {
		return ref
	}
	if b, ok := strings.CutPrefix(ref, "heads/"); ok {
		return r.branches[b]
	}
	if t, ok := strings.CutPrefix(ref, "tags/"); ok {
		return r.tags[t]
	}
	if sha, ok := r.branches[ref]; ok {
		return sha
	}
	if sha, ok := r.tags[ref]; ok {
		return sha
	}
	if len(ref) >= 7 {
		for sha := range r.commits {
			if strings.HasPrefix(sha, ref) {
				return sha
			}
		}
	}
	return ""
}

func (s *Server) apiURL(req *http.Request, p string) string {
	return s.URL + "/repos/" + req.PathValue("owner") + "/" + req.PathValue("repo") + "/" + p
}

func (s *Server) commit(w http.ResponseWriter, req *http.Request) {
	_, sha, _, ok := s.lookup(w, req, req.PathValue("ref"), http.StatusUnprocessableEntity)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"sha":      sha,
		"node_id":  "C_" + sha[:10],
		"url":      s.apiURL(req, "commits/"+sha),
		"html_url": "https://github.com/" + req.PathValue("owner") + "/" + req.PathValue("repo") + "/commit/" + sha,
		"commit":   map[string]any{"message": "fake commit", "tree": map[string]string{"sha": sha}},
	})
}

// blobSHA is git's object name of a blob.
func blobSHA(content string) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00%s", len(content), content)
	return hex.EncodeToString(h.Sum(nil))
}

func (s *Server) contents(w http.ResponseWriter, req *http.Request) {
	_, sha, tree, ok := s.lookup(w, req, req.URL.Query().Get("ref"), http.StatusNotFound)
	if !ok {
		return
	}
	p := strings.Trim(req.PathValue("path"), "/")
	entry := func(typ, p string, size int) map[string]any {
		e := map[string]any{
			"type": typ, "name": path.Base(p), "path": p, "size": size,
			"url": s.apiURL(req, "contents/"+p+"?ref="+sha),
		}
		if typ == "file" {
			e["sha"] = blobSHA(tree[p])
			e["download_url"] = s.URL + "/raw/" + sha + "/" + p
		} else {
			e["sha"] = sha
			e["download_url"] = nil
		}
		return e
	}
	if content, isFile := tree[p]; isFile {
		e := entry("file", p, len(content))
		e["encoding"] = "base64"
		e["content"] = wrap60(base64.StdEncoding.EncodeToString([]byte(content)))
		writeJSON(w, http.StatusOK, e)
		return
	}
	prefix := p + "/"
	if p == "" {
		prefix = ""
	}
	seen := map[string]bool{}
	listing := []map[string]any{}
	for _, fp := range sortedKeys(tree) {
		rest, under := strings.CutPrefix(fp, prefix)
		if !under {
			continue
		}
		name, _, deeper := strings.Cut(rest, "/")
		if seen[name] {
			continue
		}
		seen[name] = true
		if deeper {
			listing = append(listing, entry("dir", prefix+name, 0))
		} else {
			listing = append(listing, entry("file", fp, len(tree[fp])))
		}
	}
	if len(listing) == 0 {
		writeMessage(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, listing)
}

// wrap60 breaks base64 text into lines of 60 characters, as GitHub does.
func wrap60(s string) string {
	var b strings.Builder
	for len(s) > 60 {
		b.WriteString(s[:60] + "\n")
		s = s[60:]
	}
	b.WriteString(s + "\n")
	return b.String()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// treeDiff lists, in path order, what differs from tree from to tree to,
// as entries of the compare and pull request files APIs. renames (new
// path → old path) turn an added new path and a removed old path into one
// "renamed" entry.
func treeDiff(from, to map[string]string, renames map[string]string) []map[string]any {
	files := []map[string]any{}
	all := map[string]string{}
	for p, c := range from {
		all[p] = c
	}
	for p, c := range to {
		all[p] = c
	}
	renamedFrom := map[string]bool{}
	for n, o := range renames {
		if _, ok := to[n]; ok {
			if _, ok := from[o]; ok {
				renamedFrom[o] = true
			}
		}
	}
	for _, p := range sortedKeys(all) {
		old, inFrom := from[p]
		cur, inTo := to[p]
		entry := map[string]any{"filename": p, "sha": blobSHA(cur), "additions": 1, "deletions": 0, "changes": 1}
		switch o, renamed := renames[p]; {
		case renamedFrom[p]:
			continue // listed under its new name
		case renamed && !inFrom && inTo && renamedFrom[o]:
			entry["status"], entry["previous_filename"] = "renamed", o
		case !inFrom:
			entry["status"] = "added"
		case !inTo:
			entry["status"], entry["sha"], entry["additions"], entry["deletions"] = "removed", blobSHA(old), 0, 1
		case old != cur:
			entry["status"] = "modified"
		default:
			continue
		}
		files = append(files, entry)
	}
	return files
}

// pullFileCap is the most files GitHub lists for a pull request.
const pullFileCap = 3000

// lookupPull finds the request's pull request and its two trees, or
// writes GitHub's 404.
func (s *Server) lookupPull(w http.ResponseWriter, req *http.Request) (number int, pr pullRequest, from, to map[string]string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[req.PathValue("owner")+"/"+req.PathValue("repo")]
	number, err := strconv.Atoi(req.PathValue("number"))
	if r != nil && err == nil {
		pr, ok = r.pulls[number]
	}
	if !ok {
		writeMessage(w, http.StatusNotFound, "Not Found")
		return 0, pullRequest{}, nil, nil, false
	}
	return number, pr, r.commits[pr.base], r.commits[pr.head], true
}

func (s *Server) pull(w http.ResponseWriter, req *http.Request) {
	number, pr, from, to, ok := s.lookupPull(w, req)
	if !ok {
		return
	}
	files := treeDiff(from, to, pr.renames)
	writeJSON(w, http.StatusOK, map[string]any{
		"url":    s.apiURL(req, "pulls/"+strconv.Itoa(number)),
		"number": number, "state": "open", "title": "fake pull request",
		"head":    map[string]any{"ref": "feature", "sha": pr.head},
		"base":    map[string]any{"ref": "main", "sha": pr.base},
		"commits": 1, "additions": len(files), "deletions": 0, "changed_files": len(files),
	})
}

// pullFiles serves one page of a pull request's files, as GitHub does:
// per_page defaults to 30 and is at most 100, pages count from 1, a Link
// header names the next and last pages, and nothing past the 3000th file
// is listed.
func (s *Server) pullFiles(w http.ResponseWriter, req *http.Request) {
	number, pr, from, to, ok := s.lookupPull(w, req)
	if !ok {
		return
	}
	perPage, page := 30, 1
	if v, err := strconv.Atoi(req.URL.Query().Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	if v, err := strconv.Atoi(req.URL.Query().Get("page")); err == nil && v > 0 {
		page = v
	}
	files := treeDiff(from, to, pr.renames)
	if len(files) > pullFileCap {
		files = files[:pullFileCap]
	}
	start := min((page-1)*perPage, len(files))
	end := min(start+perPage, len(files))
	last := max((len(files)+perPage-1)/perPage, 1)
	link := func(p int, rel string) string {
		return fmt.Sprintf(`<%s?per_page=%d&page=%d>; rel="%s"`, s.apiURL(req, "pulls/"+strconv.Itoa(number)+"/files"), perPage, p, rel)
	}
	var links []string
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"), link(page-1, "prev"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	writeJSON(w, http.StatusOK, files[start:end])
}

// compareFileCap is the most files GitHub's compare lists.
const compareFileCap = 300

func (s *Server) compare(w http.ResponseWriter, req *http.Request) {
	base, head, ok := strings.Cut(req.PathValue("basehead"), "...")
	if !ok {
		writeMessage(w, http.StatusNotFound, "Not Found")
		return
	}
	_, _, from, ok := s.lookup(w, req, base, http.StatusNotFound)
	if !ok {
		return
	}
	_, _, to, ok := s.lookup(w, req, head, http.StatusNotFound)
	if !ok {
		return
	}
	files := treeDiff(from, to, nil)
	if len(files) > compareFileCap {
		files = files[:compareFileCap]
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"status": "ahead", "ahead_by": 1, "behind_by": 0, "total_commits": 1,
		"commits": []any{}, "files": files,
	})
}

// downloadToken is the query token of a commit's download URL.
func (s *Server) downloadToken(sha string) string {
	h := sha256.Sum256([]byte(s.token + "\x00" + sha))
	return hex.EncodeToString(h[:8])
}

func (s *Server) tarball(w http.ResponseWriter, req *http.Request) {
	_, sha, _, ok := s.lookup(w, req, req.PathValue("ref"), http.StatusNotFound)
	if !ok {
		return
	}
	loc := s.URL + "/_codeload/" + req.PathValue("owner") + "/" + req.PathValue("repo") + "/legacy.tar.gz/" + sha +
		"?token=" + s.downloadToken(sha)
	http.Redirect(w, req, loc, http.StatusFound)
}

func (s *Server) download(w http.ResponseWriter, req *http.Request) {
	sha := req.PathValue("sha")
	if req.URL.Query().Get("token") != s.downloadToken(sha) {
		http.Error(w, "404: Not Found", http.StatusNotFound)
		return
	}
	_, sha, tree, ok := s.lookup(w, req, sha, http.StatusNotFound)
	if !ok {
		return
	}
	top := req.PathValue("owner") + "-" + req.PathValue("repo") + "-" + sha[:7] + "/"
	w.Header().Set("Content-Type", "application/x-gzip")
	gw := gzip.NewWriter(w)
	tw := tar.NewWriter(gw)
	mod := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	headers := []*tar.Header{
		{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": sha}},
		{Typeflag: tar.TypeDir, Name: top, Mode: 0o775, ModTime: mod},
	}
	var dirs []string
	for _, p := range sortedKeys(tree) {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs = append(dirs, d)
		}
	}
	slices.Sort(dirs)
	for _, d := range slices.Compact(dirs) {
		headers = append(headers, &tar.Header{Typeflag: tar.TypeDir, Name: top + d + "/", Mode: 0o775, ModTime: mod})
	}
	for _, h := range headers {
		if err := tw.WriteHeader(h); err != nil {
			return
		}
	}
	for _, p := range sortedKeys(tree) {
		c := tree[p]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: top + p, Mode: 0o664, Size: int64(len(c)), ModTime: mod}); err != nil {
			return
		}
		if _, err := tw.Write([]byte(c)); err != nil {
			return
		}
	}
	_ = tw.Close() // a failed write means the client left
	_ = gw.Close()
}
