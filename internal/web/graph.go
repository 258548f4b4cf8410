package web

import (
	"fmt"
	"html"
	"html/template"
	"slices"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
)

// Geometry of the job graph, in SVG user units.
const (
	nodeW, nodeH = 180, 44
	colGap       = 60
	rowGap       = 16
	maxGraphJobs = 500 // past this many jobs the graph is left out
)

// jobGraph draws a run's jobs as an inline SVG: one column per layer (a
// job's layer is the length of the longest chain of needs above it), an
// edge from each need to its job, each box coloured by its status and
// labelled with its name and duration. Every text is escaped; the SVG has
// no script and no style attribute (classes only, for the CSP).
func jobGraph(jobs []apiv1.Job) template.HTML {
	if len(jobs) == 0 || len(jobs) > maxGraphJobs {
		return ""
	}
	byName := map[string]int{}
	for i, j := range jobs {
		byName[j.Name] = i
	}
	layer := make([]int, len(jobs))
	for i := range layer {
		layer[i] = -1
	}
	var depth func(i int, seen []bool) int
	depth = func(i int, seen []bool) int {
		if layer[i] >= 0 {
			return layer[i]
		}
		if seen[i] { // a cycle cannot be planned, but never loop on one
			return 0
		}
		seen[i] = true
		d := 0
		for _, n := range jobs[i].Needs {
			if k, ok := byName[n]; ok {
				d = max(d, depth(k, seen)+1)
			}
		}
		layer[i] = d
		return d
	}
	for i := range jobs {
		depth(i, make([]bool, len(jobs)))
	}
	rows := map[int]int{} // jobs placed in each layer so far
	x, y := make([]int, len(jobs)), make([]int, len(jobs))
	width, height := 0, 0
	for i := range jobs {
		x[i] = layer[i] * (nodeW + colGap)
		y[i] = rows[layer[i]] * (nodeH + rowGap)
		rows[layer[i]]++
		width, height = max(width, x[i]+nodeW), max(height, y[i]+nodeH)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="graph" role="img" aria-label="job graph" viewBox="-2 -2 %d %d" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">`,
		width+4, height+4, width+4, height+4)
	for i, j := range jobs {
		for _, n := range j.Needs {
			k, ok := byName[n]
			if !ok {
				continue
			}
			x1, y1 := x[k]+nodeW, y[k]+nodeH/2
			x2, y2 := x[i], y[i]+nodeH/2
			mid := (x1 + x2) / 2
			fmt.Fprintf(&b, `<path class="edge" d="M%d %d C%d %d %d %d %d %d"/>`, x1, y1, mid, y1, mid, y2, x2, y2)
		}
	}
	for i, j := range jobs {
		status := statusClass(j.Status)
		fmt.Fprintf(&b, `<a href="#job-%s"><g class="node s-%s"><title>%s: %s</title>`, html.EscapeString(j.Name), status,
			html.EscapeString(j.Name), html.EscapeString(j.Status))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" rx="6"/>`, x[i], y[i], nodeW, nodeH)
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="name">%s</text>`, x[i]+10, y[i]+18, html.EscapeString(clipText(j.Name, 22)))
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="sub">%s %s</text>`, x[i]+10, y[i]+35, html.EscapeString(j.Status),
			html.EscapeString(duration(j.StartedAt, j.FinishedAt)))
		b.WriteString(`</g></a>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec: every text above is escaped
}

// statusClass keeps a status to the characters a class name may hold.
func statusClass(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r == '_' {
			return r
		}
		return -1
	}, s)
}

// clipText cuts s to n runes, marking the cut.
func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(slices.Clip(r[:n-1])) + "…"
}
