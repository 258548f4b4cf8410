package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/orchestrator"
	"github.com/kici-dev/kici/internal/trigger"
)

// webhookSecret is the secret of the test sources that accept webhooks.
const webhookSecret = "s3cret"

// testdataSHA is the "after" commit of testdata/github/push.json, replaced
// by the test repository's commit.
const testdataSHA = "2f9d5a0e1c3b4d5e6f708192a3b4c5d6e7f80912"

// readTestdata reads a file under testdata/.
func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// githubPush returns a GitHub push delivery of refs/heads/main whose
// "after" is sha.
func githubPush(t *testing.T, sha string) []byte {
	t.Helper()
	body := readTestdata(t, "github/push.json")
	if !bytes.Contains(body, []byte(testdataSHA)) {
		t.Fatalf("testdata/github/push.json does not hold %s", testdataSHA)
	}
	return bytes.ReplaceAll(body, []byte(testdataSHA), []byte(sha))
}

// genericPush returns a generic push payload of refs/heads/main at sha.
func genericPush(sha string) []byte {
	return fmt.Appendf(nil, `{"ref": "refs/heads/main", "after": %q, "repository": "octo-org/hello", "actor": "mona"}`, sha)
}

// delivery is one webhook request.
type delivery struct {
	route     string // "github" or "generic"
	source    string
	event     string // X-GitHub-Event; github only
	id        string // X-GitHub-Delivery or X-Kici-Delivery; "" for none
	signature string // X-Hub-Signature-256; "" for none
	body      []byte
}

func (d delivery) request() (path string, header http.Header) {
	header = http.Header{"Content-Type": {"application/json"}}
	switch d.route {
	case "github":
		header.Set("User-Agent", "GitHub-Hookshot/test")
		if d.event != "" {
			header.Set("X-GitHub-Event", d.event)
		}
		if d.id != "" {
			header.Set("X-GitHub-Delivery", d.id)
		}
	default:
		if d.id != "" {
			header.Set("X-Kici-Delivery", d.id)
		}
	}
	if d.signature != "" {
		header.Set("X-Hub-Signature-256", d.signature)
	}
	return "/webhooks/" + d.route + "/" + d.source, header
}

// deliver posts a webhook delivery.
func (h *harness) deliver(t *testing.T, d delivery) response {
	t.Helper()
	path, header := d.request()
	return h.do(t, http.MethodPost, path, header, d.body)
}

func TestWebhookVerdicts(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		push := githubPush(t, sha)
		generic := genericPush(sha)
		tests := []struct {
			name string
			// source is the name the delivery goes to; empty means a fresh
			// source of the test's own, with webhookSecret unless noSecret.
			source   string
			noSecret bool
			d        delivery // source is filled in
			// signWith signs the body with this secret, unless d.signature
			// is set.
			signWith   string
			wantStatus int
			// wantError is a part of the error answer's message; empty
			// means a 200 answer, with wantRuns runs or ignored.
			wantError   string
			wantRuns    int
			wantIgnored bool
		}{
			{
				name:       "github push starts a run",
				d:          delivery{route: "github", event: "push", id: "d-1", body: push},
				signWith:   webhookSecret,
				wantStatus: http.StatusOK,
				wantRuns:   1,
			},
			{
				name:       "github push without delivery id starts a run",
				d:          delivery{route: "github", event: "push", body: push},
				signWith:   webhookSecret,
				wantStatus: http.StatusOK,
				wantRuns:   1,
			},
			{
				name:       "generic push starts a run",
				d:          delivery{route: "generic", id: "g-1", body: generic},
				signWith:   webhookSecret,
				wantStatus: http.StatusOK,
				wantRuns:   1,
			},
			{
				name:       "signed with another secret",
				d:          delivery{route: "github", event: "push", id: "d-2", body: push},
				signWith:   "not-the-secret",
				wantStatus: http.StatusUnauthorized,
				wantError:  "signature missing or invalid",
			},
			{
				name:       "signature of another body",
				d:          delivery{route: "github", event: "push", id: "d-3", body: push, signature: sign(webhookSecret, []byte("{}"))},
				wantStatus: http.StatusUnauthorized,
				wantError:  "signature missing or invalid",
			},
			{
				name:       "missing signature",
				d:          delivery{route: "github", event: "push", id: "d-4", body: push},
				wantStatus: http.StatusUnauthorized,
				wantError:  "signature missing or invalid",
			},
			{
				name:       "malformed signature",
				d:          delivery{route: "github", event: "push", id: "d-5", body: push, signature: "sha256=zz"},
				wantStatus: http.StatusUnauthorized,
				wantError:  "signature missing or invalid",
			},
			{
				name:       "sha1 signature only",
				d:          delivery{route: "github", event: "push", id: "d-6", body: push, signature: "sha1=" + strings.Repeat("0", 40)},
				wantStatus: http.StatusUnauthorized,
				wantError:  "signature missing or invalid",
			},
			{
				name:       "generic with a bad signature",
				d:          delivery{route: "generic", id: "g-2", body: generic},
				signWith:   "not-the-secret",
				wantStatus: http.StatusUnauthorized,
				wantError:  "signature missing or invalid",
			},
			{
				name:       "source without a webhook secret",
				noSecret:   true,
				d:          delivery{route: "github", event: "push", id: "d-7", body: push},
				signWith:   webhookSecret,
				wantStatus: http.StatusInternalServerError,
				wantError:  "has no webhook secret configured",
			},
			{
				name:       "generic to a source without a webhook secret",
				noSecret:   true,
				d:          delivery{route: "generic", id: "g-3", body: generic},
				signWith:   webhookSecret,
				wantStatus: http.StatusInternalServerError,
				wantError:  "has no webhook secret configured",
			},
			{
				name:       "unknown source",
				source:     "no-such-source",
				d:          delivery{route: "github", event: "push", id: "d-8", body: push},
				signWith:   webhookSecret,
				wantStatus: http.StatusNotFound,
				wantError:  `source "no-such-source": not found`,
			},
			{
				name:       "generic to an unknown source",
				source:     "no-such-source",
				d:          delivery{route: "generic", id: "g-4", body: generic},
				signWith:   webhookSecret,
				wantStatus: http.StatusNotFound,
				wantError:  `source "no-such-source": not found`,
			},
			{
				name:       "unparseable json",
				d:          delivery{route: "github", event: "push", id: "d-9", body: []byte(`{"ref": "refs/heads/main", "after": `)},
				signWith:   webhookSecret,
				wantStatus: http.StatusBadRequest,
				wantError:  "invalid payload: github push delivery: decode body: unexpected end of JSON input",
			},
			{
				name:       "generic unparseable json",
				d:          delivery{route: "generic", id: "g-5", body: []byte(`not json`)},
				signWith:   webhookSecret,
				wantStatus: http.StatusBadRequest,
				wantError:  "invalid payload: generic push payload: decode body: invalid character",
			},
			{
				name:       "push without after",
				d:          delivery{route: "github", event: "push", id: "d-10", body: []byte(`{"ref": "refs/heads/main"}`)},
				signWith:   webhookSecret,
				wantStatus: http.StatusBadRequest,
				wantError:  `invalid payload: github push delivery: missing "after"`,
			},
			{
				name:       "missing event header",
				d:          delivery{route: "github", id: "d-11", body: push},
				signWith:   webhookSecret,
				wantStatus: http.StatusBadRequest,
				wantError:  "X-GitHub-Event",
			},
			{
				name:        "ping",
				d:           delivery{route: "github", event: "ping", id: "d-12", body: readTestdata(t, "github/ping.json")},
				signWith:    webhookSecret,
				wantStatus:  http.StatusOK,
				wantIgnored: true,
			},
			{
				name:        "event kici does not act on",
				d:           delivery{route: "github", event: "issues", id: "d-13", body: []byte(`{"action": "opened"}`)},
				signWith:    webhookSecret,
				wantStatus:  http.StatusOK,
				wantIgnored: true,
			},
			{
				name:        "deleted branch",
				d:           delivery{route: "generic", id: "g-6", body: []byte(`{"ref": "refs/heads/gone", "after": "0000000000000000000000000000000000000000"}`)},
				signWith:    webhookSecret,
				wantStatus:  http.StatusOK,
				wantIgnored: true,
			},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				d := tt.d
				d.source = tt.source
				if d.source == "" {
					d.source = fmt.Sprintf("wh-%d", i)
					secret := webhookSecret
					if tt.noSecret {
						secret = ""
					}
					h.addSource(t, d.source, dir, secret)
				}
				if d.signature == "" && tt.signWith != "" {
					d.signature = sign(tt.signWith, d.body)
				}
				resp := h.deliver(t, d)
				if resp.status != tt.wantStatus {
					t.Fatalf("got status %d (%s), want %d", resp.status, resp.body, tt.wantStatus)
				}
				if tt.wantError != "" {
					if got := resp.apiError(t).Error; !strings.Contains(got, tt.wantError) {
						t.Errorf("got error %q, want it to contain %q", got, tt.wantError)
					}
				}
				var answer struct {
					apiv1.TriggerResponse
					Ignored bool   `json:"ignored"`
					Reason  string `json:"reason"`
				}
				if tt.wantStatus == http.StatusOK {
					resp.decode(t, &answer)
					if answer.Ignored != tt.wantIgnored {
						t.Errorf("got ignored %v, want %v (answer %s)", answer.Ignored, tt.wantIgnored, resp.body)
					}
					if tt.wantIgnored && answer.Reason == "" {
						t.Errorf("got no reason for an ignored delivery, want one")
					}
					if got := len(answer.Runs); got != tt.wantRuns {
						t.Errorf("got %d runs in the answer, want %d", got, tt.wantRuns)
					}
				}
				if tt.source != "" {
					return // no source of its own whose runs to count
				}
				runs := h.runs(t, d.source)
				if len(runs) != tt.wantRuns {
					t.Fatalf("got %d stored runs, want %d", len(runs), tt.wantRuns)
				}
				for j, run := range runs {
					got := []string{run.ID, run.Source, run.Workflow, run.Ref, run.SHA}
					want := []string{answer.Runs[j].ID, d.source, "ci", "refs/heads/main", sha}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("stored run (id, source, workflow, ref, sha) mismatch (-want +got):\n%s", diff)
					}
				}
			})
		}
	})
}

func TestWebhookDuplicateDelivery(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		tests := []struct {
			name string
			d    delivery
		}{
			{name: "github", d: delivery{route: "github", event: "push", id: "72d3162e-cc78-11e3-81ab-4c9367dc0958", body: githubPush(t, sha)}},
			{name: "generic", d: delivery{route: "generic", id: "push-1", body: genericPush(sha)}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				d := tt.d
				d.source = "dup-" + tt.name
				d.signature = sign(webhookSecret, d.body)
				h.addSource(t, d.source, dir, webhookSecret)

				var first apiv1.TriggerResponse
				resp := h.deliver(t, d)
				if resp.status != http.StatusOK {
					t.Fatalf("first delivery: got status %d (%s), want 200", resp.status, resp.body)
				}
				resp.decode(t, &first)
				if len(first.Runs) != 1 {
					t.Fatalf("first delivery: got %d runs, want 1", len(first.Runs))
				}

				var second struct {
					Duplicate bool           `json:"duplicate"`
					Runs      []apiv1.RunRef `json:"runs"`
				}
				resp = h.deliver(t, d)
				if resp.status != http.StatusOK {
					t.Fatalf("second delivery: got status %d (%s), want 200", resp.status, resp.body)
				}
				resp.decode(t, &second)
				if !second.Duplicate || len(second.Runs) != 0 {
					t.Errorf("second delivery: got %s, want duplicate and no runs", resp.body)
				}

				var ids []string
				for _, r := range h.runs(t, d.source) {
					ids = append(ids, r.ID)
				}
				if diff := cmp.Diff([]string{first.Runs[0].ID}, ids); diff != "" {
					t.Errorf("stored runs mismatch (-want +got):\n%s", diff)
				}

				// The same delivery id on another source is another delivery.
				other := d
				other.source = d.source + "-other"
				h.addSource(t, other.source, dir, webhookSecret)
				if resp := h.deliver(t, other); resp.status != http.StatusOK || len(h.runs(t, other.source)) != 1 {
					t.Errorf("same id on another source: got status %d (%s), want 200 and one run", resp.status, resp.body)
				}
			})
		}
	})
}

// TestWebhookConcurrentDuplicates sends one delivery several times at once,
// as a provider retrying on a slow answer does: exactly one starts a run.
func TestWebhookConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		h.addSource(t, "conc", dir, webhookSecret)
		body := githubPush(t, sha)
		path, header := delivery{route: "github", source: "conc", event: "push", id: "same-id", signature: sign(webhookSecret, body)}.request()

		const n = 6
		var wg sync.WaitGroup
		answers := make([]response, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { answers[i], errs[i] = h.send(t.Context(), http.MethodPost, path, header, body) })
		}
		wg.Wait()
		processed, duplicates := 0, 0
		for i, resp := range answers {
			if errs[i] != nil {
				t.Fatalf("delivery %d: %v", i, errs[i])
			}
			if resp.status != http.StatusOK {
				t.Fatalf("delivery %d: got status %d (%s), want 200", i, resp.status, resp.body)
			}
			var a struct {
				Duplicate bool           `json:"duplicate"`
				Runs      []apiv1.RunRef `json:"runs"`
			}
			resp.decode(t, &a)
			switch {
			case a.Duplicate:
				duplicates++
			case len(a.Runs) == 1:
				processed++
			default:
				t.Errorf("delivery %d: got %s, want one run or duplicate", i, resp.body)
			}
		}
		if got, want := [2]int{processed, duplicates}, [2]int{1, n - 1}; got != want {
			t.Errorf("got %d processed and %d duplicates, want %d and %d", got[0], got[1], want[0], want[1])
		}
		if got := len(h.runs(t, "conc")); got != 1 {
			t.Errorf("got %d stored runs, want 1", got)
		}
	})
}

// TestWebhookSecretRotation: while a secret is being rotated the source has
// both, newest first, and a delivery signed with either is accepted, be it
// stored sealed (as the API stores it) or in plaintext.
func TestWebhookSecretRotation(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		const name, oldSecret, newSecret = "rotating", "old-secret", "new-secret"
		h.addSource(t, name, dir, oldSecret)
		db := h.openStore(t)
		src, err := db.GetSource(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		// The API stored the secret sealed, never as given.
		if len(src.WebhookSecrets) != 1 || strings.Contains(src.WebhookSecrets[0], oldSecret) || !strings.HasPrefix(src.WebhookSecrets[0], "kici-sealed:") {
			t.Fatalf("stored webhook secrets %q: want one sealed value without the plaintext", src.WebhookSecrets)
		}
		// An operator's tool (or an older kici) may still store plaintext
		// values; they are accepted next to sealed ones.
		src.WebhookSecrets = []string{newSecret, src.WebhookSecrets[0]}
		if err := db.UpdateSource(t.Context(), src); err != nil {
			t.Fatal(err)
		}

		body := githubPush(t, sha)
		tests := []struct {
			name       string
			secret     string
			wantStatus int
		}{
			{name: "older secret", secret: oldSecret, wantStatus: http.StatusOK},
			{name: "newer secret", secret: newSecret, wantStatus: http.StatusOK},
			{name: "neither", secret: "retired-secret", wantStatus: http.StatusUnauthorized},
		}
		for i, tt := range tests {
			resp := h.deliver(t, delivery{route: "github", source: name, event: "push", id: fmt.Sprintf("rot-%d", i), body: body, signature: sign(tt.secret, body)})
			if resp.status != tt.wantStatus {
				t.Errorf("%s: got status %d (%s), want %d", tt.name, resp.status, resp.body, tt.wantStatus)
			}
		}
		if got := len(h.runs(t, name)); got != 2 {
			t.Errorf("got %d stored runs, want 2", got)
		}
	})
}

// TestWebhookBodyTooLarge: a body over the limit (GitHub's own 25 MiB) is
// refused before anything else is looked at.
func TestWebhookBodyTooLarge(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, _ := ciRepo(t)
		h.addSource(t, "big", dir, webhookSecret)
		body := bytes.Repeat([]byte(" "), trigger.MaxBodySize+1)
		for _, route := range []string{"github", "generic"} {
			// Unsigned: the size is checked before anything else.
			resp := h.deliver(t, delivery{route: route, source: "big", event: "push", id: "big-" + route, body: body})
			if resp.status != http.StatusRequestEntityTooLarge {
				t.Fatalf("%s: got status %d (%s), want 413", route, resp.status, resp.body)
			}
			if got, want := resp.apiError(t).Error, fmt.Sprintf("webhook body over %d bytes", trigger.MaxBodySize); got != want {
				t.Errorf("%s: got error %q, want %q", route, got, want)
			}
		}
		if got := len(h.runs(t, "big")); got != 0 {
			t.Errorf("got %d stored runs, want 0", got)
		}
	})
}

// TestWebhookGitHubFormEncoded: a GitHub webhook set to the content type
// application/x-www-form-urlencoded sends the JSON as the form field
// "payload", and signs the form body as sent.
func TestWebhookGitHubFormEncoded(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		h.addSource(t, "form", dir, webhookSecret)
		tests := []struct {
			name       string
			body       string
			wantStatus int
			wantError  string
			wantRuns   int
		}{
			{name: "push", body: url.Values{"payload": {string(githubPush(t, sha))}}.Encode(), wantStatus: http.StatusOK, wantRuns: 1},
			{name: "no payload field", body: url.Values{"other": {"x"}}.Encode(), wantStatus: http.StatusBadRequest, wantError: `form field "payload"`},
			{name: "bad form encoding", body: "payload=%zz", wantStatus: http.StatusBadRequest, wantError: "invalid payload"},
		}
		for i, tt := range tests {
			path, header := delivery{route: "github", source: "form", event: "push", id: fmt.Sprintf("form-%d", i),
				signature: sign(webhookSecret, []byte(tt.body))}.request()
			header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp := h.do(t, http.MethodPost, path, header, []byte(tt.body))
			if resp.status != tt.wantStatus {
				t.Errorf("%s: got status %d (%s), want %d", tt.name, resp.status, resp.body, tt.wantStatus)
				continue
			}
			if tt.wantError != "" {
				if got := resp.apiError(t).Error; !strings.Contains(got, tt.wantError) {
					t.Errorf("%s: got error %q, want it to contain %q", tt.name, got, tt.wantError)
				}
				continue
			}
			var out apiv1.TriggerResponse
			resp.decode(t, &out)
			if len(out.Runs) != tt.wantRuns {
				t.Errorf("%s: got %d runs, want %d", tt.name, len(out.Runs), tt.wantRuns)
			}
		}
		if got := len(h.runs(t, "form")); got != 1 {
			t.Errorf("got %d stored runs, want 1", got)
		}
	})
}

// TestWebhookGitHubEveryKind: /webhooks/github/{source} takes GitHub
// deliveries for a source of any kind, not only a github one: a local
// source and a git source (here over file://, which the setting allows)
// start the run of the push.
func TestWebhookGitHubEveryKind(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, func(c *orchestrator.Config) { c.AllowFileGitURLs = true }, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		tests := []struct {
			name string
			src  apiv1.Source
		}{
			{name: "local", src: apiv1.Source{Kind: "local", Path: dir}},
			{name: "git", src: apiv1.Source{Kind: "git", URL: "file://" + dir}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				src := tt.src
				src.Name, src.WebhookSecret = "kind-"+tt.name, webhookSecret
				h.mustAdmin(t, http.MethodPost, "/api/v1/sources", src, http.StatusCreated, nil)
				body := githubPush(t, sha)
				resp := h.deliver(t, delivery{route: "github", source: src.Name, event: "push", id: "kind-" + tt.name, body: body, signature: sign(webhookSecret, body)})
				if resp.status != http.StatusOK {
					t.Fatalf("got status %d (%s), want 200", resp.status, resp.body)
				}
				var out apiv1.TriggerResponse
				resp.decode(t, &out)
				runs := h.runs(t, src.Name)
				if len(out.Runs) != 1 || len(runs) != 1 {
					t.Fatalf("got %d runs in the answer and %d stored, want 1 and 1", len(out.Runs), len(runs))
				}
				if got := []string{runs[0].ID, runs[0].Ref, runs[0].SHA}; !cmp.Equal(got, []string{out.Runs[0].ID, "refs/heads/main", sha}) {
					t.Errorf("stored run (id, ref, sha): got %q, want [%s refs/heads/main %s]", got, out.Runs[0].ID, sha)
				}
			})
		}
	})
}
