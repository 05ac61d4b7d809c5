// The chart view: the result's timestamp column against its numeric columns (uPlot), as lines
// or bars. A result with string (SYMBOL/VARCHAR) columns besides the timestamp is keyed: one
// series per distinct key and numeric column. Bounded: the caller fetches at most
// CHART_ROWS_MAX rows, and at most SERIES_MAX series are drawn; the note says when either cap
// was hit.

import uPlot from 'uplot';
import { el, fill, formatCount } from './dom.js';
import { chartPlan, chartData, SERIES_MAX } from './chartdata.js';

const COLORS = ['#2f6fdf', '#e0572a', '#2a9d57', '#9b4dca', '#d4a017', '#17a2b8', '#c2185b',
  '#6d8b1e', '#8d6e63', '#455a64'];

/** The smallest gap between consecutive times (1 s when there is none). */
function smallestStep(xs) {
  let step = Infinity;
  for (let i = 1; i < xs.length; i++) step = Math.min(step, xs[i] - xs[i - 1]);
  return Number.isFinite(step) && step > 0 ? step : 1;
}

/** Bars side by side: series `k` of `n` gets its own slice of 80% of each time step. */
function groupedBars(step, n) {
  const width = (step * 0.8) / n;
  return (k) => uPlot.paths.bars({
    disp: {
      x0: { unit: 1, values: (u) => Array.from(u.data[0], (x) => x - step * 0.4 + k * width) },
      size: { unit: 1, values: () => [width] },
    },
  });
}

/** The chart view in `parent`. */
export function createChart(parent) {
  const note = el('div', { class: 'chart-note' });
  const area = el('div', { class: 'chart-area' });
  fill(parent, note, area);
  let plot = null;
  const size = () => ({
    width: Math.max(200, area.clientWidth - 8),
    height: Math.max(150, area.clientHeight - 40),
  });
  new ResizeObserver(() => plot?.setSize(size())).observe(area);
  const clear = () => {
    plot?.destroy();
    plot = null;
    fill(area);
  };
  return {
    /** Plots `result` ({columns, dataset, timestamp, total}) as 'line' or 'bar'. */
    show(result, kind) {
      clear();
      const plan = chartPlan(result.columns, result.timestamp);
      if (plan.error) {
        fill(note, el('span', { class: 'warn' }, plan.error));
        return;
      }
      const { data, labels, capped } = chartData(plan, result.columns, result.dataset);
      const notes = [`${formatCount(data[0].length)} points, ${labels.length} series`];
      if (result.total !== null && result.total > result.dataset.length) {
        notes.push(`only the first ${formatCount(result.dataset.length)} of ${formatCount(result.total)} rows are plotted`);
      }
      if (capped) notes.push(`only the first ${SERIES_MAX} series are drawn`);
      fill(note, el('span', { class: capped || notes.length > 1 ? 'warn' : undefined }, notes.join('; ')));
      if (!data[0].length) return;
      const step = smallestStep(data[0]);
      const bars = kind === 'bar' ? groupedBars(step, labels.length) : () => undefined;
      plot = new uPlot({
        ...size(),
        legend: { live: true },
        cursor: { drag: { x: true, y: false } },
        scales: {
          x: {
            time: true,
            // Bars are centred on their time: leave room for the first and last.
            range: kind === 'bar' ? (u, min, max) => [min - step / 2, max + step / 2] : undefined,
          },
        },
        series: [
          { label: result.columns[plan.time].name },
          ...labels.map((label, i) => ({
            label,
            stroke: COLORS[i % COLORS.length],
            fill: kind === 'bar' ? `${COLORS[i % COLORS.length]}99` : undefined,
            width: kind === 'bar' ? 1 : 1.5,
            paths: bars(i),
            spanGaps: plan.keys.length > 0,
            points: { show: kind !== 'bar' && data[0].length <= 60 },
          })),
        ],
      }, data, area);
    },
    clear() {
      clear();
      fill(note);
    },
  };
}
