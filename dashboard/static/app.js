// keel dashboard: charts of the overview. No inline script anywhere (the
// Content-Security-Policy forbids it): this file reads the chart data from
// the JSON endpoint named by #charts' data-src and draws it with uPlot.
(function () {
  "use strict";
  var css = getComputedStyle(document.documentElement);
  function colour(name) { return css.getPropertyValue("--" + name).trim() || "#2563eb"; }

  var plots = [];

  // draw plots ys over xs in el; extra, when given, is a second series
  // ({label, ys}) drawn dashed in the same colour. null values are gaps.
  function draw(el, title, xs, ys, stroke, fill, extra) {
    var width = Math.max(el.clientWidth || el.parentNode.clientWidth || 300, 240);
    // A line needs two known points in a row: with few, mark each one.
    var known = ys.filter(function (y) { return y !== null; }).length;
    var series = [{}, { label: title, stroke: stroke, fill: fill, width: 2, points: { show: known <= 3, size: 6 } }];
    var data = [xs, ys];
    if (extra) {
      series.push({ label: extra.label, stroke: stroke, width: 1.5, dash: [5, 4], points: { show: true, size: 4 } });
      data.push(extra.ys);
    }
    var opts = {
      width: width, height: 200, legend: { show: false },
      axes: [{ space: 90 }, { size: 50 }],
      series: series,
      scales: { y: { range: function (u, min, max) { return [0, Math.max(1, (max || 0) * 1.1)]; } } }
    };
    el.textContent = "";
    var p = new uPlot(opts, data, el);
    plots.push({ el: el, plot: p });
  }

  function load() {
    var box = document.getElementById("charts");
    if (!box || typeof uPlot === "undefined") { return; }
    fetch(box.getAttribute("data-src"), { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
      .then(function (d) {
        plots.forEach(function (p) { p.plot.destroy(); });
        plots = [];
        draw(document.getElementById("chart-throughput"), "finished/min", d.at, d.throughput, colour("succeeded"), "rgba(22,163,74,.12)");
        draw(document.getElementById("chart-failures"), "failed/min", d.at, d.failures, colour("dead"), "rgba(220,38,38,.12)");
        draw(document.getElementById("chart-backlog"), "pending", d.at, d.backlog, colour("pending"), "rgba(37,99,235,.12)",
          { label: "peak", ys: d.backlog_peak });
        draw(document.getElementById("chart-error-rate"), "error %", d.at, d.error_rate, colour("retrying"), "rgba(217,119,6,.12)");
      })
      .catch(function (e) {
        ["chart-throughput", "chart-failures", "chart-backlog", "chart-error-rate"].forEach(function (id) {
          var el = document.getElementById(id);
          if (el) { el.textContent = "Could not load the history: " + e.message; }
        });
      });
  }

  document.addEventListener("DOMContentLoaded", function () {
    load();
    if (document.getElementById("charts")) { setInterval(load, 30000); }
    var t;
    window.addEventListener("resize", function () { clearTimeout(t); t = setTimeout(load, 200); });
  });
})();

// The menu, on a narrow screen, is one line that scrolls sideways (see
// app.css): its edges fade out while more of it lies beyond them. The
// classes say which edge has more; the page opens with the current page's
// entry in view.
(function () {
  "use strict";
  function edges(nav) {
    var left = nav.scrollLeft > 1;
    var right = nav.scrollLeft + nav.clientWidth < nav.scrollWidth - 1;
    nav.classList.toggle("more-left", left);
    nav.classList.toggle("at-end", !right);
  }
  document.addEventListener("DOMContentLoaded", function () {
    var nav = document.getElementById("nav");
    if (!nav) { return; }
    var active = nav.querySelector("a.active");
    if (active && nav.scrollWidth > nav.clientWidth && active.offsetLeft + active.offsetWidth > nav.clientWidth) {
      nav.scrollLeft = active.offsetLeft - 24;
    }
    edges(nav);
    nav.addEventListener("scroll", function () { edges(nav); }, { passive: true });
    window.addEventListener("resize", function () { edges(nav); });
  });
})();
