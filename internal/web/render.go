package web

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"time"

	"github.com/kici-dev/kici/internal/web/ansi"
)

// pageNames are the page templates; each is parsed with layout.html.
var pageNames = []string{"login", "runs", "run", "queue", "agents", "scalers", "sources", "peers", "audit", "secrets", "error"}

func (h *Handler) parse() error {
	funcs := template.FuncMap{
		"since": func(t time.Time) string { return since(h.cfg.Now(), t) },
		"sinceP": func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return since(h.cfg.Now(), *t)
		},
		"duration": duration,
		"bytes":    bundleSize,
		"join":     join,
		"short":    shortID,
		"list":     func(items ...string) []string { return items },
		"ts":       func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
		"iso":      func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"deref": func(p *int) int {
			if p == nil {
				return 0
			}
			return *p
		},
	}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return err
		}
		h.pages[name] = t
	}
	return nil
}

// ansiHTML converts one line of job output to safe HTML: escaped first,
// then coloured.
func ansiHTML(s string) template.HTML {
	return template.HTML(ansi.Line(s)) // #nosec: ansi.Line escapes every character of s
}

// stream writes a page in two parts: its top (head and menu) at once,
// then, once rest has gathered the data, its content and bottom. The
// browser starts on the stylesheet and script while the data is read. A
// failure of rest after the top went out is shown in the page (the status
// is already 200).
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, name string, s *sessionInfo, data map[string]any, rest func() (map[string]any, error)) {
	data["Session"] = s
	data["Path"] = r.URL.Path
	t := h.pages[name]
	var top bytes.Buffer
	if err := t.ExecuteTemplate(&top, "top", data); err != nil {
		h.cfg.Log.Error("render dashboard page", "page", name, "error", err)
		http.Error(w, "the page could not be rendered; see the orchestrator log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(top.Bytes())
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	more, err := rest()
	var body bytes.Buffer
	if err == nil {
		for k, v := range more {
			data[k] = v
		}
		err = t.ExecuteTemplate(&body, "content", data)
	}
	if err != nil {
		h.cfg.Log.Error("dashboard page failed", "page", name, "path", r.URL.Path, "error", err)
		body.Reset()
		body.WriteString(`<p class="error" role="alert">`)
		template.HTMLEscape(&body, []byte("This page could not be completed: "+err.Error()))
		body.WriteString(`</p>`)
	}
	_, _ = w.Write(body.Bytes())
	_ = t.ExecuteTemplate(w, "bottom", data)
}

// render writes a page: rendered to a buffer first, so that a template
// error is a clean 500, not half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, s *sessionInfo, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	data["Session"] = s
	data["Path"] = r.URL.Path
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout.html", data); err != nil {
		h.cfg.Log.Error("render dashboard page", "page", name, "error", err)
		http.Error(w, "the page could not be rendered; see the orchestrator log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// shortID is the end of an id: kici's ids are time-ordered, so their
// starts are alike for runs made close together, their ends are not.
func shortID(id string) string {
	if len(id) <= 8 {
		return id
	}
	return id[len(id)-8:]
}

// bundleSize writes a byte count for people: 1.5 MiB, 640 B.
func bundleSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
