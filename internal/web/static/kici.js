// kici dashboard: live updates of the run page. Everything from the server
// goes into the page as text (textContent), never as markup.
"use strict";
(function () {
  const run = document.getElementById("run");
  if (!run || run.dataset.ended === "true" || !window.EventSource) return;
  const id = run.dataset.run;
  const es = new EventSource("/runs/" + encodeURIComponent(id) + "/events");
  es.addEventListener("open", () => { run.dataset.live = "open"; });
  es.addEventListener("error", () => { run.dataset.live = "closed"; });
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
    summary.textContent = step === -2 ? "provisioning" : step === -1 ? "setup" : "step " + (step + 1);
    ol = document.createElement("ol");
    ol.className = "log";
    ol.dataset.job = job;
    ol.dataset.step = String(step);
    details.append(summary, ol);
    section.append(details);
    return ol;
  };
  const count = {};
  // Live lines arrive as plain text; a moment later they are read again
  // from the server, escaped and coloured, and swapped in where the text
  // is the same line (so a numbering that went astray changes nothing).
  const pending = {};
  const recolour = async (job) => {
    const nums = pending[job];
    delete pending[job];
    if (!nums || !nums.length) return;
    const from = nums[0], count = Math.min(nums[nums.length - 1] - from + 1, 2000);
    const resp = await fetch("/runs/" + encodeURIComponent(id) + "/jobs/" + encodeURIComponent(job) +
      "/lines?from=" + from + "&count=" + count, { credentials: "same-origin" });
    if (!resp.ok) return;
    for (const l of (await resp.json()).lines || []) {
      const li = document.getElementById(job + "-L" + l.n);
      const span = li && li.querySelector(".t");
      if (!span || li.closest("ol.window")) continue;
      const probe = document.createElement("span");
      probe.innerHTML = l.html; // the server's escaped-then-coloured line
      if (probe.textContent === span.textContent) span.replaceChildren(...probe.childNodes);
    }
  };
  const strip = (s) => s.replace(/\x1b\[[0-9;?]*[ -\/]*[@-~]/g, "").replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)?/g, "");
  es.addEventListener("log", (e) => {
    const ev = JSON.parse(e.data);
    for (const l of ev.lines || []) {
      const ol = logOf(ev.job, l.step);
      if (!ol) continue;
      const n = (count[ev.job] = (count[ev.job] || document.querySelectorAll('ol.log:not(.window)[data-job="' + CSS.escape(ev.job) + '"] li').length) + 1);
      const li = document.createElement("li");
      li.id = ev.job + "-L" + n;
      const a = document.createElement("a");
      a.className = "ln";
      a.href = "#" + li.id;
      a.setAttribute("aria-label", "line " + n);
      a.dataset.n = String(n);
      const t = document.createElement("time");
      t.textContent = (l.ts || "").slice(11, 23);
      const span = document.createElement("span");
      span.className = "t";
      span.textContent = strip(l.text);
      li.append(a, t, span);
      ol.append(li);
      if (!pending[ev.job]) {
        pending[ev.job] = [];
        setTimeout(() => recolour(ev.job), 500);
      }
      pending[ev.job].push(n);
    }
  });
  // The server dropped events for this viewer: what the page shows may
  // miss some, so read it all again.
  es.addEventListener("lagged", () => { es.close(); location.reload(); });
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

// Long logs: a line link (#<job>-L<n>) or a search match beyond the lines
// the page holds loads a window of lines around it from the server, into
// the job's window list. Search covers the whole stored log on the server.
(function () {
  const run = document.getElementById("run");
  if (!run) return;
  const runID = run.dataset.run;
  const lineRe = /^#(.+)-L(\d+)$/;

  const renderWindow = (job, lines) => {
    const ol = document.querySelector('ol.log.window[data-job="' + CSS.escape(job) + '"]');
    if (!ol) return;
    ol.replaceChildren();
    for (const l of lines) {
      const li = document.createElement("li");
      li.id = job + "-L" + l.n;
      const a = document.createElement("a");
      a.className = "ln";
      a.href = "#" + li.id;
      a.setAttribute("aria-label", "line " + l.n);
      a.dataset.n = String(l.n);
      const t = document.createElement("time");
      t.textContent = (l.ts || "").slice(11, 23);
      const span = document.createElement("span");
      span.className = "t";
      // l.html is the server's escaped-then-coloured rendering (only
      // <span class="a-..."> markup, see internal/web/ansi).
      span.innerHTML = l.html;
      li.append(a, t, span);
      ol.append(li);
    }
    ol.hidden = false;
  };

  // show makes line n of job visible (loading it when the page lacks it),
  // opens its step, scrolls to it and marks it.
  const show = async (job, n) => {
    let li = document.getElementById(job + "-L" + n);
    if (!li) {
      const from = Math.max(1, n - 100);
      const resp = await fetch("/runs/" + encodeURIComponent(runID) + "/jobs/" + encodeURIComponent(job) +
        "/lines?from=" + from + "&count=200", { credentials: "same-origin" });
      if (!resp.ok) return;
      renderWindow(job, (await resp.json()).lines || []);
      li = document.getElementById(job + "-L" + n);
      if (!li) return;
    }
    const details = li.closest("details");
    if (details) details.open = true;
    document.querySelectorAll("li.hl").forEach((e) => e.classList.remove("hl"));
    li.classList.add("hl");
    li.scrollIntoView({ block: "center" });
  };

  const fromHash = () => {
    const m = lineRe.exec(decodeURIComponent(location.hash));
    if (m) show(m[1], parseInt(m[2], 10));
  };
  window.addEventListener("hashchange", fromHash);
  fromHash();

  for (const form of document.querySelectorAll("form.logsearch")) {
    const job = form.dataset.job;
    const prev = form.querySelector(".prev"), next = form.querySelector(".next"), found = form.querySelector(".found");
    let matches = [], at = -1;
    const go = (i) => {
      if (!matches.length) return;
      at = (i + matches.length) % matches.length;
      found.textContent = (at + 1) + " of " + matches.length;
      show(job, matches[at]);
    };
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const q = form.elements.q.value;
      if (!q) return;
      const resp = await fetch(form.action + "?q=" + encodeURIComponent(q), { credentials: "same-origin" });
      if (!resp.ok) { found.textContent = "search failed"; return; }
      const res = await resp.json();
      matches = res.matches || [];
      prev.disabled = next.disabled = matches.length < 2;
      if (!matches.length) { found.textContent = "no match"; return; }
      if (res.truncated) found.title = "only the first " + matches.length + " matches";
      go(0);
    });
    prev.addEventListener("click", () => go(at - 1));
    next.addEventListener("click", () => go(at + 1));
  }
})();

// The run page's toolbar: timestamps on and off (remembered), and a jump
// to the first failed step.
(function () {
  const ts = document.getElementById("toggle-ts");
  if (ts) {
    const apply = (on) => {
      document.body.classList.toggle("no-ts", !on);
      ts.setAttribute("aria-pressed", String(on));
    };
    apply(localStorage.getItem("kici-ts") !== "off");
    ts.addEventListener("click", () => {
      const on = document.body.classList.contains("no-ts");
      localStorage.setItem("kici-ts", on ? "on" : "off");
      apply(on);
    });
  }
  const ff = document.getElementById("first-failure");
  if (ff) {
    ff.addEventListener("click", () => {
      const step = document.querySelector("details.step .s-failure");
      if (!step) { ff.textContent = "No failure"; return; }
      const details = step.closest("details");
      details.open = true;
      details.scrollIntoView({ block: "start" });
      const summary = details.querySelector("summary");
      if (summary) summary.focus();
    });
  }
})();

// The runs page follows the runs: its table is read again every 5 s while
// the tab is visible.
(function () {
  const table = document.getElementById("runs");
  if (!table) return;
  setInterval(async () => {
    if (document.hidden) return;
    const resp = await fetch(location.href, { credentials: "same-origin" });
    if (!resp.ok) return;
    const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
    const fresh = doc.querySelector("#runs tbody");
    if (fresh) table.querySelector("tbody").replaceWith(document.importNode(fresh, true));
  }, 5000);
})();
