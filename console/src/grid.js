// The results table: one page of rows at a time, with a pager. Paging re-runs the statement with
// /exec's `limit=lo,hi`, as QuestDB's console does; the page itself is rendered whole (it is
// bounded by PAGE_ROWS).

import { el, fill, formatCount } from './dom.js';

export const PAGE_ROWS = 100;
const CELL_CHARS_MAX = 500;
export const NUMERIC = /^(BYTE|SHORT|INT|LONG|FLOAT|DOUBLE|U?INT\d*|FLOAT\d+|DECIMAL.*)$/i;

/** The grid in `parent`; `onPage(firstRow)` asks for the page starting at row `firstRow`. */
export function createGrid(parent, onPage) {
  const table = el('div', { class: 'grid-scroll' });
  const pager = el('div', { class: 'pager' });
  fill(parent, table, pager);
  return {
    /** Shows rows `first`.. of a result of `total` rows (null: unknown). */
    show({ columns, dataset, first, total }) {
      const head = el('tr', {}, el('th', { class: 'rownum' }, '#'),
        columns.map((c) => el('th', { title: c.type }, c.name, el('span', { class: 'type' }, c.type))));
      const numeric = columns.map((c) => NUMERIC.test(c.type));
      const body = dataset.map((row, r) => el('tr', {},
        el('td', { class: 'rownum' }, String(first + r + 1)),
        row.map((value, i) => cell(value, numeric[i]))));
      fill(table, el('table', { class: 'grid' }, el('thead', {}, head), el('tbody', {}, body)));
      table.scrollTop = 0;
      const last = first + dataset.length;
      const known = total !== null && total !== undefined;
      const more = known ? last < total : dataset.length === PAGE_ROWS;
      const button = (label, title, to, enabled) => el('button', {
        type: 'button', title, disabled: !enabled, onclick: () => onPage(to),
      }, label);
      const lastPage = known ? Math.max(0, Math.floor((total - 1) / PAGE_ROWS) * PAGE_ROWS) : 0;
      fill(pager,
        button('«', 'first page', 0, first > 0),
        button('‹', 'previous page', Math.max(0, first - PAGE_ROWS), first > 0),
        el('span', { class: 'range' }, dataset.length
          ? `rows ${formatCount(first + 1)}–${formatCount(last)}${known ? ` of ${formatCount(total)}` : ''}`
          : 'no rows'),
        button('›', 'next page', first + PAGE_ROWS, more),
        button('»', 'last page', lastPage, known && more));
    },
    /** Shows a message instead of rows. */
    message(text, kind = 'info') {
      fill(table, el('div', { class: `message ${kind}` }, text));
      fill(pager);
    },
  };
}

function cell(value, numeric) {
  if (value === null || value === undefined) return el('td', { class: 'null' }, 'null');
  let text = typeof value === 'object' ? JSON.stringify(value) : String(value);
  const full = text;
  if (text.length > CELL_CHARS_MAX) text = `${text.slice(0, CELL_CHARS_MAX)}…`;
  return el('td', { class: numeric ? 'num' : undefined, title: full.length > 40 ? full.slice(0, 2000) : undefined }, text);
}
