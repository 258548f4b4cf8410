package admincli

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/apiv1"
)

func TestSchedulesList(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "schedules-list", args: []string{"schedules", "list"}, code: 0},
		{name: "schedules-list-source", args: []string{"schedules", "list", "--source", "hello"}, code: 0},
		{name: "schedules-list-source-problem-only", args: []string{"schedules", "list", "--source", "mirror"}, code: 0},
		{name: "schedules-list-json", args: []string{"schedules", "list", "-o", "json"}, code: 0},
		{name: "schedules-list-empty", args: []string{"schedules", "list"}, empty: true, code: 0},
		{name: "schedules-list-empty-json", args: []string{"schedules", "list", "-o", "json"}, empty: true, code: 0},
		{name: "schedules-list-unknown-source", args: []string{"schedules", "list", "--source", "nope"}, code: 0},
		{name: "schedules-list-unavailable", args: []string{"schedules", "list", "--source", "down"}, code: 1},
		{name: "schedules-list-auditor", args: []string{"schedules", "list", "--source", "hello"}, env: map[string]string{envToken: fakeAuditorToken}, code: 0},
		{name: "schedules-list-args", args: []string{"schedules", "list", "hello"}, code: 2},
		{name: "schedules-list-bad-output", args: []string{"schedules", "list", "-o", "yaml"}, code: 2},
		{name: "schedules", args: []string{"schedules"}, code: 0},
	})
}

// TestSchedulesListJSONIsTheAnswer: -o json writes the list as the API
// gave it, nothing dropped or added.
func TestSchedulesListJSONIsTheAnswer(t *testing.T) {
	t.Parallel()
	fake := newFakeAPI(t, false)
	stdout, stderr, code := runCLI(t.Context(), []string{"schedules", "list", "-o", "json"}, map[string]string{envURL: fake.URL(), envToken: fakeToken})
	if code != 0 {
		t.Fatalf("exit status: got %d, want 0 (stderr %q)", code, stderr)
	}
	var got apiv1.ScheduleList
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("decode stdout %q: %v", stdout, err)
	}
	if diff := cmp.Diff(fakeScheduleList, got); diff != "" {
		t.Errorf("JSON differs from the API's answer (-want +got):\n%s", diff)
	}

}
