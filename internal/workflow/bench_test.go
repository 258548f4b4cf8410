package workflow

import (
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// fiftyJobs is a workflow of 50 jobs in a chain of fan-outs, each with
// env, a few steps and interpolations: a large real-world workflow.
func fiftyJobs() []byte {
	var b strings.Builder
	b.WriteString("name: big\non:\n  push: {branches: [main], paths: [\"src/**\", \"!docs/**\"]}\n  pull_request: {branches: [main]}\nenv: {A: a, B: \"${{ env.A }}-b\"}\njobs:\n")
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, "  job%d:\n    runs-on: [linux]\n    timeout: 10m\n", i)
		if i > 0 {
			fmt.Fprintf(&b, "    needs: [job%d]\n", (i-1)/2)
		}
		fmt.Fprintf(&b, "    if: event.branch == 'main%d' || success()\n    env: {N: \"%d\"}\n    steps:\n", i, i)
		for s := 0; s < 4; s++ {
			fmt.Fprintf(&b, "      - name: step %d\n        run: echo ${{ env.B }} ${{ event.sha }} %d\n        timeout: 1m\n", s, s)
		}
	}
	return []byte(b.String())
}

func BenchmarkCompile50Jobs(b *testing.B) {
	files := []File{{Path: ".kici/workflows/big.yml", Data: fiftyJobs()}}
	if _, err := Compile(files); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(files); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkYAMLParseOnly50Jobs measures the YAML library alone on the same
// file: the floor under BenchmarkCompile50Jobs.
func BenchmarkYAMLParseOnly50Jobs(b *testing.B) {
	data := fiftyJobs()
	b.ReportAllocs()
	for b.Loop() {
		var n yaml.Node
		if err := yaml.Unmarshal(data, &n); err != nil {
			b.Fatal(err)
		}
	}
}
