"""The statements test_pg_differential.py runs on both Sundial and PostgreSQL 15.

Each `Stmt` is one statement as a tool sends it: pgjdbc's DatabaseMetaData (captured from
pgjdbc 42.7.14 against PostgreSQL 15 with `log_statement = all`), Grafana's PostgreSQL data
source (the same text as tests/clients/go/grafana.go), DBeaver's PostgreSQL plugin (its
navigator's schema, table, column, constraint, index and type caches), plain information_schema
and pg_catalog reads, and the data itself. psql's backslash commands are not listed here: the
test captures them with `psql -E` from the real PostgreSQL at run time, so they are verbatim.

Placeholders, replaced per server before a statement runs:
    @oid:NAME@      the pg_class OID of table NAME in schema public
    @nsp:NAME@      the pg_namespace OID of schema NAME
Parameters are `(value, type OID)` pairs sent as `$n` in the extended protocol (text format, the
type OID a driver would send: pgjdbc sends strings as varchar, 1043, and longs as int8, 20); the
simple-protocol run inlines them as literals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

# ---------------------------------------------------------------------------------------------
# Tables. Sundial's QuestDB-style DDL and PostgreSQL's equivalent. The type map is what Sundial
# itself reports in information_schema.columns and pg_attribute:
#   TIMESTAMP -> timestamp (1114)   BOOLEAN -> boolean (16)     BYTE, SHORT -> smallint (21)
#   INT -> integer (23)             LONG -> bigint (20)         FLOAT -> real (700)
#   DOUBLE -> double precision (701)                            DATE -> date (1082)
#   SYMBOL, VARCHAR, STRING -> character varying (1043)         UUID -> uuid (2950)
#   BINARY -> bytea (17)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    name: str
    sundial_ddl: str
    pg_ddl: str
    inserts: tuple[str, ...]  # the same text runs on both


TABLES = (
    Table(
        "cpu",
        "CREATE TABLE cpu (ts TIMESTAMP, host SYMBOL, usage DOUBLE, n LONG, ok BOOLEAN, note VARCHAR) "
        "TIMESTAMP(ts) PARTITION BY DAY",
        "CREATE TABLE cpu (ts timestamp, host varchar, usage double precision, n bigint, ok boolean, "
        "note varchar)",
        # Out of timestamp order on purpose: PostgreSQL's heap returns insertion order.
        (
            "INSERT INTO cpu VALUES ('2024-01-02T00:00:00Z', 'b', 2.5, 20, false, 'second day')",
            "INSERT INTO cpu VALUES ('2024-01-01T00:00:00Z', 'a', 1.5, 10, true, 'first')",
            "INSERT INTO cpu VALUES ('2024-01-01T12:00:00Z', 'a', NULL, NULL, NULL, NULL)",
            "INSERT INTO cpu VALUES ('2024-01-01T06:00:00.123456Z', 'c', -0.25, -3, true, 'é ✓ \"q\"')",
        ),
    ),
    Table(
        "typ",
        "CREATE TABLE typ (ts TIMESTAMP, b BOOLEAN, i8 BYTE, i16 SHORT, i32 INT, i64 LONG, f4 FLOAT, "
        "f8 DOUBLE, sym SYMBOL, v VARCHAR, d DATE, u UUID, bin BINARY) TIMESTAMP(ts) PARTITION BY DAY",
        "CREATE TABLE typ (ts timestamp, b boolean, i8 smallint, i16 smallint, i32 integer, i64 bigint, "
        "f4 real, f8 double precision, sym varchar, v varchar, d date, u uuid, bin bytea)",
        (
            "INSERT INTO typ VALUES ('2024-03-01T00:00:00Z', true, 1, -2, 300000, 9000000000, 0.5, 1.25, "
            "'s1', 'v1', '2024-03-02', '11111111-2222-3333-4444-555555555555', NULL)",
            "INSERT INTO typ VALUES ('2024-02-01T00:00:00Z', NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
            "NULL, NULL, NULL, NULL, NULL)",
        ),
    ),
    Table(
        "Mixed Case",
        'CREATE TABLE "Mixed Case" (ts TIMESTAMP, "Val" DOUBLE)',
        'CREATE TABLE "Mixed Case" (ts timestamp, "Val" double precision)',
        ("INSERT INTO \"Mixed Case\" VALUES ('2024-01-01T00:00:00Z', 42)",),
    ),
)
TABLE_NAMES = tuple(t.name for t in TABLES)
# The type OIDs our columns have (see the map above).
TYPE_OIDS = (16, 17, 20, 21, 23, 700, 701, 1043, 1082, 1114, 2950)
# Schemas both servers have; PostgreSQL has more (pg_toast, pg_temp_*, ...).
SHARED_SCHEMAS = ("information_schema", "pg_catalog", "public")

Row = dict  # column name -> text value (None for NULL)


def col_in(col: str, values) -> Callable[[Row], bool]:
    """A row filter: keeps rows whose `col` is one of `values`."""
    allowed = frozenset(values)
    return lambda row: row.get(col) in allowed


def ours(col: str) -> Callable[[Row], bool]:
    """Keeps rows about the tables this test created (PostgreSQL also lists its own)."""
    return col_in(col, TABLE_NAMES)


@dataclass(frozen=True)
class Stmt:
    id: str
    sql: str
    params: tuple = ()  # ((value, type oid), ...)
    # Keeps the rows to compare, on both sides: for statements whose PostgreSQL answer also lists
    # PostgreSQL's own objects.
    keep: Callable[[Row], bool] | None = None
    # Whether row order is part of the answer; None: when the statement ends with ORDER BY.
    ordered: bool | None = None
    # Compare the RowDescription's table OID and column number too (user tables' data only).
    check_origin: bool = False
    source: str = ""
    notes: str = field(default="", compare=False)

    @property
    def is_ordered(self) -> bool:
        if self.ordered is not None:
            return self.ordered
        tail = self.sql.lower().rsplit(")", 1)[-1]
        return "order by" in tail


def v(value: str) -> tuple:
    """A varchar parameter, as pgjdbc sends `setString`."""
    return (value, 1043)


def i8(value: int) -> tuple:
    """An int8 parameter, as pgjdbc sends `setLong` (DBeaver's object ids)."""
    return (value, 20)


def quote_ident(name: str) -> str:
    return name if name.islower() and name.isidentifier() else '"' + name.replace('"', '""') + '"'


# ---------------------------------------------------------------------------------------------
# information_schema and pg_catalog, read directly.
# ---------------------------------------------------------------------------------------------

CATALOG = [
    Stmt("information_schema.tables (public)",
         "SELECT table_catalog, table_schema, table_name, table_type, self_referencing_column_name, "
         "reference_generation, user_defined_type_catalog, user_defined_type_schema, "
         "user_defined_type_name, is_insertable_into, is_typed, commit_action "
         "FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name"),
    Stmt("information_schema.tables * (not catalogs)",
         "SELECT * FROM information_schema.tables "
         "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY table_name"),
    Stmt("information_schema.schemata",
         "SELECT catalog_name, schema_name, schema_owner, default_character_set_catalog, sql_path "
         "FROM information_schema.schemata ORDER BY schema_name",
         keep=col_in("schema_name", SHARED_SCHEMAS)),
    Stmt("information_schema.views (public)",
         "SELECT table_name FROM information_schema.views WHERE table_schema = 'public' ORDER BY 1"),
    Stmt("information_schema.table_constraints (public)",
         "SELECT constraint_name, constraint_type, table_name, is_deferrable, initially_deferred "
         "FROM information_schema.table_constraints WHERE table_schema = 'public' ORDER BY 1"),
    Stmt("information_schema.key_column_usage (public)",
         "SELECT constraint_name, table_name, column_name, ordinal_position "
         "FROM information_schema.key_column_usage WHERE table_schema = 'public' ORDER BY 1, 2, 4"),
    Stmt("pg_catalog.pg_tables (public)",
         "SELECT * FROM pg_catalog.pg_tables WHERE schemaname = 'public' ORDER BY tablename"),
    Stmt("pg_catalog.pg_namespace",
         "SELECT oid, nspname, pg_catalog.pg_get_userbyid(nspowner) AS owner, nspacl::text AS nspacl "
         "FROM pg_catalog.pg_namespace ORDER BY nspname",
         keep=col_in("nspname", SHARED_SCHEMAS)),
    Stmt("pg_catalog.pg_database (current)",
         "SELECT datname, pg_catalog.pg_get_userbyid(datdba) AS owner, "
         "pg_catalog.pg_encoding_to_char(encoding) AS encoding, datallowconn, datistemplate, "
         "datconnlimit FROM pg_catalog.pg_database WHERE datname = current_database()"),
    Stmt("pg_catalog.pg_type (our column types)",
         "SELECT oid, typname, typnamespace, typlen, typbyval, typtype, typcategory, typispreferred, "
         "typdelim, typrelid, typelem, typarray, typinput::text AS typinput, "
         "typoutput::text AS typoutput, typreceive::text AS typreceive, typsend::text AS typsend, typalign, typstorage, typnotnull, typbasetype, typtypmod, typndims, "
         "typcollation FROM pg_catalog.pg_type "
         f"WHERE oid IN ({', '.join(map(str, TYPE_OIDS))}) ORDER BY oid"),
    Stmt("pg_catalog.pg_class (our tables)",
         "SELECT c.relname, c.relnamespace, c.reltype <> 0 AS has_rowtype, "
         "pg_catalog.pg_get_userbyid(c.relowner) AS owner, c.relam, c.relhasindex, c.relisshared, "
         "c.relpersistence, c.relkind, c.relnatts, c.relchecks, c.relhasrules, c.relhastriggers, "
         "c.relhassubclass, c.relrowsecurity, c.relispartition, c.reloptions "
         "FROM pg_catalog.pg_class c WHERE c.relnamespace = 'public'::regnamespace ORDER BY c.relname"),
    Stmt("session: current_database, user, schemas",
         "SELECT current_database(), current_catalog, current_user, session_user, current_schema(), "
         "current_schemas(false), current_schemas(true) AS with_implicit"),
    Stmt("SHOW search_path", "SHOW search_path"),
    Stmt("SHOW transaction isolation level", "SHOW transaction isolation level"),
    Stmt("SHOW standard_conforming_strings", "SHOW standard_conforming_strings"),
    Stmt("SELECT * FROM cpu (row order)", "SELECT * FROM cpu", ordered=True, check_origin=True,
         notes="PostgreSQL returns heap (insertion) order; Sundial timestamp order"),
    Stmt("SELECT * FROM cpu ORDER BY ts", "SELECT * FROM cpu ORDER BY ts", check_origin=True),
    Stmt("SELECT * FROM typ ORDER BY ts", "SELECT * FROM typ ORDER BY ts", check_origin=True),
    Stmt('SELECT * FROM "Mixed Case"', 'SELECT * FROM "Mixed Case"', ordered=False,
         check_origin=True),
    # Column origins through renames, filters, subqueries and joins; computed columns have none.
    Stmt("origins: renamed, filtered, computed",
         "SELECT usage AS u, host, n + 1 AS n1, note FROM cpu WHERE n > 0 ORDER BY ts",
         check_origin=True),
    Stmt("origins: subquery and join",
         "SELECT s.host, t.i32, s.usage FROM (SELECT ts, host, usage FROM cpu) s "
         "JOIN typ t ON t.ts = s.ts ORDER BY s.ts", check_origin=True),
    Stmt("origins: aggregate", "SELECT host, count(*) AS c, max(usage) AS m FROM cpu GROUP BY host ORDER BY host",
         check_origin=True),
]

# pg_attribute by regclass text, crossed with each table.
for _t in TABLES:
    CATALOG.append(Stmt(
        f"pg_catalog.pg_attribute ({_t.name})",
        "SELECT attname, atttypid, attlen, attnum, atttypmod, attndims, attbyval, attalign, "
        "attstorage, attnotnull, atthasdef, attidentity, attgenerated, attisdropped, attislocal, "
        "attinhcount, attcollation FROM pg_catalog.pg_attribute "
        f"WHERE attrelid = '{quote_ident(_t.name)}'::regclass AND attnum > 0 ORDER BY attnum"))
    CATALOG.append(Stmt(
        f"information_schema.columns * ({_t.name})",
        "SELECT * FROM information_schema.columns "
        "WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position",
        params=(v(_t.name),)))

# ---------------------------------------------------------------------------------------------
# Grafana's PostgreSQL data source (query builder), as tests/clients/go/grafana.go replays it.
# ---------------------------------------------------------------------------------------------

GRAFANA_SEARCH_PATH = """SELECT CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
 FROM generate_series(array_lower(string_to_array(current_setting('search_path'),','),1),
 array_upper(string_to_array(current_setting('search_path'),','),1)) as i,
 string_to_array(current_setting('search_path'),',') s"""

GRAFANA_TABLES = """SELECT quote_ident(table_name) as "table" FROM information_schema.tables
 WHERE quote_ident(table_schema) NOT IN ('information_schema', 'pg_catalog',
 '_timescaledb_cache', '_timescaledb_catalog', '_timescaledb_internal', '_timescaledb_config',
 'timescaledb_information', 'timescaledb_experimental')
 AND table_type = 'BASE TABLE' AND quote_ident(table_schema) IN (""" + GRAFANA_SEARCH_PATH + ")"

GRAFANA_COLUMNS = """SELECT quote_ident(column_name) AS "column", data_type AS "type"
 FROM information_schema.columns WHERE
 CASE WHEN array_length(parse_ident('%(t)s'),1) = 2
 THEN quote_ident(table_schema) = (parse_ident('%(t)s'))[1]
 AND quote_ident(table_name) = (parse_ident('%(t)s'))[2]
 ELSE quote_ident(table_name) = '%(t)s' AND quote_ident(table_schema) IN (""" + GRAFANA_SEARCH_PATH + """)
 END"""

GRAFANA = [
    Stmt("grafana: search_path schemas", GRAFANA_SEARCH_PATH, ordered=False),
    Stmt("grafana: table list", GRAFANA_TABLES, ordered=False),
    Stmt("grafana: server_version_num",
         "SELECT current_setting('server_version_num')::int/100 as version"),
    Stmt("grafana: timescaledb extension",
         "SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'"),
]
for _name in ("cpu", "public.cpu", "typ", '"Mixed Case"', 'public."Mixed Case"'):
    # Column order is information_schema.columns' natural order (no ORDER BY): both list a
    # table's columns in attnum order, which the query builder shows as is.
    GRAFANA.append(Stmt(f"grafana: columns of {_name}",
                        GRAFANA_COLUMNS % {"t": _name.replace("'", "''")}, ordered=True))

# ---------------------------------------------------------------------------------------------
# pgjdbc 42.7.14 DatabaseMetaData, verbatim from PostgreSQL's statement log.
# ---------------------------------------------------------------------------------------------

JDBC_TABLES_HEAD = """SELECT current_database() AS "TABLE_CAT", n.nspname AS "TABLE_SCHEM", c.relname AS "TABLE_NAME",  CASE n.nspname ~ '^pg_' OR n.nspname = 'information_schema'  WHEN true THEN CASE  WHEN n.nspname = 'pg_catalog' OR n.nspname = 'information_schema' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TABLE'   WHEN 'v' THEN 'SYSTEM VIEW'   WHEN 'i' THEN 'SYSTEM INDEX'   ELSE NULL   END  WHEN n.nspname = 'pg_toast' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TOAST TABLE'   WHEN 'i' THEN 'SYSTEM TOAST INDEX'   ELSE NULL   END  ELSE CASE c.relkind   WHEN 'r' THEN 'TEMPORARY TABLE'   WHEN 'p' THEN 'TEMPORARY TABLE'   WHEN 'i' THEN 'TEMPORARY INDEX'   WHEN 'S' THEN 'TEMPORARY SEQUENCE'   WHEN 'v' THEN 'TEMPORARY VIEW'   ELSE NULL   END  END  WHEN false THEN CASE c.relkind  WHEN 'r' THEN 'TABLE'  WHEN 'p' THEN 'PARTITIONED TABLE'  WHEN 'i' THEN 'INDEX'  WHEN 'P' then 'PARTITIONED INDEX'  WHEN 'S' THEN 'SEQUENCE'  WHEN 'v' THEN 'VIEW'  WHEN 'c' THEN 'TYPE'  WHEN 'f' THEN 'FOREIGN TABLE'  WHEN 'm' THEN 'MATERIALIZED VIEW'  ELSE NULL  END  ELSE NULL  END  AS "TABLE_TYPE", d.description AS "REMARKS",  '' as "TYPE_CAT", '' as "TYPE_SCHEM", '' as "TYPE_NAME", '' AS "SELF_REFERENCING_COL_NAME", '' AS "REF_GENERATION"  FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c  LEFT JOIN pg_catalog.pg_description d ON (c.oid = d.objoid AND d.objsubid = 0  and d.classoid = 'pg_class'::regclass)  WHERE c.relnamespace = n.oid """

JDBC_COLUMNS_HEAD = """SELECT * FROM (SELECT current_database() AS current_database, n.nspname,c.relname,a.attname,a.atttypid,a.attnotnull  OR (t.typtype = 'd' AND t.typnotnull) AS attnotnull,a.atttypmod,a.attlen,t.typtypmod,row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS attnum, nullif(a.attidentity, '') as attidentity,nullif(a.attgenerated, '') as attgenerated,pg_catalog.pg_get_expr(def.adbin, def.adrelid) AS adsrc,dsc.description,t.typbasetype,t.typtype  FROM pg_catalog.pg_namespace n  JOIN pg_catalog.pg_class c ON (c.relnamespace = n.oid)  JOIN pg_catalog.pg_attribute a ON (a.attrelid=c.oid)  JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid)  LEFT JOIN pg_catalog.pg_attrdef def ON (a.attrelid=def.adrelid AND a.attnum = def.adnum)  LEFT JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)  LEFT JOIN pg_catalog.pg_class dc ON (dc.oid=dsc.classoid AND dc.relname='pg_class')  LEFT JOIN pg_catalog.pg_namespace dn ON (dc.relnamespace=dn.oid AND dn.nspname='pg_catalog')  WHERE c.relkind in ('r','p','v','f','m') and a.attnum > 0 AND NOT a.attisdropped """

JDBC_SCHEMAS_HEAD = """SELECT nspname AS "TABLE_SCHEM", current_database() AS "TABLE_CATALOG" FROM pg_catalog.pg_namespace  WHERE nspname <> 'pg_toast' AND (nspname !~ '^pg_temp_'  OR nspname = (pg_catalog.current_schemas(true))[1]) AND (nspname !~ '^pg_toast_temp_'  OR nspname = replace((pg_catalog.current_schemas(true))[1], 'pg_temp_', 'pg_toast_temp_')) """

JDBC_PRIMARY_KEYS = """SELECT        result.TABLE_CAT AS "TABLE_CAT",        result.TABLE_SCHEM AS "TABLE_SCHEM",        result.TABLE_NAME AS "TABLE_NAME",        result.COLUMN_NAME AS "COLUMN_NAME",        result.KEY_SEQ AS "KEY_SEQ",        result.PK_NAME AS "PK_NAME"FROM      (SELECT current_database() AS TABLE_CAT, n.nspname AS TABLE_SCHEM,   ct.relname AS TABLE_NAME, a.attname AS COLUMN_NAME,   (information_schema._pg_expandarray(con.conkey)).n AS KEY_SEQ, con.conname AS PK_NAME,   information_schema._pg_expandarray(con.conkey) AS KEYS, a.attnum AS A_ATTNUM FROM pg_catalog.pg_constraint con   JOIN pg_catalog.pg_class ct ON (con.conrelid = ct.oid)   JOIN pg_catalog.pg_namespace n ON (ct.relnamespace = n.oid)   JOIN pg_catalog.pg_attribute a ON (a.attrelid = ct.oid) WHERE con.contype = 'p'  AND n.nspname = $1 AND ct.relname = $2 ) result where  result.A_ATTNUM = (result.KEYS).x  ORDER BY result.table_name, result.pk_name, result.key_seq"""

JDBC_INDEX_INFO = """SELECT     tmp.TABLE_CAT AS "TABLE_CAT",     tmp.TABLE_SCHEM AS "TABLE_SCHEM",     tmp.TABLE_NAME AS "TABLE_NAME",     tmp.NON_UNIQUE AS "NON_UNIQUE",     tmp.INDEX_QUALIFIER AS "INDEX_QUALIFIER",     tmp.INDEX_NAME AS "INDEX_NAME",     tmp.TYPE AS "TYPE",     tmp.ORDINAL_POSITION AS "ORDINAL_POSITION",     trim(both '"' from pg_catalog.pg_get_indexdef(tmp.CI_OID, tmp.ORDINAL_POSITION, false)) AS "COLUMN_NAME",   CASE tmp.AM_NAME     WHEN 'btree' THEN CASE tmp.I_INDOPTION[tmp.ORDINAL_POSITION - 1] & 1::smallint       WHEN 1 THEN 'D'       ELSE 'A'     END     ELSE NULL   END AS "ASC_OR_DESC",     tmp.CARDINALITY AS "CARDINALITY",     tmp.PAGES AS "PAGES",     tmp.FILTER_CONDITION AS "FILTER_CONDITION",     tmp.REMARKS AS "REMARKS"FROM (SELECT current_database() AS TABLE_CAT,  n.nspname AS TABLE_SCHEM,   ct.relname AS TABLE_NAME, NOT i.indisunique AS NON_UNIQUE,   NULL AS INDEX_QUALIFIER, ci.relname AS INDEX_NAME,   CASE i.indisclustered     WHEN true THEN 1    ELSE CASE am.amname       WHEN 'hash' THEN 2      ELSE 3    END   END AS TYPE,   (information_schema._pg_expandarray(i.indkey)).n AS ORDINAL_POSITION,   ci.reltuples AS CARDINALITY,   ci.relpages AS PAGES,   pg_catalog.pg_get_expr(i.indpred, i.indrelid) AS FILTER_CONDITION,   ci.oid AS CI_OID,   i.indoption AS I_INDOPTION,   am.amname AS AM_NAME,   d.description AS REMARKS FROM pg_catalog.pg_class ct   JOIN pg_catalog.pg_namespace n ON (ct.relnamespace = n.oid)   JOIN pg_catalog.pg_index i ON (ct.oid = i.indrelid)   JOIN pg_catalog.pg_class ci ON (ci.oid = i.indexrelid)   JOIN pg_catalog.pg_am am ON (ci.relam = am.oid)   LEFT JOIN pg_catalog.pg_description d ON (ci.oid = d.objoid) WHERE true  AND n.nspname = $1 AND ct.relname = $2) AS tmp ORDER BY "NON_UNIQUE", "TYPE", "INDEX_NAME", "ORDINAL_POSITION" """

JDBC_IMPORTED_KEYS = """SELECT current_database() AS "PKTABLE_CAT", pkn.nspname AS "PKTABLE_SCHEM", pkc.relname AS "PKTABLE_NAME", pka.attname AS "PKCOLUMN_NAME", current_database() AS "FKTABLE_CAT", fkn.nspname AS "FKTABLE_SCHEM", fkc.relname AS "FKTABLE_NAME", fka.attname AS "FKCOLUMN_NAME", pos.n AS "KEY_SEQ", CASE con.confupdtype  WHEN 'c' THEN 0 WHEN 'n' THEN 2 WHEN 'd' THEN 4 WHEN 'r' THEN 1 WHEN 'p' THEN 1 WHEN 'a' THEN 3 ELSE NULL END AS "UPDATE_RULE", CASE con.confdeltype  WHEN 'c' THEN 0 WHEN 'n' THEN 2 WHEN 'd' THEN 4 WHEN 'r' THEN 1 WHEN 'p' THEN 1 WHEN 'a' THEN 3 ELSE NULL END AS "DELETE_RULE", con.conname AS "FK_NAME", pkic.relname AS "PK_NAME", CASE  WHEN con.condeferrable AND con.condeferred THEN 5 WHEN con.condeferrable THEN 6 ELSE 7 END AS "DEFERRABILITY"  FROM  pg_catalog.pg_namespace pkn, pg_catalog.pg_class pkc, pg_catalog.pg_attribute pka,  pg_catalog.pg_namespace fkn, pg_catalog.pg_class fkc, pg_catalog.pg_attribute fka,  pg_catalog.pg_constraint con,  pg_catalog.generate_series(1, 32) pos(n),  pg_catalog.pg_class pkic WHERE pkn.oid = pkc.relnamespace AND pkc.oid = pka.attrelid AND pka.attnum = con.confkey[pos.n] AND con.confrelid = pkc.oid  AND fkn.oid = fkc.relnamespace AND fkc.oid = fka.attrelid AND fka.attnum = con.conkey[pos.n] AND con.conrelid = fkc.oid  AND con.contype = 'f' AND (pkic.relkind = 'i' OR pkic.relkind = 'I') AND pkic.oid = con.conindid  AND fkn.nspname = $1 AND fkc.relname = $2 ORDER BY pkn.nspname,pkc.relname, con.conname,pos.n"""

JDBC_TYPE_BY_OID = "SELECT n.nspname = ANY(current_schemas(true)), n.nspname, t.typname FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON t.typnamespace = n.oid WHERE t.oid = $1"

JDBC_TYPE_IS_ARRAY = "SELECT typinput='pg_catalog.array_in'::regproc as is_array, typtype, typname, pg_type.oid   FROM pg_catalog.pg_type   LEFT JOIN (select ns.oid as nspoid, ns.nspname, r.r           from pg_namespace as ns           join ( select s.r, (current_schemas(false))[s.r] as nspname                    from generate_series(1, array_upper(current_schemas(false), 1)) as s(r) ) as r          using ( nspname )        ) as sp     ON sp.nspoid = typnamespace  WHERE pg_type.oid = $1  ORDER BY sp.r, pg_type.oid DESC"

# ResultSetMetaData (isNullable, getTableName, isAutoIncrement) for `SELECT * FROM cpu`: the
# table OID and column numbers come from the RowDescription.
JDBC_RSMD_CPU = "SELECT c.oid, a.attnum, a.attname, c.relname, n.nspname, a.attnotnull OR (t.typtype = 'd' AND t.typnotnull), a.attidentity != '' OR pg_catalog.pg_get_expr(d.adbin, d.adrelid) LIKE '%nextval(%' FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON (c.relnamespace = n.oid) JOIN pg_catalog.pg_attribute a ON (c.oid = a.attrelid) JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid) LEFT JOIN pg_catalog.pg_attrdef d ON (d.adrelid = a.attrelid AND d.adnum = a.attnum) JOIN (SELECT @oid:cpu@ AS oid , 1 AS attnum UNION ALL SELECT @oid:cpu@, 2 UNION ALL SELECT @oid:cpu@, 3 UNION ALL SELECT @oid:cpu@, 4 UNION ALL SELECT @oid:cpu@, 5 UNION ALL SELECT @oid:cpu@, 6) vals ON (c.oid = vals.oid AND a.attnum = vals.attnum) where c.oid in (@oid:cpu@)"

JDBC = [
    Stmt("pgjdbc getTables(null, null, %, [TABLE])",
         JDBC_TABLES_HEAD + """ AND c.relname LIKE $1 AND (false  OR ( c.relkind = 'r' AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' ) )  ORDER BY "TABLE_TYPE","TABLE_SCHEM","TABLE_NAME" """,
         params=(v("%"),)),
    Stmt("pgjdbc getTables(null, public, %, null)",
         JDBC_TABLES_HEAD + """ AND n.nspname LIKE $1 AND c.relname LIKE $2 ORDER BY "TABLE_TYPE","TABLE_SCHEM","TABLE_NAME" """,
         params=(v("public"), v("%"))),
    Stmt("pgjdbc getColumns(null, null, %, null)",
         JDBC_COLUMNS_HEAD + """ AND c.relname LIKE $1) c WHERE true  ORDER BY nspname,c.relname,attnum """,
         params=(v("%"),), keep=ours("relname")),
    Stmt("pgjdbc getSchemas()", JDBC_SCHEMAS_HEAD + """ ORDER BY "TABLE_SCHEM" """,
         keep=col_in("TABLE_SCHEM", SHARED_SCHEMAS)),
    Stmt("pgjdbc getSchemas(null, pub%)",
         JDBC_SCHEMAS_HEAD + """ AND nspname LIKE $1 ORDER BY "TABLE_SCHEM" """, params=(v("pub%"),)),
    Stmt("pgjdbc getCatalogs()",
         """SELECT datname AS "TABLE_CAT" FROM pg_catalog.pg_database WHERE datallowconn = true ORDER BY datname""",
         keep=col_in("TABLE_CAT", ["qdb"])),
    Stmt("pgjdbc select current_catalog", "select current_catalog"),
    Stmt("pgjdbc max_index_keys", "SELECT setting FROM pg_catalog.pg_settings WHERE name='max_index_keys'"),
    Stmt("pgjdbc ResultSetMetaData of SELECT * FROM cpu", JDBC_RSMD_CPU, ordered=False),
]
for _t in TABLES:
    _n = _t.name
    JDBC += [
        Stmt(f"pgjdbc getTables(null, public, {_n}, null)",
             JDBC_TABLES_HEAD + """ AND n.nspname LIKE $1 AND c.relname LIKE $2 ORDER BY "TABLE_TYPE","TABLE_SCHEM","TABLE_NAME" """,
             params=(v("public"), v(_n))),
        Stmt(f"pgjdbc getColumns(null, public, {_n}, %)",
             JDBC_COLUMNS_HEAD + """ AND n.nspname LIKE $1 AND c.relname LIKE $2) c WHERE true  AND attname LIKE $3 ORDER BY nspname,c.relname,attnum """,
             params=(v("public"), v(_n), v("%"))),
        Stmt(f"pgjdbc getPrimaryKeys(null, public, {_n})", JDBC_PRIMARY_KEYS, params=(v("public"), v(_n))),
        Stmt(f"pgjdbc getIndexInfo(null, public, {_n}, false, true)", JDBC_INDEX_INFO,
             params=(v("public"), v(_n))),
    ]
JDBC.append(Stmt("pgjdbc getImportedKeys(null, public, cpu)", JDBC_IMPORTED_KEYS,
                 params=(v("public"), v("cpu"))))
for _oid in TYPE_OIDS:
    # getColumns resolves each column's type OID to a name (TypeInfoCache, setInt).
    JDBC.append(Stmt(f"pgjdbc type by oid {_oid}", JDBC_TYPE_BY_OID, params=((str(_oid), 23),)))
for _oid in (1043, 1114, 2950):
    JDBC.append(Stmt(f"pgjdbc type is_array {_oid}", JDBC_TYPE_IS_ARRAY, params=((str(_oid), 23),)))

# ---------------------------------------------------------------------------------------------
# DBeaver's PostgreSQL plugin: what its navigator sends to list a database's schemas, a schema's
# tables, and a table's columns, constraints and indexes (PostgreDataSource, PostgreDatabase,
# PostgreSchema's TableCache, ConstraintCache, IndexCache, PostgreDataTypeCache).
# ---------------------------------------------------------------------------------------------

DBEAVER = [
    Stmt("dbeaver: current_schema, session_user", "SELECT current_schema(),session_user"),
    Stmt("dbeaver: database",
         "SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE datname=$1", params=(v("qdb"),)),
    Stmt("dbeaver: schemas",
         "SELECT n.oid,n.*,d.description FROM pg_catalog.pg_namespace n\n"
         "LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=n.oid AND d.objsubid=0 AND d.classoid='pg_namespace'::regclass\n"
         " ORDER BY nspname",
         keep=col_in("nspname", SHARED_SCHEMAS)),
    Stmt("dbeaver: tables of public",
         "SELECT c.oid,c.*,d.description,pg_catalog.pg_get_expr(c.relpartbound, c.oid) as partition_expr,  pg_catalog.pg_get_partkeydef(c.oid) as partition_key \n"
         "FROM pg_catalog.pg_class c\n"
         "LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND d.classoid='pg_class'::regclass\n"
         "WHERE c.relnamespace=$1 AND c.relkind not in ('i','I','c')",
         params=(i8("@nsp:public@"),), ordered=False),
    Stmt("dbeaver: constraints of public",
         "SELECT c.oid,c.*,t.relname as tabrelname,rt.relnamespace as refnamespace,d.description, case when c.contype='c' then \"substring\"(pg_get_constraintdef(c.oid), 7) else null end consrc_copy\n"
         "FROM pg_catalog.pg_constraint c\n"
         "INNER JOIN pg_catalog.pg_class t ON t.oid=c.conrelid\n"
         "LEFT OUTER JOIN pg_catalog.pg_class rt ON rt.oid=c.confrelid\n"
         "LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND d.classoid='pg_constraint'::regclass\n"
         "WHERE t.relnamespace=$1\n"
         "ORDER BY c.oid",
         params=(i8("@nsp:public@"),)),
    Stmt("dbeaver: indexes of public",
         "SELECT i.*,i.indkey as keys,c.relname,c.relnamespace,c.relam,c.reltablespace,tc.relname as tabrelname,dsc.description,pg_catalog.pg_get_expr(i.indpred, i.indrelid) as pred_expr,pg_catalog.pg_get_expr(i.indexprs, i.indrelid, true) as expr,pg_catalog.pg_relation_size(i.indexrelid) as index_rel_size,pg_catalog.pg_stat_get_numscans(i.indexrelid) as index_num_scans\n"
         "FROM pg_catalog.pg_index i\n"
         "INNER JOIN pg_catalog.pg_class c ON c.oid=i.indexrelid\n"
         "INNER JOIN pg_catalog.pg_class tc ON tc.oid=i.indrelid\n"
         "LEFT OUTER JOIN pg_catalog.pg_description dsc ON i.indexrelid=dsc.objoid\n"
         "WHERE  c.relnamespace=$1 ORDER BY tabrelname, c.relname",
         params=(i8("@nsp:public@"),)),
    Stmt("dbeaver: data types of pg_catalog (our column types)",
         "SELECT t.oid,t.*,c.relkind,format_type(nullif(t.typbasetype, 0), t.typtypmod) as base_type_name, d.description\n"
         "FROM pg_catalog.pg_type t\n"
         "LEFT OUTER JOIN pg_catalog.pg_type et ON et.oid=t.typelem\n"
         "LEFT OUTER JOIN pg_catalog.pg_class c ON c.oid=t.typrelid\n"
         "LEFT OUTER JOIN pg_catalog.pg_description d ON t.oid=d.objoid\n"
         "WHERE t.typname IS NOT NULL\n"
         "AND (c.relkind IS NULL OR c.relkind = 'c') AND (et.typcategory IS NULL OR et.typcategory <> 'C')\n"
         "AND t.typnamespace=$1",
         params=(i8("@nsp:pg_catalog@"),), ordered=False,
         keep=col_in("oid", [str(o) for o in TYPE_OIDS])),
    Stmt("dbeaver: functions of public",
         "SELECT p.oid,p.*,d.description\n"
         "FROM pg_catalog.pg_proc p\n"
         "LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=p.oid\n"
         "WHERE p.pronamespace=$1\n"
         "ORDER BY p.proname",
         params=(i8("@nsp:public@"),)),
]
for _t in TABLES:
    DBEAVER.append(Stmt(
        f"dbeaver: columns of {_t.name}",
        "SELECT c.relname,a.*,pg_catalog.pg_get_expr(ad.adbin, ad.adrelid, true) as def_value,dsc.description,dep.objid\n"
        "FROM pg_catalog.pg_attribute a\n"
        "INNER JOIN pg_catalog.pg_class c ON (a.attrelid=c.oid)\n"
        "LEFT OUTER JOIN pg_catalog.pg_attrdef ad ON (a.attrelid=ad.adrelid AND a.attnum = ad.adnum)\n"
        "LEFT OUTER JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)\n"
        "LEFT OUTER JOIN pg_depend dep on dep.refobjid = a.attrelid AND dep.deptype = 'i' and dep.refobjsubid = a.attnum and dep.classid = dep.refclassid\n"
        "WHERE NOT a.attisdropped AND c.relkind not in ('i','I','c') AND c.oid=$1\n"
        "ORDER BY a.attnum",
        params=(i8(f"@oid:{_t.name}@"),),
        # PostgreSQL's pg_attribute also holds the system columns (ctid, xmin, ...: attnum < 0).
        keep=lambda row: row.get("attnum") is not None and int(row["attnum"]) > 0))

STATEMENTS: list[Stmt] = CATALOG + GRAFANA + JDBC + DBEAVER

# ---------------------------------------------------------------------------------------------
# psql's backslash commands: captured with `psql -E` from PostgreSQL at run time.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PsqlCommand:
    command: str
    keep: Callable[[Row], bool] | None = None  # for every query the command sends
    # Compare psql's rendered output too (not when PostgreSQL lists objects of its own).
    compare_output: bool = True


PSQL_COMMANDS = [
    PsqlCommand(r"\dt"),
    PsqlCommand(r"\dt+", compare_output=False),  # sizes differ
    PsqlCommand(r"\d"),
    PsqlCommand(r"\dt cpu"),
    PsqlCommand(r"\d cpu"),
    PsqlCommand(r"\d+ cpu"),
    PsqlCommand(r"\d typ"),
    PsqlCommand(r'\d "Mixed Case"'),
    PsqlCommand(r"\dn"),
    PsqlCommand(r"\dn+"),
    PsqlCommand(r"\l", keep=col_in("Name", ["qdb"]), compare_output=False),
    PsqlCommand(r"\l+", keep=col_in("Name", ["qdb"]), compare_output=False),
    PsqlCommand(r"\df"),
    PsqlCommand(r"\dT"),
    PsqlCommand(r"\du"),
    PsqlCommand(r"\dv"),
    PsqlCommand(r"\di"),
    PsqlCommand(r"\dx", keep=lambda row: row.get("Name") != "plpgsql", compare_output=False),
    PsqlCommand(r"\db"),
    PsqlCommand(r"\dA", keep=col_in("Name", ["heap"]), compare_output=False),
]

# Columns whose values depend on storage, statistics or transaction ids, not on the schema:
# compared as "<physical>" on both sides (by name, or by PostgreSQL's type xid/xid8).
PHYSICAL_COLUMNS = frozenset({
    "relfilenode", "relpages", "reltuples", "relallvisible", "relfrozenxid", "relminmxid",
    "datfrozenxid", "datminmxid", "Size", "index_rel_size", "index_num_scans", "CARDINALITY",
    "PAGES",
})
