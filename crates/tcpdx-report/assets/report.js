// tcpdx report: draws the graphs from the JSON block with uPlot (inlined before this
// script), then marks <body> with data-tcpdx-rendered="N graphs" and the time taken
// since navigation start (data-tcpdx-render-ms), for tests and for the curious.
(function () {
  'use strict';
  var DATA = JSON.parse(document.getElementById('tcpdx-data').textContent);
  var body = document.body;
  var expected = Number(body.getAttribute('data-tcpdx-expected'));
  var rendered = 0;
  function marker() {
    body.setAttribute('data-tcpdx-render-ms', performance.now().toFixed(0));
    body.setAttribute('data-tcpdx-rendered', rendered + ' graphs');
  }

  var C = {
    data: '#1f5fbf', retx: '#d62728', sack: '#9467bd', ack: '#2ca02c', rwnd: '#ff7f0e',
    total: '#1f5fbf', good: '#2ca02c', rtt: '#8c564b', flight: '#1f5fbf', cwnd: '#d62728',
    srt: '#8c564b', outstanding: '#17becf'
  };
  var STALL = {
    'rto-stall': 'rgba(214,39,40,0.16)', 'delack-slowstart-stall': 'rgba(255,127,14,0.18)',
    'nagle-delack-stall': 'rgba(255,127,14,0.18)', 'network-loss': 'rgba(148,103,189,0.14)',
    'receiver-window-limited': 'rgba(23,190,207,0.16)', 'fixed-duration-stall': 'rgba(188,189,34,0.2)',
    'application-limited': 'rgba(127,127,127,0.15)'
  };
  // What limited the sender per round trip (the same colours as the legend's .lim-* in
  // report.css).
  var LIMIT = {
    cwnd: 'rgba(214,39,40,0.10)', receiver_window: 'rgba(227,119,194,0.22)',
    sender: 'rgba(44,160,44,0.16)', pacing: 'rgba(23,190,207,0.16)',
    recovery: 'rgba(148,103,189,0.20)', timeout: 'rgba(140,86,75,0.24)'
  };

  function graphDone(el, points) {
    el.setAttribute('data-points', String(points));
    rendered += 1;
    if (rendered === expected) marker();
  }

  // SI prefix, three significant digits (the axes have room for about ten characters).
  function si(v, unit) {
    if (v == null) return '–';
    var a = Math.abs(v), p = '';
    if (a >= 1e9) { v /= 1e9; p = 'G'; } else if (a >= 1e6) { v /= 1e6; p = 'M'; } else if (a >= 1e3) { v /= 1e3; p = 'k'; }
    return Number(v.toPrecision(3)) + ' ' + p + unit;
  }
  function axisFmt(unit) {
    return function (u, vals) { return vals.map(function (v) { return si(v, unit); }); };
  }
  function secs(u, v) { return v == null ? '–' : v.toFixed(6) + ' s'; }

  // Shades the episodes of the connection's findings; labels them on the first graph.
  function stallHook(stalls, label) {
    return function (u) {
      if (!stalls.length) return;
      var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height;
      var xmin = u.scales.x.min, xmax = u.scales.x.max;
      ctx.save();
      ctx.font = Math.round(10 * devicePixelRatio) + 'px sans-serif';
      ctx.textAlign = 'left';
      ctx.textBaseline = 'alphabetic';
      var rows = [];
      stalls.forEach(function (s) {
        if (s.e < xmin || s.s > xmax) return;
        var x0 = u.valToPos(Math.max(s.s, xmin), 'x', true);
        var x1 = u.valToPos(Math.min(s.e, xmax), 'x', true);
        ctx.fillStyle = STALL[s.kind] || 'rgba(127,127,127,0.15)';
        ctx.fillRect(x0, top, Math.max(x1 - x0, 2), h);
        if (label) {
          // One text row per kind, so labels of overlapping episodes do not collide.
          var row = rows.indexOf(s.kind);
          if (row < 0) { rows.push(s.kind); row = rows.length - 1; }
          ctx.fillStyle = '#444';
          ctx.fillText(s.kind, x0 + 2, top + (12 + 12 * row) * devicePixelRatio);
        }
      });
      ctx.restore();
    };
  }

  // Shades each stretch of rounds with its limit, behind the flight and the window.
  function limitHook(bands) {
    return function (u) {
      if (!bands.length) return;
      var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height;
      var xmin = u.scales.x.min, xmax = u.scales.x.max;
      ctx.save();
      bands.forEach(function (b) {
        if (b.e < xmin || b.s > xmax) return;
        var x0 = u.valToPos(Math.max(b.s, xmin), 'x', true);
        var x1 = u.valToPos(Math.min(b.e, xmax), 'x', true);
        ctx.fillStyle = LIMIT[b.limit] || 'rgba(127,127,127,0.12)';
        ctx.fillRect(x0, top, Math.max(x1 - x0, 1), h);
      });
      ctx.restore();
    };
  }

  // Draws each point of a range series as a vertical bar lo..hi (one segment, or all the
  // segments of a decimated column), tcptrace style.
  function rangeHook(idx, lo, color) {
    return function (u) {
      if (!u.series[idx].show) return;
      var xs = u.data[0], hi = u.data[idx], ctx = u.ctx;
      var xmin = u.scales.x.min, xmax = u.scales.x.max;
      ctx.save();
      ctx.strokeStyle = color;
      ctx.lineWidth = Math.max(1, devicePixelRatio);
      ctx.beginPath();
      for (var i = 0; i < xs.length; i++) {
        var h = hi[i];
        if (h == null || xs[i] < xmin || xs[i] > xmax) continue;
        var x = Math.round(u.valToPos(xs[i], 'x', true)) + 0.5;
        ctx.moveTo(x, u.valToPos(lo.get(xs[i]), 'y', true));
        ctx.lineTo(x, u.valToPos(h, 'y', true) - 1);
      }
      ctx.stroke();
      ctx.restore();
    };
  }

  function loMap(r) {
    var m = new Map();
    for (var i = 0; i < r.t.length; i++) m.set(r.t[i], r.lo[i]);
    return m;
  }

  // A connection's graphs share their x range: zooming one zooms the others.
  var groups = {};
  var ready = false;
  function syncZoom(group) {
    return function (u, key) {
      if (!ready || key !== 'x' || groups[group].busy) return;
      groups[group].busy = true;
      groups[group].charts.forEach(function (c) {
        if (c !== u) c.setScale('x', { min: u.scales.x.min, max: u.scales.x.max });
      });
      groups[group].busy = false;
    };
  }

  function count(data) {
    var n = 0;
    for (var s = 1; s < data.length; s++) {
      var col = data[s];
      for (var i = 0; i < col.length; i++) if (col[i] != null) n++;
    }
    return n;
  }

  function line(label, color, extra) {
    var s = { label: label, stroke: color, width: 1.25, spanGaps: true, points: { show: false } };
    for (var k in extra) s[k] = extra[k];
    return s;
  }
  function dots(label, color) {
    return { label: label, stroke: color, fill: color, width: 0, paths: function () { return null; },
      points: { show: true, size: 3, stroke: color, fill: color } };
  }

  function spec(kind, c) {
    var stepped = uPlot.paths.stepped({ align: 1 });
    if (kind === 'tseq') {
      var t = c.tseq, los = [loMap(t.data), loMap(t.retx), loMap(t.sack)];
      return {
        tables: [[t.data.t, t.data.hi], [t.retx.t, t.retx.hi], [t.sack.t, t.sack.hi],
          [t.ack.t, t.ack.v], [t.rwnd.t, t.rwnd.v]],
        series: [dots('data', C.data), dots('retransmitted', C.retx), dots('SACK', C.sack),
          line('ACK', C.ack, { paths: stepped }), line('ACK + window', C.rwnd, { paths: stepped })],
        y: 'B',
        draw: [rangeHook(1, los[0], C.data), rangeHook(2, los[1], C.retx), rangeHook(3, los[2], C.sack)],
        label: true
      };
    }
    if (kind === 'tput') {
      return {
        tables: [[c.tput.t, c.tput.total_bps, c.tput.goodput_bps]],
        series: [line('throughput (' + (c.tput.bin_s * 1000).toFixed(0) + ' ms bins)', C.total, { paths: stepped, fill: 'rgba(31,95,191,0.08)' }),
          line('goodput', C.good, { paths: stepped })],
        y: 'b/s'
      };
    }
    if (kind === 'rtt') {
      return { tables: [[c.rtt_ms.t, c.rtt_ms.v]], series: [dots('ACK RTT (ms)', C.rtt)], y: 'ms', plain: true };
    }
    if (kind === 'flight') {
      var tables = [], series = [];
      if (c.in_flight.t.length) { tables.push([c.in_flight.t, c.in_flight.v]); series.push(line('bytes in flight', C.flight)); }
      if (c.sender_window.t.length) { tables.push([c.sender_window.t, c.sender_window.v]); series.push(line('inferred sender window (per round trip)', C.cwnd, { paths: stepped })); }
      return { tables: tables, series: series, y: 'B', draw: [limitHook(c.limits || [])] };
    }
    if (kind === 'srt') {
      return { tables: [[c.srt_ms.t, c.srt_ms.v]], series: [dots('response time (ms)', C.srt)], y: 'ms', plain: true };
    }
    if (kind === 'outstanding') {
      return { tables: [[c.outstanding.t, c.outstanding.v]], series: [line('requests outstanding', C.outstanding, { paths: stepped })], y: '', plain: true };
    }
    throw new Error('unknown graph kind ' + kind);
  }

  function chart(el) {
    var kind = el.getAttribute('data-kind');
    var ci = Number(el.getAttribute('data-conn'));
    var c = DATA.conns[ci];
    var s = spec(kind, c);
    var data = s.tables.length === 1 ? s.tables[0] : uPlot.join(s.tables);
    var group = 'conn' + ci;
    groups[group] = groups[group] || { charts: [], busy: false };
    var plot = el.querySelector('.plot');
    var width = Math.max(300, plot.clientWidth || 1200);
    var done = false;
    var opts = {
      width: width, height: kind === 'tseq' ? 380 : 220,
      cursor: { sync: { key: group }, drag: { x: true, y: kind === 'tseq' } },
      scales: { x: { time: false } },
      axes: [
        { label: 'seconds since the first frame', values: function (u, v) { return v.map(function (x) { return x + ' s'; }); } },
        s.plain ? { size: 60, label: s.y } : { values: axisFmt(s.y), size: 75 }
      ],
      series: [{ label: 'time', value: secs }].concat(s.series.map(function (x) {
        if (!x.value) x.value = function (u, v) { return v == null ? '–' : (s.plain ? String(v) : si(v, s.y)); };
        return x;
      })),
      hooks: {
        draw: (s.draw || []).concat([stallHook(c.stalls, s.label), function (u) {
          if (!done) { done = true; graphDone(el, count(u.data)); }
        }]),
        setScale: [syncZoom(group)]
      }
    };
    var u = new uPlot(opts, data, plot);
    groups[group].charts.push(u);
  }

  if (expected === 0) marker();
  document.querySelectorAll('.graph.budget').forEach(function (el) {
    graphDone(el, el.querySelectorAll('.seg').length);
  });
  document.querySelectorAll('.graph.chart').forEach(function (el) {
    try {
      chart(el);
    } catch (e) {
      tcpdxError('graph ' + el.getAttribute('data-kind') + ': ' + e.message);
    }
  });
  // Start every graph of a connection on the same time range (the union of theirs).
  Object.keys(groups).forEach(function (k) {
    var g = groups[k], lo = Infinity, hi = -Infinity;
    g.charts.forEach(function (u) {
      var xs = u.data[0];
      if (xs.length) { lo = Math.min(lo, xs[0]); hi = Math.max(hi, xs[xs.length - 1]); }
    });
    if (lo < hi) g.charts.forEach(function (u) { u.setScale('x', { min: lo, max: hi }); });
  });
  ready = true;
  // Graphs follow the window's width.
  var resizing = 0;
  window.addEventListener('resize', function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      Object.keys(groups).forEach(function (k) {
        groups[k].charts.forEach(function (u) {
          var w = Math.max(300, u.root.parentNode.clientWidth);
          if (w !== u.width) u.setSize({ width: w, height: u.height });
        });
      });
    }, 150);
  });
  // For tests and the console: each connection's charts (uPlot instances).
  window.tcpdxCharts = groups;
})();
