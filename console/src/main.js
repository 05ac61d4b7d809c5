// Sundial's web console: wires the login, editor, results grid, chart, schema panel, upload,
// history and status together. One statement runs at a time: running another (or paging) aborts
// the request under way.
//
// The page first asks GET /login whether credentials are required and who its session cookie
// names; it shows either the login form or the app (the other stays hidden, so the editor keeps
// its text across a re-login). A 401 to any request while the app is in use means the session
// ended: the request under way is cancelled, polling stops and the form comes back.

import 'uplot/dist/uPlot.min.css';
import './style.css';
import { exec, logout, onUnauthorized, whoami } from './api.js';
import { createEditor } from './editor.js';
import { createGrid, PAGE_ROWS } from './grid.js';
import { createChart } from './chart.js';
import { CHART_ROWS_MAX } from './chartdata.js';
import { createSchema } from './schema.js';
import { createUpload } from './upload.js';
import { createHistory } from './history.js';
import { createStatus } from './status.js';
import { createLogin } from './login.js';
import { sessionView, userLabel, SESSION_ENDED } from './session.js';
import { el, fill, formatCount, formatMs } from './dom.js';

const $ = (id) => document.getElementById(id);

const info = $('result-info');
const runButton = $('run');
let current = null; // the last result: {text, columns, timestamp, total, first, dataset, chart}
let controller = null; // the request under way
let mode = 'grid';

const editor = createEditor($('editor'), (picked) => run(picked));
const grid = createGrid($('grid-view'), (first) => page(first));
const chart = createChart($('chart-view'));
const schema = createSchema($('schema'), {
  onPick: (name) => editor.insert(name),
  onSchema: (s) => editor.setSchema(s),
});
createUpload($('upload'), () => schema.refresh());
const history = createHistory($('history-panel'), (text) => editor.setText(text));
const statusPanel = createStatus($('status'));
const loginForm = createLogin($('login-view'), ({ user, role }) => enter({ user, role, logout: true }));
const logoutButton = $('logout');
let inApp = false;

onUnauthorized(() => showForm(SESSION_ENDED));
logoutButton.addEventListener('click', leave);
whoami().then((answer) => {
  const view = sessionView(answer);
  if (view.view === 'form') showForm(null);
  else enter(view);
});

/** Shows the app for `user` (null: the server requires no login) and starts its requests. */
function enter({ user, role, logout: canLogOut }) {
  inApp = true;
  $('login-view').hidden = true;
  $('app').hidden = false;
  $('help').hidden = false;
  $('status').hidden = false;
  fill($('session-user'), user ? userLabel(user, role) : '');
  logoutButton.hidden = !canLogOut;
  logoutButton.disabled = false;
  $('session').hidden = !user && !canLogOut;
  statusPanel.start();
  schema.refresh();
  editor.view.focus();
}

/** Shows the login form (with `message` above it), stopping what the app does. */
function showForm(message) {
  if (inApp) {
    inApp = false;
    controller?.abort();
    statusPanel.stop();
    $('app').hidden = true;
    $('help').hidden = true;
    $('status').hidden = true;
    $('session').hidden = true;
  }
  $('login-view').hidden = false;
  loginForm.show(message);
}

/** Log out: the session ends, and the results of this user are cleared from the page. */
async function leave() {
  logoutButton.disabled = true;
  controller?.abort();
  statusPanel.stop();
  await logout();
  current = null;
  chart.clear();
  if (mode === 'chart') setMode('grid');
  grid.message('');
  fill(info);
  showForm('You have logged out.');
}

runButton.addEventListener('click', () => {
  if (controller) controller.abort();
  else editor.run();
});
$('tab-grid').addEventListener('click', () => setMode('grid'));
$('tab-chart').addEventListener('click', () => setMode('chart'));
$('chart-kind').addEventListener('change', () => mode === 'chart' && showChart());

/** Starts a request, aborting the one under way; returns its signal. */
function begin() {
  controller?.abort();
  controller = new AbortController();
  runButton.textContent = 'Cancel';
  document.body.classList.add('busy');
  return controller.signal;
}

function end(signal) {
  if (controller?.signal !== signal) return;
  controller = null;
  runButton.textContent = 'Run';
  document.body.classList.remove('busy');
}

async function run({ text, offset }) {
  history.add(text);
  editor.markError(null);
  const signal = begin();
  fill(info, 'running…');
  try {
    const r = await exec(text, { limit: `1,${PAGE_ROWS}`, count: true, signal });
    if (!r.ok) {
      current = null;
      chart.clear();
      if (mode === 'chart') setMode('grid');
      grid.message(r.error, 'error');
      if (r.position >= 0) editor.markError(offset + r.position, r.error);
      fill(info, el('span', { class: 'error' }, 'error'), ` · ${formatMs(r.ms)}`);
      return;
    }
    const j = r.json;
    if (j.ddl !== undefined || j.dml !== undefined) {
      current = null;
      chart.clear();
      if (mode === 'chart') setMode('grid');
      grid.message(j.ddl !== undefined ? 'OK: statement done' : 'OK: rows written', 'ok');
      fill(info, `OK · ${formatMs(r.ms)}`);
      if (j.ddl !== undefined) schema.refresh();
      return;
    }
    current = {
      text,
      columns: j.columns ?? [],
      timestamp: j.timestamp ?? -1,
      total: typeof j.count === 'number' ? j.count : null,
      first: 0,
      dataset: j.dataset ?? [],
      chart: null,
    };
    showInfo(r);
    grid.show(current);
    if (mode === 'chart') showChart();
    if (/^\s*(create|drop|alter|rename|truncate)\b/i.test(text)) schema.refresh();
  } catch (e) {
    if (e.name !== 'AbortError') throw e;
    fill(info, 'cancelled');
  } finally {
    end(signal);
    // How many statements were answered (the browser test waits on it).
    info.dataset.runs = String(Number(info.dataset.runs ?? 0) + 1);
  }
}

function showInfo(r) {
  const executeNs = r.json.timings?.execute;
  fill(info,
    el('span', { id: 'row-count' }, `${formatCount(current.total)} rows`),
    ` · ${formatMs(r.ms)}`,
    typeof executeNs === 'number' ? ` (execute ${formatMs(executeNs / 1e6)})` : '');
}

async function page(first) {
  if (!current) return;
  const signal = begin();
  const wanted = current;
  try {
    const r = await exec(wanted.text, { limit: `${first + 1},${first + PAGE_ROWS}`, count: true, signal });
    if (wanted !== current) return;
    if (!r.ok) {
      grid.message(r.error, 'error');
      return;
    }
    current.first = first;
    current.dataset = r.json.dataset ?? [];
    current.total = typeof r.json.count === 'number' ? r.json.count : current.total;
    showInfo(r);
    grid.show(current);
  } catch (e) {
    if (e.name !== 'AbortError') throw e;
  } finally {
    end(signal);
  }
}

function setMode(next) {
  mode = next;
  $('tab-grid').classList.toggle('active', mode === 'grid');
  $('tab-chart').classList.toggle('active', mode === 'chart');
  $('grid-view').hidden = mode !== 'grid';
  $('chart-view').hidden = mode !== 'chart';
  $('chart-kind').disabled = mode !== 'chart';
  if (mode === 'chart') showChart();
}

/** Plots the current result: its first CHART_ROWS_MAX rows, fetched once per result. */
async function showChart() {
  if (!current) {
    chart.clear();
    return;
  }
  const kind = $('chart-kind').value;
  const wanted = current;
  if (!wanted.chart) {
    if (wanted.first === 0 && wanted.total !== null && wanted.dataset.length >= wanted.total) {
      wanted.chart = { dataset: wanted.dataset };
    } else {
      const signal = begin();
      try {
        const r = await exec(wanted.text, { limit: `1,${CHART_ROWS_MAX}`, signal });
        if (!r.ok) {
          chart.clear();
          grid.message(r.error, 'error');
          return;
        }
        wanted.chart = { dataset: r.json.dataset ?? [] };
      } catch (e) {
        if (e.name !== 'AbortError') throw e;
        return;
      } finally {
        end(signal);
      }
    }
  }
  if (wanted !== current || mode !== 'chart') return;
  chart.show({ ...wanted, dataset: wanted.chart.dataset }, kind);
}
