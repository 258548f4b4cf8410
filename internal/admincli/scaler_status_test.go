package admincli

import "testing"

func TestScalerStatus(t *testing.T) {
	t.Parallel()
	noScaler := map[string]string{envURL: "{url}" + fakeNoScaler}
	runGolden(t, []goldenCase{
		{name: "scaler-status", args: []string{"scaler", "status"}, code: 0},
		{name: "scaler-status-json", args: []string{"scaler", "status", "-o", "json"}, code: 0},
		{name: "scaler-status-no-scalers", args: []string{"scaler", "status"}, empty: true, code: 0},
		{name: "scaler-status-not-configured", args: []string{"scaler", "status"}, env: noScaler, code: 0},
		{name: "scaler-status-not-configured-json", args: []string{"scalers", "status", "-o", "json"}, env: noScaler, code: 0},
		{name: "scaler-status-extra-arg", args: []string{"scaler", "status", "docker"}, code: 2},
		{name: "scaler-status-wrong-token", args: []string{"scaler", "status"}, env: map[string]string{envToken: "nope"}, code: 1},
	})
}
