// kici dashboard: live updates of the run page. Everything from the server
// goes into the page as text (textContent), never as markup.
"use strict";
(function () {
  const run = document.getElementById("run");
  if (!run || run.dataset.ended === "true" || !window.EventSource) return;
  const id = run.dataset.run;
  const es = new EventSource("/runs/" + encodeURIComponent(id) + "/events");
  const setStatus = (el, status) => {
    if (!el || !status) return;
    el.textContent = status;
    el.className = "status s-" + status.replace(/[^a-z_]/g, "");
  };
  const logOf = (job, step) => {
    let ol = document.querySelector('ol.log[data-job="' + CSS.escape(job) + '"][data-step="' + CSS.escape(String(step)) + '"]');
    if (ol) return ol;
    const section = document.querySelector('section.job[data-job="' + CSS.escape(job) + '"]');
    if (!section) return null;
    const details = document.createElement("details");
    details.className = "step";
    details.open = true;
    details.dataset.step = String(step);
    const summary = document.createElement("summary");
    summary.textContent = step === -2 ? "provisioning" : "step " + (step + 1);
    ol = document.createElement("ol");
    ol.className = "log";
    ol.dataset.job = job;
    ol.dataset.step = String(step);
    details.append(summary, ol);
    section.append(details);
    return ol;
  };
  const count = {};
  const strip = (s) => s.replace(/\x1b\[[0-9;?]*[ -\/]*[@-~]/g, "").replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)?/g, "");
  es.addEventListener("log", (e) => {
    const ev = JSON.parse(e.data);
    for (const l of ev.lines || []) {
      const ol = logOf(ev.job, l.step);
      if (!ol) continue;
      const n = (count[ev.job] = (count[ev.job] || document.querySelectorAll('ol.log[data-job="' + CSS.escape(ev.job) + '"] li').length) + 1);
      const li = document.createElement("li");
      li.id = ev.job + "-L" + n;
      const a = document.createElement("a");
      a.className = "ln";
      a.href = "#" + li.id;
      a.setAttribute("aria-label", "line " + n);
      const t = document.createElement("time");
      t.textContent = (l.ts || "").slice(11, 23);
      const span = document.createElement("span");
      span.className = "t";
      span.textContent = strip(l.text);
      li.append(a, t, span);
      ol.append(li);
    }
  });
  es.addEventListener("job", (e) => {
    const ev = JSON.parse(e.data);
    setStatus(document.querySelector('[data-job-status="' + CSS.escape(ev.job) + '"]'), ev.status);
  });
  es.addEventListener("run", (e) => {
    const ev = JSON.parse(e.data);
    setStatus(document.getElementById("run-status"), ev.status);
    if (["success", "failure", "cancelled"].includes(ev.status)) {
      const form = document.querySelector("form.actions");
      if (form) form.remove();
      es.close();
    }
  });
})();
