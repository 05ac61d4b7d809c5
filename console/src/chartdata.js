// What the chart plots, without the DOM: which columns are time, keys and values, and the rows
// turned into uPlot's aligned arrays (x ascending, one array per series, null where a series
// has no value). Bounded: at most SERIES_MAX series; the caller bounds the rows.

import { NUMERIC } from './grid.js';

export const CHART_ROWS_MAX = 10_000;
export const SERIES_MAX = 20;
const STRING = /^(SYMBOL|VARCHAR|STRING|CHAR|UTF8|LARGEUTF8|UTF8VIEW)$/i;
const TIME = /^(TIMESTAMP|TIMESTAMP_NS|DATE)/i;

/** The plan of a chart for a result's columns: which column is time, which are keys and
 * values; or {error} when the result cannot be plotted. */
export function chartPlan(columns, timestampIndex) {
  let time = timestampIndex >= 0 ? timestampIndex : columns.findIndex((c) => TIME.test(c.type));
  if (time < 0) return { error: 'Nothing to plot: the result has no TIMESTAMP column.' };
  const keys = [];
  const values = [];
  columns.forEach((c, i) => {
    if (i === time) return;
    if (NUMERIC.test(c.type)) values.push(i);
    else if (STRING.test(c.type)) keys.push(i);
  });
  if (!values.length) return { error: 'Nothing to plot: the result has no numeric column.' };
  return { time, keys, values };
}

/** Seconds since the epoch of a timestamp value as /exec writes it (ISO text, any precision). */
export function epochSeconds(value) {
  if (value === null || value === undefined) return null;
  if (typeof value === 'number') return value / 1e6;
  const m = /^(\d{4,}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(String(value));
  if (!m) {
    const ms = Date.parse(value);
    return Number.isFinite(ms) ? ms / 1000 : null;
  }
  const whole = Date.parse(`${m[1]}Z`);
  if (!Number.isFinite(whole)) return null;
  return whole / 1000 + (m[2] ? Number(`0.${m[2]}`) : 0);
}

/** uPlot's aligned data and series labels for `dataset` under `plan`; `capped` when series were
 * left out. */
export function chartData(plan, columns, dataset) {
  const seriesIndex = new Map();
  const labels = [];
  let capped = false;
  const xs = new Map();
  const points = [];
  for (const row of dataset) {
    const x = epochSeconds(row[plan.time]);
    if (x === null) continue;
    if (!xs.has(x)) xs.set(x, xs.size);
    const key = plan.keys.map((k) => (row[k] === null ? 'null' : String(row[k]))).join(' · ');
    for (const v of plan.values) {
      const label = plan.keys.length
        ? (plan.values.length > 1 ? `${key}: ${columns[v].name}` : key)
        : columns[v].name;
      let s = seriesIndex.get(label);
      if (s === undefined) {
        if (labels.length >= SERIES_MAX) {
          capped = true;
          continue;
        }
        s = labels.length;
        seriesIndex.set(label, s);
        labels.push(label);
      }
      const y = row[v] === null ? null : Number(row[v]);
      points.push([xs.get(x), s, Number.isFinite(y) ? y : null]);
    }
  }
  // x ascending; each series gets a value (or null) per x.
  const order = [...xs.keys()].sort((a, b) => a - b);
  const position = new Map(order.map((x, i) => [x, i]));
  const byInsertion = [...xs.keys()];
  const data = [Float64Array.from(order)];
  for (let s = 0; s < labels.length; s++) data.push(new Array(order.length).fill(null));
  for (const [xi, s, y] of points) data[s + 1][position.get(byInsertion[xi])] = y;
  return { data, labels, capped };
}

