// kici dashboard: live updates of the run page. Everything from the server
// goes into the page as text (textContent), never as markup.
"use strict";

// The run page's logs. Each job's log is numbered through all its steps;
// a step is a <details> section. A section of many lines (or one the page
// could not hold) becomes a window: a scroll box as tall as all its lines
// that holds in the DOM only the lines in view, fetched from the server a
// chunk at a time. Live lines come over the run's event stream, which
// starts exactly where the page's lines end (from=) and resumes from the
// last frame's id after a drop, so no line is lost or shown twice.
(function () {
  const run = document.getElementById("run");
  if (!run) return;
  const runID = run.dataset.run;
  const jobsURL = "/runs/" + encodeURIComponent(runID) + "/jobs/";
  const WINDOW_AT = 1000; // a section of more lines scrolls in a window
  const CHUNK = 500; // lines per fetch
  const MAX_CHUNKS = 40; // chunks a job keeps
  const MAX_LIVE = 5000; // live lines a job keeps as text until fetched
  const OVERSCAN = 60; // lines drawn above and below the view
  // get fetches a same-origin URL; a request the network lost (a dropped
  // connection, the browser aborting it) answers null instead of
  // throwing, so that each caller can try again later.
  const get = async (url) => {
    try {
      const resp = await fetch(url, { credentials: "same-origin" });
      return resp;
    } catch (e) {
      return null;
    }
  };
  const strip = (s) => s.replace(/\x1b\[[0-9;?]*[ -\/]*[@-~]/g, "").replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)?/g, "");

  let lineHeight = 0;
  const lh = () => {
    if (!lineHeight) {
      const box = document.createElement("div");
      box.className = "vlog";
      const ol = document.createElement("ol");
      ol.className = "log";
      const li = document.createElement("li");
      li.textContent = "x";
      ol.append(li);
      box.append(ol);
      document.body.append(box);
      lineHeight = li.getBoundingClientRect().height || 20;
      box.remove();
    }
    return lineHeight;
  };

  // lineEl makes a line's <li>: l.html is the server's escaped-then-
  // coloured rendering (only <span class="a-..."> markup, see
  // internal/web/ansi); l.text, a live line's text, goes in as text.
  const lineEl = (job, n, l) => {
    const li = document.createElement("li");
    li.id = job.name + "-L" + n;
    const a = document.createElement("a");
    a.className = "ln";
    a.href = "#" + li.id;
    a.setAttribute("aria-label", "line " + n);
    a.dataset.n = String(n);
    const t = document.createElement("time");
    const span = document.createElement("span");
    span.className = "t";
    if (l) {
      t.textContent = (l.ts || "").slice(11, 23);
      if (l.html !== undefined) span.innerHTML = l.html;
      else span.textContent = l.text;
    } else {
      li.classList.add("loading");
    }
    li.append(a, t, span);
    if (job.marked(n)) li.classList.add("hl");
    return li;
  };

  class Section {
    constructor(job, details) {
      this.job = job;
      this.details = details;
      this.step = parseInt(details.dataset.step, 10);
      this.from = parseInt(details.dataset.from, 10) || 1;
      this.count = parseInt(details.dataset.count, 10) || 0;
      this.ol = details.querySelector("ol.log");
      this.box = null;
      this.queued = false;
      details.addEventListener("toggle", () => this.draw());
    }
    has(n) { return n >= this.from && n < this.from + this.count; }
    // windowed turns the section into a scroll box of all its lines.
    windowed() {
      if (this.box) return;
      this.box = document.createElement("div");
      this.box.className = "vlog";
      this.box.tabIndex = 0;
      const title = this.details.querySelector("summary").cloneNode(true);
      title.querySelectorAll(".status, .count").forEach((e) => e.remove());
      this.box.setAttribute("aria-label", "lines of " + title.textContent.trim());
      this.spacer = document.createElement("div");
      this.spacer.className = "vspace";
      this.ol.replaceWith(this.box);
      this.ol.replaceChildren();
      this.ol.classList.add("vwin");
      this.box.append(this.spacer, this.ol);
      this.box.addEventListener("scroll", () => this.draw());
      this.resize();
    }
    resize() {
      if (this.box) this.spacer.style.height = this.count * lh() + "px";
      const c = this.details.querySelector("summary .count");
      if (c) c.textContent = this.count + (this.count === 1 ? " line" : " lines");
    }
    // draw redraws the window's lines in view, at most once a frame.
    draw() {
      if (!this.box || this.queued) return;
      this.queued = true;
      requestAnimationFrame(() => { this.queued = false; this.drawNow(); });
    }
    drawNow() {
      if (!this.box || !this.details.open) return;
      const h = lh(), top = this.box.scrollTop, height = this.box.clientHeight || 400;
      const first = Math.max(0, Math.floor(top / h) - OVERSCAN);
      const last = Math.min(this.count, Math.ceil((top + height) / h) + OVERSCAN);
      const els = [];
      for (let i = first; i < last; i++) {
        const n = this.from + i;
        els.push(lineEl(this.job, n, this.job.line(n)));
      }
      this.ol.style.top = first * h + "px";
      this.ol.replaceChildren(...els);
      this.job.fetchFor(this.from + first, this.from + last - 1).then((got) => { if (got) this.draw(); });
    }
    // append adds a live line (resize follows, once for a batch).
    append(n, l) {
      if (this.count === 0) this.from = n;
      this.count++;
      if (this.box) {
        this.job.keepLive(n, l);
      } else {
        this.ol.append(lineEl(this.job, n, l));
        if (this.count > WINDOW_AT) this.windowed();
      }
    }
    // reveal opens the section and brings line n into view.
    async reveal(n) {
      this.details.open = true;
      if (this.box) {
        this.box.scrollTop = (n - this.from) * lh() - this.box.clientHeight / 2;
        await this.job.fetchFor(n, n);
        this.drawNow();
      }
      const li = document.getElementById(this.job.name + "-L" + n);
      if (li) li.scrollIntoView({ block: "center" });
      return li;
    }
    // tail keeps the newest line in view (follow mode).
    tail() {
      this.details.open = true;
      if (this.box) {
        this.box.scrollTop = this.box.scrollHeight;
        this.drawNow();
        this.box.scrollIntoView({ block: "end" });
      } else if (this.ol.lastElementChild) {
        this.ol.lastElementChild.scrollIntoView({ block: "end" });
      }
    }
  }

  class Job {
    constructor(el) {
      this.el = el;
      this.name = el.dataset.job;
      this.idx = el.dataset.idx;
      this.total = parseInt(el.dataset.total, 10) || 0;
      this.pos = el.dataset.pos || "";
      this.sections = [...el.querySelectorAll("details.step")].map((d) => new Section(this, d));
      this.chunks = new Map(); // first line of a chunk → {lines, at}
      this.inflight = new Map();
      this.live = new Map(); // line number → {ts, text}
      this.pending = []; // live lines to recolour
      this.hl = null; // [first, last] marked lines
      if (el.dataset.truncated === "true") {
        this.ready = this.outline();
      } else {
        for (const s of this.sections) if (s.count > WINDOW_AT) s.windowed();
        this.ready = Promise.resolve();
      }
    }
    // outline reads the job's sections from the server; every section the
    // page does not hold whole becomes a window.
    async outline() {
      let resp = null;
      for (let wait = 250; ; wait *= 2) {
        resp = await get(jobsURL + encodeURIComponent(this.name) + "/outline");
        if (resp || wait > 8000) break;
        await new Promise((r) => setTimeout(r, wait));
      }
      if (!resp || !resp.ok) throw new Error("outline of " + this.name + ": " + (resp ? resp.status : "no answer"));
      const o = await resp.json(); // a cut answer rejects ready, as a refusal does
      const spans = o.sections || [];
      for (const sec of this.sections) {
        if (!spans.some((sp) => sp.step === sec.step)) { sec.from = o.total + 1; sec.count = 0; }
      }
      for (const sp of spans) {
        let sec = this.sections.find((s) => s.step === sp.step);
        if (!sec) sec = this.newSection(sp.step);
        const held = sec.ol.children.length;
        sec.from = sp.from;
        sec.count = sp.count;
        if (held < sp.count || sp.count > WINDOW_AT) sec.windowed();
        sec.resize();
        sec.draw();
      }
      this.total = o.total;
      this.pos = o.pos;
      const note = this.el.querySelector(".truncated");
      if (note) note.hidden = true;
    }
    newSection(step) {
      const details = document.createElement("details");
      details.className = "step";
      details.dataset.step = String(step);
      details.dataset.from = String(this.total + 1);
      details.dataset.count = "0";
      const summary = document.createElement("summary");
      const title = document.createElement("span");
      title.textContent = step === -2 ? "provisioning" : step === -1 ? "setup" : "step " + (step + 1);
      const count = document.createElement("span");
      count.className = "count";
      summary.append(title, " ", count);
      const ol = document.createElement("ol");
      ol.className = "log";
      details.append(summary, ol);
      const after = this.sections.filter((s) => s.step < step).pop();
      if (after) after.details.after(details);
      else this.el.append(details);
      const sec = new Section(this, details);
      this.sections.push(sec);
      this.sections.sort((a, b) => a.step - b.step);
      return sec;
    }
    section(step) { return this.sections.find((s) => s.step === step) || this.newSection(step); }
    sectionOf(n) { return this.sections.find((s) => s.has(n)); }
    marked(n) { return !!this.hl && n >= this.hl[0] && n <= this.hl[1]; }
    line(n) {
      const start = n - ((n - 1) % CHUNK);
      const c = this.chunks.get(start);
      const l = c && c.lines[n - start];
      return l || this.live.get(n) || null;
    }
    keepLive(n, l) {
      this.live.set(n, l);
      if (this.live.size > MAX_LIVE) this.live.delete(this.live.keys().next().value);
    }
    // fetchFor fetches the chunks of lines a..b that are missing or hold
    // live text only; it resolves true when it got any.
    async fetchFor(a, b) {
      const wanted = [];
      for (let start = a - ((a - 1) % CHUNK); start <= b; start += CHUNK) {
        const c = this.chunks.get(start);
        const need = Math.min(b, this.total) - start + 1;
        if (c && (c.lines.length >= Math.min(need, CHUNK) || Date.now() - c.at < 500)) continue;
        wanted.push(this.fetchChunk(start));
      }
      if (!wanted.length) return false;
      return (await Promise.all(wanted)).some(Boolean);
    }
    fetchChunk(start) {
      if (this.inflight.has(start)) return this.inflight.get(start);
      const p = (async () => {
        try {
          const resp = await get(jobsURL + encodeURIComponent(this.name) + "/lines?from=" + start + "&count=" + CHUNK);
          if (!resp || !resp.ok) {
            // Lost or refused: draw again a little later, which asks again.
            setTimeout(() => { for (const sec of this.sections) sec.draw(); }, 1000);
            return false;
          }
          let lines;
          try {
            lines = (await resp.json()).lines || [];
          } catch (e) {
            return false; // the answer was cut off; the next draw asks again
          }
          this.chunks.delete(start);
          this.chunks.set(start, { lines, at: Date.now() });
          if (this.chunks.size > MAX_CHUNKS) this.chunks.delete(this.chunks.keys().next().value);
          for (const l of lines) this.live.delete(l.n);
          return lines.length > 0;
        } finally {
          this.inflight.delete(start);
        }
      })();
      this.inflight.set(start, p);
      return p;
    }
    // addLive adds lines from the event stream.
    addLive(lines, follow) {
      const touched = new Set();
      for (const l of lines) {
        const n = ++this.total;
        const sec = this.section(l.step);
        sec.append(n, { ts: l.ts, text: strip(l.text) });
        touched.add(sec);
        if (!sec.box) this.pending.push(n);
      }
      for (const sec of touched) {
        sec.resize();
        if (follow) sec.tail();
        else sec.draw();
      }
      // Once the stream pauses, the lines still held as text are fetched
      // coloured.
      clearTimeout(this.settle);
      this.settle = setTimeout(() => { for (const sec of touched) sec.draw(); }, 600);
      if (this.pending.length && !this.recolouring) {
        this.recolouring = true;
        setTimeout(() => this.recolour(), 500);
      }
    }
    // recolour reads live lines held as text again from the server,
    // escaped and coloured, and swaps them in where the text is the same.
    async recolour() {
      this.recolouring = false;
      const nums = this.pending;
      this.pending = [];
      if (!nums.length) return;
      const from = nums[0], count = Math.min(nums[nums.length - 1] - from + 1, 2000);
      const resp = await get(jobsURL + encodeURIComponent(this.name) + "/lines?from=" + from + "&count=" + count);
      if (!resp || !resp.ok) return; // the lines keep their plain text
      let got;
      try {
        got = (await resp.json()).lines || [];
      } catch (e) {
        return;
      }
      for (const l of got) {
        const li = document.getElementById(this.name + "-L" + l.n);
        const span = li && li.querySelector(".t");
        if (!span || li.closest(".vlog")) continue;
        const probe = document.createElement("span");
        probe.innerHTML = l.html;
        if (probe.textContent === span.textContent) span.replaceChildren(...probe.childNodes);
      }
    }
    // show marks lines a..b and brings a into view.
    async show(a, b) {
      await this.ready;
      this.hl = [a, b];
      document.querySelectorAll("li.hl").forEach((e) => e.classList.remove("hl"));
      const sec = this.sectionOf(a);
      if (!sec) return;
      for (let n = a; n <= b; n++) {
        const li = document.getElementById(this.name + "-L" + n);
        if (li) li.classList.add("hl");
      }
      const li = await sec.reveal(a);
      if (li) li.classList.add("hl");
    }
  }

  const jobs = new Map();
  for (const el of document.querySelectorAll("section.job")) jobs.set(el.dataset.job, new Job(el));
  window.kiciJobs = jobs;

  // Line links: #<job>-L<n>, or a range #<job>-L<a>-L<b>; shift+click on
  // a line number after a click on another makes a range link.
  const lineRe = /^#(.+?)-L(\d+)(?:-L(\d+))?$/, oneRe = /^#(.+)-L(\d+)()$/;
  const fromHash = () => {
    const hash = decodeURIComponent(location.hash);
    let m = lineRe.exec(hash);
    if (!m || !jobs.has(m[1])) m = oneRe.exec(hash); // a job named like "x-L1"
    const job = m && jobs.get(m[1]);
    if (!job) return;
    const a = parseInt(m[2], 10), b = m[3] ? parseInt(m[3], 10) : a;
    job.show(Math.min(a, b), Math.max(a, b));
  };
  window.addEventListener("hashchange", fromHash);
  fromHash();
  let anchor = null;
  document.addEventListener("click", (e) => {
    const a = e.target.closest && e.target.closest("a.ln");
    if (!a) return;
    const job = a.closest("section.job").dataset.job, n = parseInt(a.dataset.n, 10);
    if (e.shiftKey && anchor && anchor.job === job && anchor.n !== n) {
      e.preventDefault();
      location.hash = "#" + job + "-L" + Math.min(anchor.n, n) + "-L" + Math.max(anchor.n, n);
      return;
    }
    anchor = { job, n };
  });

  // Search: the server searches the whole stored log; next and previous
  // walk its matches.
  for (const form of document.querySelectorAll("form.logsearch")) {
    const job = jobs.get(form.dataset.job);
    const prev = form.querySelector(".prev"), next = form.querySelector(".next"), found = form.querySelector(".found");
    let matches = [], at = -1;
    const go = (i) => {
      if (!matches.length) return;
      at = (i + matches.length) % matches.length;
      found.textContent = (at + 1) + " of " + matches.length;
      job.show(matches[at], matches[at]);
    };
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const q = form.elements.q.value;
      if (!q) return;
      const resp = await get(form.action + "?q=" + encodeURIComponent(q));
      if (!resp || !resp.ok) { found.textContent = "search failed; try again"; return; }
      let res;
      try {
        res = await resp.json();
      } catch (e) {
        found.textContent = "search failed; try again";
        return;
      }
      matches = res.matches || [];
      prev.disabled = next.disabled = matches.length < 2;
      if (!matches.length) { found.textContent = "no match"; return; }
      if (res.truncated) found.title = "only the first " + matches.length + " matches";
      go(0);
    });
    prev.addEventListener("click", () => go(at - 1));
    next.addEventListener("click", () => go(at + 1));
  }

  // Follow mode keeps the newest line in view.
  const followBtn = document.getElementById("follow");
  let follow = false;
  if (followBtn) {
    followBtn.addEventListener("click", () => {
      follow = !follow;
      followBtn.setAttribute("aria-pressed", String(follow));
    });
  }

  // The live part, once every job knows where its lines end.
  if (run.dataset.ended === "true" || !window.EventSource) return;
  const setStatus = (el, status) => {
    if (!el || !status) return;
    el.textContent = status;
    el.className = "status s-" + status.replace(/[^a-z_]/g, "");
  };
  Promise.all([...jobs.values()].map((j) => j.ready)).then(() => {
    const from = [...jobs.values()].map((j) => j.idx + ":" + j.pos).join(",");
    const es = new EventSource("/runs/" + encodeURIComponent(runID) + "/events?from=" + encodeURIComponent(from));
    es.addEventListener("open", () => { run.dataset.live = "open"; });
    es.addEventListener("error", () => { run.dataset.live = es.readyState === EventSource.CLOSED ? "closed" : "reconnecting"; });
    es.addEventListener("log", (e) => {
      const ev = JSON.parse(e.data);
      const job = jobs.get(ev.job);
      if (job) job.addLive(ev.lines || [], follow);
    });
    // The server dropped events for this viewer and could not make up for
    // them: what the page shows may miss some, so read it all again.
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
        run.dataset.live = "ended";
      }
    });
  }, (err) => { run.dataset.live = "failed: " + err.message; });
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

// Lists that follow the state (runs, queue, agents, scalers, peers): each
// table marked data-refresh is read again every 5 s while the tab is
// visible, unless something in it has the focus (a half-typed drain
// reason is not thrown away).
(function () {
  const tables = [...document.querySelectorAll("table[data-refresh][id]")];
  if (!tables.length) return;
  setInterval(async () => {
    if (document.hidden) return;
    let text;
    try {
      const resp = await fetch(location.href, { credentials: "same-origin" });
      if (!resp.ok) return;
      text = await resp.text();
    } catch (e) {
      return; // lost on the way: the next tick tries again
    }
    const doc = new DOMParser().parseFromString(text, "text/html");
    for (const table of tables) {
      if (table.contains(document.activeElement)) continue;
      const fresh = doc.querySelector("#" + CSS.escape(table.id) + " tbody");
      const old = table.querySelector("tbody");
      if (fresh && old) old.replaceWith(document.importNode(fresh, true));
    }
  }, 5000);
})();
