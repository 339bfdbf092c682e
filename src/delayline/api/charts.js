// What the dashboard (/ui) and the Manager (/ui/manager) share: SVG nodes, times and
// durations as text, a read's error line, a histogram's percentile, the history's bars. Served at
// /ui/charts.js; plain JavaScript, no build step. Every value goes in as text.
"use strict";
const SVG = "http://www.w3.org/2000/svg";

function el(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}
function ms(value) {
  if (value === null || value === undefined) return "-";
  return value < 1000 ? `${Math.round(value)} ms` : `${(value / 1000).toFixed(1)} s`;
}
function shortTime(at) { return new Date(at).toISOString().replace("T", " ").slice(5, 16); }

// Run `step` (a page's read and draw); its failure shows in the page's #error line.
async function refresh(step) {
  try {
    await step();
    document.getElementById("error").textContent = "";
  } catch (error) {
    document.getElementById("error").textContent = `cannot read: ${error.message}`;
  }
}

// A histogram's quantile (0..1) as the upper bound of its bucket, ms; null if empty.
function percentile(histogram, fraction) {
  const bounds = Object.keys(histogram).sort((a, b) => (a === "+Inf") - (b === "+Inf") || a - b);
  const total = bounds.reduce((sum, bound) => sum + histogram[bound], 0);
  if (total === 0) return null;
  let seen = 0;
  for (const bound of bounds) {
    seen += histogram[bound];
    if (seen >= fraction * total) return bound === "+Inf" ? Infinity : +bound;
  }
  return null;
}

// The server's per-minute history (GET /v1/history's body) in `svg`, a bar per minute
// (per 10 minutes past an hour), each titled with its lateness p99; returns the
// window's lateness histogram.
function drawHistoryBars(svg, history) {
  const per = history.minutes.length > 60 ? 10 : 1;
  const bars = [];
  const whole = {};
  for (let i = 0; i < history.minutes.length; i += per) {
    const slice = history.minutes.slice(i, i + per);
    const lateness = {};
    for (const minute of slice) {
      for (const [bound, count] of Object.entries(minute.lateness_buckets)) {
        lateness[bound] = (lateness[bound] || 0) + count;
        whole[bound] = (whole[bound] || 0) + count;
      }
    }
    const delivered = slice.reduce((sum, minute) => sum + minute.delivered, 0);
    bars.push({at: slice[0].minute, delivered, p99: percentile(lateness, 0.99)});
  }
  svg.replaceChildren();
  svg.dataset.delivered = history.delivered;
  svg.dataset.minutes = history.minutes.length;
  const largest = Math.max(1, ...bars.map((bar) => bar.delivered));
  const width = 1040 / bars.length;
  bars.forEach((bar, i) => {
    if (!bar.delivered) return;
    const height = 95 * bar.delivered / largest;
    const rect = el("rect", {x: 10 + i * width, y: 110 - height, width: Math.max(1, width - 1), height,
      class: "bar", "data-at": bar.at, "data-delivered": bar.delivered});
    const late = bar.p99 === null ? "-" : `≤ ${ms(bar.p99)}`;
    rect.append(el("title", {}, `${shortTime(bar.at)}: ${bar.delivered} delivered, lateness p99 ${late}`));
    svg.append(rect);
  });
  svg.append(el("text", {x: 4, y: 12, class: "axis"}, `${largest.toLocaleString()} a ${per === 1 ? "minute" : "10 minutes"}`));
  svg.append(el("text", {x: 10, y: 125, class: "axis"}, shortTime(history.from)));
  svg.append(el("text", {x: 960, y: 125, class: "axis"}, shortTime(history.to)));
  return whole;
}
