package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/apiv1"
)

// TestQueuePages reads a queue of 25 jobs in pages: each page holds at
// most limit entries oldest first, next_cursor leads to the next one and is
// absent on the last, and together they are the whole queue. A cursor or a
// limit the server did not hand out is a 400 naming it.
func TestQueuePages(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		var wf strings.Builder
		wf.WriteString("name: many\non: {push: {}}\njobs:\n")
		for i := range 25 {
			fmt.Fprintf(&wf, "  j%02d:\n    runs-on: [nowhere]\n    steps: [{run: x}]\n", i)
		}
		dir, _ := gitRepo(t, map[string]string{".kici/workflows/many.yml": wf.String()})
		h.addSource(t, "pages", dir, "")
		h.trigger(t, "pages")

		var whole apiv1.Queue
		h.mustAdmin(t, http.MethodGet, "/api/v1/queue?limit=1000", nil, http.StatusOK, &whole)
		if len(whole.Jobs) != 25 || whole.NextCursor != "" {
			t.Fatalf("limit 1000: got %d entries, next_cursor %q; want 25 and none", len(whole.Jobs), whole.NextCursor)
		}
		for i, e := range whole.Jobs {
			if e.Status != "queued" || e.Job == "" {
				t.Errorf("entry %d: got status %q, job %q; want queued and the job's name", i, e.Status, e.Job)
			}
			if i > 0 && e.Enqueued.Before(whole.Jobs[i-1].Enqueued) {
				t.Errorf("entry %d enqueued before entry %d: want oldest first", i, i-1)
			}
		}
		var def apiv1.Queue
		h.mustAdmin(t, http.MethodGet, "/api/v1/queue", nil, http.StatusOK, &def)
		if len(def.Jobs) != 25 {
			t.Errorf("default limit: got %d entries, want all 25 (the default page is 100)", len(def.Jobs))
		}

		var got []apiv1.QueueEntry
		var sizes []int
		cursor := ""
		for range 10 {
			var page apiv1.Queue
			h.mustAdmin(t, http.MethodGet, "/api/v1/queue?limit=10&cursor="+url.QueryEscape(cursor), nil, http.StatusOK, &page)
			got = append(got, page.Jobs...)
			sizes = append(sizes, len(page.Jobs))
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		if diff := cmp.Diff([]int{10, 10, 5}, sizes); diff != "" {
			t.Errorf("page sizes (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(whole.Jobs, got); diff != "" {
			t.Errorf("pages differ from the whole queue (-want +got):\n%s", diff)
		}

		for _, tt := range []struct {
			name, query, want string
		}{
			{name: "garbage cursor", query: "cursor=garbage!", want: `cursor "garbage!": not a next_cursor of this listing`},
			{name: "cursor of no number", query: "cursor=" + "eC95", want: `cursor "eC95": not a next_cursor`},
			{name: "huge cursor", query: "cursor=" + strings.Repeat("A", 5000), want: `cursor "` + strings.Repeat("A", 64) + `…": not a next_cursor`},
			{name: "limit zero", query: "limit=0", want: `limit "0": want 1 to 1000`},
			{name: "limit over the maximum", query: "limit=1001", want: `limit "1001": want 1 to 1000`},
			{name: "limit not a number", query: "limit=ten", want: `limit "ten": want 1 to 1000`},
		} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				resp := h.admin(t, http.MethodGet, "/api/v1/queue?"+tt.query, nil)
				if resp.status != http.StatusBadRequest {
					t.Fatalf("got status %d (%s), want 400", resp.status, resp.body)
				}
				if e := resp.apiError(t); !strings.Contains(e.Error, tt.want) {
					t.Errorf("got error %q, want it to contain %q", e.Error, tt.want)
				}
			})
		}
	})
}
