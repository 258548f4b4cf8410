package admincli

import "testing"

func TestScalerReload(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "scaler-reload", args: []string{"scaler", "reload"}, code: 0},
		{name: "scaler-reload-json", args: []string{"scaler", "reload", "-o", "json"}, code: 0},
		{name: "scaler-reload-nothing", args: []string{"scaler", "reload"}, empty: true, code: 0},
		{name: "scaler-reload-rejected", args: []string{"scaler", "reload"}, env: map[string]string{envURL: "{url}" + fakeFailing}, code: 1},
		{name: "scaler-reload-rejected-json", args: []string{"scaler", "reload", "-o", "json"}, env: map[string]string{envURL: "{url}" + fakeFailing}, code: 1},
		{name: "scaler-reload-not-configured", args: []string{"scaler", "reload"}, env: map[string]string{envURL: "{url}" + fakeNoScaler}, code: 1},
	})
}
