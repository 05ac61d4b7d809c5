// End-to-end test of node-postgres (`pg`) against a running `sundial serve`.
//
// Connection parameters come from PGHOST, PGPORT, PGUSER, PGPASSWORD and PGDATABASE; run with
// TZ=UTC (timestamps without time zone are read as local times). Every check runs as a named step;
// a failed step prints why and the run goes on with the next one, and the process exits 1 if any
// step failed (0 otherwise). Run by tests/clients/test_drivers.py.
'use strict'

const assert = require('node:assert/strict')
const pg = require('pg')

const config = {
  host: process.env.PGHOST || '127.0.0.1',
  port: Number(process.env.PGPORT || 8812),
  user: process.env.PGUSER || 'admin',
  password: process.env.PGPASSWORD || 'quest',
  database: process.env.PGDATABASE || 'qdb',
  connectionTimeoutMillis: 10000,
  query_timeout: 60000,
  application_name: 'sundial-node-pg-test',
}

const ROWS = 500
const SYMBOLS = ['BTC', 'ETH', 'SOL', 'ADA', '€URO✓']
const BASE = Date.UTC(2024, 5, 1) // 2024-06-01T00:00:00Z

// One generated row of node_trades: JS Dates have milliseconds, so timestamps do too.
function makeTrade(i) {
  return {
    ts: new Date(BASE + i * 97_000 + ((i * 7919) % 1000)), // 97 s apart: two DAY partitions
    sym: SYMBOLS[i % SYMBOLS.length],
    price: 10 + i * 0.125,
    qty: i % 50 === 49 ? null : BigInt(i) * 1_000_000_007n,
    ok: i % 7 === 6 ? null : i % 3 === 0,
    note: i % 11 === 10 ? null : `note ${i}: ünï\t"q" 'x'`,
    n: i % 13 === 12 ? null : i - 250,
  }
}
const TRADES = Array.from({ length: ROWS }, (_, i) => makeTrade(i))

let failures = 0

async function run(name, bug, body) {
  const started = Date.now()
  try {
    await body()
    if (bug) {
      failures++
      console.log(`XPASS ${name}: passes although marked as the known server bug "${bug}"; remove the mark`)
    } else {
      console.log(`ok   ${name} (${Date.now() - started} ms)`)
    }
  } catch (err) {
    if (bug) {
      console.log(`XFAIL ${name} (known server bug: ${bug}): ${err.message.split('\n')[0]}`)
    } else {
      failures++
      console.log(`FAIL ${name}: ${err.stack || err}`)
      if (err.code) console.log(`     code=${err.code} position=${err.position}`)
    }
  }
}
const step = (name, body) => run(name, null, body)
const knownBug = (name, bug, body) => run(name, bug, body)

async function withClient(body, extra = {}) {
  const client = new pg.Client({ ...config, ...extra })
  await client.connect()
  try {
    return await body(client)
  } finally {
    await client.end()
  }
}

/** The error `promise` rejects with; fails if it resolves. */
async function rejection(promise, what) {
  try {
    await promise
  } catch (err) {
    return err
  }
  assert.fail(`no error for ${what}`)
}

// Rows of (ts, sym, price, qty, ok, note, n) as node-postgres returns them by default.
function asReturned(t) {
  return {
    ts: t.ts,
    sym: t.sym,
    price: t.price,
    qty: t.qty === null ? null : t.qty.toString(), // int8 comes back as a string
    ok: t.ok,
    note: t.note,
    n: t.n,
  }
}

const SELECT_ALL = 'SELECT ts, sym, price, qty, ok, note, n FROM node_trades'

function checkTrades(rows, want, what) {
  assert.equal(rows.length, want.length, `${what}: row count`)
  rows.forEach((row, i) => {
    assert.ok(row.ts instanceof Date, `${what} row ${i}: ts is not a Date: ${row.ts}`)
    assert.deepEqual(row, asReturned(want[i]), `${what} row ${i}`)
  })
}

async function main() {
  console.log(`node-postgres ${require('pg/package.json').version} against ${config.host}:${config.port}`)
  assert.equal(new Date(0).getTimezoneOffset(), 0, 'run with TZ=UTC')

  await step('Client connect (SCRAM-SHA-256) and a simple query', () =>
    withClient(async (c) => {
      const r = await c.query("SELECT 40 + 2 AS answer, 'héllo' AS greeting, true AS yes, 1.5 AS half")
      assert.equal(r.command, 'SELECT')
      assert.equal(r.rowCount, 1)
      assert.deepEqual(r.fields.map((f) => f.name), ['answer', 'greeting', 'yes', 'half'])
      assert.equal(Number(r.rows[0].answer), 42)
      assert.equal(r.rows[0].greeting, 'héllo')
      assert.equal(r.rows[0].yes, true)
      assert.equal(Number(r.rows[0].half), 1.5)
    }))

  await step('wrong password gives code 28P01', async () => {
    const c = new pg.Client({ ...config, password: 'wrong' })
    const err = await rejection(c.connect(), 'a wrong password')
    assert.equal(err.code, '28P01', err.message)
  })

  await step('CREATE TABLE (QuestDB DDL) through a simple query', () =>
    withClient(async (c) => {
      const r = await c.query(
        'CREATE TABLE node_trades (ts TIMESTAMP, sym SYMBOL, price DOUBLE, qty LONG, ok BOOLEAN, note VARCHAR, n INT) ' +
          'TIMESTAMP(ts) PARTITION BY DAY')
      assert.equal(r.rows.length, 0)
      const count = await c.query('SELECT count(*) AS n FROM node_trades')
      assert.equal(count.rows[0].n, '0')
    }))

  await step('parameterized INSERTs ($1..$7) with Dates, BigInts, NULLs; select-back check', () =>
    withClient(async (c) => {
      const sql = 'INSERT INTO node_trades (ts, sym, price, qty, ok, note, n) VALUES ($1, $2, $3, $4, $5, $6, $7)'
      // Half one row per statement, half in multi-row INSERTs with 350 parameters each.
      for (const t of TRADES.slice(0, ROWS / 2)) {
        const r = await c.query(sql, [t.ts, t.sym, t.price, t.qty, t.ok, t.note, t.n])
        assert.equal(r.command, 'INSERT')
        assert.equal(r.rowCount, 1)
      }
      for (let from = ROWS / 2; from < ROWS; from += 50) {
        const chunk = TRADES.slice(from, from + 50)
        const values = []
        const tuples = chunk.map((t, k) => {
          values.push(t.ts, t.sym, t.price, t.qty, t.ok, t.note, t.n)
          return `(${[1, 2, 3, 4, 5, 6, 7].map((p) => `$${k * 7 + p}`).join(', ')})`
        })
        const r = await c.query(
          `INSERT INTO node_trades (ts, sym, price, qty, ok, note, n) VALUES ${tuples.join(', ')}`, values)
        assert.equal(r.rowCount, chunk.length)
      }
      const r = await c.query(`${SELECT_ALL} ORDER BY ts`)
      checkTrades(r.rows, TRADES, 'all rows')
    }))

  await step('parameterized SELECT with text, number, Date and BigInt parameters', () =>
    withClient(async (c) => {
      for (const [sym, minPrice, since] of [['ETH', 20, new Date(BASE)], ['€URO✓', 0, new Date(BASE + 97_000 * 300)],
        ['SOL', 50.5, new Date(BASE + 1)], ['nope', 0, new Date(0)]]) {
        const r = await c.query(`${SELECT_ALL} WHERE sym = $1 AND price > $2 AND ts >= $3 ORDER BY ts`,
          [sym, minPrice, since])
        const want = TRADES.filter((t) => t.sym === sym && t.price > minPrice && t.ts >= since)
        checkTrades(r.rows, want, `${sym} > ${minPrice} since ${since.toISOString()}`)
      }
      const big = await c.query('SELECT count(*) AS n, min(qty) AS q FROM node_trades WHERE qty > $1',
        [400n * 1_000_000_007n])
      const want = TRADES.filter((t) => t.qty !== null && t.qty > 400n * 1_000_000_007n)
      assert.deepEqual(big.rows[0], { n: String(want.length), q: (401n * 1_000_000_007n).toString() })
      const nulls = await c.query('SELECT count(*) AS n FROM node_trades WHERE note IS NULL AND ok IS NOT NULL AND n > $1', [-1000])
      assert.equal(nulls.rows[0].n, String(TRADES.filter((t) => t.note === null && t.ok !== null && t.n !== null).length))
    }))

  await step('named prepared statements executed repeatedly', () =>
    withClient(async (c) => {
      for (let round = 0; round < 12; round++) {
        const sym = SYMBOLS[round % SYMBOLS.length]
        const minPrice = 10 + round * 5
        const r = await c.query({
          name: 'by_sym',
          text: `${SELECT_ALL} WHERE sym = $1 AND price > $2 ORDER BY ts`,
          values: [sym, minPrice],
        })
        checkTrades(r.rows, TRADES.filter((t) => t.sym === sym && t.price > minPrice), `round ${round}`)
      }
      // rowMode 'array' and a second named statement on the same connection.
      for (let round = 0; round < 6; round++) {
        const r = await c.query({
          name: 'agg',
          text: 'SELECT sym, count(*) AS n, max(price) AS top FROM node_trades WHERE n >= $1 GROUP BY sym ORDER BY sym',
          values: [round * 10],
          rowMode: 'array',
        })
        const want = SYMBOLS.slice().sort().map((sym) => {
          const rows = TRADES.filter((t) => t.sym === sym && t.n !== null && t.n >= round * 10)
          return [sym, String(rows.length), Math.max(...rows.map((t) => t.price))]
        }).filter((row) => row[1] !== '0')
        assert.deepEqual(r.rows, want, `agg round ${round}`)
      }
    }))

  await step('several statements in one simple query', () =>
    withClient(async (c) => {
      const results = await c.query(
        "CREATE TABLE node_multi (ts TIMESTAMP, v LONG) TIMESTAMP(ts); " +
          "INSERT INTO node_multi VALUES ('2024-01-01T00:00:00Z', 1), ('2024-01-01T00:00:01Z', 2); " +
          "SELECT count(*) AS n, sum(v) AS s FROM node_multi; SELECT 'x' AS y")
      assert.ok(Array.isArray(results), 'expected one result per statement')
      assert.deepEqual(results.map((r) => r.command), ['CREATE', 'INSERT', 'SELECT', 'SELECT'])
      assert.equal(results[1].rowCount, 2)
      assert.deepEqual(results[2].rows, [{ n: '2', s: '3' }])
      assert.deepEqual(results[3].rows, [{ y: 'x' }])
    }))

  await step('errors carry .code (SQLSTATE) and .position', () =>
    withClient(async (c) => {
      let err = await rejection(c.query('SELECT nope FROM node_trades'), 'a missing column')
      assert.equal(err.code, '42703', err.message)
      assert.equal(err.position, '8', `position of ${err.message}`)
      assert.equal(err.severity, 'ERROR')
      err = await rejection(c.query('SELECT * FROM no_such_table'), 'a missing table')
      assert.equal(err.code, '42P01', err.message)
      assert.equal(err.position, '15', `position of ${err.message}`)
      err = await rejection(c.query('SELECT 1;\nSELEC 2'), 'a syntax error')
      assert.equal(err.code, '42601', err.message)
      assert.ok(Number(err.position) >= 11, `position ${err.position} of ${err.message}`)
      err = await rejection(c.query('SELECT * FROM no_such_table WHERE x = $1', [1]), 'a missing table with a parameter')
      assert.equal(err.code, '42P01', err.message)
      err = await rejection(c.query('INSERT INTO node_trades (ts, n) VALUES ($1, $2)', [new Date(BASE), 'abc']),
        'a bad integer')
      assert.equal(err.code, '22P02', err.message)
      // The client is still usable.
      const r = await c.query('SELECT count(*) AS n FROM node_trades')
      assert.equal(r.rows[0].n, String(ROWS))
    }))

  await step('error .position for a query with parameters', () =>
    withClient(async (c) => {
      const err = await rejection(c.query('SELECT nope FROM node_trades WHERE sym = $1', ['BTC']), 'a missing column')
      assert.equal(err.code, '42703')
      assert.equal(err.position, '8', `position of ${err.message}`)
    }))

  await step('Pool: 10 concurrent tasks sharing 4 connections, and a transaction', async () => {
    const pool = new pg.Pool({ ...config, max: 4 })
    try {
      await pool.query('CREATE TABLE node_pool (ts TIMESTAMP, task INT, i INT) TIMESTAMP(ts) PARTITION BY DAY')
      const tasks = Array.from({ length: 10 }, async (_, task) => {
        for (let i = 0; i < 20; i++) {
          const sym = SYMBOLS[(task + i) % SYMBOLS.length]
          const minPrice = (task * 37 + i * 11) % 70
          const r = await pool.query('SELECT count(*) AS n FROM node_trades WHERE sym = $1 AND price > $2', [sym, minPrice])
          assert.equal(r.rows[0].n, String(TRADES.filter((t) => t.sym === sym && t.price > minPrice).length),
            `task ${task} query ${i}`)
          await pool.query('INSERT INTO node_pool VALUES ($1, $2, $3)', [new Date(BASE + task * 3_600_000 + i * 1000), task, i])
        }
      })
      await Promise.all(tasks)
      assert.ok(pool.totalCount <= 4, `pool opened ${pool.totalCount} connections`)
      const r = await pool.query('SELECT count(*) AS n, count(DISTINCT task) AS tasks FROM node_pool')
      assert.deepEqual(r.rows[0], { n: '200', tasks: '10' })
      // A transaction on one checked-out client.
      const client = await pool.connect()
      try {
        await client.query('BEGIN')
        await client.query('INSERT INTO node_pool VALUES ($1, $2, $3)', [new Date(BASE), 99, 0])
        await client.query('INSERT INTO node_pool VALUES ($1, $2, $3)', [new Date(BASE + 1), 99, 1])
        await client.query('COMMIT')
      } finally {
        client.release()
      }
      const after = await pool.query('SELECT count(*) AS n FROM node_pool WHERE task = $1', [99])
      assert.equal(after.rows[0].n, '2')
    } finally {
      await pool.end()
    }
  })

  await step('timestamps and dates come back as JS Dates with the right values', () =>
    withClient(async (c) => {
      await c.query('CREATE TABLE node_times (ts TIMESTAMP, d DATE, label VARCHAR) TIMESTAMP(ts)')
      const cases = [
        [new Date('2024-02-29T23:59:59.999Z'), new Date('2024-02-29T00:00:00Z'), 'leap'],
        [new Date('1970-01-01T00:00:00.000Z'), new Date('1970-01-01T00:00:00Z'), 'epoch'],
        [new Date('1999-12-31T12:34:56.789Z'), new Date('1999-12-31T00:00:00Z'), 'y2k'],
        [new Date('2038-01-19T03:14:08.001Z'), new Date('2038-01-19T00:00:00Z'), '2038'],
      ]
      for (const [ts, d, label] of cases) {
        await c.query('INSERT INTO node_times VALUES ($1, $2, $3)', [ts, d, label])
      }
      await c.query("INSERT INTO node_times VALUES ('2024-06-01 00:00:00.5', '2024-06-01', 'literal')")
      const r = await c.query('SELECT ts, d, label FROM node_times ORDER BY ts')
      const want = [...cases, [new Date('2024-06-01T00:00:00.500Z'), new Date('2024-06-01T00:00:00Z'), 'literal']]
        .sort((a, b) => a[0] - b[0])
      assert.equal(r.rows.length, want.length)
      r.rows.forEach((row, i) => {
        assert.ok(row.ts instanceof Date && row.d instanceof Date, `row ${i} types`)
        assert.equal(row.ts.toISOString(), want[i][0].toISOString(), `ts of ${row.label}`)
        assert.equal(row.d.toISOString(), want[i][1].toISOString(), `date of ${row.label}`)
        assert.equal(row.label, want[i][2])
      })
      // The text PostgreSQL would print, and microseconds, which JS Dates cannot hold.
      const text = await c.query(
        "SELECT CAST(ts AS VARCHAR) AS t FROM node_times WHERE label = $1", ['leap'])
      assert.match(text.rows[0].t, /^2024-02-29[ T]23:59:59\.999/)
      const micros = await c.query("SELECT extract(microsecond FROM CAST('2024-01-01 00:00:00.123456' AS TIMESTAMP)) AS us")
      assert.equal(Number(micros.rows[0].us), 123456)
    }))

  await step('a JS Date in a non-UTC zone round-trips through a TIMESTAMP column', () =>
      withClient(async (c) => {
        await c.query('CREATE TABLE node_tz (ts TIMESTAMP, label VARCHAR) TIMESTAMP(ts)')
        const saved = process.env.TZ
        process.env.TZ = 'Asia/Kolkata'
        try {
          // Sent as '2024-05-05T10:00:00.123+05:30'; read back as a local (Kolkata) wall-clock time.
          const local = new Date(2024, 4, 5, 10, 0, 0, 123)
          await c.query('INSERT INTO node_tz VALUES ($1, $2)', [local, 'kolkata'])
          const r = await c.query('SELECT ts FROM node_tz')
          assert.equal(r.rows[0].ts.getTime(), local.getTime(), `read back ${r.rows[0].ts.toString()}`)
        } finally {
          process.env.TZ = saved
        }
      }))

  await step('a named prepared statement sees rows inserted after it was prepared', () =>
      withClient(async (c) => {
        await c.query('CREATE TABLE node_stale (ts TIMESTAMP, v LONG) TIMESTAMP(ts)')
        const seen = []
        for (let i = 0; i < 3; i++) {
          const r = await c.query({ name: 'count_stale', text: 'SELECT count(*) AS n FROM node_stale WHERE v >= $1', values: [0] })
          seen.push(r.rows[0].n)
          await c.query('INSERT INTO node_stale VALUES ($1, $2)', [new Date(BASE + i * 1000), i])
        }
        const fresh = await c.query('SELECT count(*) AS n FROM node_stale')
        assert.equal(fresh.rows[0].n, '3', 'count by a simple query')
        assert.deepEqual(seen, ['0', '1', '2'], 'counts by the named statement after 0, 1 and 2 inserts')
      }))

  console.log(failures === 0 ? 'node-postgres: all steps passed' : `node-postgres: ${failures} step(s) FAILED`)
  process.exitCode = failures === 0 ? 0 : 1
}

main().catch((err) => {
  console.log(`FAIL (uncaught): ${err.stack || err}`)
  process.exitCode = 1
})
