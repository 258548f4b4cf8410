package admincli

import "testing"

func TestDiagnose(t *testing.T) {
	t.Parallel()
	failing := map[string]string{envURL: "{url}" + fakeFailing}
	runGolden(t, []goldenCase{
		{name: "diagnose", args: []string{"diagnose"}, code: 0},
		{name: "diagnose-json", args: []string{"diagnose", "-o", "json"}, code: 0},
		{name: "diagnose-failing", args: []string{"diagnose"}, env: failing, code: 1},
		{name: "diagnose-failing-json", args: []string{"diagnose", "-o", "json"}, env: failing, code: 1},
		{name: "diagnose-extra-arg", args: []string{"diagnose", "now"}, code: 2},
		{name: "diagnose-wrong-token", args: []string{"diagnose"}, env: map[string]string{envToken: "nope"}, code: 1},
	})
}
