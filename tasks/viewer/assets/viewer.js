// The episode viewer's behaviour (no framework, no server): step pages and index filters. Inlined into every page.
(function () {
  "use strict";
  function byId(id) { return document.getElementById(id); }

  // ---- an episode page: <script id="episode-data" type="application/json"> holds the steps --------------------
  function episodePage(data) {
    var steps = data.steps, n = steps.length, at = 0;
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
      at = Math.max(0, Math.min(n - 1, i));
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
      var adm = byId("step-admissible");
      if (adm) { adm.textContent = s.admissible; }
      Array.prototype.forEach.call(strip.children, function (c, k) {
        c.classList.toggle("current", k === at);
      });
      var code = byId("code");
      if (code) {
        Array.prototype.forEach.call(code.children, function (line, k) {
          line.classList.toggle("current", s.line === k + 1);
        });
      }
      if (history.replaceState) { history.replaceState(null, "", "#step-" + at); }
    }
    document.addEventListener("keydown", function (ev) {
      if (ev.target && (ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT")) { return; }
      var go = {ArrowRight: at + 1, ArrowDown: at + 1, j: at + 1, " ": at + 1, ArrowLeft: at - 1,
                ArrowUp: at - 1, k: at - 1, Home: 0, End: n - 1}[ev.key];
      if (go !== undefined) { ev.preventDefault(); show(go); }
    });
    byId("prev").addEventListener("click", function () { show(at - 1); });
    byId("next").addEventListener("click", function () { show(at + 1); });
    var m = /^#step-(\d+)$/.exec(location.hash);
    show(m ? parseInt(m[1], 10) : 0);
  }

  // ---- an index page: filters over the rows' data-* attributes ------------------------------------------------
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

  document.addEventListener("DOMContentLoaded", function () {
    var data = byId("episode-data");
    if (data) { episodePage(JSON.parse(data.textContent)); }
    if (document.querySelector("select[data-filter]")) { indexPage(); }
  });
})();
