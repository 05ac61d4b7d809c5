// The side panel of tables: SHOW TABLES, and for a table opened table_columns('t') (type,
// designated timestamp, index, dedup key) and SHOW CREATE TABLE t (partitioning). Columns are
// fetched when a table is opened, and again on refresh for the tables left open.

import { rows, quoteIdent } from './api.js';
import { el, fill } from './dom.js';

const TABLES_MAX = 1000;

/** The panel in `parent`; `onPick(name)` inserts a name into the editor; `onSchema(schema)` gets
 * {table: [column, ...]} for completion. */
export function createSchema(parent, { onPick, onSchema }) {
  const list = el('ul', { class: 'tables' });
  const note = el('div', { class: 'schema-note' });
  const refreshButton = el('button', { type: 'button', class: 'small', title: 'refresh the tables', onclick: () => refresh() }, '⟳');
  fill(parent, el('div', { class: 'panel-head' }, el('span', {}, 'Tables'), refreshButton), note, list);
  const open = new Set();
  const columns = new Map();
  let generation = 0;

  async function details(name, item) {
    const box = item.querySelector('.columns');
    try {
      const [cols, ddl] = await Promise.all([
        // By name, not position: QuestDB's SHOW COLUMNS has more columns than these.
        rows(`SELECT "column", type, indexed, designated, upsertKey FROM table_columns('${name.replaceAll("'", "''")}')`),
        rows(`SHOW CREATE TABLE ${quoteIdent(name)}`),
      ]);
      columns.set(name, cols.map((c) => c[0]));
      const partition = /PARTITION BY (\w+)/i.exec(ddl[0]?.[0] ?? '')?.[1] ?? 'NONE';
      fill(box,
        el('li', { class: 'partition' }, `partition by ${partition}`),
        cols.map(([column, type, indexed, designated, upsertKey]) => el('li', { class: 'column', title: `${column} ${type}` },
          el('span', { class: 'name', ondblclick: () => onPick(quoteIdentIfNeeded(column)) }, column),
          el('span', { class: 'type' }, type),
          designated && el('span', { class: 'badge ts', title: 'designated timestamp' }, 'ts'),
          indexed && el('span', { class: 'badge idx', title: 'symbol index' }, 'idx'),
          upsertKey && el('span', { class: 'badge key', title: 'deduplication (upsert) key' }, 'key'))));
      publish();
    } catch (e) {
      fill(box, el('li', { class: 'error' }, e.message));
    }
  }

  function item(name) {
    const isOpen = open.has(name);
    const node = el('li', { class: `table${isOpen ? ' open' : ''}`, dataset: { table: name } },
      el('div', { class: 'table-name', title: 'click: columns; double-click: insert the name' ,
        onclick: () => toggle(name, node),
        ondblclick: () => onPick(quoteIdentIfNeeded(name)) },
      el('span', { class: 'caret' }, isOpen ? '▾' : '▸'), name),
      el('ul', { class: 'columns' }));
    if (isOpen) details(name, node);
    return node;
  }

  function toggle(name, node) {
    if (open.has(name)) {
      open.delete(name);
      node.classList.remove('open');
      node.querySelector('.caret').textContent = '▸';
      fill(node.querySelector('.columns'));
    } else {
      open.add(name);
      node.classList.add('open');
      node.querySelector('.caret').textContent = '▾';
      details(name, node);
    }
  }

  function publish() {
    const schema = {};
    for (const li of list.children) {
      const name = li.dataset.table;
      schema[name] = columns.get(name) ?? [];
    }
    onSchema(schema);
  }

  async function refresh() {
    const mine = ++generation;
    refreshButton.disabled = true;
    try {
      const names = (await rows('SHOW TABLES')).map((r) => String(r[0])).sort((a, b) => a.localeCompare(b));
      if (mine !== generation) return;
      for (const name of [...open]) if (!names.includes(name)) open.delete(name);
      for (const name of [...columns.keys()]) if (!names.includes(name)) columns.delete(name);
      fill(note, names.length > TABLES_MAX ? `showing ${TABLES_MAX} of ${names.length} tables` : (names.length ? '' : 'no tables yet'));
      fill(list, names.slice(0, TABLES_MAX).map(item));
      publish();
    } catch (e) {
      if (mine === generation) fill(note, el('span', { class: 'error' }, `cannot list tables: ${e.message}`));
    } finally {
      if (mine === generation) refreshButton.disabled = false;
    }
  }

  return { refresh, count: () => list.children.length };
}

function quoteIdentIfNeeded(name) {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : quoteIdent(name);
}
