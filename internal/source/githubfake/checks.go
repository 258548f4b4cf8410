package githubfake

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// CheckRun is a check run as the fake holds it; see [Server.CheckRuns].
type CheckRun struct {
	ID         int64
	Name       string
	HeadSHA    string
	ExternalID string
	DetailsURL string
	Status     string
	Conclusion string
	Title      string
	Summary    string
	// History lists the states the check run was given, oldest first:
	// "queued", "in_progress", or "completed/CONCLUSION".
	History []string
}

// checkRunInput is the body of POST and PATCH …/check-runs, as GitHub
// documents it (the fields kici sends).
type checkRunInput struct {
	Name        *string `json:"name"`
	HeadSHA     *string `json:"head_sha"`
	DetailsURL  *string `json:"details_url"`
	ExternalID  *string `json:"external_id"`
	Status      *string `json:"status"`
	Conclusion  *string `json:"conclusion"`
	StartedAt   *string `json:"started_at"`
	CompletedAt *string `json:"completed_at"`
	Output      *struct {
		Title   string `json:"title"`
		Summary string `json:"summary"`
		Text    string `json:"text"`
	} `json:"output"`
}

var (
	headSHARE        = regexp.MustCompile(`^[0-9a-f]{40}$`)
	checkStatuses    = []string{"queued", "in_progress", "completed"}
	checkConclusions = []string{"action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out"}
)

// AddRepo creates repo ("owner/name") if it is not known yet, so that its
// check runs can be written without any commit added. The check-runs
// endpoints answer 404 for a repository the fake does not know; they take
// any 40-hex head_sha, not only the commits added with AddCommit.
func (s *Server) AddRepo(repoName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repo(repoName)
}

// FailCheckRuns makes the next n requests to the check-runs endpoints
// answer status (e.g. 502) with header set on the answer (e.g.
// Retry-After), as GitHub or a proxy in front of it does when it fails.
func (s *Server) FailCheckRuns(n, status int, header http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkFailures, s.checkFailStatus, s.checkFailHeader = n, status, header.Clone()
}

// LoseCreateAnswers makes the next n check run creations take effect and
// then answer 502, as when a proxy loses GitHub's answer: the client
// cannot know that the check run exists.
func (s *Server) LoseCreateAnswers(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lostCreates = n
}

// CheckRuns returns a copy of repo's check runs, by id.
func (s *Server) CheckRuns(repoName string) []CheckRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoName]
	if r == nil {
		return nil
	}
	out := make([]CheckRun, 0, len(r.checkRuns))
	for _, c := range r.checkRuns {
		cp := *c
		cp.History = slices.Clone(c.History)
		out = append(out, cp)
	}
	return out
}

// checkFault answers the request with the configured failure if one is
// left, and reports whether it did.
func (s *Server) checkFault(w http.ResponseWriter) bool {
	s.mu.Lock()
	if s.checkFailures <= 0 {
		s.mu.Unlock()
		return false
	}
	s.checkFailures--
	status, header := s.checkFailStatus, s.checkFailHeader
	s.mu.Unlock()
	for k, v := range header {
		w.Header()[k] = v
	}
	if status >= 500 {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		_, _ = w.Write([]byte("<html><body><h1>" + strconv.Itoa(status) + " " + http.StatusText(status) + "</h1></body></html>\n"))
		return true
	}
	writeMessage(w, status, http.StatusText(status))
	return true
}

// checkRepo returns the request's repository, or writes 404.
func (s *Server) checkRepo(w http.ResponseWriter, req *http.Request) *repo {
	r := s.repos[req.PathValue("owner")+"/"+req.PathValue("repo")]
	if r == nil {
		writeMessage(w, http.StatusNotFound, "Not Found")
	}
	return r
}

// apply checks in as GitHub does and applies it to c; it writes 422 and
// returns false when in is invalid.
func (in *checkRunInput) apply(w http.ResponseWriter, c *CheckRun) bool {
	if in.Name != nil {
		c.Name = *in.Name
	}
	if in.HeadSHA != nil {
		c.HeadSHA = *in.HeadSHA
	}
	if in.DetailsURL != nil {
		c.DetailsURL = *in.DetailsURL
	}
	if in.ExternalID != nil {
		c.ExternalID = *in.ExternalID
	}
	if in.Output != nil {
		c.Title, c.Summary = in.Output.Title, in.Output.Summary
		if in.Output.Title == "" || in.Output.Summary == "" {
			writeMessage(w, http.StatusUnprocessableEntity, "Invalid request.\n\n\"title\", \"summary\" weren't supplied.")
			return false
		}
		if len(in.Output.Summary) > 65535 || len(in.Output.Text) > 65535 {
			writeMessage(w, http.StatusUnprocessableEntity, "Invalid request.\n\nOnly 65535 characters are allowed; 65536 were supplied.")
			return false
		}
	}
	status := c.Status
	if in.Status != nil {
		status = *in.Status
		if status != "completed" {
			c.Conclusion = "" // a check run taken back to queued or in_progress loses its conclusion
		}
	}
	if in.Conclusion != nil {
		if !slices.Contains(checkConclusions, *in.Conclusion) {
			writeMessage(w, http.StatusUnprocessableEntity, "Invalid request.\n\n"+strconv.Quote(*in.Conclusion)+" is not a member of the conclusion enum.")
			return false
		}
		c.Conclusion, status = *in.Conclusion, "completed"
	}
	if !slices.Contains(checkStatuses, status) {
		writeMessage(w, http.StatusUnprocessableEntity, "Invalid request.\n\n"+strconv.Quote(status)+" is not a member of the status enum.")
		return false
	}
	if status == "completed" && c.Conclusion == "" {
		writeMessage(w, http.StatusUnprocessableEntity, "Invalid request.\n\nNo subschema in \"anyOf\" matched. \"conclusion\" wasn't supplied.")
		return false
	}
	c.Status = status
	state := status
	if status == "completed" {
		state += "/" + c.Conclusion
	}
	if len(c.History) == 0 || c.History[len(c.History)-1] != state {
		c.History = append(c.History, state)
	}
	return true
}

func (s *Server) createCheckRun(w http.ResponseWriter, req *http.Request) {
	if s.checkFault(w) {
		return
	}
	var in checkRunInput
	if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<20)).Decode(&in); err != nil {
		writeMessage(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if in.Name == nil || *in.Name == "" || in.HeadSHA == nil {
		writeMessage(w, http.StatusUnprocessableEntity, "Invalid request.\n\n\"name\", \"head_sha\" weren't supplied.")
		return
	}
	if !headSHARE.MatchString(*in.HeadSHA) {
		writeMessage(w, http.StatusUnprocessableEntity, "No commit found for SHA: "+*in.HeadSHA)
		return
	}
	s.mu.Lock()
	r := s.checkRepo(w, req)
	if r == nil {
		s.mu.Unlock()
		return
	}
	c := &CheckRun{Status: "queued"}
	if in.Status == nil && in.Conclusion == nil {
		in.Status = new("queued")
	}
	if !in.apply(w, c) {
		s.mu.Unlock()
		return
	}
	s.checkRunSeq++
	c.ID = int64(s.checkRunSeq)
	r.checkRuns = append(r.checkRuns, c)
	lost := s.lostCreates > 0
	if lost {
		s.lostCreates--
	}
	body := s.checkRunJSON(req, c)
	s.mu.Unlock()
	if lost {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("<html><body><h1>502 Bad Gateway</h1></body></html>\n"))
		return
	}
	writeJSON(w, http.StatusCreated, body)
}

func (s *Server) updateCheckRun(w http.ResponseWriter, req *http.Request) {
	if s.checkFault(w) {
		return
	}
	var in checkRunInput
	if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<20)).Decode(&in); err != nil {
		writeMessage(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	id, _ := strconv.ParseInt(req.PathValue("id"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.checkRepo(w, req)
	if r == nil {
		return
	}
	i := slices.IndexFunc(r.checkRuns, func(c *CheckRun) bool { return c.ID == id })
	if i < 0 {
		writeMessage(w, http.StatusNotFound, "Not Found")
		return
	}
	in.HeadSHA = nil // not writable
	c := *r.checkRuns[i]
	c.History = slices.Clone(c.History)
	if !in.apply(w, &c) {
		return
	}
	*r.checkRuns[i] = c
	writeJSON(w, http.StatusOK, s.checkRunJSON(req, &c))
}

// listCheckRuns serves GET …/commits/{ref}/check-runs with check_name,
// status, filter (latest: the newest check run of each name; all) and
// per_page/page.
func (s *Server) listCheckRuns(w http.ResponseWriter, req *http.Request) {
	if s.checkFault(w) {
		return
	}
	q := req.URL.Query()
	perPage, _ := strconv.Atoi(q.Get("per_page"))
	if perPage <= 0 || perPage > 100 {
		perPage = 30
	}
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.checkRepo(w, req)
	if r == nil {
		return
	}
	sha := r.resolve(req.PathValue("ref"))
	if sha == "" {
		sha = req.PathValue("ref")
	}
	var match []*CheckRun
	for i := len(r.checkRuns) - 1; i >= 0; i-- { // newest first
		c := r.checkRuns[i]
		if c.HeadSHA != sha || (q.Get("check_name") != "" && c.Name != q.Get("check_name")) ||
			(q.Get("status") != "" && c.Status != q.Get("status")) {
			continue
		}
		if q.Get("filter") != "all" && slices.ContainsFunc(match, func(m *CheckRun) bool { return m.Name == c.Name }) {
			continue
		}
		match = append(match, c)
	}
	out := []map[string]any{}
	for i := (page - 1) * perPage; i < len(match) && i < page*perPage; i++ {
		out = append(out, s.checkRunJSON(req, match[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(match), "check_runs": out})
}

// checkRunJSON is c as GitHub answers it; s.mu is held.
func (s *Server) checkRunJSON(req *http.Request, c *CheckRun) map[string]any {
	var conclusion, completedAt any
	if c.Conclusion != "" {
		conclusion = c.Conclusion
		completedAt = time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC).Format(time.RFC3339)
	}
	id := strconv.FormatInt(c.ID, 10)
	return map[string]any{
		"id": c.ID, "node_id": "CR_" + id, "name": c.Name, "head_sha": c.HeadSHA,
		"external_id": c.ExternalID, "details_url": c.DetailsURL,
		"url":      s.apiURL(req, "check-runs/"+id),
		"html_url": "https://github.com/" + req.PathValue("owner") + "/" + req.PathValue("repo") + "/runs/" + id,
		"status":   c.Status, "conclusion": conclusion,
		"started_at":   time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339),
		"completed_at": completedAt,
		"output": map[string]any{
			"title": c.Title, "summary": c.Summary, "text": nil,
			"annotations_count": 0, "annotations_url": s.apiURL(req, "check-runs/"+id+"/annotations"),
		},
		"check_suite":   map[string]any{"id": 1},
		"app":           map[string]any{"id": 1, "slug": "kici", "name": "kici"},
		"pull_requests": []any{},
	}
}
