// The episode viewer's behaviour (no framework, no server): step pages, index filters, and the one-file book of a
// run's episodes (MLflow's artifact preview). Inlined into every page.
(function () {
  "use strict";
  function byId(id) { return document.getElementById(id); }
  var current = null;   // the episode shown: {at, show(i)}
  var book = null;      // the one-file book's controller, on its page

  // In MLflow's preview the page is a blob: document in a sandboxed iframe: replaceState works there, but guard it.
  function setHash(hash) {
    try { if (history.replaceState) { history.replaceState(null, "", hash); } } catch (e) { /* no history here */ }
  }

  // ---- one episode: the steps (label, action, observation, ... image) drawn into the page's step elements --------
  function episodeView(steps, onStep, start) {
    var n = steps.length, view = {at: 0};
    var strip = byId("strip");
    steps.forEach(function (s, i) {
      var cell = document.createElement("span");
      cell.className = s.cls;
      cell.title = s.label;
      cell.dataset.step = i;
      cell.addEventListener("click", function () { show(i); });
      strip.appendChild(cell);
    });
    function fill(id, text) { var el = byId(id); if (el) { el.textContent = text; } }
    function show(i) {
      var at = view.at = Math.max(0, Math.min(n - 1, i));
      var s = steps[at];
      fill("step-no", s.label);
      fill("step-action", s.action);
      fill("step-observation", s.observation);
      fill("step-goals", s.goals);
      fill("step-conditions", s.conditions);
      byId("step-flags").innerHTML = s.flags;
      var img = byId("step-image");
      if (img) {
        if (s.image) { img.src = s.image; img.style.visibility = "visible"; }
        else { img.removeAttribute("src"); img.style.visibility = "hidden"; }
      }
      Array.prototype.forEach.call(strip.children, function (c, k) {
        c.classList.toggle("current", k === at);
      });
      var code = byId("code");
      if (code) {
        Array.prototype.forEach.call(code.children, function (line, k) {
          line.classList.toggle("current", s.line === k + 1);
        });
      }
      onStep(at);
    }
    view.show = show;
    byId("prev").addEventListener("click", function () { show(view.at - 1); });
    byId("next").addEventListener("click", function () { show(view.at + 1); });
    show(start);
    return view;
  }

  var STEP_KEYS = {ArrowRight: 1, ArrowDown: 1, j: 1, " ": 1, ArrowLeft: -1, ArrowUp: -1, k: -1};
  document.addEventListener("keydown", function (ev) {
    if (ev.target && (ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT")) { return; }
    if (book && book.key(ev.key)) { ev.preventDefault(); return; }
    if (!current) { return; }
    var go = STEP_KEYS[ev.key] !== undefined ? current.at + STEP_KEYS[ev.key]
      : {Home: 0, End: Infinity}[ev.key];
    if (go !== undefined) { ev.preventDefault(); current.show(go); }
  });

  // ---- an index: filters over the rows' data-* attributes ---------------------------------------------------------
  function indexPage() {
    var selects = document.querySelectorAll("select[data-filter]");
    var rows = document.querySelectorAll("tr[data-outcome]");
    function apply() {
      var shown = 0;
      Array.prototype.forEach.call(rows, function (row) {
        var ok = Array.prototype.every.call(selects, function (sel) {
          return sel.value === "" || row.dataset[sel.dataset.filter] === sel.value;
        });
        row.style.display = ok ? "" : "none";
        shown += ok ? 1 : 0;
      });
      var count = byId("shown");
      if (count) { count.textContent = shown + " of " + rows.length + " shown"; }
    }
    Array.prototype.forEach.call(selects, function (sel) { sel.addEventListener("change", apply); });
    apply();
  }

  // ---- the book: the index and every episode in one file; an episode replaces the index in place -----------------
  // Links are handled here, not followed: in MLflow's sandboxed blob: iframe a relative URL resolves to nothing.
  function bookPage(data) {
    var index = byId("book-index"), view = byId("book-episode"), shownAt = null;
    var EPISODE = /^#episode-(\d+)(?:-step-(\d+))?$/;
    function listed() {   // the episode numbers of the rows the filters show, in the index's order
      return Array.prototype.filter.call(index.querySelectorAll("tr[data-outcome]"), function (row) {
        return row.style.display !== "none";
      }).map(function (row) {
        var m = EPISODE.exec(row.querySelector("a[href^='#episode-']").getAttribute("href"));
        return parseInt(m[1], 10);
      });
    }
    function button(text, id, onClick) {
      var b = document.createElement("button");
      b.id = id;
      b.textContent = text;
      b.addEventListener("click", onClick);
      return b;
    }
    function open(k, step) {
      var episode = data.episodes[k];
      if (!episode) { return; }
      shownAt = k;
      view.innerHTML = "";
      var nav = document.createElement("p");
      nav.className = "muted";
      var back = document.createElement("a");
      back.href = "#";
      back.id = "book-back";
      back.textContent = "\u2190 back to the list";
      back.addEventListener("click", function (ev) { ev.preventDefault(); close(); });
      nav.appendChild(back);
      nav.appendChild(document.createTextNode(" "));
      nav.appendChild(button("\u2190 episode", "book-prev", function () { step_episode(-1); }));
      nav.appendChild(button("episode \u2192", "book-next", function () { step_episode(1); }));
      nav.appendChild(document.createTextNode(" keys: n p (episodes), Esc (the list)"));
      var title = document.createElement("h2");
      title.id = "book-title";
      title.textContent = episode.title;
      view.appendChild(nav);
      view.appendChild(title);
      var body = document.createElement("div");
      body.innerHTML = episode.body;
      view.appendChild(body);
      index.hidden = true;
      view.hidden = false;
      var steps = episode.steps.map(function (s) {
        var copy = Object.assign({}, s);
        copy.image = s.image ? (data.images[s.image] || null) : null;
        return copy;
      });
      current = episodeView(steps, function (at) { setHash("#episode-" + k + "-step-" + at); }, step || 0);
      window.scrollTo(0, 0);
    }
    function close() {
      current = null;
      shownAt = null;
      view.hidden = true;
      view.innerHTML = "";
      index.hidden = false;
      setHash("#");
    }
    function step_episode(by) {
      var order = listed(), at = order.indexOf(shownAt);
      var next = order[at < 0 ? 0 : at + by];
      if (next !== undefined) { open(next, 0); }
    }
    index.addEventListener("click", function (ev) {
      var link = ev.target.closest && ev.target.closest("a[href^='#episode-']");
      if (!link) { return; }
      ev.preventDefault();
      var m = EPISODE.exec(link.getAttribute("href"));
      if (m) { open(parseInt(m[1], 10), 0); }
    });
    book = {key: function (key) {
      if (shownAt === null) { return false; }
      if (key === "Escape") { close(); return true; }
      if (key === "n" || key === "p") { step_episode(key === "n" ? 1 : -1); return true; }
      return false;
    }};
    var m = EPISODE.exec(location.hash);
    if (m) { open(parseInt(m[1], 10), m[2] ? parseInt(m[2], 10) : 0); }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var bookData = byId("book-data"), data = byId("episode-data");
    if (document.querySelector("select[data-filter]")) { indexPage(); }
    if (bookData) {
      bookPage(JSON.parse(bookData.textContent));
    } else if (data) {
      var m = /^#step-(\d+)$/.exec(location.hash);
      current = episodeView(JSON.parse(data.textContent).steps, function (at) { setHash("#step-" + at); },
                            m ? parseInt(m[1], 10) : 0);
    }
  });
})();
