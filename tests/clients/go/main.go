// End-to-end test of the Go driver pgx (v5) against a running `sundial serve`.
//
// Connection parameters come from PGHOST, PGPORT, PGUSER, PGPASSWORD and PGDATABASE. Every check
// runs as a named step; a failed step prints why and the run goes on with the next one, and the
// program exits 1 if any step failed (0 otherwise). Run by tests/clients/test_drivers.py.
package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

const rows = 1000

var symbols = []string{"BTC", "ETH", "SOL", "ADA", "€URO✓"}

var base = time.Date(2024, 4, 1, 0, 0, 0, 0, time.UTC)

// trade is one generated row of pgx_trades; nil pointers are NULLs.
type trade struct {
	ts    time.Time
	sym   string
	price float64
	qty   *int64
	ok    *bool
	note  *string
}

func makeTrade(i int) trade {
	t := trade{
		// 97 s apart (two DAY partitions), with a microsecond part that differs per row.
		ts:    base.Add(time.Duration(97*i)*time.Second + time.Duration((i*7919)%1_000_000)*time.Microsecond),
		sym:   symbols[i%len(symbols)],
		price: 50 + float64(i)*0.5,
	}
	if i%50 != 49 {
		q := int64(i) * 1_000_000_007
		t.qty = &q
	}
	if i%7 != 6 {
		b := i%3 == 0
		t.ok = &b
	}
	if i%11 != 10 {
		n := fmt.Sprintf("note %d: ünï\t\"q\"", i)
		t.note = &n
	}
	return t
}

var trades []trade

var (
	connString string
	failures   int
	ctx        = context.Background()
)

// step runs body; bug, when not empty, names the known server bug the step is expected to fail
// on (XFAIL); a step so marked that passes (XPASS) fails the run, so that the mark gets removed.
func run(name, bug string, body func() error) {
	started := time.Now()
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return body()
	}()
	switch {
	case err == nil && bug == "":
		fmt.Printf("ok   %s (%d ms)\n", name, time.Since(started).Milliseconds())
	case err == nil:
		failures++
		fmt.Printf("XPASS %s: passes although marked as the known server bug %q; remove the mark\n", name, bug)
	case bug != "":
		fmt.Printf("XFAIL %s (known server bug: %s): %v\n", name, bug, err)
	default:
		failures++
		fmt.Printf("FAIL %s: %v\n", name, err)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			fmt.Printf("     SQLSTATE=%s position=%d detail=%q\n", pgErr.Code, pgErr.Position, pgErr.Detail)
		}
	}
}

func step(name string, body func() error) { run(name, "", body) }

func knownBug(name, bug string, body func() error) { run(name, bug, body) }

func check(ok bool, format string, args ...any) error {
	if !ok {
		return fmt.Errorf(format, args...)
	}
	return nil
}

func checkEq(want, got any, format string, args ...any) error {
	if !reflect.DeepEqual(want, got) {
		return fmt.Errorf("%s: expected <%v> but got <%v>", fmt.Sprintf(format, args...), show(want), show(got))
	}
	return nil
}

func show(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "NULL"
		}
		return rv.Elem().Interface()
	}
	return v
}

func env(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func connect(mode ...pgx.QueryExecMode) (*pgx.Conn, error) {
	config, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	if len(mode) > 0 {
		config.DefaultQueryExecMode = mode[0]
	}
	return pgx.ConnectConfig(ctx, config)
}

func main() {
	u := url.URL{
		Scheme: "postgres",
		User:   url.UserPassword(env("PGUSER", "admin"), env("PGPASSWORD", "quest")),
		Host:   net.JoinHostPort(env("PGHOST", "127.0.0.1"), env("PGPORT", "8812")),
		Path:   "/" + env("PGDATABASE", "qdb"),
	}
	u.RawQuery = "connect_timeout=10&application_name=sundial-pgx-test"
	connString = u.String()
	for i := 0; i < rows; i++ {
		trades = append(trades, makeTrade(i))
	}
	var deadline context.CancelFunc
	ctx, deadline = context.WithTimeout(context.Background(), 90*time.Second)
	defer deadline()
	fmt.Printf("pgx v5 against %s:%s\n", env("PGHOST", "127.0.0.1"), env("PGPORT", "8812"))

	step("pgx.Connect (SCRAM-SHA-256), Ping and server parameters", connectAndPing)
	step("wrong password gives SQLSTATE 28P01", wrongPassword)
	step("Exec DDL (QuestDB CREATE TABLE)", createTables)
	step("Exec INSERT with parameters in every query exec mode, NULLs", execWithParams)
	step("CopyFrom (binary COPY) of 1000 rows", copyFrom)
	step("Query with $1/$2 in every query exec mode, exact values back", queryWithParams)
	step("QueryRow scanning aggregates", queryRow)
	step("CollectRows into structs and RowToMap", collectRows)
	step("pgx.Batch: inserts and queries in one pipeline (QueryExecModeExec)",
		func() error { return batch(pgx.QueryExecModeExec, "pgx_batch_exec") })
	step("pgx.Batch: inserts and queries in one pipeline (QueryExecModeDescribeExec)",
		func() error { return batch(pgx.QueryExecModeDescribeExec, "pgx_batch_describe") })
	step("pgx.Batch: inserts and queries in one pipeline (default QueryExecModeCacheStatement)", func() error { return batch(pgx.QueryExecModeCacheStatement, "pgx_batch_cached") })
	step("a prepared statement sees rows inserted after it was prepared", stalePrepared)
	step("pgx.Batch with an error in the middle", batchWithError)
	step("errors carry SQLSTATE in *pgconn.PgError", pgErrors)
	step("error position for a statement with parameters", errorPositionExtended)
	step("transactions: Begin/Commit, and an aborted transaction", transactions)
	step("pgxpool: 8 goroutines sharing 4 connections", pool)
	step("binary timestamps from a non-UTC time.Time keep the wall-clock time", nonUTCBinary)
	// The simple protocol inlines the value as an SQL string literal. Sundial reads a literal's
	// offset as QuestDB does (the instant, stored in UTC); PostgreSQL drops it for a TIMESTAMP.
	// Bound parameters follow PostgreSQL (see the binary and pgjdbc/node-postgres steps).
	knownBug("text timestamp with a UTC offset (simple protocol) keeps the wall-clock time",
		"an SQL string literal's UTC offset is applied (QuestDB's rule), not dropped as PostgreSQL does for TIMESTAMP",
		nonUTCText)
	step("parameter types of $1::BIGINT, CAST($1 AS INT), $1::timestamp", castParams)
	step("UUID column scans into pgtype.UUID", uuidColumn)
	step("= ANY($1) with []int64 and []string in every query exec mode", anyArrays)
	grafanaSteps()

	if failures == 0 {
		fmt.Println("pgx: all steps passed")
		os.Exit(0)
	}
	fmt.Printf("pgx: %d step(s) FAILED\n", failures)
	os.Exit(1)
}

// ---- steps ----------------------------------------------------------------------------------

func connectAndPing() error {
	conn, err := connect()
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if err := conn.Ping(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	var n int64
	var s string
	if err := conn.QueryRow(ctx, "SELECT 40 + 2, 'héllo'").Scan(&n, &s); err != nil {
		return err
	}
	if err := checkEq(int64(42), n, "40 + 2"); err != nil {
		return err
	}
	if err := checkEq("héllo", s, "string"); err != nil {
		return err
	}
	pg := conn.PgConn()
	if err := check(pg.ParameterStatus("server_version") != "", "no server_version"); err != nil {
		return err
	}
	if err := checkEq("UTF8", pg.ParameterStatus("client_encoding"), "client_encoding"); err != nil {
		return err
	}
	return check(pg.PID() != 0 || pg.SecretKey() != nil, "no BackendKeyData")
}

func wrongPassword() error {
	config, err := pgx.ParseConfig(connString)
	if err != nil {
		return err
	}
	config.Password = "wrong"
	conn, err := pgx.ConnectConfig(ctx, config)
	if err == nil {
		conn.Close(ctx)
		return errors.New("connected with a wrong password")
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return fmt.Errorf("not a PgError: %v", err)
	}
	return checkEq("28P01", pgErr.Code, "SQLSTATE")
}

func createTables() error {
	conn, err := connect()
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, ddl := range []string{
		"CREATE TABLE pgx_trades (ts TIMESTAMP, sym SYMBOL, price DOUBLE, qty LONG, ok BOOLEAN, note VARCHAR) TIMESTAMP(ts) PARTITION BY DAY",
		"CREATE TABLE pgx_params (ts TIMESTAMP, sym SYMBOL, price DOUBLE, qty LONG, ok BOOLEAN, note VARCHAR, n INT, f FLOAT, d DATE) TIMESTAMP(ts)",
		"CREATE TABLE pgx_pool (ts TIMESTAMP, worker INT, i INT) TIMESTAMP(ts) PARTITION BY DAY",
		"CREATE TABLE pgx_tx (ts TIMESTAMP, v LONG) TIMESTAMP(ts)",
		"CREATE TABLE pgx_tz (ts TIMESTAMP, how VARCHAR) TIMESTAMP(ts)",
		"CREATE TABLE pgx_uuid (ts TIMESTAMP, u UUID) TIMESTAMP(ts)",
	} {
		tag, err := conn.Exec(ctx, ddl)
		if err != nil {
			return fmt.Errorf("%s: %w", ddl, err)
		}
		if err := check(!tag.Insert() && !tag.Select(), "command tag %q for CREATE TABLE", tag); err != nil {
			return err
		}
	}
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pgx_trades").Scan(&n); err != nil {
		return err
	}
	return checkEq(int64(0), n, "rows in a new table")
}

var modes = []struct {
	name string
	mode pgx.QueryExecMode
}{
	{"CacheStatement", pgx.QueryExecModeCacheStatement},
	{"CacheDescribe", pgx.QueryExecModeCacheDescribe},
	{"DescribeExec", pgx.QueryExecModeDescribeExec},
	{"Exec", pgx.QueryExecModeExec},
	{"SimpleProtocol", pgx.QueryExecModeSimpleProtocol},
}

func ptr[T any](v T) *T { return &v }

func execWithParams() error {
	conn, err := connect()
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	type row struct {
		Ts    time.Time
		Sym   *string
		Price *float64
		Qty   *int64
		Ok    *bool
		Note  *string
		N     *int32
		F     *float32
		D     *time.Time
	}
	var want []row
	for i, m := range modes {
		ts := time.Date(2024, 2, 29, 23, 59, 59, 0, time.UTC).Add(time.Duration(i) * time.Hour).Add(123456 * time.Microsecond)
		full := row{ts, ptr("S" + m.name), ptr(-1.0e300 + float64(i)), ptr(int64(math.MinInt64 + 1 + i)), ptr(i%2 == 0),
			ptr("it's \"quoted\"\n\\ " + m.name + " 日本"), ptr(int32(math.MaxInt32 - i)), ptr(float32(1.5)),
			ptr(time.Date(1999, 12, 31-i, 0, 0, 0, 0, time.UTC))}
		empty := row{Ts: ts.Add(time.Minute)}
		for _, r := range []row{full, empty} {
			tag, err := conn.Exec(ctx, "INSERT INTO pgx_params VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)", m.mode,
				r.Ts, r.Sym, r.Price, r.Qty, r.Ok, r.Note, r.N, r.F, r.D)
			if err != nil {
				return fmt.Errorf("%s insert: %w", m.name, err)
			}
			if err := check(tag.Insert() && tag.RowsAffected() == 1, "%s: command tag %q", m.name, tag); err != nil {
				return err
			}
			want = append(want, r)
		}
	}
	sort.Slice(want, func(a, b int) bool { return want[a].Ts.Before(want[b].Ts) })
	for _, m := range modes {
		rs, err := conn.Query(ctx, "SELECT ts, sym, price, qty, ok, note, n, f, d FROM pgx_params WHERE ts > $1 ORDER BY ts",
			m.mode, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
		if err != nil {
			return fmt.Errorf("%s select: %w", m.name, err)
		}
		got, err := pgx.CollectRows(rs, pgx.RowToStructByPos[row])
		if err != nil {
			return fmt.Errorf("%s select: %w", m.name, err)
		}
		if err := checkEq(len(want), len(got), "%s: rows", m.name); err != nil {
			return err
		}
		for i := range want {
			if err := checkEq(want[i], got[i], "%s: row %d", m.name, i); err != nil {
				return err
			}
		}
	}
	return nil
}

func copyFrom() error {
	conn, err := connect()
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	src := make([][]any, 0, rows)
	for _, t := range trades {
		src = append(src, []any{t.ts, t.sym, t.price, t.qty, t.ok, t.note})
	}
	n, err := conn.CopyFrom(ctx, pgx.Identifier{"pgx_trades"}, []string{"ts", "sym", "price", "qty", "ok", "note"},
		pgx.CopyFromRows(src))
	if err != nil {
		return err
	}
	if err := checkEq(int64(rows), n, "rows copied"); err != nil {
		return err
	}
	var count, withQty int64
	var sum float64
	var first, last time.Time
	err = conn.QueryRow(ctx, "SELECT count(*), count(qty), sum(price), min(ts), max(ts) FROM pgx_trades").
		Scan(&count, &withQty, &sum, &first, &last)
	if err != nil {
		return err
	}
	var wantQty int64
	var wantSum float64
	for _, t := range trades {
		wantSum += t.price
		if t.qty != nil {
			wantQty++
		}
	}
	return errors.Join(
		checkEq(int64(rows), count, "count(*)"),
		checkEq(wantQty, withQty, "count(qty)"),
		checkEq(wantSum, sum, "sum(price)"),
		checkEq(trades[0].ts, first, "min(ts)"),
		checkEq(trades[rows-1].ts, last, "max(ts)"),
	)
}

func expected(sym string, minPrice float64) []trade {
	var out []trade
	for _, t := range trades {
		if t.sym == sym && t.price > minPrice {
			out = append(out, t)
		}
	}
	return out
}

// scanTrades reads (ts, sym, price, qty, ok, note) rows and compares them with want.
func scanTrades(rs pgx.Rows, want []trade, what string) error {
	defer rs.Close()
	i := 0
	for rs.Next() {
		if i >= len(want) {
			return fmt.Errorf("%s: more than the %d rows expected", what, len(want))
		}
		var got trade
		if err := rs.Scan(&got.ts, &got.sym, &got.price, &got.qty, &got.ok, &got.note); err != nil {
			return fmt.Errorf("%s: row %d: %w", what, i, err)
		}
		w := want[i]
		if err := errors.Join(
			checkEq(w.ts, got.ts, "%s row %d ts", what, i),
			checkEq(time.UTC, got.ts.Location(), "%s row %d ts location", what, i),
			checkEq(w.sym, got.sym, "%s row %d sym", what, i),
			checkEq(w.price, got.price, "%s row %d price", what, i),
			checkEq(w.qty, got.qty, "%s row %d qty", what, i),
			checkEq(w.ok, got.ok, "%s row %d ok", what, i),
			checkEq(w.note, got.note, "%s row %d note", what, i),
		); err != nil {
			return err
		}
		i++
	}
	if err := rs.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return checkEq(len(want), i, "%s: rows", what)
}

const selectBySym = "SELECT ts, sym, price, qty, ok, note FROM pgx_trades WHERE sym = $1 AND price > $2 ORDER BY ts"

func queryWithParams() error {
	for _, m := range modes {
		conn, err := connect(m.mode)
		if err != nil {
			return err
		}
		err = func() error {
			defer conn.Close(ctx)
			// Several runs each: the cached modes prepare once and then only Bind/Execute.
			for round := 0; round < 6; round++ {
				sym := symbols[round%len(symbols)]
				minPrice := 50 + float64(round)*40
				rs, err := conn.Query(ctx, selectBySym, sym, minPrice)
				if err != nil {
					return fmt.Errorf("%s round %d: %w", m.name, round, err)
				}
				if err := scanTrades(rs, expected(sym, minPrice), fmt.Sprintf("%s round %d (%s > %v)", m.name, round, sym, minPrice)); err != nil {
					return err
				}
			}
			// All 1000 rows, in time order.
			rs, err := conn.Query(ctx, "SELECT ts, sym, price, qty, ok, note FROM pgx_trades ORDER BY ts")
			if err != nil {
				return err
			}
			if err := scanTrades(rs, trades, m.name+" all rows"); err != nil {
				return err
			}
			// Field descriptions carry PostgreSQL's OIDs.
			rs, err = conn.Query(ctx, selectBySym, "BTC", 0.0)
			if err != nil {
				return err
			}
			var oids []uint32
			var names []string
			for _, fd := range rs.FieldDescriptions() {
				oids = append(oids, fd.DataTypeOID)
				names = append(names, fd.Name)
			}
			rs.Close()
			return errors.Join(
				checkEq([]string{"ts", "sym", "price", "qty", "ok", "note"}, names, "%s column names", m.name),
				checkEq([]uint32{pgtype.TimestampOID, pgtype.VarcharOID, pgtype.Float8OID, pgtype.Int8OID, pgtype.BoolOID, pgtype.VarcharOID},
					oids, "%s column type OIDs", m.name),
			)
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

func queryRow() error {
	conn, err := connect()
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, sym := range symbols {
		var n int64
		var top float64
		var first time.Time
		var qty *int64
		err := conn.QueryRow(ctx, "SELECT count(*), max(price), min(ts), max(qty) FROM pgx_trades WHERE sym = $1", sym).
			Scan(&n, &top, &first, &qty)
		if err != nil {
			return err
		}
		want := expected(sym, math.Inf(-1))
		var maxQty *int64
		for _, t := range want {
			if t.qty != nil && (maxQty == nil || *t.qty > *maxQty) {
				maxQty = t.qty
			}
		}
		if err := errors.Join(
			checkEq(int64(len(want)), n, "%s count", sym),
			checkEq(want[len(want)-1].price, top, "%s max(price)", sym),
			checkEq(want[0].ts, first, "%s min(ts)", sym),
			checkEq(maxQty, qty, "%s max(qty)", sym),
		); err != nil {
			return err
		}
	}
	// No row: pgx.ErrNoRows.
	var s string
	err = conn.QueryRow(ctx, "SELECT sym FROM pgx_trades WHERE sym = $1", "nope").Scan(&s)
	if err := check(errors.Is(err, pgx.ErrNoRows), "expected pgx.ErrNoRows, got %v", err); err != nil {
		return err
	}
	// NULL into a non-pointer fails, into a pointer gives nil.
	var qty *int64
	if err := conn.QueryRow(ctx, "SELECT qty FROM pgx_trades WHERE qty IS NULL LIMIT 1").Scan(&qty); err != nil {
		return err
	}
	if err := checkEq((*int64)(nil), qty, "NULL qty"); err != nil {
		return err
	}
	var plain int64
	err = conn.QueryRow(ctx, "SELECT qty FROM pgx_trades WHERE qty IS NULL LIMIT 1").Scan(&plain)
	return check(err != nil, "scanning NULL into an int64 did not fail")
}

func collectRows() error {
	conn, err := connect()
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	type Trade struct {
		Ts    time.Time `db:"ts"`
		Sym   string    `db:"sym"`
		Price float64   `db:"price"`
		Qty   *int64    `db:"qty"`
	}
	rs, err := conn.Query(ctx, "SELECT ts, sym, price, qty FROM pgx_trades WHERE sym = $1 ORDER BY ts LIMIT 5", "SOL")
	if err != nil {
		return err
	}
	got, err := pgx.CollectRows(rs, pgx.RowToStructByName[Trade])
	if err != nil {
		return err
	}
	want := expected("SOL", math.Inf(-1))[:5]
	for i, w := range want {
		if err := checkEq(Trade{w.ts, w.sym, w.price, w.qty}, got[i], "row %d", i); err != nil {
			return err
		}
	}
	rs, err = conn.Query(ctx, "SELECT sym, count(*) AS n FROM pgx_trades GROUP BY sym ORDER BY sym")
	if err != nil {
		return err
	}
	maps, err := pgx.CollectRows(rs, pgx.RowToMap)
	if err != nil {
		return err
	}
	if err := checkEq(len(symbols), len(maps), "groups"); err != nil {
		return err
	}
	return checkEq(map[string]any{"sym": "ADA", "n": int64(rows / len(symbols))}, maps[0], "first group")
}

// batch sends 20 inserts and 4 queries in one pipeline (one Sync) into table, which must be
// empty; the queries see the inserted rows. In QueryExecModeExec each query goes out as
// Parse/Bind/Describe/Execute; in the cached modes pgx first prepares every statement of the batch
// (Parse/Describe, Sync), then sends Bind/Execute for each and one Sync.
func batch(mode pgx.QueryExecMode, table string) error {
	conn, err := connect(mode)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" (ts TIMESTAMP, v LONG) TIMESTAMP(ts)"); err != nil {
		return err
	}
	b := &pgx.Batch{}
	for i := 0; i < 20; i++ {
		b.Queue("INSERT INTO "+table+" VALUES ($1, $2)", base.Add(time.Duration(i)*time.Second), int64(i*i))
	}
	b.Queue("SELECT count(*), sum(v) FROM " + table)
	b.Queue("SELECT v FROM "+table+" WHERE v >= $1 ORDER BY v", int64(300))
	b.Queue("SELECT sym, price FROM pgx_trades WHERE sym = $1 ORDER BY ts LIMIT 1", "ETH")
	b.Queue("SELECT $1 * 2 + v FROM "+table+" WHERE v = $2", int64(21), int64(0))
	br := conn.SendBatch(ctx, b)
	for i := 0; i < 20; i++ {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return fmt.Errorf("insert %d: %w", i, err)
		}
		if err := checkEq("INSERT 0 1", tag.String(), "insert %d tag", i); err != nil {
			br.Close()
			return err
		}
	}
	var count int64
	var sum *int64
	if err := br.QueryRow().Scan(&count, &sum); err != nil {
		br.Close()
		return err
	}
	rs, err := br.Query()
	if err != nil {
		br.Close()
		return err
	}
	vs, err := pgx.CollectRows(rs, pgx.RowTo[int64])
	if err != nil {
		br.Close()
		return err
	}
	var sym string
	var price float64
	if err := br.QueryRow().Scan(&sym, &price); err != nil {
		br.Close()
		return err
	}
	var doubled int64
	if err := br.QueryRow().Scan(&doubled); err != nil {
		br.Close()
		return err
	}
	if err := br.Close(); err != nil {
		return err
	}
	eth := expected("ETH", math.Inf(-1))[0]
	return errors.Join(
		checkEq(int64(20), count, "count after the batched inserts"),
		checkEq(ptr(int64(2470)), sum, "sum(v)"),
		checkEq([]int64{324, 361}, vs, "rows with v >= 300"),
		checkEq(eth.sym, sym, "sym"),
		checkEq(eth.price, price, "price"),
		checkEq(int64(42), doubled, "$1 * 2 + v"),
	)
}

// In QueryExecModeExec the batch goes out as Parse/Bind/Describe/Execute for each query and one
// Sync: after the failed query the server skips the rest up to the Sync. (The cached modes would
// prepare every query first and fail the whole batch there.)
func batchWithError() error {
	conn, err := connect(pgx.QueryExecModeExec)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	b := &pgx.Batch{}
	b.Queue("SELECT 1")
	b.Queue("SELECT * FROM pgx_missing WHERE v = $1", int64(1))
	b.Queue("SELECT 3")
	br := conn.SendBatch(ctx, b)
	var one int64
	if err := br.QueryRow().Scan(&one); err != nil {
		br.Close()
		return fmt.Errorf("first query: %w", err)
	}
	_, err = br.Exec()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		br.Close()
		return fmt.Errorf("second query: expected a PgError, got %v", err)
	}
	code := pgErr.Code
	_, third := br.Exec()
	br.Close()
	if err := errors.Join(
		checkEq(int64(1), one, "first result"),
		checkEq("42P01", code, "SQLSTATE of the failed query"),
		check(third != nil, "the query after the error ran"),
	); err != nil {
		return err
	}
	// The connection is fine afterwards.
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pgx_trades").Scan(&n); err != nil {
		return err
	}
	return checkEq(int64(rows), n, "count after the failed batch")
}

func pgErrors() error {
	conn, err := connect()
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	cases := []struct {
		sql      string
		args     []any
		code     string
		position int32 // 0: not checked
	}{
		{"SELECT * FROM no_such_table", nil, "42P01", 0},
		{"SELEC 1", nil, "42601", 0},
		{"SELECT nope FROM pgx_trades", []any{pgx.QueryExecModeSimpleProtocol}, "42703", 8},
		{"SELECT nope FROM pgx_trades WHERE sym = $1", []any{"BTC"}, "42703", 0},
		{"SELECT 1/0", nil, "22012", 0},
		{"INSERT INTO pgx_trades (ts, qty) VALUES ($1, $2)", []any{pgx.QueryExecModeExec, base, "not-a-number"}, "22P02", 0},
	}
	for _, c := range cases {
		rs, err := conn.Query(ctx, c.sql, c.args...)
		if err == nil {
			for rs.Next() {
			}
			rs.Close()
			err = rs.Err()
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			return fmt.Errorf("%s: expected a PgError, got %v", c.sql, err)
		}
		if err := errors.Join(
			checkEq(c.code, pgErr.Code, "SQLSTATE of %q (%s)", c.sql, pgErr.Message),
			checkEq("ERROR", pgErr.Severity, "severity of %q", c.sql),
		); err != nil {
			return err
		}
		if c.position != 0 {
			if err := checkEq(c.position, pgErr.Position, "position of %q", c.sql); err != nil {
				return err
			}
		}
	}
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pgx_trades").Scan(&n); err != nil {
		return err
	}
	return checkEq(int64(rows), n, "count after the errors")
}

func errorPositionExtended() error {
	conn, err := connect()
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SELECT nope FROM pgx_trades WHERE sym = $1", "BTC")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return fmt.Errorf("expected a PgError, got %v", err)
	}
	return errors.Join(checkEq("42703", pgErr.Code, "SQLSTATE"), checkEq(int32(8), pgErr.Position, "position"))
}

func transactions() error {
	conn, err := connect()
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	for i := 0; i < 10; i++ {
		if _, err := tx.Exec(ctx, "INSERT INTO pgx_tx VALUES ($1, $2)", base.Add(time.Duration(i)*time.Minute), int64(i)); err != nil {
			tx.Rollback(ctx)
			return err
		}
	}
	if err := checkEq(byte('T'), conn.PgConn().TxStatus(), "transaction status inside the block"); err != nil {
		tx.Rollback(ctx)
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	other, err := connect()
	if err != nil {
		return err
	}
	defer other.Close(ctx)
	var n, sum int64
	if err := other.QueryRow(ctx, "SELECT count(*), sum(v) FROM pgx_tx").Scan(&n, &sum); err != nil {
		return err
	}
	if err := errors.Join(checkEq(int64(10), n, "rows after commit"), checkEq(int64(45), sum, "sum after commit")); err != nil {
		return err
	}
	// An error inside a block: 25P02 until the rollback.
	tx, err = conn.Begin(ctx)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "SELECT * FROM no_such_table")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		tx.Rollback(ctx)
		return fmt.Errorf("expected 42P01, got %v", err)
	}
	_, err = tx.Exec(ctx, "SELECT 1")
	if !errors.As(err, &pgErr) || pgErr.Code != "25P02" {
		tx.Rollback(ctx)
		return fmt.Errorf("expected 25P02 in an aborted transaction, got %v", err)
	}
	if err := checkEq(byte('E'), conn.PgConn().TxStatus(), "transaction status after the error"); err != nil {
		tx.Rollback(ctx)
		return err
	}
	if err := tx.Rollback(ctx); err != nil {
		return err
	}
	return checkEq(byte('I'), conn.PgConn().TxStatus(), "transaction status after rollback")
}

func pool() error {
	config, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return err
	}
	config.MaxConns = 4
	p, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return err
	}
	defer p.Close()
	const workers, iterations = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < iterations; i++ {
				sym := symbols[(w+i)%len(symbols)]
				minPrice := float64((w*37 + i*11) % 500)
				var n int64
				var top *float64
				err := p.QueryRow(ctx, "SELECT count(*), max(price) FROM pgx_trades WHERE sym = $1 AND price > $2", sym, minPrice).
					Scan(&n, &top)
				if err != nil {
					errs <- fmt.Errorf("worker %d query %d: %w", w, i, err)
					return
				}
				want := expected(sym, minPrice)
				var wantTop *float64
				if len(want) > 0 {
					wantTop = &want[len(want)-1].price
				}
				if err := errors.Join(checkEq(int64(len(want)), n, "worker %d query %d count", w, i),
					checkEq(wantTop, top, "worker %d query %d max", w, i)); err != nil {
					errs <- err
					return
				}
				ts := base.Add(time.Duration(w)*time.Hour + time.Duration(i)*time.Second)
				if _, err := p.Exec(ctx, "INSERT INTO pgx_pool VALUES ($1, $2, $3)", ts, int32(w), int32(i)); err != nil {
					errs <- fmt.Errorf("worker %d insert %d: %w", w, i, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	if err := errors.Join(all...); err != nil {
		return err
	}
	stat := p.Stat()
	if err := check(stat.TotalConns() <= 4 && stat.TotalConns() >= 1, "pool has %d connections", stat.TotalConns()); err != nil {
		return err
	}
	var n, workersSeen int64
	if err := p.QueryRow(ctx, "SELECT count(*), count(DISTINCT worker) FROM pgx_pool").Scan(&n, &workersSeen); err != nil {
		return err
	}
	return errors.Join(checkEq(int64(workers*iterations), n, "rows inserted through the pool"),
		checkEq(int64(workers), workersSeen, "workers"))
}

var kolkata = time.FixedZone("IST", 5*3600+1800)

// A time.Time in another zone, sent in binary for a TIMESTAMP parameter: pgx sends the wall-clock
// time (as PostgreSQL's timestamp without time zone keeps it).
func nonUTCBinary() error {
	conn, err := connect()
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	wall := time.Date(2024, 5, 5, 10, 0, 0, 123456000, kolkata)
	if _, err := conn.Exec(ctx, "INSERT INTO pgx_tz VALUES ($1, 'binary')", wall); err != nil {
		return err
	}
	var got time.Time
	if err := conn.QueryRow(ctx, "SELECT ts FROM pgx_tz WHERE how = 'binary'").Scan(&got); err != nil {
		return err
	}
	return checkEq(time.Date(2024, 5, 5, 10, 0, 0, 123456000, time.UTC), got, "stored wall-clock time")
}

// The same through the simple protocol: pgx writes the literal '2024-05-05 10:00:00.123456+05:30',
// which PostgreSQL stores as 10:00 in a timestamp without time zone.
func nonUTCText() error {
	conn, err := connect(pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	wall := time.Date(2024, 5, 5, 10, 0, 0, 123456000, kolkata)
	if _, err := conn.Exec(ctx, "INSERT INTO pgx_tz VALUES ($1, 'text')", wall); err != nil {
		return err
	}
	var got time.Time
	if err := conn.QueryRow(ctx, "SELECT ts FROM pgx_tz WHERE how = 'text'").Scan(&got); err != nil {
		return err
	}
	return checkEq(time.Date(2024, 5, 5, 10, 0, 0, 123456000, time.UTC), got, "stored wall-clock time")
}

func uuidColumn() error {
	conn, err := connect()
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	id := pgtype.UUID{Bytes: [16]byte{0x3f, 0x2a, 0x1b, 0x4c, 0x5d, 0x6e, 0x4f, 0x70, 0x81, 0x92, 0xa3, 0xb4, 0xc5, 0xd6, 0xe7, 0xf8}, Valid: true}
	if _, err := conn.Exec(ctx, "INSERT INTO pgx_uuid VALUES ($1, $2)", base, id); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	var text string
	if err := conn.QueryRow(ctx, "SELECT u FROM pgx_uuid").Scan(&text); err != nil {
		return err
	}
	if err := checkEq("3f2a1b4c-5d6e-4f70-8192-a3b4c5d6e7f8", strings.ToLower(text), "UUID as text"); err != nil {
		return err
	}
	rs, err := conn.Query(ctx, "SELECT u FROM pgx_uuid")
	if err != nil {
		return err
	}
	oid := rs.FieldDescriptions()[0].DataTypeOID
	rs.Close()
	if err := checkEq(uint32(pgtype.UUIDOID), oid, "type OID of a UUID column"); err != nil {
		return err
	}
	var got pgtype.UUID
	if err := conn.QueryRow(ctx, "SELECT u FROM pgx_uuid").Scan(&got); err != nil {
		return err
	}
	return checkEq(id, got, "UUID")
}

// PostgreSQL gives a parameter under a cast the cast's type, and pgx encodes the argument for it.
func castParams() error {
	conn, err := connect()
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	sd, err := conn.Prepare(ctx, "casts", "SELECT $1::BIGINT * 2, CAST($2 AS INT), $3::timestamp")
	if err != nil {
		return err
	}
	if err := checkEq([]uint32{pgtype.Int8OID, pgtype.Int4OID, pgtype.TimestampOID}, sd.ParamOIDs, "parameter OIDs"); err != nil {
		return err
	}
	var n int64
	var i int32
	var ts time.Time
	if err := conn.QueryRow(ctx, "casts", int64(21), int32(7), base).Scan(&n, &i, &ts); err != nil {
		return err
	}
	return errors.Join(checkEq(int64(42), n, "$1::BIGINT * 2"), checkEq(int32(7), i, "CAST($2 AS INT)"), checkEq(base, ts, "$3::timestamp"))
}

// Multi-get by an array parameter: pgx sends []int64 as int8[] and []string as text[], in
// binary when the statement was described and as text otherwise.
func anyArrays() error {
	var want []int64
	var ids []int64
	for i := 3; i < rows; i += 97 {
		if q := trades[i].qty; q != nil {
			want = append(want, *q)
		}
		ids = append(ids, int64(i)*1_000_000_007)
	}
	ids = append(ids, -1, ids[0])
	for _, m := range modes {
		conn, err := connect(m.mode)
		if err != nil {
			return err
		}
		err = func() error {
			defer conn.Close(ctx)
			for round := 0; round < 3; round++ {
				rs, err := conn.Query(ctx, "SELECT qty FROM pgx_trades WHERE qty = ANY($1) ORDER BY ts", ids)
				if err != nil {
					return fmt.Errorf("%s: %w", m.name, err)
				}
				got, err := pgx.CollectRows(rs, pgx.RowTo[int64])
				if err != nil {
					return fmt.Errorf("%s: %w", m.name, err)
				}
				if err := checkEq(want, got, "%s round %d: qty = ANY($1)", m.name, round); err != nil {
					return err
				}
			}
			var n int64
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM pgx_trades WHERE sym = ANY($1)", []string{"ETH", "none"}).Scan(&n); err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			wantN := int64(0)
			for _, t := range trades {
				if t.sym == "ETH" {
					wantN++
				}
			}
			return checkEq(wantN, n, "%s: sym = ANY($1)", m.name)
		}()
		if err != nil {
			return err
		}
	}
	conn, err := connect()
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	sd, err := conn.Prepare(ctx, "any_qty", "SELECT qty FROM pgx_trades WHERE qty = ANY($1)")
	if err != nil {
		return err
	}
	return checkEq([]uint32{pgtype.Int8ArrayOID}, sd.ParamOIDs, "parameter OIDs of qty = ANY($1)")
}

// A statement prepared once and run again later must see the rows inserted in between.
func stalePrepared() error {
	conn, err := connect()
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE pgx_stale (ts TIMESTAMP, v LONG) TIMESTAMP(ts)"); err != nil {
		return err
	}
	if _, err := conn.Prepare(ctx, "count_stale", "SELECT count(*) FROM pgx_stale WHERE v >= $1"); err != nil {
		return err
	}
	var seen []int64
	for i := 0; i < 3; i++ {
		var n int64
		if err := conn.QueryRow(ctx, "count_stale", int64(0)).Scan(&n); err != nil {
			return err
		}
		seen = append(seen, n)
		if _, err := conn.Exec(ctx, "INSERT INTO pgx_stale VALUES ($1, $2)", base.Add(time.Duration(i)*time.Second), int64(i)); err != nil {
			return err
		}
	}
	var fresh int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pgx_stale", pgx.QueryExecModeSimpleProtocol).Scan(&fresh); err != nil {
		return err
	}
	return errors.Join(checkEq(int64(3), fresh, "count(*) by a simple query"),
		checkEq([]int64{0, 1, 2}, seen, "counts by the prepared statement after 0, 1 and 2 inserts"))
}
