// Bar charts as inline SVG, drawn here in a few dozen lines rather than with a library: the
// page needs stacked and grouped bars over at most 30 buckets, which SVG does natively, and
// no library then needs vendoring, updating or an exception in the Content-Security-Policy.

import { h, s, number } from "./dom.js";

const WIDTH = 360;
const HEIGHT = 180;
const LEFT = 34;
const BOTTOM = 20;
const TOP = 8;

function niceMax(value) {
  if (value <= 4) return 4;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (step * magnitude >= value) return step * magnitude;
  }
  return 10 * magnitude;
}

function bucketLabel(start, unit) {
  const date = new Date(start);
  return unit === "hour"
    ? `${String(date.getUTCHours()).padStart(2, "0")}h`
    : `${date.getUTCMonth() + 1}/${date.getUTCDate()}`;
}

/**
 * A bar chart of `series` ([{label, colour class, values}]) over `buckets` (their starts).
 * `stacked` piles the series in one bar per bucket; otherwise they stand side by side.
 */
export function barChart({ title, buckets, unit, series, stacked = true }) {
  const totals = buckets.map((_, i) =>
    stacked
      ? series.reduce((sum, one) => sum + one.values[i], 0)
      : Math.max(0, ...series.map((one) => one.values[i])),
  );
  const top = niceMax(Math.max(0, ...totals));
  const plotWidth = WIDTH - LEFT - 4;
  const plotHeight = HEIGHT - TOP - BOTTOM;
  const slot = plotWidth / Math.max(1, buckets.length);
  const y = (value) => TOP + plotHeight - (value / top) * plotHeight;

  const grid = [0, 0.5, 1].map((fraction) =>
    s(
      "g",
      { class: "grid" },
      s("line", { x1: LEFT, x2: WIDTH - 4, y1: y(top * fraction), y2: y(top * fraction) }),
      s("text", { x: LEFT - 6, y: y(top * fraction) + 4, "text-anchor": "end" }, number(top * fraction)),
    ),
  );
  const bars = [];
  const labelEvery = Math.ceil(buckets.length / 7);
  buckets.forEach((start, i) => {
    const x0 = LEFT + i * slot;
    let base = 0;
    series.forEach((one, j) => {
      const value = one.values[i];
      if (!value) return;
      const width = stacked ? slot * 0.7 : (slot * 0.8) / series.length;
      const x = stacked ? x0 + slot * 0.15 : x0 + slot * 0.1 + j * width;
      const bottom = stacked ? base : 0;
      bars.push(
        s(
          "rect",
          {
            class: `bar ${one.colour}`,
            x: x.toFixed(1),
            y: y(bottom + value).toFixed(1),
            width: Math.max(1, width - 1).toFixed(1),
            height: Math.max(1, y(bottom) - y(bottom + value)).toFixed(1),
          },
          s("title", {}, `${bucketLabel(start, unit)}: ${one.label} ${number(value)}`),
        ),
      );
      if (stacked) base += value;
    });
    if (i % labelEvery === 0) {
      bars.push(
        s("text", { class: "axis", x: (x0 + slot / 2).toFixed(1), y: HEIGHT - 6, "text-anchor": "middle" },
          bucketLabel(start, unit)),
      );
    }
  });
  const summary = series.map((one) => `${one.label} ${number(one.values.reduce((a, b) => a + b, 0))}`);
  const svg = s(
    "svg",
    {
      viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
      role: "img",
      "aria-label": `${title}: ${summary.join(", ")}`,
      preserveAspectRatio: "none",
    },
    grid,
    bars,
  );
  const legend = h(
    "ul",
    { class: "legend" },
    series.map((one) =>
      h("li", {}, h("span", { class: `swatch ${one.colour}`, "aria-hidden": "true" }), one.label,
        " ", h("strong", {}, number(one.values.reduce((a, b) => a + b, 0)))),
    ),
  );
  return h("figure", { class: "chart" }, h("figcaption", {}, title), svg, legend, dataTable(buckets, unit, series));
}

function dataTable(buckets, unit, series) {
  return h(
    "details",
    { class: "chart-data" },
    h("summary", {}, "Numbers"),
    h(
      "div",
      { class: "scroll" },
      h(
        "table",
        {},
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, unit === "hour" ? "Hour (UTC)" : "Day (UTC)"),
          series.map((one) => h("th", { scope: "col" }, one.label)))),
        h("tbody", {}, buckets.map((start, i) =>
          h("tr", {}, h("th", { scope: "row" }, bucketLabel(start, unit)),
            series.map((one) => h("td", {}, number(one.values[i])))))),
      ),
    ),
  );
}
