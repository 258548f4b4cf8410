package admincli

import "testing"

func TestScalerRetry(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "scaler-retry", args: []string{"scaler", "retry", "docker"}, code: 0},
		{name: "scaler-retry-json", args: []string{"scaler", "retry", "docker", "-o", "json"}, code: 0},
		{name: "scaler-retry-unknown", args: []string{"scaler", "retry", "nope"}, code: 1},
		{name: "scaler-retry-no-name", args: []string{"scaler", "retry"}, code: 2},
		{name: "scaler-retry-not-configured", args: []string{"scaler", "retry", "docker"}, env: map[string]string{envURL: "{url}" + fakeNoScaler}, code: 1},
	})
}
