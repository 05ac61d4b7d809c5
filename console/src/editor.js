// The SQL editor: CodeMirror 6 with its SQL language, Ctrl/Cmd-Enter to run, and the error of
// the last run marked (a lint diagnostic) where the server says it is.
//
// The editor lives in a shadow root: there CodeMirror's styles go into a constructed style sheet
// (adoptedStyleSheets) instead of a <style> element, which the console's Content-Security-Policy
// (`style-src 'self'`, no inline styles) would block. Its look is therefore set by `theme` below,
// not by app.css.

import { EditorState, Compartment, Prec } from '@codemirror/state';
import {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter,
  drawSelection, placeholder,
} from '@codemirror/view';
import { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands';
import { syntaxHighlighting, defaultHighlightStyle, bracketMatching } from '@codemirror/language';
import { sql, PostgreSQL } from '@codemirror/lang-sql';
import { autocompletion, completionKeymap, closeBrackets } from '@codemirror/autocomplete';
import { setDiagnostics, lintGutter } from '@codemirror/lint';
import { statementAt } from './statements.js';

const SAVED_KEY = 'sundial.console.editor';
const SAVED_CHARS_MAX = 100_000;

/** Creates the editor in `parent`; `onRun({text, offset})` gets the SQL to run and where it
 * starts in the document. */
export function createEditor(parent, onRun) {
  const root = parent.attachShadow({ mode: 'open' });
  const language = new Compartment();
  const languageFor = (schema) => sql({ dialect: PostgreSQL, upperCaseKeywords: true, schema });
  const run = (view) => {
    const picked = pick(view.state);
    if (picked.text.trim()) onRun(picked);
    return true;
  };
  let saveTimer = 0;
  const view = new EditorView({
    parent: root,
    root,
    state: EditorState.create({
      doc: localStorage.getItem(SAVED_KEY) ?? 'SHOW TABLES;',
      extensions: [
        Prec.highest(keymap.of([
          { key: 'Mod-Enter', run },
          { key: 'Ctrl-Enter', run },
        ])),
        theme,
        EditorView.lineWrapping,
        lineNumbers(),
        highlightActiveLineGutter(),
        highlightActiveLine(),
        drawSelection(),
        history(),
        bracketMatching(),
        closeBrackets(),
        autocompletion(),
        lintGutter(),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        language.of(languageFor({})),
        placeholder('SELECT * FROM ...'),
        keymap.of([...completionKeymap, ...defaultKeymap, ...historyKeymap, indentWithTab]),
        EditorView.updateListener.of((update) => {
          if (!update.docChanged) return;
          // The marked error no longer applies to edited text.
          update.view.dispatch(setDiagnostics(update.state, []));
          clearTimeout(saveTimer);
          saveTimer = setTimeout(() => save(update.state.doc.toString()), 500);
        }),
      ],
    }),
  });
  return {
    view,
    /** Runs what Ctrl-Enter would run. */
    run: () => run(view),
    /** Replaces the whole text (from the history). */
    setText(text) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
      view.focus();
    },
    /** Inserts `text` at the cursor. */
    insert(text) {
      view.dispatch(view.state.replaceSelection(text));
      view.focus();
    },
    /** Table and column names for completion: {table: [column, ...]}. */
    setSchema(schema) {
      view.dispatch({ effects: language.reconfigure(languageFor(schema)) });
    },
    /** Marks `message` at document offset `at` (the word there), or clears the marks (null). */
    markError(at, message) {
      const state = view.state;
      if (at === null || at < 0) {
        view.dispatch(setDiagnostics(state, []));
        return;
      }
      const from = Math.min(at, state.doc.length);
      const to = wordEnd(state.doc.toString(), from);
      view.dispatch(setDiagnostics(state, [{ from, to, severity: 'error', message }]));
      view.dispatch({ selection: { anchor: from }, scrollIntoView: true });
    },
  };
}

const MONO = 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace';
const theme = EditorView.theme({
  '&': { height: '100%', fontSize: '13px', backgroundColor: '#fff' },
  '&.cm-focused': { outline: 'none' },
  '.cm-scroller': { fontFamily: MONO, lineHeight: '1.45' },
  '.cm-gutters': { backgroundColor: '#f6f7f9', borderRight: '1px solid #dde1e6', color: '#8a939e' },
  '.cm-activeLine': { backgroundColor: '#f3f7fe' },
  '.cm-activeLineGutter': { backgroundColor: '#e8eefb' },
  '.cm-tooltip': { fontFamily: 'system-ui, sans-serif', fontSize: '12px' },
  '.cm-lintRange-error': { backgroundColor: '#fde7e7' },
});

/** The selection if there is one, else the statement under the cursor. */
function pick(state) {
  const range = state.selection.main;
  const doc = state.doc.toString();
  if (!range.empty) return { text: doc.slice(range.from, range.to), offset: range.from };
  return statementAt(doc, range.head);
}

/** The end of the word (or the one character) at `from`, for the error's underline. */
function wordEnd(doc, from) {
  if (from >= doc.length) return from;
  let to = from;
  while (to < doc.length && /[\w$.]/.test(doc[to]) && to - from < 200) to++;
  return to > from ? to : from + 1;
}

function save(text) {
  try {
    if (text.length <= SAVED_CHARS_MAX) localStorage.setItem(SAVED_KEY, text);
  } catch {
    // Storage full or disabled: the editor's text is just not kept.
  }
}
