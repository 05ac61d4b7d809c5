// The statements Grafana sends, replayed through pgx v5 (the driver Grafana's backend uses):
// its PostgreSQL data source's query-builder meta queries and macros, and QuestDB's Grafana
// plugin (questdb-questdb-datasource) meta queries and macro expansions, in pgx's default
// extended protocol and in the simple protocol. Each answer is checked, not only accepted.
package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// searchPath is how Grafana's PostgreSQL data source expands the schemas of search_path.
const searchPath = `SELECT CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
 FROM generate_series(array_lower(string_to_array(current_setting('search_path'),','),1),
 array_upper(string_to_array(current_setting('search_path'),','),1)) as i,
 string_to_array(current_setting('search_path'),',') s`

// grafanaTables is the query builder's table list.
const grafanaTables = `SELECT quote_ident(table_name) as "table" FROM information_schema.tables
 WHERE quote_ident(table_schema) NOT IN ('information_schema', 'pg_catalog',
 '_timescaledb_cache', '_timescaledb_catalog', '_timescaledb_internal', '_timescaledb_config',
 'timescaledb_information', 'timescaledb_experimental')
 AND table_type = 'BASE TABLE' AND quote_ident(table_schema) IN (` + searchPath + `)`

// grafanaColumns is the query builder's column list for table `%[1]s`.
const grafanaColumns = `SELECT quote_ident(column_name) AS "column", data_type AS "type"
 FROM information_schema.columns WHERE
 CASE WHEN array_length(parse_ident('%[1]s'),1) = 2
 THEN quote_ident(table_schema) = (parse_ident('%[1]s'))[1]
 AND quote_ident(table_name) = (parse_ident('%[1]s'))[2]
 ELSE quote_ident(table_name) = '%[1]s' AND quote_ident(table_schema) IN (` + searchPath + `)
 END`

func grafanaSteps() {
	modes := []struct {
		name string
		mode pgx.QueryExecMode
	}{
		{"extended protocol", pgx.QueryExecModeCacheStatement},
		{"simple protocol", pgx.QueryExecModeSimpleProtocol},
	}
	for _, m := range modes {
		mode := m.mode
		step("Grafana PostgreSQL data source: table and column lists ("+m.name+")", func() error {
			return grafanaMetaQueries(mode)
		})
		step("Grafana: a comment-only ping is an empty statement ("+m.name+")", func() error {
			return commentPing(mode)
		})
		step("QuestDB's Grafana plugin: tables(), table_columns() and $__timeFilter ("+m.name+")", func() error {
			return questdbPlugin(mode)
		})
	}
}

// stringColumn runs sql and returns its first column as text.
func stringColumn(conn *pgx.Conn, sql string) ([]string, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sql, err)
	}
	values, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		v, err := row.Values()
		if err != nil {
			return "", err
		}
		return fmt.Sprint(v[0]), nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sql, err)
	}
	return values, nil
}

func grafanaMetaQueries(mode pgx.QueryExecMode) error {
	conn, err := connect(mode)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	tables, err := stringColumn(conn, grafanaTables)
	if err != nil {
		return err
	}
	if err := check(slices.Contains(tables, "pgx_trades"), "table list %v lacks pgx_trades", tables); err != nil {
		return err
	}
	for _, name := range []string{"public.pgx_trades", "pgx_trades"} {
		columns, err := stringColumn(conn, fmt.Sprintf(grafanaColumns, name))
		if err != nil {
			return err
		}
		want := []string{"ts", "sym", "price", "qty", "ok", "note"}
		if err := checkEq(want, columns, "columns of %s", name); err != nil {
			return err
		}
	}
	// $__timeFilter and $__timeGroupAlias as the data source expands them (TimescaleDB off).
	from := base
	sql := fmt.Sprintf(`SELECT floor(extract(epoch from ts)/60)*60 AS "time", avg(price)
 FROM pgx_trades WHERE ts BETWEEN '%s' AND '%s' GROUP BY 1 ORDER BY 1`,
		from.Format(time.RFC3339), from.Add(1000*time.Hour).Format(time.RFC3339))
	buckets, err := stringColumn(conn, sql)
	if err != nil {
		return err
	}
	return check(len(buckets) > 0, "no time buckets from %s", sql)
}

func commentPing(mode pgx.QueryExecMode) error {
	conn, err := connect(mode)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, sql := range []string{"-- ping", "/* ping */", ";"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%q: %w", sql, err)
		}
	}
	return nil
}

func questdbPlugin(mode pgx.QueryExecMode) error {
	conn, err := connect(mode)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "select table_name, partitionBy, designatedTimestamp, walEnabled, dedup from tables()")
	if err != nil {
		return err
	}
	found := false
	for rows.Next() {
		var name, partitionBy string
		var designated *string
		var wal, dedup bool
		if err := rows.Scan(&name, &partitionBy, &designated, &wal, &dedup); err != nil {
			return err
		}
		if name == "pgx_trades" {
			found = true
			if err := checkEq("DAY", partitionBy, "partitionBy"); err != nil {
				return err
			}
			if err := check(designated != nil && *designated == "ts", "designatedTimestamp %v", show(designated)); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := check(found, "tables() lacks pgx_trades"); err != nil {
		return err
	}
	columns, err := stringColumn(conn, `select "column", type, designated from table_columns('pgx_trades')`)
	if err != nil {
		return err
	}
	if err := checkEq([]string{"ts", "sym", "price", "qty", "ok", "note"}, columns, "table_columns"); err != nil {
		return err
	}
	// $__timeFilter(ts) and $__sampleByInterval as the plugin expands them: microseconds
	// cast to TIMESTAMP.
	from := base.UnixMicro()
	to := base.Add(60 * 24 * time.Hour).UnixMicro()
	sql := fmt.Sprintf("SELECT ts, avg(price) FROM pgx_trades WHERE ts >= cast(%d as timestamp) AND ts <= cast(%d as timestamp) SAMPLE BY 1h ALIGN TO CALENDAR", from, to)
	var n int64
	counted := fmt.Sprintf("SELECT count(*) FROM (%s)", sql)
	if err := conn.QueryRow(ctx, counted).Scan(&n); err != nil {
		return fmt.Errorf("%s: %w", counted, err)
	}
	return check(n > 0, "no rows from %s", sql)
}
