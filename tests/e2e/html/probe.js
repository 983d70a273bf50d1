// Appended to a copy of an HTML report by tests/e2e/HtmlReportTest.cpp, after the
// report's own script: it reads what the page shows, clicks and hovers as a reader
// would, and writes all of it as JSON into <script id="probe-result">, which
// `chromium --dump-dom` prints with the rest of the page.
(function () {
  'use strict';
  var result = {};
  var root = document.documentElement;
  result.rendered = root.getAttribute('data-rendered');
  result.errors = root.getAttribute('data-errors') || '';
  // Wider than the window: the page scrolls sideways.
  result.pageWidth = root.scrollWidth;
  result.windowWidth = window.innerWidth;

  function all(selector, from) { return Array.prototype.slice.call((from || document).querySelectorAll(selector)); }
  function text(e) { return e ? e.textContent.trim() : null; }
  function tip() { var t = document.getElementById('tip'); return t.style.display === 'block' ? t.textContent : ''; }
  function center(e) {
    var b = e.getBoundingClientRect();
    return { clientX: b.left + b.width / 2, clientY: b.top + b.height / 2, bubbles: true };
  }

  result.timelines = all('figure.timeline').map(function (f) {
    return {
      device: f.getAttribute('data-device'),
      peak: text(f.querySelector('.peak text')),
      series: all('path.line', f).map(function (p) {
        return [p.getAttribute('data-series'), +p.getAttribute('data-points')];
      }),
      marks: all('g.mark', f).map(function (m) { return m.getAttribute('data-kind'); }),
      legend: text(f.querySelector('.legend'))
    };
  });

  // Several processes: the ranks' figures, and each device's chart of them all.
  result.ranks = all('ul.ranks li').map(function (li) { return text(li); });
  result.ranksTimelines = all('figure.ranks-timeline').map(function (f) {
    return {
      device: f.getAttribute('data-device'),
      series: all('path.line', f).map(function (p) {
        return [p.getAttribute('data-series'), +p.getAttribute('data-points')];
      }),
      legend: text(f.querySelector('.legend'))
    };
  });

  result.flames = all('figure.flame').map(function (f) {
    var frames = all('g.frame', f);
    return {
      device: f.getAttribute('data-device'),
      metric: f.getAttribute('data-metric'),
      frames: frames.length,
      root: frames.length ? [frames[0].getAttribute('data-name'), +frames[0].getAttribute('data-bytes')] : null,
      names: frames.map(function (g) { return g.getAttribute('data-name'); })
    };
  });

  // The event log's moment view: what it shows first (the moment of the device's
  // peak), then after a click at the start of its timeline.
  function momentView(f) {
    return {
      moment: +f.getAttribute('data-moment'),
      bytes: +f.getAttribute('data-bytes'),
      frames: all('g.frame', f).map(function (g) {
        return [g.getAttribute('data-name'), +g.getAttribute('data-bytes')];
      }).filter(function (n) { return n[0].indexOf('.py:') >= 0; }),
      none: text(f.querySelector('p.none'))
    };
  }
  result.moments = all('figure.moments').map(function (f) {
    var first = momentView(f);
    var line = document.querySelector('figure.timeline[data-process="' + f.getAttribute('data-process') +
      '"][data-device="' + f.getAttribute('data-device') + '"] rect.hover');
    var r = line.getBoundingClientRect();
    line.dispatchEvent(new MouseEvent('click', { clientX: r.left + 1, clientY: r.top + r.height / 2, bubbles: true }));
    return { device: f.getAttribute('data-device'), first: first, clicked: momentView(f) };
  });

  function table(t) {
    return all('tbody tr', t).map(function (r) {
      return all('td', r).map(function (c) {
        var summary = c.querySelector('summary');
        return summary ? text(summary) : text(c);
      });
    });
  }
  result.tables = {};
  all('table').forEach(function (t) {
    var key = t.className.replace(' sortable', '') + (t.getAttribute('data-device') ? ':' + t.getAttribute('data-device') : '');
    result.tables[key] = table(t);
  });

  // Sorting: the hotspot table of the first CUDA device (or of cpu) by its "Allocated" column.
  var hot = document.querySelector('table.hotspots[data-device^="cuda"]') || document.querySelector('table.hotspots');
  if (hot) {
    var allocated = all('th', hot).filter(function (th) { return th.textContent === 'Allocated'; })[0];
    var column = all('th', hot).indexOf(allocated);
    var order = function () { return all('tbody tr', hot).map(function (r) { return text(r.cells[column]); }); };
    allocated.click();
    result.sortedOnce = [allocated.getAttribute('aria-sort'), order()];
    allocated.click();
    result.sortedTwice = [allocated.getAttribute('aria-sort'), order()];
  }

  // Zoom and hover: the first flame graph's widest frame below the root.
  var flame = document.querySelector('figure.flame');
  if (flame && flame.querySelectorAll('g.frame').length > 2) {
    var target = flame.querySelectorAll('g.frame')[2];
    var name = target.getAttribute('data-name');
    target.dispatchEvent(new MouseEvent('mousemove', center(target)));
    result.hoverTip = tip();
    target.dispatchEvent(new MouseEvent('click', center(target)));
    var zoomed = all('g.frame', flame).filter(function (g) { return g.getAttribute('data-name') === name; })[0];
    result.zoom = {
      name: name,
      width: +zoomed.querySelector('rect').getAttribute('width'),
      ancestors: all('g.frame.ancestor', flame).length
    };
    all('g.frame', flame)[0].dispatchEvent(new MouseEvent('click', { bubbles: true }));
    result.zoomedOut = all('g.frame.ancestor', flame).length;
  }

  // Hover on the first timeline, a tenth of the way into its plot.
  var hover = document.querySelector('figure.timeline rect.hover');
  if (hover) {
    var b = hover.getBoundingClientRect();
    hover.dispatchEvent(new MouseEvent('mousemove', { clientX: b.left + b.width * 0.1, clientY: b.top + 5, bubbles: true }));
    result.timelineTip = tip();
  }

  // "Python frames only", checked then unchecked: the first process's flame graphs' names each time.
  var box = document.querySelector('input.python-only');
  if (box) {
    var firstNames = function () {
      return all('g.frame', document.querySelector('figure.flame')).map(function (g) { return g.getAttribute('data-name'); });
    };
    box.checked = true;
    box.dispatchEvent(new Event('change'));
    result.pythonOnly = firstNames();
    box.checked = false;
    box.dispatchEvent(new Event('change'));
    result.withNative = firstNames();
  }

  var out = document.createElement('script');
  out.type = 'application/json';
  out.id = 'probe-result';
  out.textContent = JSON.stringify(result).replace(/</g, '\\u003c');
  document.body.appendChild(out);
})();
