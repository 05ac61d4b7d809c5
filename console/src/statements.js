// Splitting the editor's text into statements at `;` (outside quotes and comments).

/** The statements of `text` as [start, end) ranges, `;` excluded. */
export function statementRanges(text) {
  const ranges = [];
  let start = 0;
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "'" || c === '"') {
      i = text.indexOf(c, i + 1);
      // A doubled quote is an escaped one: the scan just goes on from the next quote.
      i = i < 0 ? text.length : i + 1;
    } else if (c === '-' && text[i + 1] === '-') {
      i = text.indexOf('\n', i);
      i = i < 0 ? text.length : i + 1;
    } else if (c === '/' && text[i + 1] === '*') {
      i = text.indexOf('*/', i + 2);
      i = i < 0 ? text.length : i + 2;
    } else if (c === ';') {
      ranges.push([start, i]);
      start = ++i;
    } else {
      i++;
    }
  }
  ranges.push([start, text.length]);
  return ranges;
}

/** The statement under offset `at` ({text, offset}, surrounding blanks trimmed): the one whose
 * text holds the cursor (or ends with the `;` just before it); when that one is blank (the cursor is after
 * the last `;`), the nearest non-blank one before it, else after it. */
export function statementAt(text, at) {
  const raw = statementRanges(text);
  const trimmed = raw.map(([from, to]) => trim(text, from, to));
  const blank = ([from, to]) => from >= to;
  let i = raw.findIndex(([from, to]) => at >= from && at <= to + 1);
  if (i < 0) i = raw.length - 1;
  let range = trimmed[i];
  if (blank(range)) {
    range = trimmed.slice(0, i).filter((r) => !blank(r)).pop()
      ?? trimmed.slice(i + 1).find((r) => !blank(r));
  }
  if (!range) return { text: '', offset: 0 };
  return { text: text.slice(range[0], range[1]), offset: range[0] };
}

function trim(text, from, to) {
  while (from < to && /\s/.test(text[from])) from++;
  while (to > from && /\s/.test(text[to - 1])) to--;
  return [from, to];
}
