// The memtool HTML report's script. It draws each timeline and flame graph from
// the JSON the reporter embedded (#memtool-data), sorts the tables, and shows
// tooltips. It fetches nothing and needs no library. When everything is drawn it
// sets data-rendered="ok" on <html>, which the browser test waits for.
(function () {
  'use strict';

  var SVG_NS = 'http://www.w3.org/2000/svg';
  var UNITS = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  var data = JSON.parse(document.getElementById('memtool-data').textContent);
  var tip = document.getElementById('tip');

  // ---- small helpers -------------------------------------------------------

  function svg(name, attrs, parent) {
    var e = document.createElementNS(SVG_NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function html(name, cls, text, parent) {
    var e = document.createElement(name);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  // As the reporter writes bytes (core::formatBytes): "512 B", "1.50 KiB".
  function fmtBytes(b) {
    if (b < 1024) return b + ' B';
    var v = b, u = -1;
    while (v >= 1024 && u < UNITS.length - 1) { v /= 1024; u++; }
    return fixed2(v) + ' ' + UNITS[u];
  }

  // printf's "%.2f": toFixed takes an exact tie up, printf to the even digit, so a
  // size of exactly 2.125 GiB read one way here and the other in every table.
  function fixed2(v) {
    var up = v.toFixed(2), exact = v.toFixed(20);
    if (!/^\d+\.\d\d50*$/.test(exact)) return up;
    var down = exact.slice(0, exact.indexOf('.') + 3);
    return (down.charCodeAt(down.length - 1) - 48) % 2 === 0 ? down : up;
  }

  function fmtSeconds(s) { return s.toFixed(3) + ' s'; }

  // 1, 2, 2.5 or 5 times a power of ten, at least `raw`.
  function niceStep(raw) {
    if (!(raw > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(raw)));
    var f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * p;
  }

  function trimNumber(v) { return String(Math.round(v * 1000) / 1000); }

  // Ticks for 0..max bytes in whole IEC units: [value, label] pairs, the last at or above max.
  function byteTicks(max) {
    var unit = 1, k = -1;
    while (max / unit >= 1024 && k < UNITS.length - 1) { unit *= 1024; k++; }
    var step = niceStep(Math.max(max, 1) / unit / 4) * unit;
    var ticks = [];
    for (var v = 0; ; v += step) {
      ticks.push([v, v === 0 ? '0' : trimNumber(v / unit) + ' ' + (k < 0 ? 'B' : UNITS[k])]);
      if (v >= max) break;
    }
    return ticks;
  }

  // Ticks for 0..end seconds, labelled in ms below a second and in us below 10 ms:
  // a short run (a memtool.track block of a notebook cell) would read "0 s, 0 s, 0.001 s".
  function timeTicks(end) {
    var step = niceStep(end / 6);
    var unit = end < 0.01 ? [1e-6, ' \u00b5s'] : end < 1 ? [1e-3, ' ms'] : [1, ' s'];
    var ticks = [];
    for (var v = 0; v <= end + step * 1e-9; v += step) ticks.push([v, trimNumber(v / unit[0]) + unit[1]]);
    return ticks;
  }

  // ---- tooltip ---------------------------------------------------------------

  function showTip(evt, lines) {
    tip.textContent = '';
    lines.forEach(function (line, i) { html('div', i === 0 ? 'head' : '', line, tip); });
    tip.style.display = 'block';
    var x = evt.clientX + 14, y = evt.clientY + 14;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 4) x = Math.max(4, evt.clientX - w - 14);
    if (y + h > window.innerHeight - 4) y = Math.max(4, evt.clientY - h - 14);
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  }

  function hideTip() { tip.style.display = 'none'; }

  // ---- timelines -------------------------------------------------------------

  var W = 960;

  // The bytes right after the last point at or before t (0 before the first).
  function valueAt(points, t) {
    var lo = 0, hi = points.length - 1, found = -1;
    while (lo <= hi) {
      var mid = (lo + hi) >> 1;
      if (points[mid][0] <= t) { found = mid; lo = mid + 1; } else { hi = mid - 1; }
    }
    return found < 0 ? 0 : points[found][1];
  }

  // One time axis for every chart of a process: its last point or event, and a little room.
  function processEnd(proc) {
    var end = 0;
    Object.keys(proc.timeline).forEach(function (name) {
      var points = proc.timeline[name];
      if (points.length) end = Math.max(end, points[points.length - 1][0]);
    });
    Object.keys(proc.polled || {}).forEach(function (name) {
      var points = proc.polled[name];
      if (points.length) end = Math.max(end, points[points.length - 1][0]);
    });
    proc.marks.forEach(function (m) { end = Math.max(end, m.time_s); });
    return end > 0 ? end * 1.03 : 1;
  }

  // A chart's frame: bytes up to `top` (rounded to a tick) over seconds up to `end`,
  // `H` high with `T` above the plot for labels; its grid, ticks and time axis
  // drawn, and the scales the series are drawn with.
  function chartFrame(fig, top, end, H, T) {
    var L = 78, R = 18, B = 30;
    var yTicks = byteTicks(top);
    var yTop = yTicks[yTicks.length - 1][0] || 1;
    var x = function (t) { return L + (t / end) * (W - L - R); };
    var y = function (b) { return T + (1 - b / yTop) * (H - T - B); };
    var chart = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, class: 'chart', role: 'img' });
    fig.appendChild(chart);
    yTicks.forEach(function (t) {
      svg('line', { x1: L, x2: W - R, y1: y(t[0]), y2: y(t[0]), class: 'grid' }, chart);
      svg('text', { x: L - 6, y: y(t[0]) + 4, class: 'tick', 'text-anchor': 'end' }, chart).textContent = t[1];
    });
    timeTicks(end).forEach(function (t) {
      svg('line', { x1: x(t[0]), x2: x(t[0]), y1: H - B, y2: H - B + 4, class: 'axis' }, chart);
      svg('text', { x: x(t[0]), y: H - B + 17, class: 'tick', 'text-anchor': 'middle' }, chart).textContent = t[1];
    });
    svg('line', { x1: L, x2: W - R, y1: H - B, y2: H - B, class: 'axis' }, chart);
    return { chart: chart, x: x, y: y };
  }

  function drawTimeline(fig) {
    var proc = data.processes[+fig.getAttribute('data-process')];
    var device = fig.getAttribute('data-device');
    var series = [device, device + '.active', device + '.reserved']
      .filter(function (name) { return proc.timeline[name]; })
      .map(function (name, i) {
        return { name: name, points: proc.timeline[name], peak: proc.devices[name], cls: 'series-' + i };
      });
    // The whole device (host: its cgroup or the machine) as memtool run polled it.
    if (proc.polled && proc.polled[device] && proc.polled[device].length)
      series.push({ name: device + ' used (polled, whole device)', points: proc.polled[device], cls: 'series-polled' });
    var marks = proc.marks.filter(function (m) { return m.device === device; });

    var top = 0;
    series.forEach(function (s) {
      s.points.forEach(function (p) { top = Math.max(top, p[1]); });
    });
    var end = processEnd(proc);
    var H = marks.length ? 230 : 210, L = 78, R = 18, T = marks.length ? 36 : 16, B = 30;
    var frame = chartFrame(fig, top, end, H, T), chart = frame.chart, x = frame.x, y = frame.y;

    // A step line: the bytes hold until the next point.
    series.forEach(function (s, i) {
      var d = 'M' + x(0) + ',' + y(0), last = 0;
      s.points.forEach(function (p) {
        d += 'L' + x(p[0]) + ',' + y(last) + 'L' + x(p[0]) + ',' + y(p[1]);
        last = p[1];
      });
      d += 'L' + x(end) + ',' + y(last);
      if (i === 0) svg('path', { d: d + 'L' + x(end) + ',' + y(0) + 'Z', class: 'area ' + s.cls }, chart);
      svg('path', { d: d, class: 'line ' + s.cls, 'data-series': s.name, 'data-points': s.points.length }, chart);
    });

    // What the reader hovers: a guide and every series' bytes at that moment.
    var guide = svg('line', { y1: T, y2: H - B, class: 'guide', visibility: 'hidden' }, chart);
    var hover = svg('rect', { x: L, y: T, width: W - L - R, height: H - T - B, class: 'hover' }, chart);
    hover.addEventListener('mousemove', function (evt) {
      var box = chart.getBoundingClientRect();
      var vx = (evt.clientX - box.left) * (W / box.width);
      var t = Math.max(0, Math.min(end, ((vx - L) / (W - L - R)) * end));
      guide.setAttribute('x1', x(t));
      guide.setAttribute('x2', x(t));
      guide.setAttribute('visibility', 'visible');
      showTip(evt, [fmtSeconds(t)].concat(series.map(function (s) {
        return s.name + ': ' + fmtBytes(valueAt(s.points, t));
      })));
    });
    hover.addEventListener('mouseleave', function () { guide.setAttribute('visibility', 'hidden'); hideTip(); });
    // With an event log, a click shows what was live then (the moment view below).
    hover.addEventListener('click', function (evt) {
      var view = document.querySelector('figure.moments[data-process="' + fig.getAttribute('data-process') +
        '"][data-device="' + device + '"]');
      if (!view || !view.showTime) return;
      var box = chart.getBoundingClientRect();
      var vx = (evt.clientX - box.left) * (W / box.width);
      view.showTime(Math.max(0, Math.min(end, ((vx - L) / (W - L - R)) * end)));
    });

    // Labels of events close together take the next of two rows above the plot.
    var rowEnds = [-Infinity, -Infinity];
    marks.forEach(function (m) {
      var mx = x(m.time_s);
      var row = rowEnds[0] < mx ? 0 : rowEnds[1] < mx ? 1 : 0;
      rowEnds[row] = mx + 6.5 * m.kind.length + 8;
      var g = svg('g', { class: 'mark mark-' + m.kind + (m.failed ? ' failed' : ''), 'data-kind': m.kind }, chart);
      svg('line', { x1: mx, x2: mx, y1: T - 6 - 11 * row, y2: H - B, class: 'mark-line' }, g);
      svg('line', { x1: mx, x2: mx, y1: T - 6 - 11 * row, y2: H - B, class: 'mark-hit' }, g);
      svg('text', { x: mx + 3, y: T - 8 - 11 * row, class: 'mark-label' }, g).textContent = m.kind;
      g.addEventListener('mousemove', function (evt) { showTip(evt, [m.label, 'at ' + fmtSeconds(m.time_s)]); });
      g.addEventListener('mouseleave', hideTip);
    });

    var peak = proc.devices[device];
    if (peak && peak.bytes > 0) {
      var px = x(peak.time_s), py = y(peak.bytes), right = px > W / 2;
      var g = svg('g', { class: 'peak' }, chart);
      svg('circle', { cx: px, cy: py, r: 4.5 }, g);
      svg('text', { x: right ? px - 8 : px + 8, y: Math.max(T + 10, py - 6), 'text-anchor': right ? 'end' : 'start' }, g)
        .textContent = 'peak ' + peak.text + ' at ' + fmtSeconds(peak.time_s);
    }

    var legend = html('div', 'legend', undefined, fig);
    series.forEach(function (s) {
      var item = html('span', 'item', undefined, legend);
      html('span', 'swatch ' + s.cls, undefined, item);
      html('span', '', s.name + (s.peak ? ', peak ' + s.peak.text : ''), item);
    });
    if (marks.length) {
      var kinds = {};
      marks.forEach(function (m) { kinds[m.kind] = true; });
      Object.keys(kinds).forEach(function (k) {
        var item = html('span', 'item', undefined, legend);
        html('span', 'swatch mark-' + k, undefined, item);
        html('span', '', k, item);
      });
    }
  }

  // ---- flame graphs (icicles) ----------------------------------------------------

  var ROW = 18;
  var HUES = { py: 28, pylib: 48, c: 208, clib: 190, none: 0 };

  function hash(text) {
    var h = 0;
    for (var i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) | 0;
    return Math.abs(h);
  }

  function frameColor(kind, label) {
    if (kind === 'root' || kind === 'none') return 'hsl(0, 0%, 78%)';
    var sat = kind === 'clib' || kind === 'pylib' ? 30 : 65;
    return 'hsl(' + (HUES[kind] + (hash(label) % 12)) + ', ' + sat + '%, ' + (62 + (hash(label) % 14)) + '%)';
  }

  function drawFlame(fig) {
    var proc = data.processes[+fig.getAttribute('data-process')];
    var device = fig.getAttribute('data-device'), metric = fig.getAttribute('data-metric');
    if (fig.getAttribute('data-view') === 'python') metric = 'python:' + metric;
    var tree = proc.flames[device] && proc.flames[device][metric];
    if (!tree || tree[1] === 0) {
      html('p', 'none', 'No stack held memory under this measure.', fig);
      return;
    }
    flameChart(fig, tree, proc.names, device);
  }

  // A tree [name id, bytes, [children...]] (root id -1) as a flame graph in `parent`.
  function flameChart(parent, tree, names, device) {
    var depth = 0;
    function build(node, parent, level) {
      var name = node[0] < 0 ? null : names[node[0]];
      var n = {
        label: name ? name[0] : 'all ' + device + ' (' + fmtBytes(node[1]) + ')',
        text: name ? name[1] : 'all stacks on ' + device,
        kind: name ? name[2] : 'root',
        bytes: node[1], parent: parent, level: level, children: []
      };
      depth = Math.max(depth, level);
      n.children = node[2].map(function (c) { return build(c, n, level + 1); });
      return n;
    }
    var root = build(tree, null, 0);
    var chart = svg('svg', { viewBox: '0 0 ' + W + ' ' + (depth + 1) * ROW, class: 'chart flame-chart' });
    parent.appendChild(chart);

    function render(focus) {
      while (chart.firstChild) chart.removeChild(chart.firstChild);
      var scale = W / focus.bytes;
      function draw(n, x, w, ancestor) {
        var g = svg('g', {
          class: 'frame' + (ancestor ? ' ancestor' : ''), 'data-name': n.label, 'data-bytes': n.bytes
        }, chart);
        svg('rect', { x: x, y: n.level * ROW, width: Math.max(w - 0.5, 0.5), height: ROW - 1, fill: frameColor(n.kind, n.label) }, g);
        var room = Math.floor((w - 8) / 6.3);
        if (room >= 3) {
          svg('text', { x: x + 4, y: n.level * ROW + 13 }, g).textContent =
            n.label.length > room ? n.label.slice(0, room - 1) + '\u2026' : n.label;
        }
        g.addEventListener('click', function () { hideTip(); render(n); });
        g.addEventListener('mousemove', function (evt) {
          var lines = [n.text, fmtBytes(n.bytes) + ' (' + trimNumber((100 * n.bytes) / root.bytes) + '% of all)'];
          if (focus !== root && !ancestor) lines.push(trimNumber((100 * n.bytes) / focus.bytes) + '% of ' + focus.label);
          showTip(evt, lines);
        });
        g.addEventListener('mouseleave', hideTip);
      }
      var ancestors = [];
      for (var a = focus.parent; a; a = a.parent) ancestors.unshift(a);
      ancestors.forEach(function (a) { draw(a, 0, W, true); });
      (function layout(n, x) {
        var w = n.bytes * scale;
        if (w < 0.3) return;
        draw(n, x, w, false);
        var at = x;
        n.children.forEach(function (c) { layout(c, at); at += c.bytes * scale; });
      })(focus, 0);
    }
    render(root);
  }

  // ---- the event log's moments ----------------------------------------------------

  // What was live on `device` at moment `m` of `moments` as a tree like the flame
  // graphs' (stack -1: the stacks past the largest, one node).
  function momentTree(moments, m, device) {
    var root = [-1, 0, []], names = moments.names.slice(), other = -1;
    moments.moments[m][1].forEach(function (row) {
      var path;
      if (row[0] < 0) {
        if (row[2] !== device) return;
        if (other < 0) { other = names.length; names.push(['(other stacks)', 'the smaller stacks of this moment', 'none']); }
        path = [other];
      } else {
        var stack = moments.stacks[row[0]];
        if (stack[0] !== device) return;
        path = stack[1];
      }
      root[1] += row[1];
      var node = root;
      path.forEach(function (id) {
        var next = null;
        for (var i = 0; i < node[2].length; i++) if (node[2][i][0] === id) next = node[2][i];
        if (!next) { next = [id, 0, []]; node[2].push(next); }
        next[1] += row[1];
        node = next;
      });
    });
    (function order(n) {
      n[2].sort(function (a, b) { return b[1] - a[1]; });
      n[2].forEach(order);
    })(root);
    return { tree: root, names: names };
  }

  function drawMoments(fig) {
    var proc = data.processes[+fig.getAttribute('data-process')];
    var device = fig.getAttribute('data-device'), moments = proc.moments;
    var count = moments.moments.length;
    var bar = html('p', 'moment-bar', '', fig);
    var slider = html('input', '', '', bar);
    slider.type = 'range';
    slider.min = 0;
    slider.max = count - 1;
    var label = html('span', 'moment-time', '', bar);
    var box = html('div', 'moment-flame', '', fig);
    function show(m) {
      slider.value = m;
      fig.setAttribute('data-moment', m);
      var built = momentTree(moments, m, device);
      label.textContent = ' live at ' + fmtSeconds(moments.moments[m][0]) + ': ' + fmtBytes(built.tree[1]);
      fig.setAttribute('data-bytes', built.tree[1]);
      while (box.firstChild) box.removeChild(box.firstChild);
      if (built.tree[1] === 0) html('p', 'none', 'Nothing was live on ' + device + ' then.', box);
      else flameChart(box, built.tree, built.names, device);
    }
    slider.addEventListener('input', function () { show(+slider.value); });
    // The last moment at or before `t` (a click on the timeline).
    fig.showTime = function (t) {
      var m = 0;
      for (var i = 0; i < count; i++) if (moments.moments[i][0] <= t) m = i;
      show(m);
    };
    var peak = 0;
    for (var i = 0; i < count; i++) if (proc.devices[device] && moments.moments[i][0] <= proc.devices[device].time_s) peak = i;
    show(peak);
  }

  // ---- sortable tables ---------------------------------------------------------

  function sortable(table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.tabIndex = 0;
      var sort = function () {
        var numeric = th.classList.contains('num');
        var current = th.getAttribute('aria-sort');
        // Numbers largest first, text A to Z; a second click turns it round.
        var descending = current ? current === 'ascending' : numeric;
        var key = function (row) {
          var cell = row.cells[col];
          var v = cell.hasAttribute('data-v') ? cell.getAttribute('data-v') : cell.textContent;
          return numeric ? parseFloat(v) : v.toLowerCase();
        };
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows).map(function (r, i) { return [key(r), i, r]; });
        rows.sort(function (a, b) {
          var c = a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
          return (descending ? -c : c) || a[1] - b[1];
        });
        rows.forEach(function (r) { body.appendChild(r[2]); });
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', descending ? 'descending' : 'ascending');
      };
      th.addEventListener('click', sort);
      th.addEventListener('keydown', function (e) { if (e.key === 'Enter') sort(); });
    });
  }

  // Every process's live bytes on one device, each on the shared clock (its
  // start's shift), one step line each: the ranks of a job side by side.
  function drawRanksTimeline(fig) {
    var device = fig.getAttribute('data-device');
    var series = [];
    data.processes.forEach(function (proc, i) {
      var points = proc.timeline[device];
      if (!points || !proc.devices[device]) return;
      var shift = data.ranks[i].shift_s;
      series.push({
        name: data.ranks[i].label,
        points: points.map(function (p) { return [p[0] + shift, p[1]]; }),
        cls: 'series-' + (series.length % 3)
      });
    });
    var top = 0, end = 0;
    series.forEach(function (s) {
      s.points.forEach(function (p) { top = Math.max(top, p[1]); end = Math.max(end, p[0]); });
    });
    end = end > 0 ? end * 1.03 : 1;
    var H = 230, L = 78, R = 18, T = 16, B = 30;
    var frame = chartFrame(fig, top, end, H, T), chart = frame.chart, x = frame.x, y = frame.y;
    series.forEach(function (s) {
      var d = 'M' + x(0) + ',' + y(0), last = 0;
      s.points.forEach(function (p) {
        d += 'L' + x(p[0]) + ',' + y(last) + 'L' + x(p[0]) + ',' + y(p[1]);
        last = p[1];
      });
      svg('path', { d: d, class: 'line ' + s.cls, 'data-series': s.name, 'data-points': s.points.length }, chart);
    });
    var hover = svg('rect', { x: L, y: T, width: W - L - R, height: H - T - B, class: 'hover' }, chart);
    hover.addEventListener('mousemove', function (evt) {
      var box = chart.getBoundingClientRect();
      var t = Math.max(0, Math.min(end, (((evt.clientX - box.left) * (W / box.width) - L) / (W - L - R)) * end));
      showTip(evt, [fmtSeconds(t)].concat(series.map(function (s) {
        return s.name + ': ' + fmtBytes(valueAt(s.points, t));
      })));
    });
    hover.addEventListener('mouseleave', hideTip);
    var legend = html('div', 'legend', undefined, fig);
    series.forEach(function (s) {
      var item = html('span', 'item', undefined, legend);
      html('span', 'swatch ' + s.cls, undefined, item);
      html('span', '', s.name, item);
    });
  }

  Array.prototype.forEach.call(document.querySelectorAll('figure.timeline'), drawTimeline);
  Array.prototype.forEach.call(document.querySelectorAll('figure.ranks-timeline'), drawRanksTimeline);
  Array.prototype.forEach.call(document.querySelectorAll('figure.flame'), drawFlame);
  Array.prototype.forEach.call(document.querySelectorAll('figure.moments'), drawMoments);
  // "Python frames only": the process's flame graphs drawn again from the other tree.
  Array.prototype.forEach.call(document.querySelectorAll('input.python-only'), function (box) {
    box.addEventListener('change', function () {
      var sel = 'figure.flame[data-process="' + box.getAttribute('data-process') + '"]';
      Array.prototype.forEach.call(document.querySelectorAll(sel), function (fig) {
        Array.prototype.slice.call(fig.children).forEach(function (c) {
          if (c.tagName.toLowerCase() !== 'figcaption') fig.removeChild(c);
        });
        fig.setAttribute('data-view', box.checked ? 'python' : 'native');
        drawFlame(fig);
      });
    });
  });
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), sortable);
  document.documentElement.setAttribute('data-rendered', 'ok');
})();
