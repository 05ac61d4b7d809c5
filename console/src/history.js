// Query history, kept in the browser (localStorage): the last HISTORY_MAX statements run, newest
// first, each at most TEXT_CHARS_MAX characters; a click puts one back into the editor.

import { el, fill } from './dom.js';

const KEY = 'sundial.console.history';
const HISTORY_MAX = 50;
const TEXT_CHARS_MAX = 10_000;

function load() {
  try {
    const list = JSON.parse(localStorage.getItem(KEY) ?? '[]');
    return Array.isArray(list) ? list.filter((q) => typeof q === 'string').slice(0, HISTORY_MAX) : [];
  } catch {
    return [];
  }
}

/** The history list in `parent`; `onPick(text)` loads a statement into the editor. */
export function createHistory(parent, onPick) {
  const list = el('ul', { class: 'history', id: 'history' });
  const clear = el('button', { type: 'button', class: 'small', title: 'forget the history', onclick: () => { entries = []; keep(); } }, '✕');
  fill(parent, el('div', { class: 'panel-head' }, el('span', {}, 'History'), clear), list);
  let entries = load();

  function keep() {
    try {
      localStorage.setItem(KEY, JSON.stringify(entries));
    } catch {
      // Storage full or disabled: the history lasts until the page is closed.
    }
    render();
  }
  function render() {
    fill(list, entries.map((text) => el('li', { title: text.slice(0, 1000), onclick: () => onPick(text) },
      text.replace(/\s+/g, ' ').slice(0, 200))));
  }
  render();
  return {
    add(text) {
      if (text.length > TEXT_CHARS_MAX) return;
      entries = [text, ...entries.filter((q) => q !== text)].slice(0, HISTORY_MAX);
      keep();
    },
  };
}
