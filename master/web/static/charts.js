// fairshare dashboard: the chart of the frameworks' shares over the last hour (SVG, no library).
// Lines of equal shares stay apart: each framework has its own color and marker shape, series
// are drawn a few pixels apart (SERIES_GAP, said under the chart), and every line and marker has
// a tooltip with the exact values. Uses el, svg, clock and colorOf of dashboard.js.
"use strict";

const MARKERS = ["circle", "square", "triangle", "diamond", "cross"];
const SERIES_GAP = 2;  // px between series, so lines of equal shares never hide each other
const MAX_GAP = 8;
const MARKED_POINTS = 12;  // markers along each line (and one at its end)

function markerOf(index) {
  return MARKERS[index % MARKERS.length];
}

// A marker of `shape` centred on (cx, cy), filled with `color`.
function marker(shape, cx, cy, color, size) {
  const r = size;
  if (shape === "circle") return svg("circle", { cx, cy, r, fill: color });
  if (shape === "square") {
    return svg("rect", { x: cx - r, y: cy - r, width: 2 * r, height: 2 * r, fill: color });
  }
  const points = {
    triangle: [[0, -1.2], [1.1, 0.9], [-1.1, 0.9]],
    diamond: [[0, -1.3], [1.2, 0], [0, 1.3], [-1.2, 0]],
    cross: [[-1, -1], [0, -0.3], [1, -1], [0.3, 0], [1, 1], [0, 0.3], [-1, 1], [-0.3, 0]],
  }[shape];
  return svg("polygon", { fill: color,
    points: points.map(([dx, dy]) => `${(cx + dx * r).toFixed(1)},${(cy + dy * r).toFixed(1)}`)
      .join(" ") });
}

function titled(node, text) {
  const title = svg("title", {});
  title.textContent = text;
  node.append(title);
  return node;
}

function legendMarker(shape, color) {
  const box = svg("svg", { width: 14, height: 14, viewBox: "0 0 14 14", class: "marker-key" });
  box.append(marker(shape, 7, 7, color, 4.5));
  return box;
}

function collectSeries(points) {
  const series = new Map();
  for (const point of points) {
    for (const [id, f] of Object.entries(point.frameworks)) {
      if (!series.has(id)) series.set(id, { name: f.name, dominant: [], weighted: [] });
      const s = series.get(id);
      s.name = f.name;
      s.dominant.push([point.time, f.dominant_share]);
      s.weighted.push([point.time, f.weighted_share]);
    }
  }
  return series;
}

function drawAxes(root, frame) {
  const { x, y, top, start, now, width, height, pad } = frame;
  for (let v = 0; v <= top + 1e-9; v += top > 2 ? 0.5 : 0.25) {
    root.append(svg("line", { class: "grid", x1: pad.left, x2: width - pad.right, y1: y(v),
      y2: y(v) }));
    const label = svg("text", { x: pad.left - 6, y: y(v) + 4, "text-anchor": "end" });
    label.textContent = v.toFixed(2);
    root.append(label);
  }
  root.append(svg("line", { class: "axis", x1: pad.left, x2: pad.left, y1: pad.top,
    y2: height - pad.bottom }));
  root.append(svg("line", { class: "axis", x1: pad.left, x2: width - pad.right,
    y1: height - pad.bottom, y2: height - pad.bottom }));
  for (const t of [start, (start + now) / 2, now]) {
    const label = svg("text", { x: x(t), y: height - 8, "text-anchor": "middle" });
    label.textContent = clock(t);
    root.append(label);
  }
}

function renderChart() {
  const history = view.history.points;
  const newest = history.length ? history[history.length - 1].time : 0;
  const points = history.concat(view.live.filter((p) => p.time > newest));
  const box = document.getElementById("chart");
  const width = Math.max(400, box.clientWidth || 800);
  const height = 260;
  const pad = { left: 44, right: 120, top: 12, bottom: 26 };
  const now = Date.now() / 1000;
  const start = Math.max(now - 3600, Math.min(points.length ? points[0].time : now, now - 120));
  const series = collectSeries(points);
  let top = 1;
  for (const s of series.values()) {
    for (const [, v] of s.dominant.concat(s.weighted)) top = Math.max(top, v);
  }
  const yMax = top * 1.08;  // headroom: a line at 1.0 is not drawn on the frame
  const x = (t) => pad.left + ((t - start) / (now - start)) * (width - pad.left - pad.right);
  const y = (v) => pad.top + (1 - v / yMax) * (height - pad.top - pad.bottom);
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": "frameworks' shares over time" });
  drawAxes(root, { x, y, top, start, now, width, height, pad });
  const legend = el("div", { class: "chart-legend" });
  const ends = [];
  const count = series.size;
  let index = 0;
  for (const [id, s] of series) {
    const color = colorOf(id);
    const shape = markerOf([...view.colors.keys()].indexOf(id));  // stable, like the color
    const gap = Math.max(-MAX_GAP, Math.min(MAX_GAP, (index - (count - 1) / 2) * SERIES_GAP));
    const yy = (v) => y(v) + gap;
    for (const [data, dash, what] of [[s.weighted, "5 4", "weighted"], [s.dominant, "", "dominant"]]) {
      const d = data.map(([t, v], i) => `${i ? "L" : "M"}${x(t).toFixed(1)},${yy(v).toFixed(1)}`);
      const last = data[data.length - 1];
      root.append(titled(svg("path", { d: d.join(" "), fill: "none", stroke: color,
        "stroke-width": dash ? 1.5 : 2.5, "stroke-dasharray": dash, opacity: dash ? 0.8 : 1,
        "data-series": id, "data-kind": what }),
        `${s.name} (${id}): ${what} share ${last ? last[1].toFixed(3) : "-"}`));
    }
    const every = Math.max(1, Math.ceil(s.dominant.length / MARKED_POINTS));
    s.dominant.forEach(([t, v], i) => {
      if (i % every && i !== s.dominant.length - 1) return;
      const dot = marker(shape, x(t), yy(v), color, i === s.dominant.length - 1 ? 4.5 : 3);
      dot.setAttribute("data-series", id);
      dot.setAttribute("data-marker", shape);
      root.append(titled(dot, `${s.name} at ${clock(t)}: dominant share ${v.toFixed(3)},` +
        ` weighted ${s.weighted[i][1].toFixed(3)}`));
    });
    const last = s.dominant[s.dominant.length - 1];
    if (last) ends.push({ y: yy(last[1]), name: s.name, color });
    legend.append(el("span", { "data-series": id, "data-marker": shape },
      legendMarker(shape, color), s.name, el("span", { class: "muted" }, ` ${id.slice(0, 10)}`)));
    index += 1;
  }
  ends.sort((a, b) => a.y - b.y);  // end labels pushed apart so equal shares stay readable
  let previous = -Infinity;
  for (const end of ends) {
    const labelY = Math.max(end.y + 4, previous + 13);
    previous = labelY;
    const label = svg("text", { x: width - pad.right + 8, y: labelY, fill: end.color });
    label.style.fill = end.color;
    label.textContent = end.name;
    root.append(label);
  }
  if (!series.size) legend.append(el("span", { class: "empty" }, "no frameworks yet"));
  else if (series.size > 1) {
    legend.append(el("span", { class: "muted" },
      `(lines drawn ${SERIES_GAP} px apart so equal shares stay visible; hover for values)`));
  }
  box.replaceChildren(root, legend);
}
