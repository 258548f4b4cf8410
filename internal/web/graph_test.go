package web

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// TestJobGraphLayersAndEscapes: jobs are placed in columns by the longest
// chain of needs above them, each need is an edge, and a job name full of
// markup stays text: the SVG is well-formed XML with one rect per job.
func TestJobGraphLayersAndEscapes(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(90 * time.Second)
	evil := `<script>alert(1)</script>"'&`
	jobs := []apiv1.Job{
		{Name: "build", Status: "success", StartedAt: &start, FinishedAt: &end},
		{Name: "test", Status: "failure", Needs: []string{"build"}},
		{Name: evil, Status: "skipped", Needs: []string{"test", "build", "no-such-job"}},
	}
	svg := string(jobGraph(jobs))
	if strings.Contains(svg, "<script") || !strings.Contains(svg, "&lt;script&gt;") {
		t.Fatalf("a job name's markup is not escaped:\n%s", svg)
	}
	dec := xml.NewDecoder(strings.NewReader(svg))
	var xs []string // the x of each job's rect, in order
	paths, texts := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the graph is not well-formed XML: %v\n%s", err, svg)
		}
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch el.Name.Local {
		case "rect":
			for _, a := range el.Attr {
				if a.Name.Local == "x" {
					xs = append(xs, a.Value)
				}
			}
		case "path":
			paths++
		case "text":
			texts++
		}
		for _, a := range el.Attr {
			if a.Name.Local == "style" || strings.HasPrefix(a.Name.Local, "on") {
				t.Errorf("element %s has attribute %s", el.Name.Local, a.Name.Local)
			}
		}
	}
	if len(xs) != 3 || xs[0] != "0" || xs[1] != "240" || xs[2] != "480" {
		t.Errorf("rect x positions %v, want the three jobs in columns 0, 240, 480", xs)
	}
	if paths != 3 {
		t.Errorf("%d edges, want 3 (the unknown need drawn as none)", paths)
	}
	if texts != 6 || !strings.Contains(svg, "1m30s") {
		t.Errorf("%d texts (want 6), duration shown: %t", texts, strings.Contains(svg, "1m30s"))
	}
	if jobGraph(nil) != "" {
		t.Error("a run without jobs has a graph")
	}
	// Needs that loop (not plannable, but never trusted) do not hang.
	loop := []apiv1.Job{{Name: "a", Needs: []string{"b"}}, {Name: "b", Needs: []string{"a"}}}
	if g := jobGraph(loop); !strings.HasPrefix(string(g), "<svg") {
		t.Errorf("looping needs: %q", g)
	}
}

func TestBundleSize(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"}, {5 << 20, "5.0 MiB"}, {3 << 30, "3.0 GiB"}} {
		if got := bundleSize(c.n); got != c.want {
			t.Errorf("bundleSize(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
