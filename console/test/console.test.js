// Tests of the console's logic that needs no browser: statement splitting, chart data and the
// login state.
// Run with `npm test` (node --test); tests/clients/test_console.py drives the whole page.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { statementRanges, statementAt } from '../src/statements.js';
import { chartPlan, chartData, epochSeconds, SERIES_MAX } from '../src/chartdata.js';
import { sessionView, userLabel, loginFailure } from '../src/session.js';
import { badLineTexts } from '../src/upload.js';

test('statements split at semicolons outside quotes and comments', () => {
  const text = "SELECT ';' AS a; -- no; split\nSELECT \"x;y\" /* ; */ FROM t;";
  const parts = statementRanges(text).map(([f, t]) => text.slice(f, t).trim());
  assert.deepEqual(parts, ["SELECT ';' AS a", '-- no; split\nSELECT "x;y" /* ; */ FROM t', '']);
  // Unterminated quotes and comments run to the end, without throwing or looping.
  for (const bad of ["SELECT 'abc", 'SELECT "a', 'SELECT /* x', 'SELECT 1 --', "'", '/*', ';;;', '']) {
    const ranges = statementRanges(bad);
    assert.ok(ranges.length >= 1 && ranges.every(([f, t]) => f <= t && t <= bad.length), bad);
  }
  // Big input: linear, bounded by the text.
  const big = 'SELECT 1;'.repeat(20000);
  assert.equal(statementRanges(big).length, 20001);
});

test('the statement under the cursor', () => {
  const text = 'SELECT 1;\n\n  SELECT 2\n  FROM t;\n';
  const at = (i) => statementAt(text, i);
  assert.deepEqual(at(0), { text: 'SELECT 1', offset: 0 });
  assert.deepEqual(at(9), { text: 'SELECT 1', offset: 0 }, 'just after the ;');
  assert.deepEqual(at(10), { text: 'SELECT 2\n  FROM t', offset: 13 });
  assert.deepEqual(at(20), { text: 'SELECT 2\n  FROM t', offset: 13 });
  assert.deepEqual(at(text.length), { text: 'SELECT 2\n  FROM t', offset: 13 }, 'after the last ;');
  assert.deepEqual(statementAt('', 0), { text: '', offset: 0 });
  assert.deepEqual(statementAt(';  ;', 2), { text: '', offset: 0 });
  assert.deepEqual(statementAt('  SELECT 3', 0), { text: 'SELECT 3', offset: 2 });
  assert.deepEqual(statementAt('SELECT 1; SELECT * FROM x', 25), { text: 'SELECT * FROM x', offset: 10 });
  // Out of range cursors do not throw.
  assert.deepEqual(statementAt('SELECT 1', 99), { text: 'SELECT 1', offset: 0 });
  assert.deepEqual(statementAt('SELECT 1', -5), { text: 'SELECT 1', offset: 0 });
});

test('timestamps of any precision', () => {
  assert.equal(epochSeconds('1970-01-01T00:00:01.000000Z'), 1);
  assert.equal(epochSeconds('2024-01-01T00:00:00Z'), 1704067200);
  assert.equal(epochSeconds('2024-01-01T00:00:00.5Z'), 1704067200.5);
  assert.ok(Math.abs(epochSeconds('2024-01-01T00:00:00.000000123Z') - 1704067200.000000123) < 1e-6);
  assert.equal(epochSeconds(null), null);
  assert.equal(epochSeconds('not a time'), null);
  assert.equal(epochSeconds('9999-99-99T99:99:99Z'), null);
});

const cols = (...specs) => specs.map(([name, type]) => ({ name, type }));

test('what a chart plots', () => {
  assert.ok(chartPlan(cols(['x', 'LONG']), -1).error);
  assert.ok(chartPlan(cols(['ts', 'TIMESTAMP'], ['s', 'SYMBOL']), -1).error);
  assert.deepEqual(chartPlan(cols(['s', 'SYMBOL'], ['ts', 'TIMESTAMP'], ['v', 'DOUBLE'], ['b', 'BOOLEAN']), -1),
    { time: 1, keys: [0], values: [2] });
  // The designated timestamp wins over the first TIMESTAMP column.
  assert.equal(chartPlan(cols(['a', 'TIMESTAMP'], ['b', 'TIMESTAMP'], ['v', 'INT']), 1).time, 1);
});

test('keyed results give one series per key, aligned on sorted time', () => {
  const columns = cols(['ts', 'TIMESTAMP'], ['host', 'SYMBOL'], ['v', 'DOUBLE']);
  const plan = chartPlan(columns, -1);
  const rows = [
    ['1970-01-01T00:00:02.000000Z', 'b', 4],
    ['1970-01-01T00:00:01.000000Z', 'a', 1],
    ['1970-01-01T00:00:01.000000Z', 'b', 2],
    ['1970-01-01T00:00:02.000000Z', null, 'NaN'],
    [null, 'a', 9],
  ];
  const { data, labels, capped } = chartData(plan, columns, rows);
  assert.deepEqual(labels, ['b', 'a', 'null']);
  assert.deepEqual([...data[0]], [1, 2]);
  assert.deepEqual(data.slice(1), [[2, 4], [1, null], [null, null]]);
  assert.equal(capped, false);
});

test('series are capped', () => {
  const columns = cols(['ts', 'TIMESTAMP'], ['k', 'VARCHAR'], ['v', 'LONG'], ['w', 'LONG']);
  const rows = [];
  for (let i = 0; i < 100; i++) rows.push(['2024-01-01T00:00:00.000000Z', `k${i}`, i, -i]);
  const { data, labels, capped } = chartData(chartPlan(columns, -1), columns, rows);
  assert.equal(labels.length, SERIES_MAX);
  assert.equal(data.length, SERIES_MAX + 1);
  assert.equal(labels[0], 'k0: v');
  assert.ok(capped);
});

test('what GET /login means for the page', () => {
  const app = (user, role, logout) => ({ view: 'app', user, role, logout });
  assert.deepEqual(sessionView({ auth: 'off', user: null, role: null }), app(null, null, false));
  assert.deepEqual(sessionView({ auth: 'required', user: null, role: null }),
    { view: 'form', user: null, role: null, logout: false });
  assert.deepEqual(sessionView({ auth: 'required', user: 'admin', role: 'admin' }), app('admin', 'admin', true));
  assert.deepEqual(sessionView({ auth: 'required', user: 'bob', role: 'read' }), app('bob', 'read', true));
  // A user without a role is still logged in; an unknown role is not shown as one.
  assert.deepEqual(sessionView({ auth: 'required', user: 'eve', role: null }), app('eve', null, true));
  assert.deepEqual(sessionView({ auth: 'required', user: 'eve', role: 'root' }), app('eve', null, true));
  // With auth off there is nothing to log out of, even if a user is named.
  assert.deepEqual(sessionView({ auth: 'off', user: 'admin', role: 'admin' }), app('admin', 'admin', false));
  // No answer (an older server without /login, a network failure): the app, whose requests
  // show their own errors.
  for (const none of [null, undefined, 'text', 42, [], {}]) {
    assert.deepEqual(sessionView(none), app(null, null, false), JSON.stringify(none));
  }
  // Hostile answers: a name that is not a string or is empty means no user; a huge one is cut.
  for (const user of [42, '', {}, ['admin'], true]) {
    assert.equal(sessionView({ auth: 'required', user, role: 'admin' }).view, 'form', JSON.stringify(user));
  }
  assert.equal(sessionView({ auth: 'required', user: 'x'.repeat(100_000), role: 'read' }).user.length, 64);
  // Anything but "required" shows no form (the server decides; an unknown value is not a lock-out).
  assert.equal(sessionView({ auth: 'REQUIRED', user: null }).view, 'app');
  assert.equal(userLabel('bob', 'read'), 'bob (read)');
  assert.equal(userLabel('eve', null), 'eve (no role)');
});

test('what a failed login says', () => {
  assert.equal(loginFailure(401, 'wrong user name or password'), 'wrong user name or password');
  assert.equal(loginFailure(401, undefined), 'wrong user name or password');
  assert.equal(loginFailure(0, 'Failed to fetch'), 'cannot reach the server: Failed to fetch');
  assert.equal(loginFailure(0, ''), 'cannot reach the server');
  assert.match(loginFailure(404, undefined), /no login/);
  assert.equal(loginFailure(400, 'send {"user": ...} as JSON'), 'send {"user": ...} as JSON');
  assert.equal(loginFailure(503, null), 'login failed: HTTP 503');
  assert.equal(loginFailure(500, 'x'.repeat(10_000)).length, 500);
});

test('an import names the line of each refused value', () => {
  const answer = {
    errorsTotal: 3,
    errors: [
      { line: 4, column: 'temp', action: 'skipCol', reason: "'warm' is not a DOUBLE" },
      { line: 7, column: null, action: 'skipRow', reason: 'expected 3 fields, found 2' },
    ],
  };
  assert.deepEqual(badLineTexts(answer), [
    "line 4: temp: 'warm' is not a DOUBLE (skipCol)",
    'line 7: expected 3 fields, found 2 (skipRow)',
    '… and 1 more',
  ]);
  assert.deepEqual(badLineTexts({ errors: [], errorsTotal: 0 }), []);
  assert.deepEqual(badLineTexts({}), []);
});
