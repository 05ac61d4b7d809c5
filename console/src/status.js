// The status panel: GET /status every POLL_MS (version, uptime, tables, rows ingested since
// start); rows per second is the difference of two polls' totals over the time between them.
// Whatever is missing (no /status, or a field absent) shows "n/a". Polling runs between
// `start()` and `stop()` (the page stops it while its login form shows: a poll with an ended
// session would only be refused).

import { status } from './api.js';
import { el, fill, formatCount, formatMs } from './dom.js';

const POLL_MS = 3000;
/** Between polls while the server has no /status (an older server): less noise. */
const POLL_MISSING_MS = 30_000;

export function createStatus(parent) {
  const field = (label, id) => {
    const value = el('span', { class: 'value', id }, 'n/a');
    parent.append(el('span', { class: 'stat' }, el('span', { class: 'label' }, label), value));
    return value;
  };
  const version = field('version', 'status-version');
  const uptime = field('uptime', 'status-uptime');
  const tables = field('tables', 'status-tables');
  const rate = field('rows/s', 'status-rate');
  let previous = null;
  let timer = 0;
  let generation = 0;

  const number = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
  async function poll() {
    const mine = generation;
    const s = await status();
    if (mine !== generation) return;
    const now = performance.now();
    const state = s?.status;
    parent.classList.toggle('down', !s || (state !== undefined && state !== 'ok'));
    fill(version, typeof s?.version === 'string' ? s.version : 'n/a');
    const up = number(s?.uptime_ms);
    fill(uptime, up === null ? 'n/a' : formatMs(up));
    const count = number(s?.tables);
    fill(tables, count === null ? 'n/a' : formatCount(count));
    const rows = number(s?.rows_ingested);
    // Time between polls: the server's uptime when it has one (no network jitter), else ours.
    const at = up ?? now;
    if (rows !== null && previous && at > previous.at && rows >= previous.rows) {
      fill(rate, formatCount(((rows - previous.rows) * 1000) / (at - previous.at)));
    } else {
      fill(rate, 'n/a');
    }
    previous = rows === null ? null : { rows, at };
    timer = setTimeout(poll, s ? POLL_MS : POLL_MISSING_MS);
  }
  function stop() {
    generation++;
    clearTimeout(timer);
    previous = null;
  }
  return {
    start() {
      stop();
      poll();
    },
    stop,
  };
}
