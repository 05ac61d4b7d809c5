// CSV upload: POST /imp (multipart `data`) with the table name and QuestDB's options, and the
// import's answer (rows imported/rejected, per-column errors) or its error.

import { importCsv } from './api.js';
import { el, fill, formatCount } from './dom.js';

const PARTITIONS = ['NONE', 'HOUR', 'DAY', 'WEEK', 'MONTH', 'YEAR'];

/** The refused rows and values an import's JSON answer lists, each with its line (as the
 * text answer of /imp), then how many more there were. */
export function badLineTexts(j) {
  const errors = j.errors ?? [];
  const lines = errors.map((e) => `line ${e.line}: ${e.column ? `${e.column}: ` : ''}${e.reason} (${e.action})`);
  const more = (j.errorsTotal ?? errors.length) - errors.length;
  if (more > 0) lines.push(`… and ${formatCount(more)} more`);
  return lines;
}

function badLines(j) {
  const lines = badLineTexts(j);
  return lines.length ? el('ul', { class: 'detail', id: 'upload-errors' }, lines.map((t) => el('li', {}, t))) : null;
}

/** The upload form in `parent`; `onImported(table)` runs after a successful import. */
export function createUpload(parent, onImported) {
  const file = el('input', { type: 'file', name: 'data', accept: '.csv,.tsv,.txt,text/csv', id: 'upload-file' });
  const name = el('input', { type: 'text', id: 'upload-name', placeholder: 'table (default: file name)', spellcheck: false });
  const timestamp = el('input', { type: 'text', id: 'upload-timestamp', placeholder: 'timestamp column (optional)', spellcheck: false });
  // The server's default: DAY for a table with a timestamp column, else none.
  const partitionBy = el('select', { id: 'upload-partition', title: 'partitionBy' },
    el('option', { value: '' }, 'partition: default'),
    PARTITIONS.map((p) => el('option', { value: p }, `partition: ${p}`)));
  const header = el('select', { id: 'upload-header', title: 'header line' },
    el('option', { value: '' }, 'header: detect'), el('option', { value: 'true' }, 'header: first line'));
  const atomicity = el('select', { id: 'upload-atomicity', title: 'atomicity: what a bad value does' },
    el('option', { value: 'skipCol' }, 'bad value: NULL'),
    el('option', { value: 'skipRow' }, 'bad value: skip row'),
    el('option', { value: 'abort' }, 'bad value: abort'));
  const overwrite = el('input', { type: 'checkbox', id: 'upload-overwrite' });
  const submit = el('button', { type: 'submit', id: 'upload-submit', disabled: true }, 'Import');
  const result = el('div', { class: 'upload-result', id: 'upload-result' });
  file.addEventListener('change', () => {
    submit.disabled = !file.files.length;
    if (file.files.length && !name.value) name.placeholder = file.files[0].name.replace(/\.[^.]*$/, '');
  });
  const form = el('form', { class: 'upload', onsubmit: (e) => { e.preventDefault(); upload(); } },
    file, name, timestamp,
    el('div', { class: 'row' }, partitionBy, header),
    el('div', { class: 'row' }, atomicity, el('label', { title: 'replace the table\'s rows' }, overwrite, 'overwrite')),
    submit, result);
  fill(parent, el('div', { class: 'panel-head' }, el('span', {}, 'Import CSV')), form);

  async function upload() {
    const chosen = file.files[0];
    if (!chosen) return;
    const table = name.value.trim() || chosen.name.replace(/\.[^.]*$/, '');
    const params = { name: table, atomicity: atomicity.value };
    if (timestamp.value.trim()) params.timestamp = timestamp.value.trim();
    if (partitionBy.value) params.partitionBy = partitionBy.value;
    if (header.value) params.forceHeader = header.value;
    if (overwrite.checked) params.overwrite = 'true';
    submit.disabled = true;
    fill(result, el('span', { class: 'busy' }, `importing ${chosen.name}…`));
    const answer = await importCsv(chosen, params);
    submit.disabled = false;
    if (!answer.ok) {
      fill(result, el('div', { class: 'error' }, answer.error));
      return;
    }
    const j = answer.json;
    const withErrors = (j.columns ?? []).filter((c) => c.errors > 0);
    fill(result,
      el('div', { class: 'ok' }, `${formatCount(j.rowsImported)} rows imported into ${j.location}`,
        j.rowsRejected ? `, ${formatCount(j.rowsRejected)} rejected` : ''),
      el('div', { class: 'detail' }, `partition by ${j.partitionBy}, timestamp ${j.timestamp ?? 'none'}, header ${j.header ? 'yes' : 'no'}`),
      withErrors.length ? el('ul', { class: 'detail' }, withErrors.map((c) => el('li', {}, `${c.name} (${c.type}): ${formatCount(c.errors)} bad values`))) : null,
      badLines(j));
    onImported(j.location);
  }
}
