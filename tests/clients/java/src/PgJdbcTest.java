// End-to-end test of the PostgreSQL JDBC driver (pgjdbc) against a running `sundial serve`.
//
// Connection parameters come from PGHOST, PGPORT, PGUSER, PGPASSWORD and PGDATABASE, and TLS from
// PGSSLMODE and PGSSLROOTCERT when set. Every check runs as a named step; a failed step prints why
// and the run goes on with the next one, and the program exits 1 if any step failed (0 otherwise).
// Run by tests/clients/test_drivers.py and test_tls.py.

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.Date;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.TimeZone;
import java.util.UUID;
import java.util.Collections;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.text.MessageFormat;

import org.postgresql.PGStatement;
import org.postgresql.util.PSQLException;

public final class PgJdbcTest {
    static final int ROWS = 1000;
    static final String[] SYMBOLS = {"BTC", "ETH", "SOL", "ADA", "€URO✓"};
    static final LocalDateTime BASE = LocalDateTime.of(2024, 3, 1, 0, 0);

    /** One generated row of `trades`; qty is null for every 100th row. */
    record Trade(LocalDateTime ts, String sym, double price, Long qty) {
        static Trade of(int i) {
            // 97 s apart (two DAY partitions), with a microsecond part that differs per row.
            LocalDateTime ts = BASE.plusSeconds(97L * i).plusNanos(((i * 7919L) % 1_000_000L) * 1000L);
            return new Trade(ts, SYMBOLS[i % SYMBOLS.length], 100.0 + i * 0.25,
                    i % 100 == 99 ? null : i * 1_000_000_007L);
        }
    }

    static final List<Trade> TRADES = new ArrayList<>();

    static String host, port, user, password, database;
    static int failures = 0;

    interface Body {
        void run() throws Exception;
    }

    static void step(String name, Body body) {
        run(name, null, body);
    }

    /**
     * A step that fails because of a known server bug (described by `bug`): its failure is
     * reported as XFAIL and does not fail the run, but its passing does (XPASS), so that the mark
     * gets removed once the bug is fixed.
     */
    static void knownBug(String name, String bug, Body body) {
        run(name, bug, body);
    }

    static void run(String name, String bug, Body body) {
        long started = System.nanoTime();
        try {
            body.run();
            if (bug == null) {
                System.out.printf("ok   %s (%d ms)%n", name, (System.nanoTime() - started) / 1_000_000);
            } else {
                failures++;
                System.out.printf("XPASS %s: passes although marked as the known server bug \"%s\"; remove the mark%n", name, bug);
            }
        } catch (Throwable t) {
            if (bug != null) {
                System.out.printf("XFAIL %s (known server bug: %s): %s%n", name, bug, t);
            } else {
                failures++;
                System.out.printf("FAIL %s: %s%n", name, t);
                if (t instanceof SQLException e) {
                    System.out.printf("     SQLState=%s%n", e.getSQLState());
                }
                t.printStackTrace(System.out);
            }
        }
        System.out.flush();
    }

    static void check(boolean ok, String what, Object... args) {
        if (!ok) {
            throw new AssertionError(String.format(what, args));
        }
    }

    static void checkEq(Object expected, Object actual, String what, Object... args) {
        if (!Objects.equals(expected, actual)) {
            throw new AssertionError(String.format(what, args) + ": expected <" + expected + "> but got <" + actual + ">");
        }
    }

    static String url() {
        return "jdbc:postgresql://" + host + ":" + port + "/" + database;
    }

    static Connection connect(String... extra) throws SQLException {
        Properties props = new Properties();
        props.setProperty("user", user);
        props.setProperty("password", password);
        props.setProperty("ApplicationName", "sundial-pgjdbc-test");
        props.setProperty("connectTimeout", "10");
        props.setProperty("socketTimeout", "60");
        for (int i = 0; i + 1 < extra.length; i += 2) {
            props.setProperty(extra[i], extra[i + 1]);
        }
        tls(props);
        return DriverManager.getConnection(url(), props);
    }

    // TLS as libpq's variables ask for it (PGSSLMODE, PGSSLROOTCERT: a PEM file), when set.
    static void tls(Properties props) {
        String mode = env("PGSSLMODE", "");
        if (!mode.isEmpty()) {
            props.setProperty("sslmode", mode);
        }
        String root = env("PGSSLROOTCERT", "");
        if (!root.isEmpty()) {
            props.setProperty("sslrootcert", root);
        }
    }

    static String env(String name, String fallback) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? fallback : v;
    }

    public static void main(String[] args) throws Exception {
        // Timestamps are sent and read in the JVM's zone; pin it so that expected values are plain.
        TimeZone.setDefault(TimeZone.getTimeZone("UTC"));
        host = env("PGHOST", "127.0.0.1");
        port = env("PGPORT", "8812");
        user = env("PGUSER", "admin");
        password = env("PGPASSWORD", "quest");
        database = env("PGDATABASE", "qdb");
        for (int i = 0; i < ROWS; i++) {
            TRADES.add(Trade.of(i));
        }
        System.out.println("pgjdbc " + org.postgresql.util.DriverInfo.DRIVER_VERSION + " against " + url());

        step("connect with SCRAM-SHA-256 and run a query", PgJdbcTest::connectAndSelect);
        step("wrong password gives SQLState 28P01", PgJdbcTest::wrongPassword);
        step("CREATE TABLE with QuestDB DDL through Statement", PgJdbcTest::createTrades);
        step("PreparedStatement addBatch/executeBatch of 1000 rows", PgJdbcTest::batchInsert);
        step("executeBatch with reWriteBatchedInserts=true (multi-row INSERTs)", PgJdbcTest::rewrittenBatch);
        step("PreparedStatement query with parameters, exact values back", PgJdbcTest::parameterizedQuery);
        step("server-side prepared statement (prepareThreshold=1) run 10 times, binary results", PgJdbcTest::serverPrepared);
        step("prepareThreshold=-1 (binary from the first execution)", PgJdbcTest::forceBinary);
        step("a server-prepared statement sees rows inserted after it was prepared", PgJdbcTest::stalePrepared);
        step("ResultSetMetaData names and types", PgJdbcTest::resultSetMetaData);
        step("DatabaseMetaData.getTables lists trades", PgJdbcTest::metaTables);
        step("DatabaseMetaData.getColumns lists the 4 columns", PgJdbcTest::metaColumns);
        step("DatabaseMetaData.getPrimaryKeys / getIndexInfo", PgJdbcTest::metaKeysAndIndexes);
        step("DatabaseMetaData.getImportedKeys", PgJdbcTest::metaImportedKeys);
        step("DatabaseMetaData.getProcedures", PgJdbcTest::metaProcedures);
        step("SQL errors give SQLException with a SQLState", PgJdbcTest::errors);
        step("error position (field P) for an error in Parse", PgJdbcTest::errorPosition);
        step("setFetchSize with autocommit off (portal with a row limit)", PgJdbcTest::fetchSize);
        step("setAutoCommit(false) / commit, and an aborted transaction", PgJdbcTest::transactions);
        step("plain SQL types: set/get of every kind, text and binary", PgJdbcTest::plainTypes);
        step("setTimestamp/getTimestamp in a JVM time zone other than UTC", PgJdbcTest::otherTimeZone);
        step("UUID column read back as java.util.UUID", PgJdbcTest::uuidColumn);
        step("several statements in one execute()", PgJdbcTest::multipleStatements);
        step("setDate(java.sql.Date) on a DATE column", PgJdbcTest::setDate);

        System.out.println(failures == 0 ? "pgjdbc: all steps passed" : "pgjdbc: " + failures + " step(s) FAILED");
        System.exit(failures == 0 ? 0 : 1);
    }

    // ---- steps ------------------------------------------------------------------------------

    static void connectAndSelect() throws Exception {
        try (Connection c = connect(); Statement st = c.createStatement()) {
            check(c.isValid(5), "connection is not valid");
            try (ResultSet rs = st.executeQuery("SELECT 40 + 2 AS answer, 'héllo' AS greeting")) {
                check(rs.next(), "no row");
                checkEq(42L, rs.getLong(1), "answer");
                checkEq("héllo", rs.getString("greeting"), "greeting");
                check(!rs.next(), "more than one row");
            }
            String version = c.getMetaData().getDatabaseProductVersion();
            check(version != null && !version.isEmpty(), "no server version");
            checkEq("PostgreSQL", c.getMetaData().getDatabaseProductName(), "product name");
        }
    }

    static void wrongPassword() {
        Properties props = new Properties();
        props.setProperty("user", user);
        props.setProperty("password", password + "-wrong");
        tls(props);
        try {
            DriverManager.getConnection(url(), props).close();
            throw new AssertionError("connected with a wrong password");
        } catch (SQLException e) {
            checkEq("28P01", e.getSQLState(), "SQLState for a wrong password (%s)", e.getMessage());
        }
    }

    static void createTrades() throws Exception {
        try (Connection c = connect(); Statement st = c.createStatement()) {
            st.execute("CREATE TABLE trades (ts TIMESTAMP, sym SYMBOL, price DOUBLE, qty LONG) TIMESTAMP(ts) PARTITION BY DAY");
            try (ResultSet rs = st.executeQuery("SELECT count(*) FROM trades")) {
                check(rs.next(), "no row");
                checkEq(0L, rs.getLong(1), "rows in a new table");
            }
        }
    }

    static void batchInsert() throws Exception {
        try (Connection c = connect();
             PreparedStatement ps = c.prepareStatement("INSERT INTO trades (ts, sym, price, qty) VALUES (?, ?, ?, ?)")) {
            for (Trade t : TRADES) {
                ps.setTimestamp(1, Timestamp.valueOf(t.ts()));
                ps.setString(2, t.sym());
                ps.setDouble(3, t.price());
                if (t.qty() == null) {
                    ps.setNull(4, Types.BIGINT);
                } else {
                    ps.setLong(4, t.qty());
                }
                ps.addBatch();
            }
            int[] counts = ps.executeBatch();
            checkEq(ROWS, counts.length, "update counts");
            for (int i = 0; i < counts.length; i++) {
                check(counts[i] == 1 || counts[i] == Statement.SUCCESS_NO_INFO, "update count %d is %d", i, counts[i]);
            }
        }
        try (Connection c = connect(); Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT count(*), count(qty), sum(price), min(ts), max(ts) FROM trades")) {
            check(rs.next(), "no row");
            checkEq((long) ROWS, rs.getLong(1), "count(*)");
            checkEq(TRADES.stream().filter(t -> t.qty() != null).count(), rs.getLong(2), "count(qty)");
            checkEq(TRADES.stream().mapToDouble(Trade::price).sum(), rs.getDouble(3), "sum(price)");
            checkEq(Timestamp.valueOf(TRADES.get(0).ts()), rs.getTimestamp(4), "min(ts)");
            checkEq(Timestamp.valueOf(TRADES.get(ROWS - 1).ts()), rs.getTimestamp(5), "max(ts)");
        }
    }

    /** reWriteBatchedInserts=true: pgjdbc folds the batch into multi-row INSERTs (up to 128 rows each). */
    static void rewrittenBatch() throws Exception {
        try (Connection c = connect("reWriteBatchedInserts", "true"); Statement st = c.createStatement()) {
            st.execute("CREATE TABLE jdbc_rewrite (ts TIMESTAMP, sym SYMBOL, price DOUBLE, qty LONG) TIMESTAMP(ts) PARTITION BY DAY");
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO jdbc_rewrite (ts, sym, price, qty) VALUES (?, ?, ?, ?)")) {
                for (Trade t : TRADES) {
                    ps.setTimestamp(1, Timestamp.valueOf(t.ts()));
                    ps.setString(2, t.sym());
                    ps.setDouble(3, t.price());
                    ps.setObject(4, t.qty(), Types.BIGINT);
                    ps.addBatch();
                }
                int[] counts = ps.executeBatch();
                checkEq(ROWS, counts.length, "update counts");
            }
            try (ResultSet rs = st.executeQuery("SELECT ts, sym, price, qty FROM jdbc_rewrite ORDER BY ts")) {
                checkTrades(rs, TRADES, "rows inserted by rewritten batches");
            }
        }
    }

    static final String SELECT_BY_SYM = "SELECT ts, sym, price, qty FROM trades WHERE sym = ? AND price > ? ORDER BY ts";

    static List<Trade> expected(String sym, double minPrice) {
        return TRADES.stream().filter(t -> t.sym().equals(sym) && t.price() > minPrice).toList();
    }

    /** Reads (ts, sym, price, qty) rows and compares them with `want`, through typed getters. */
    static void checkTrades(ResultSet rs, List<Trade> want, String what) throws SQLException {
        int n = 0;
        while (rs.next()) {
            check(n < want.size(), "%s: more rows than the %d expected", what, want.size());
            Trade t = want.get(n);
            checkEq(Timestamp.valueOf(t.ts()), rs.getTimestamp(1), "%s row %d getTimestamp", what, n);
            checkEq(t.ts(), rs.getObject(1, LocalDateTime.class), "%s row %d getObject(LocalDateTime)", what, n);
            checkEq(t.sym(), rs.getString(2), "%s row %d getString", what, n);
            checkEq(t.price(), rs.getDouble(3), "%s row %d getDouble", what, n);
            long qty = rs.getLong(4);
            if (t.qty() == null) {
                check(rs.wasNull(), "%s row %d: qty should be NULL, got %d", what, n, qty);
                checkEq(null, rs.getObject(4), "%s row %d getObject(qty)", what, n);
            } else {
                check(!rs.wasNull(), "%s row %d: qty is NULL", what, n);
                checkEq(t.qty(), qty, "%s row %d getLong", what, n);
            }
            n++;
        }
        checkEq(want.size(), n, "%s: row count", what);
    }

    static void parameterizedQuery() throws Exception {
        try (Connection c = connect(); PreparedStatement ps = c.prepareStatement(SELECT_BY_SYM)) {
            ps.setString(1, "ETH");
            ps.setDouble(2, 200.0);
            try (ResultSet rs = ps.executeQuery()) {
                checkTrades(rs, expected("ETH", 200.0), "ETH > 200");
            }
            ps.setString(1, "€URO✓");
            ps.setDouble(2, 0.0);
            try (ResultSet rs = ps.executeQuery()) {
                checkTrades(rs, expected("€URO✓", 0.0), "non-ASCII symbol");
            }
            ps.setString(1, "nope");
            ps.setDouble(2, 0.0);
            try (ResultSet rs = ps.executeQuery()) {
                check(!rs.next(), "rows for an unknown symbol");
            }
        }
    }

    static void serverPrepared() throws Exception {
        try (Connection c = connect(); PreparedStatement ps = c.prepareStatement(SELECT_BY_SYM);
             ProtocolTrace trace = new ProtocolTrace()) {
            PGStatement pg = ps.unwrap(PGStatement.class);
            pg.setPrepareThreshold(1);
            for (int round = 0; round < 10; round++) {
                String sym = SYMBOLS[round % SYMBOLS.length];
                double min = 100.0 + round * 20.0;
                ps.setString(1, sym);
                ps.setDouble(2, min);
                try (ResultSet rs = ps.executeQuery()) {
                    checkTrades(rs, expected(sym, min), "round " + round + " (" + sym + " > " + min + ")");
                }
            }
            check(pg.isUseServerPrepare(), "the statement did not become server-prepared");
            // One named statement, parsed once and bound 10 times (results in binary after the first).
            checkEq(1L, trace.count("FE=> Parse(stmt=S_"), "Parse of a named statement");
            checkEq(10L, trace.count("FE=> Bind(stmt=S_"), "Bind of the named statement");
            // A second statement on the same connection, with several NULLs and a long list.
            try (PreparedStatement q = c.prepareStatement("SELECT qty FROM trades WHERE qty IS NULL OR qty < ? ORDER BY ts")) {
                q.unwrap(PGStatement.class).setPrepareThreshold(1);
                for (int round = 0; round < 6; round++) {
                    q.setLong(1, 5_000_000_035L);
                    int nulls = 0, values = 0;
                    try (ResultSet rs = q.executeQuery()) {
                        while (rs.next()) {
                            rs.getLong(1);
                            if (rs.wasNull()) nulls++; else values++;
                        }
                    }
                    checkEq(10, nulls, "round %d: NULL qty rows", round);
                    checkEq(5, values, "round %d: qty < 5000000035 rows", round);
                }
            }
        }
    }

    static void forceBinary() throws Exception {
        try (Connection c = connect("prepareThreshold", "-1");
             PreparedStatement ps = c.prepareStatement(SELECT_BY_SYM)) {
            for (int round = 0; round < 6; round++) {
                ps.setString(1, "BTC");
                ps.setDouble(2, 150.0 + round);
                try (ResultSet rs = ps.executeQuery()) {
                    checkTrades(rs, expected("BTC", 150.0 + round), "binary round " + round);
                }
            }
            // Aggregates and expressions come back in binary too.
            try (PreparedStatement agg = c.prepareStatement(
                    "SELECT sym, count(*) AS n, max(price) AS top, min(ts) AS first FROM trades WHERE qty > ? GROUP BY sym ORDER BY sym")) {
                for (int round = 0; round < 3; round++) {
                    agg.setLong(1, 0L);
                    Map<String, Long> counts = new LinkedHashMap<>();
                    try (ResultSet rs = agg.executeQuery()) {
                        while (rs.next()) {
                            String sym = rs.getString("sym");
                            counts.put(sym, rs.getLong("n"));
                            double top = TRADES.stream().filter(t -> t.sym().equals(sym) && t.qty() != null && t.qty() > 0)
                                    .mapToDouble(Trade::price).max().orElseThrow();
                            checkEq(top, rs.getDouble("top"), "max(price) for %s", sym);
                            LocalDateTime first = TRADES.stream().filter(t -> t.sym().equals(sym) && t.qty() != null && t.qty() > 0)
                                    .map(Trade::ts).min(LocalDateTime::compareTo).orElseThrow();
                            checkEq(Timestamp.valueOf(first), rs.getTimestamp("first"), "min(ts) for %s", sym);
                        }
                    }
                    Map<String, Long> want = new LinkedHashMap<>();
                    TRADES.stream().filter(t -> t.qty() != null && t.qty() > 0).map(Trade::sym).sorted()
                            .forEach(s -> want.merge(s, 1L, Long::sum));
                    checkEq(want, counts, "counts per symbol");
                }
            }
        }
    }

    static void resultSetMetaData() throws Exception {
        try (Connection c = connect(); PreparedStatement ps = c.prepareStatement(
                "SELECT ts, sym, price, qty, price * 2 AS doubled FROM trades WHERE sym = ? LIMIT 1")) {
            // Before executing: the driver describes the statement.
            ResultSetMetaData before = ps.getMetaData();
            check(before != null, "no metadata before execution");
            checkEq(5, before.getColumnCount(), "column count before execution");
            ps.setString(1, "BTC");
            try (ResultSet rs = ps.executeQuery()) {
                ResultSetMetaData md = rs.getMetaData();
                checkEq(5, md.getColumnCount(), "column count");
                String[] names = {"ts", "sym", "price", "qty", "doubled"};
                int[] types = {Types.TIMESTAMP, Types.VARCHAR, Types.DOUBLE, Types.BIGINT, Types.DOUBLE};
                String[] typeNames = {"timestamp", "varchar", "float8", "int8", "float8"};
                for (int i = 0; i < names.length; i++) {
                    checkEq(names[i], md.getColumnLabel(i + 1), "label of column %d", i + 1);
                    checkEq(names[i], md.getColumnName(i + 1), "name of column %d", i + 1);
                    checkEq(types[i], md.getColumnType(i + 1), "java.sql.Types of %s", names[i]);
                    checkEq(typeNames[i], md.getColumnTypeName(i + 1), "type name of %s", names[i]);
                    checkEq(before.getColumnType(i + 1), md.getColumnType(i + 1), "type of %s before execution", names[i]);
                }
                checkEq("java.sql.Timestamp", md.getColumnClassName(1), "class of ts");
                checkEq("java.lang.Double", md.getColumnClassName(3), "class of price");
                checkEq("java.lang.Long", md.getColumnClassName(4), "class of qty");
                check(rs.next(), "no row");
            }
        }
    }

    static void metaTables() throws Exception {
        try (Connection c = connect()) {
            DatabaseMetaData md = c.getMetaData();
            List<String> found = new ArrayList<>();
            try (ResultSet rs = md.getTables(null, null, "%", new String[]{"TABLE"})) {
                while (rs.next()) {
                    found.add(rs.getString("TABLE_NAME"));
                    if (rs.getString("TABLE_NAME").equals("trades")) {
                        checkEq("TABLE", rs.getString("TABLE_TYPE"), "TABLE_TYPE of trades");
                        String schema = rs.getString("TABLE_SCHEM");
                        check(schema != null && !schema.isEmpty(), "TABLE_SCHEM of trades is empty");
                    }
                }
            }
            check(found.contains("trades"), "getTables did not list trades: %s", found);
            check(found.stream().noneMatch(n -> n.startsWith("pg_")), "getTables(TABLE) listed catalog relations: %s", found);
            // By exact name too.
            try (ResultSet rs = md.getTables(null, null, "trades", null)) {
                check(rs.next(), "getTables(\"trades\") found nothing");
                checkEq("trades", rs.getString("TABLE_NAME"), "TABLE_NAME");
                check(!rs.next(), "getTables(\"trades\") found more than one table");
            }
            // The list of table types is a catalog query too.
            List<String> tableTypes = new ArrayList<>();
            try (ResultSet rs = md.getTableTypes()) {
                while (rs.next()) tableTypes.add(rs.getString(1));
            }
            check(tableTypes.contains("TABLE"), "getTableTypes: %s", tableTypes);
        }
    }

    static void metaColumns() throws Exception {
        try (Connection c = connect()) {
            DatabaseMetaData md = c.getMetaData();
            List<String> names = new ArrayList<>();
            Map<String, String> typeNames = new LinkedHashMap<>();
            Map<String, Integer> dataTypes = new LinkedHashMap<>();
            List<Integer> positions = new ArrayList<>();
            try (ResultSet rs = md.getColumns(null, null, "trades", "%")) {
                while (rs.next()) {
                    checkEq("trades", rs.getString("TABLE_NAME"), "TABLE_NAME");
                    String name = rs.getString("COLUMN_NAME");
                    names.add(name);
                    typeNames.put(name, rs.getString("TYPE_NAME"));
                    dataTypes.put(name, rs.getInt("DATA_TYPE"));
                    positions.add(rs.getInt("ORDINAL_POSITION"));
                }
            }
            checkEq(List.of("ts", "sym", "price", "qty"), names, "getColumns column names");
            checkEq(List.of(1, 2, 3, 4), positions, "ORDINAL_POSITION");
            checkEq(Map.of("ts", "timestamp", "sym", "varchar", "price", "float8", "qty", "int8"), Map.copyOf(typeNames),
                    "TYPE_NAME");
            checkEq(Map.of("ts", Types.TIMESTAMP, "sym", Types.VARCHAR, "price", Types.DOUBLE, "qty", Types.BIGINT),
                    Map.copyOf(dataTypes), "DATA_TYPE");
        }
    }

    static int countRows(ResultSet rs) throws SQLException {
        try (rs) {
            int n = 0;
            while (rs.next()) n++;
            return n;
        }
    }

    /** Catalog queries with a parameter that join relations Sundial never has rows for (pg_constraint, pg_index). */
    static void metaKeysAndIndexes() throws Exception {
        try (Connection c = connect()) {
            DatabaseMetaData md = c.getMetaData();
            checkEq(0, countRows(md.getPrimaryKeys(null, null, "trades")), "primary key columns of trades");
            checkEq(0, countRows(md.getIndexInfo(null, null, "trades", false, true)), "indexes of trades");
        }
    }

    /** getImportedKeys first reads max_index_keys from pg_settings. */
    static void metaImportedKeys() throws Exception {
        try (Connection c = connect()) {
            checkEq(0, countRows(c.getMetaData().getImportedKeys(null, null, "trades")), "foreign keys of trades");
        }
    }

    /** getProcedures selects several unnamed NULL columns. */
    static void metaProcedures() throws Exception {
        try (Connection c = connect()) {
            countRows(c.getMetaData().getProcedures(null, null, "%"));
        }
    }

    static void errors() throws Exception {
        try (Connection c = connect(); Statement st = c.createStatement()) {
            try {
                st.executeQuery("SELECT * FROM no_such_table");
                throw new AssertionError("no error for a missing table");
            } catch (PSQLException e) {
                checkEq("42P01", e.getSQLState(), "SQLState for a missing table (%s)", e.getMessage());
                check(e.getServerErrorMessage() != null, "no server error message");
                checkEq("ERROR", e.getServerErrorMessage().getSeverity(), "severity");
                check(e.getMessage().contains("no_such_table"), "message does not name the table: %s", e.getMessage());
            }
            try {
                st.execute("SELEC 1");
                throw new AssertionError("no error for a syntax error");
            } catch (PSQLException e) {
                checkEq("42601", e.getSQLState(), "SQLState for a syntax error (%s)", e.getMessage());
            }
            try (PreparedStatement ps = c.prepareStatement("SELECT nope FROM trades WHERE sym = ?")) {
                ps.setString(1, "BTC");
                ps.executeQuery();
                throw new AssertionError("no error for a missing column");
            } catch (PSQLException e) {
                checkEq("42703", e.getSQLState(), "SQLState for a missing column (%s)", e.getMessage());
            }
            // The connection is still usable.
            try (ResultSet rs = st.executeQuery("SELECT count(*) FROM trades")) {
                check(rs.next(), "no row");
                checkEq((long) ROWS, rs.getLong(1), "count after errors");
            }
        }
    }

    /** PostgreSQL sends the error's position (field P) for errors of Parse too. */
    static void errorPosition() throws Exception {
        try (Connection c = connect(); PreparedStatement ps = c.prepareStatement("SELECT nope FROM trades WHERE sym = ?")) {
            ps.setString(1, "BTC");
            ps.executeQuery();
            throw new AssertionError("no error for a missing column");
        } catch (PSQLException e) {
            checkEq("42703", e.getSQLState(), "SQLState for a missing column (%s)", e.getMessage());
            checkEq(8, e.getServerErrorMessage().getPosition(), "error position (field P) of: %s", e.getServerErrorMessage());
        }
    }

    /** pgjdbc sends setDate(java.sql.Date) as the text "1999-12-31 +00", which PostgreSQL takes for a date. */
    static void setDate() throws Exception {
        try (Connection c = connect(); Statement st = c.createStatement()) {
            st.execute("CREATE TABLE jdbc_dates (ts TIMESTAMP, dt DATE) TIMESTAMP(ts)");
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO jdbc_dates VALUES (?, ?)")) {
                ps.setTimestamp(1, Timestamp.valueOf(BASE));
                ps.setDate(2, Date.valueOf(LocalDate.of(1999, 12, 31)));
                checkEq(1, ps.executeUpdate(), "insert");
            }
            try (PreparedStatement ps = c.prepareStatement("SELECT dt FROM jdbc_dates WHERE dt = ?")) {
                ps.setDate(1, Date.valueOf(LocalDate.of(1999, 12, 31)));
                try (ResultSet rs = ps.executeQuery()) {
                    check(rs.next(), "no row");
                    checkEq(Date.valueOf(LocalDate.of(1999, 12, 31)), rs.getDate(1), "getDate");
                }
            }
        }
    }

    /** A UUID column should be described as uuid (OID 2950), as pg_attribute says, and read as java.util.UUID. */
    static void uuidColumn() throws Exception {
        UUID uuid = UUID.fromString("3f2a1b4c-5d6e-4f70-8192-a3b4c5d6e7f8");
        try (Connection c = connect(); PreparedStatement ps = c.prepareStatement("SELECT u FROM jdbc_types WHERE u IS NOT NULL AND ts > ?")) {
            for (int round = 0; round < 3; round++) { // text first, then binary once server-prepared
                ps.unwrap(PGStatement.class).setPrepareThreshold(1);
                ps.setTimestamp(1, Timestamp.valueOf(BASE.minusYears(1)));
                try (ResultSet rs = ps.executeQuery()) {
                    checkEq("uuid", rs.getMetaData().getColumnTypeName(1), "type name of a UUID column");
                    check(rs.next(), "no row");
                    checkEq(uuid, rs.getObject(1), "getObject of a UUID column");
                    checkEq(uuid, rs.getObject(1, UUID.class), "getObject(UUID.class)");
                }
            }
        }
    }

    /**
     * With a JVM zone other than UTC, pgjdbc sends setTimestamp as "2024-05-05 10:00:00+05:30" and
     * reads timestamps as wall-clock times of that zone. A TIMESTAMP (without time zone) column keeps
     * the wall-clock time, as in PostgreSQL, so the value round-trips and other sessions see 10:00.
     */
    static void otherTimeZone() throws Exception {
        TimeZone saved = TimeZone.getDefault();
        LocalDateTime wall = LocalDateTime.of(2024, 5, 5, 10, 0, 0, 123_456_000);
        try {
            TimeZone.setDefault(TimeZone.getTimeZone("Asia/Kolkata"));
            try (Connection c = connect(); Statement st = c.createStatement()) {
                st.execute("CREATE TABLE jdbc_tz (ts TIMESTAMP, n INT) TIMESTAMP(ts)");
                try (PreparedStatement ps = c.prepareStatement("INSERT INTO jdbc_tz VALUES (?, ?)")) {
                    ps.setTimestamp(1, Timestamp.valueOf(wall));
                    ps.setInt(2, 1);
                    ps.executeUpdate();
                }
                try (ResultSet rs = st.executeQuery("SELECT ts FROM jdbc_tz")) {
                    check(rs.next(), "no row");
                    checkEq(Timestamp.valueOf(wall), rs.getTimestamp(1), "getTimestamp in Asia/Kolkata");
                    checkEq(wall, rs.getObject(1, LocalDateTime.class), "getObject(LocalDateTime) in Asia/Kolkata");
                }
            }
        } finally {
            TimeZone.setDefault(saved);
        }
        try (Connection c = connect(); Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT ts FROM jdbc_tz")) {
            check(rs.next(), "no row");
            checkEq(wall, rs.getObject(1, LocalDateTime.class), "wall-clock time seen from a UTC session");
        }
    }

    /** Records pgjdbc's protocol trace (FINEST on QueryExecutorImpl) while it is open. */
    static final class ProtocolTrace extends Handler implements AutoCloseable {
        final Logger logger = Logger.getLogger("org.postgresql.core.v3.QueryExecutorImpl");
        final Level savedLevel = logger.getLevel();
        final List<String> lines = Collections.synchronizedList(new ArrayList<>());

        ProtocolTrace() {
            setLevel(Level.ALL);
            logger.setLevel(Level.FINEST);
            logger.addHandler(this);
        }

        @Override
        public void publish(LogRecord r) {
            String msg = r.getMessage();
            lines.add(r.getParameters() == null ? msg : MessageFormat.format(msg, r.getParameters()));
        }

        long count(String needle) {
            synchronized (lines) {
                return lines.stream().filter(l -> l.contains(needle)).count();
            }
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
            logger.removeHandler(this);
            logger.setLevel(savedLevel);
        }
    }

    /**
     * After prepareThreshold executions pgjdbc switches a PreparedStatement to a named server-side
     * statement; later executions must still see rows inserted since.
     */
    static void stalePrepared() throws Exception {
        try (Connection c = connect(); Statement st = c.createStatement()) {
            st.execute("CREATE TABLE jdbc_stale (ts TIMESTAMP, v LONG) TIMESTAMP(ts)");
            List<Long> seen = new ArrayList<>();
            try (PreparedStatement count = c.prepareStatement("SELECT count(*) FROM jdbc_stale WHERE v >= ?");
                 PreparedStatement insert = c.prepareStatement("INSERT INTO jdbc_stale VALUES (?, ?)")) {
                count.unwrap(PGStatement.class).setPrepareThreshold(1);
                for (int i = 0; i < 3; i++) {
                    count.setLong(1, 0);
                    try (ResultSet rs = count.executeQuery()) {
                        check(rs.next(), "no row");
                        seen.add(rs.getLong(1));
                    }
                    insert.setTimestamp(1, Timestamp.valueOf(BASE.plusSeconds(i)));
                    insert.setLong(2, i);
                    insert.executeUpdate();
                }
            }
            try (ResultSet rs = st.executeQuery("SELECT count(*) FROM jdbc_stale")) {
                check(rs.next(), "no row");
                checkEq(3L, rs.getLong(1), "count(*) by a fresh statement");
            }
            checkEq(List.of(0L, 1L, 2L), seen, "counts by the server-prepared statement after 0, 1 and 2 inserts");
        }
    }

    static void fetchSize() throws Exception {
        try (Connection c = connect(); ProtocolTrace trace = new ProtocolTrace()) {
            c.setAutoCommit(false);
            try (Statement st = c.createStatement()) {
                st.setFetchSize(64);
                try (ResultSet rs = st.executeQuery("SELECT ts, sym, price, qty FROM trades ORDER BY ts")) {
                    checkTrades(rs, TRADES, "Statement with fetch size 64");
                }
                // 1000 rows by 64: the portal is suspended 15 times, then runs to completion.
                checkEq(15L, trace.count("<=BE PortalSuspended"), "PortalSuspended messages (trace: %d lines)", trace.lines.size());
                check(trace.count("limit=64") >= 16, "no Execute with limit=64 in the protocol trace");
            }
            try (PreparedStatement ps = c.prepareStatement(SELECT_BY_SYM)) {
                ps.setFetchSize(7);
                for (int round = 0; round < 3; round++) {
                    ps.setString(1, "SOL");
                    ps.setDouble(2, 120.0);
                    try (ResultSet rs = ps.executeQuery()) {
                        checkTrades(rs, expected("SOL", 120.0), "PreparedStatement with fetch size 7, round " + round);
                    }
                }
            }
            // Two cursors open at the same time, read in turns.
            try (Statement a = c.createStatement(); Statement b = c.createStatement()) {
                a.setFetchSize(10);
                b.setFetchSize(13);
                try (ResultSet ra = a.executeQuery("SELECT qty FROM trades WHERE qty IS NOT NULL ORDER BY ts");
                     ResultSet rb = b.executeQuery("SELECT price FROM trades ORDER BY ts DESC")) {
                    List<Trade> withQty = TRADES.stream().filter(t -> t.qty() != null).toList();
                    for (int i = 0; i < 300; i++) {
                        check(ra.next() && rb.next(), "cursor ended early at %d", i);
                        checkEq(withQty.get(i).qty(), ra.getLong(1), "interleaved qty %d", i);
                        checkEq(TRADES.get(ROWS - 1 - i).price(), rb.getDouble(1), "interleaved price %d", i);
                    }
                }
            }
            c.commit();
        }
    }

    static void transactions() throws Exception {
        try (Connection c = connect(); Statement st = c.createStatement()) {
            st.execute("CREATE TABLE jdbc_tx (ts TIMESTAMP, n INT) TIMESTAMP(ts)");
            c.setAutoCommit(false);
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO jdbc_tx VALUES (?, ?)")) {
                for (int i = 0; i < 10; i++) {
                    ps.setTimestamp(1, Timestamp.valueOf(BASE.plusMinutes(i)));
                    ps.setInt(2, i);
                    checkEq(1, ps.executeUpdate(), "insert %d", i);
                }
            }
            c.commit();
            checkEq(false, c.getAutoCommit(), "autocommit after commit");
            try (Connection other = connect(); Statement os = other.createStatement();
                 ResultSet rs = os.executeQuery("SELECT count(*), sum(n) FROM jdbc_tx")) {
                check(rs.next(), "no row");
                checkEq(10L, rs.getLong(1), "rows seen by another connection after commit");
                checkEq(45L, rs.getLong(2), "sum seen by another connection after commit");
            }
            // An error aborts the transaction: the next statement fails with 25P02 until rollback.
            try {
                st.executeQuery("SELECT * FROM no_such_table");
                throw new AssertionError("no error");
            } catch (SQLException e) {
                checkEq("42P01", e.getSQLState(), "first error");
            }
            try {
                st.executeQuery("SELECT 1");
                throw new AssertionError("a statement ran in an aborted transaction");
            } catch (SQLException e) {
                checkEq("25P02", e.getSQLState(), "statement in an aborted transaction (%s)", e.getMessage());
            }
            c.rollback();
            try (ResultSet rs = st.executeQuery("SELECT count(*) FROM jdbc_tx")) {
                check(rs.next(), "no row");
                checkEq(10L, rs.getLong(1), "count after rollback");
            }
            c.commit();
            c.setAutoCommit(true);
            try (ResultSet rs = st.executeQuery("SELECT 1")) {
                check(rs.next(), "no row");
            }
        }
    }

    static void plainTypes() throws Exception {
        UUID uuid = UUID.fromString("3f2a1b4c-5d6e-4f70-8192-a3b4c5d6e7f8");
        try (Connection c = connect(); Statement st = c.createStatement()) {
            st.execute("CREATE TABLE jdbc_types (ts TIMESTAMP, b BOOLEAN, sm SMALLINT, i INTEGER, l BIGINT, r REAL, "
                    + "d DOUBLE PRECISION, v VARCHAR, t TEXT, dt DATE, u UUID) TIMESTAMP(ts)");
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO jdbc_types VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")) {
                ps.setTimestamp(1, Timestamp.valueOf(LocalDateTime.of(2024, 2, 29, 23, 59, 59, 999_999_000)));
                ps.setBoolean(2, true);
                ps.setShort(3, (short) -32768);
                ps.setInt(4, Integer.MAX_VALUE);
                ps.setLong(5, Long.MIN_VALUE + 1);
                ps.setFloat(6, 1.5f);
                ps.setDouble(7, -1.0e300);
                ps.setString(8, "it's \"quoted\"\ttab");
                ps.setString(9, "ünïcödé ✓ 日本");
                ps.setObject(10, LocalDate.of(1999, 12, 31)); // setDate: see the known-bug step
                ps.setObject(11, uuid);
                checkEq(1, ps.executeUpdate(), "first insert");
                ps.setTimestamp(1, Timestamp.valueOf(LocalDateTime.of(2024, 3, 1, 0, 0)));
                for (int k = 2; k <= 11; k++) {
                    ps.setNull(k, Types.NULL);
                }
                checkEq(1, ps.executeUpdate(), "insert of NULLs");
                ps.setObject(1, LocalDateTime.of(2024, 3, 2, 1, 2, 3));
                ps.setObject(2, false);
                ps.setObject(3, (short) 7);
                ps.setObject(4, -7);
                ps.setObject(5, 7L);
                ps.setObject(6, 0.25f);
                ps.setObject(7, new BigDecimal("2.5"), Types.DOUBLE);
                ps.setObject(8, "x");
                ps.setObject(9, "");
                ps.setObject(10, LocalDate.of(2000, 1, 1));
                ps.setObject(11, uuid.toString(), Types.OTHER);
                checkEq(1, ps.executeUpdate(), "insert through setObject");
            }
            // Text results (a plain Statement), then binary ones (server-prepared, several runs).
            try (ResultSet rs = st.executeQuery("SELECT * FROM jdbc_types ORDER BY ts")) {
                checkTypeRows(rs, uuid, "text");
            }
            try (PreparedStatement ps = c.prepareStatement("SELECT * FROM jdbc_types WHERE ts >= ? ORDER BY ts")) {
                ps.unwrap(PGStatement.class).setPrepareThreshold(1);
                for (int round = 0; round < 4; round++) {
                    ps.setTimestamp(1, Timestamp.valueOf(LocalDateTime.of(2024, 1, 1, 0, 0)));
                    try (ResultSet rs = ps.executeQuery()) {
                        checkTypeRows(rs, uuid, "binary round " + round);
                    }
                }
            }
        }
    }

    static void checkTypeRows(ResultSet rs, UUID uuid, String what) throws SQLException {
        check(rs.next(), "%s: no first row", what);
        checkEq(Timestamp.valueOf(LocalDateTime.of(2024, 2, 29, 23, 59, 59, 999_999_000)), rs.getTimestamp("ts"), "%s ts", what);
        checkEq(true, rs.getBoolean("b"), "%s boolean", what);
        checkEq((short) -32768, rs.getShort("sm"), "%s smallint", what);
        checkEq(Integer.MAX_VALUE, rs.getInt("i"), "%s integer", what);
        checkEq(Long.MIN_VALUE + 1, rs.getLong("l"), "%s bigint", what);
        checkEq(1.5f, rs.getFloat("r"), "%s real", what);
        checkEq(-1.0e300, rs.getDouble("d"), "%s double", what);
        checkEq("it's \"quoted\"\ttab", rs.getString("v"), "%s varchar", what);
        checkEq("ünïcödé ✓ 日本", rs.getString("t"), "%s text", what);
        checkEq(Date.valueOf(LocalDate.of(1999, 12, 31)), rs.getDate("dt"), "%s date", what);
        checkEq(LocalDate.of(1999, 12, 31), rs.getObject("dt", LocalDate.class), "%s date as LocalDate", what);
        // The UUID column as text; as java.util.UUID: see the known-bug step.
        checkEq(uuid.toString(), rs.getString("u"), "%s uuid as text", what);
        ResultSetMetaData md = rs.getMetaData();
        List<String> typeNames = new ArrayList<>();
        for (int i = 1; i <= md.getColumnCount() - 1; i++) typeNames.add(md.getColumnTypeName(i));
        checkEq(List.of("timestamp", "bool", "int2", "int4", "int8", "float4", "float8", "varchar", "varchar", "date"),
                typeNames, "%s column type names", what);

        check(rs.next(), "%s: no second row", what);
        for (int k = 2; k <= 11; k++) {
            checkEq(null, rs.getObject(k), "%s NULL in column %s", what, md.getColumnName(k));
        }
        rs.getBoolean("b");
        check(rs.wasNull(), "%s: wasNull after a NULL boolean", what);

        check(rs.next(), "%s: no third row", what);
        checkEq(LocalDateTime.of(2024, 3, 2, 1, 2, 3), rs.getObject("ts", LocalDateTime.class), "%s ts (setObject)", what);
        checkEq(false, rs.getObject("b"), "%s boolean (setObject)", what);
        checkEq(7, rs.getInt("sm"), "%s smallint (setObject)", what);
        checkEq(-7, rs.getObject("i"), "%s integer (setObject)", what);
        checkEq(7L, rs.getObject("l"), "%s bigint (setObject)", what);
        checkEq(0.25f, rs.getObject("r"), "%s real (setObject)", what);
        checkEq(2.5, rs.getObject("d"), "%s double (setObject)", what);
        checkEq("x", rs.getObject("v"), "%s varchar (setObject)", what);
        checkEq("", rs.getObject("t"), "%s empty text (setObject)", what);
        checkEq(LocalDate.of(2000, 1, 1), rs.getObject("dt", LocalDate.class), "%s date (setObject)", what);
        checkEq(uuid.toString(), rs.getString("u"), "%s uuid (setObject)", what);
        check(!rs.next(), "%s: more than three rows", what);
    }

    static void multipleStatements() throws Exception {
        try (Connection c = connect(); Statement st = c.createStatement()) {
            boolean isResult = st.execute("SELECT 1 AS a; SELECT 'two' AS b, 3 AS c; SELECT count(*) FROM trades");
            List<String> seen = new ArrayList<>();
            while (true) {
                if (isResult) {
                    try (ResultSet rs = st.getResultSet()) {
                        while (rs.next()) {
                            List<String> row = new ArrayList<>();
                            for (int i = 1; i <= rs.getMetaData().getColumnCount(); i++) row.add(rs.getString(i));
                            seen.add(String.join(",", row));
                        }
                    }
                } else if (st.getUpdateCount() == -1) {
                    break;
                }
                isResult = st.getMoreResults();
            }
            checkEq(Arrays.asList("1", "two,3", String.valueOf(ROWS)), seen, "rows of the three statements");
        }
    }
}
