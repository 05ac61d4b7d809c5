//! Materialized views in QuestDB's syntax: `CREATE MATERIALIZED VIEW`, `REFRESH MATERIALIZED
//! VIEW`, and the refresh itself, which recomputes the time buckets the base table's commits
//! touched.
//!
//! ```text
//!   base table commits ──▶ Table::changes_since(watermark)        (sundial-storage changes.rs)
//!        │ rows lo..=hi         └─ removed / schema: the view is marked invalid (QuestDB's rule)
//!        ▼
//!   buckets floor(lo) .. ceil(hi) ──▶ the view's query, its base scan filtered to them
//!        ▼
//!   one transaction of the view: replace_range(buckets) + the rows + RefreshState{base_seq}
//! ```
//!
//! A materialized view is a table of kind `MaterializedView` (partitions, TTL, Parquet
//! conversion and backup apply as to any table) whose transaction holds its normalised
//! defining statement and its refresh watermark. Invariants:
//! * only a refresh writes a view's rows (storage refuses other writes), and each refresh of
//!   a range is one transaction with the watermark it reaches, so after a crash the view's
//!   rows are the query's answer over the base table as of some commit;
//! * a refresh recomputes whole buckets: the base scan is cut at bucket boundaries of the
//!   query's SAMPLE BY, so every bucket it writes saw all of its base rows;
//! * the watermark is the base table's commit read *before* the refresh planned its query:
//!   commits racing with the refresh are after it and recomputed by the next one;
//! * refreshes of one view never overlap (a lock per view).
//!
//! When the base table's change log does not reach back to the watermark (after a restart),
//! the refresh is a full one: the query runs over a chunk of base partitions at a time, and the
//! rows of all chunks are committed in one transaction with the new watermark, so readers see
//! the whole view before or after it. Only a view whose rows pass [`FULL_REFRESH_TXN_BYTES`]
//! is committed chunk by chunk (the watermark moving with the last), bounding the memory a
//! refresh holds; between those commits a reader sees older buckets already recomputed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, TableReference};
use datafusion::logical_expr::{Expr, Filter, LogicalPlan, lit};
use datafusion::scalar::ScalarValue;
use sundial_sql::questdb::stride::{Step, Stride, Unit};
use sundial_sql::questdb::{Buckets, extract, view_buckets};
use sundial_sql::{AlterView, Command, CreateMaterializedView, Refresh, RefreshHow};
use sundial_storage::{PartitionBy, RefreshState, Table, TableKind, TableMeta};

use crate::runner::{Runner, blocking};

mod listing;

use crate::error::{QueryError, Result};
pub(crate) use listing::register;

/// How often the background refresher looks for views to refresh.
pub(crate) const REFRESH_POLL: Duration = Duration::from_millis(50);
/// How long the background refresher leaves a view whose refresh failed, in nanoseconds.
const RETRY_AFTER_FAILURE_NS: i64 = 5_000_000_000;
/// A full refresh whose rows take more memory than this commits them chunk by chunk rather
/// than in one transaction (see the module docs).
const FULL_REFRESH_TXN_BYTES: usize = 256 << 20;

pub(crate) use crate::view_def::{Definition, definition};

/// The tables a statement for tables names, and the kinds it applies to; `None` when it
/// applies to every kind or names none.
pub(crate) fn applies_to(command: &Command) -> Option<(Vec<&str>, &'static [TableKind])> {
    const TABLES: &[TableKind] = &[TableKind::Table];
    const STORED: &[TableKind] = &[TableKind::Table, TableKind::MaterializedView];
    Some(match command {
        Command::AddColumns { table, .. }
        | Command::SetDedup { table, .. }
        | Command::DropColumns { table, .. }
        | Command::RenameColumn { table, .. }
        | Command::DropPartitions { table, .. }
        | Command::ShowCreateTable { table } => (vec![table.as_str()], TABLES),
        Command::SetTtl { table, .. }
        | Command::SetColdAfter { table, .. }
        | Command::SetIndexed { table, .. }
        | Command::ConvertPartitions { table, .. }
        | Command::DropLastValueCache { table, .. } => (vec![table.as_str()], STORED),
        Command::CreateLastValueCache(c) => (vec![c.table.as_str()], STORED),
        Command::RenameTable { from, .. } => (vec![from.as_str()], TABLES),
        Command::DropTables { names, .. } => (names.iter().map(String::as_str).collect(), TABLES),
        Command::Truncate { tables } => (tables.iter().map(String::as_str).collect(), TABLES),
        _ => return None,
    })
}

/// QuestDB's partitioning of a view whose buckets are `stride`: DAY up to a minute, MONTH up
/// to an hour, YEAR beyond.
fn default_partitioning(stride: Stride) -> PartitionBy {
    let minute = 60_000_000_000i64;
    match stride.step() {
        Some(sundial_sql::questdb::stride::Step::Nanos(n)) if n <= minute => PartitionBy::Day,
        Some(sundial_sql::questdb::stride::Step::Nanos(n)) if n <= 60 * minute => {
            PartitionBy::Month
        }
        _ => PartitionBy::Year,
    }
}

/// A stride as QuestDB writes it: `15m`, `1M`.
fn stride_text(s: Stride) -> String {
    let unit = match s.unit {
        Unit::Nanosecond => "n",
        Unit::Microsecond => "U",
        Unit::Millisecond => "T",
        Unit::Second => "s",
        Unit::Minute => "m",
        Unit::Hour => "h",
        Unit::Day => "d",
        Unit::Week => "w",
        Unit::Month => "M",
        Unit::Year => "y",
    };
    format!("{}{unit}", s.count)
}

/// `'name'`, quoted as QuestDB's SHOW CREATE quotes names.
fn quoted(name: &str) -> String {
    format!("'{}'", name.replace('\'', "''"))
}

/// The statement stored for a view: every setting written out, as QuestDB's SHOW CREATE
/// MATERIALIZED VIEW shows it.
fn normalised(v: &CreateMaterializedView, base: &str, partition_by: PartitionBy) -> String {
    let refresh = match &v.refresh {
        Refresh::Immediate => "IMMEDIATE".to_string(),
        Refresh::Manual => "MANUAL".to_string(),
        Refresh::Every {
            every,
            start,
            time_zone,
        } => {
            let mut s = format!("EVERY {}", stride_text(*every));
            if let Some(start) = start {
                s.push_str(&format!(" START {start}"));
            }
            if let Some(zone) = time_zone {
                s.push_str(&format!(" TIME ZONE {}", quoted(zone)));
            }
            s
        }
        Refresh::Period { length, delay, .. } => {
            let mut s = format!("PERIOD (LENGTH {}", stride_text(*length));
            if let Some(delay) = delay {
                s.push_str(&format!(" DELAY {}", stride_text(*delay)));
            }
            s + ")"
        }
    };
    let mut out = format!(
        "CREATE MATERIALIZED VIEW {} WITH BASE {} REFRESH {refresh} AS (\n{}\n)",
        quoted(&v.name),
        quoted(base),
        v.query
    );
    if let Some(ts) = &v.timestamp {
        out.push_str(&format!(" TIMESTAMP({ts})"));
    }
    out.push_str(&format!(" PARTITION BY {}", partition_by.name()));
    if let Some(ttl) = v.ttl {
        out.push_str(&format!(" TTL {ttl}"));
    }
    out
}

/// The distinct tables `plan` scans, as named.
fn scanned_tables(plan: &LogicalPlan) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            let name = scan.table_name.table().to_string();
            if !out.iter().any(|n| n.eq_ignore_ascii_case(&name)) {
                out.push(name);
            }
        }
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    });
    out
}

/// `CREATE MATERIALIZED VIEW`: checks the query, creates the view's table and fills it with
/// a full refresh (a view whose first refresh fails is not kept).
pub(crate) async fn create(engine: &dyn Runner, c: CreateMaterializedView) -> Result<()> {
    let db = engine.db().clone();
    if db.table(&c.name).is_some() && c.if_not_exists {
        return Ok(());
    }
    check_refresh(&c.refresh)?;
    let buckets = view_buckets(&extract(&c.query)?.1)?;
    let (plan, timestamp) = engine.plan_query(&c.query).await?;
    let scanned = scanned_tables(&plan);
    let base = match &c.base {
        Some(base) => {
            if !scanned.iter().any(|t| t.eq_ignore_ascii_case(base)) {
                return Err(QueryError::Invalid(format!(
                    "WITH BASE {base}: the query does not read '{base}'"
                )));
            }
            base.clone()
        }
        None => match scanned.as_slice() {
            [one] => one.clone(),
            [] => {
                return Err(QueryError::Invalid(
                    "a materialized view's query must read a table".into(),
                ));
            }
            _ => {
                return Err(QueryError::Invalid(format!(
                    "the query reads {}: name the one whose commits the view follows with \
                     WITH BASE",
                    scanned.join(", ")
                )));
            }
        },
    };
    let base_table = engine.table_or_error(&base)?;
    let base_meta = base_table.meta();
    if base_meta.kind == TableKind::View {
        return Err(QueryError::Invalid(format!(
            "'{base}' is a view: a materialized view's base must store rows (a table or a \
             materialized view)"
        )));
    }
    if base_meta.timestamp_column().is_none() {
        return Err(QueryError::Invalid(format!(
            "base table '{base}' has no designated timestamp"
        )));
    }
    // The bucket column: as TIMESTAMP(c) names it, or the base's timestamp selected under
    // its own name, or the one TIMESTAMP column of the result.
    let base_ts = base_meta.timestamp_column().map(|c| c.name.clone());
    let fields = plan.schema().fields();
    let is_ts = |f: &&Arc<datafusion::arrow::datatypes::Field>| {
        matches!(
            f.data_type(),
            datafusion::arrow::datatypes::DataType::Timestamp(..)
        )
    };
    let by_name = base_ts.as_deref().and_then(|ts| {
        fields
            .iter()
            .filter(is_ts)
            .find(|f| f.name().eq_ignore_ascii_case(ts))
    });
    let only = {
        let mut timestamps = fields.iter().filter(is_ts);
        match (timestamps.next(), timestamps.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        }
    };
    let timestamp = c
        .timestamp
        .clone()
        .or(timestamp)
        .or_else(|| by_name.or(only).map(|f| f.name().clone()))
        .ok_or_else(|| {
            QueryError::Invalid(
                "the query's result has no designated timestamp: select the SAMPLE BY \
                 bucket's timestamp column, or name it with TIMESTAMP(column)"
                    .into(),
            )
        })?;
    let mut def = crate::views::describe(&c.name, plan.schema(), Some(&timestamp))?;
    if def.timestamp.is_none() {
        return Err(QueryError::Invalid(format!(
            "TIMESTAMP({timestamp}) is not a TIMESTAMP column of the query's result"
        )));
    }
    def.partition_by = c
        .partition_by
        .unwrap_or_else(|| default_partitioning(buckets.stride));
    def.ttl = c.ttl;
    let statement = normalised(&c, &base_meta.name, def.partition_by);
    let name = c.name.clone();
    let view = {
        let db = db.clone();
        blocking(move || {
            Ok(db.create_derived(def, TableKind::MaterializedView, &statement, false)?)
        })
        .await?
    };
    engine.catalog_changed();
    if let Err(e) = refresh(engine, &view, RefreshHow::Full).await {
        drop(view);
        let _ = blocking(move || Ok(db.drop_table(&name)?)).await;
        return Err(e);
    }
    Ok(())
}

/// Refuses refresh settings Sundial cannot follow: PERIOD, a START that is not a timestamp, an
/// unknown TIME ZONE.
fn check_refresh(refresh: &Refresh) -> Result<()> {
    match refresh {
        Refresh::Period { .. } => Err(QueryError::NotSupported(
            "REFRESH PERIOD (not yet): use IMMEDIATE, MANUAL or EVERY".into(),
        )),
        Refresh::Every {
            start, time_zone, ..
        } => {
            if let Some(start) = start
                && sundial_sql::rollup::instant_of_text(start).is_none()
            {
                return Err(QueryError::Invalid(format!(
                    "REFRESH EVERY ... START {start}: not a timestamp such as \
                     '2025-01-01T00:00:00Z'"
                )));
            }
            if let Some(zone) = time_zone {
                sundial_sql::questdb::stride::parse_zone(zone).map_err(|e| {
                    QueryError::Invalid(format!("REFRESH EVERY ... TIME ZONE: {e}"))
                })?;
            }
            Ok(())
        }
        Refresh::Immediate | Refresh::Manual => Ok(()),
    }
}

/// `ALTER MATERIALIZED VIEW v SET TTL ... | SET REFRESH ...`: the setting changes, and the
/// stored statement with it (SHOW CREATE shows the view as it now is).
pub(crate) async fn alter(engine: &dyn Runner, name: &str, change: AlterView) -> Result<()> {
    let view = engine.table_or_error(name)?;
    let meta = view.meta();
    crate::views::expect_kind(
        &meta,
        TableKind::MaterializedView,
        "ALTER MATERIALIZED VIEW",
    )?;
    let mut def = definition(&meta)?;
    let ttl = match change {
        AlterView::Ttl(ttl) => {
            def.view.ttl = ttl;
            Some(ttl)
        }
        AlterView::Refresh(refresh) => {
            check_refresh(&refresh)?;
            def.view.refresh = refresh;
            None
        }
    };
    let statement = normalised(&def.view, &def.base, meta.partition_by);
    blocking(move || {
        let mut w = view.writer()?;
        if let Some(ttl) = ttl {
            w.set_ttl(ttl)?;
            w.drop_expired()?;
        }
        Ok(w.set_definition(&statement)?)
    })
    .await
}

/// `REFRESH MATERIALIZED VIEW v [FULL | INCREMENTAL | RANGE FROM a TO b]`: the rows written.
pub(crate) async fn refresh_statement(
    engine: &dyn Runner,
    name: &str,
    how: RefreshHow,
) -> Result<u64> {
    let view = engine.table_or_error(name)?;
    crate::views::expect_kind(
        &view.meta(),
        TableKind::MaterializedView,
        "REFRESH MATERIALIZED VIEW",
    )?;
    refresh(engine, &view, how).await
}

/// What the listing shows of refreshes besides the watermark: kept in memory per view.
#[derive(Debug, Clone, Default)]
pub(crate) struct RefreshLog {
    pub last_start_ns: Option<i64>,
    pub last_finish_ns: Option<i64>,
    pub last_error: Option<String>,
}

/// Each view's refresh lock and log, by table directory (unique per view, even across data
/// directories in one process).
fn registry() -> &'static Mutex<HashMap<std::path::PathBuf, Arc<ViewSlot>>> {
    static SLOTS: OnceLock<Mutex<HashMap<std::path::PathBuf, Arc<ViewSlot>>>> = OnceLock::new();
    SLOTS.get_or_init(Default::default)
}

#[derive(Debug, Default)]
pub(crate) struct ViewSlot {
    lock: tokio::sync::Mutex<()>,
    log: Mutex<RefreshLog>,
}

impl ViewSlot {
    /// Whether a refresh of the view runs now.
    pub(crate) fn is_refreshing(&self) -> bool {
        self.lock.try_lock().is_err()
    }

    /// What the last refresh did.
    pub(crate) fn log(&self) -> RefreshLog {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The slot of view `table`.
pub(crate) fn slot(table: &Table) -> Arc<ViewSlot> {
    let mut slots = registry().lock().unwrap_or_else(|p| p.into_inner());
    slots.entry(table.path().to_path_buf()).or_default().clone()
}

fn now_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX)
}

/// Refreshes `view` as `how` says; returns the rows written.
pub(crate) async fn refresh(
    engine: &dyn Runner,
    view: &Arc<Table>,
    how: RefreshHow,
) -> Result<u64> {
    let slot = slot(view);
    let _running = slot.lock.lock().await;
    {
        let mut log = slot.log.lock().unwrap_or_else(|p| p.into_inner());
        log.last_start_ns = Some(now_ns());
    }
    let started = std::time::Instant::now();
    let result = refresh_locked(engine, view, how).await;
    sundial_metrics::metrics().matview_refresh(result.is_ok(), started.elapsed());
    let mut log = slot.log.lock().unwrap_or_else(|p| p.into_inner());
    log.last_finish_ns = Some(now_ns());
    log.last_error = result.as_ref().err().map(ToString::to_string);
    result
}

async fn refresh_locked(engine: &dyn Runner, view: &Arc<Table>, how: RefreshHow) -> Result<u64> {
    let snapshot = view.snapshot();
    let meta = snapshot.meta().clone();
    let def = definition(&meta)?;
    let state = snapshot.refresh().cloned();
    let Some(base) = engine.db().table(&def.base) else {
        invalidate(view, state, "base table is dropped").await?;
        return Ok(0);
    };
    let base_snapshot = base.snapshot();
    let base_seq = base_snapshot.seq();
    let fresh_state = RefreshState {
        base_id: base.id(),
        base_seq,
        refreshed_at_ns: now_ns(),
        invalid: None,
    };
    match how {
        RefreshHow::Full => full(engine, view, &def, &base, fresh_state).await,
        RefreshHow::Range { from, to } => {
            let (from, to) = (
                engine.timestamp_of(&from).await?,
                engine.timestamp_of(&to).await?,
            );
            if from > to {
                return Err(QueryError::Invalid(format!(
                    "RANGE FROM is after TO ({from} > {to} ns)"
                )));
            }
            let (lo, hi) = bucket_range(&def.buckets, from, to)?;
            // A range refresh leaves the watermark where it was.
            recompute(engine, view, &def, &base, lo, hi, None).await
        }
        RefreshHow::Incremental => {
            let Some(state) = state else {
                return full(engine, view, &def, &base, fresh_state).await;
            };
            if state.invalid.is_some() {
                return Ok(0);
            }
            if state.base_id != base.id() {
                invalidate(view, Some(state), "base table is dropped").await?;
                return Ok(0);
            }
            if state.base_seq == base_seq {
                return Ok(0);
            }
            if state.base_seq > base_seq {
                // The view reflects commits the base table no longer has (both restored from
                // a backup that copied the view after a later refresh): its rows are not
                // known to be the query's over this base.
                return full(engine, view, &def, &base, fresh_state).await;
            }
            let Some(changes) = base.changes_since(state.base_seq) else {
                return full(engine, view, &def, &base, fresh_state).await;
            };
            if let Some(reason) = changes.schema.or(changes.removed) {
                invalidate(view, Some(state), &reason).await?;
                return Ok(0);
            }
            match changes.rows {
                Some((min_ts, max_ts)) => {
                    let (lo, hi) = bucket_range(&def.buckets, min_ts, max_ts)?;
                    recompute(engine, view, &def, &base, lo, hi, Some(fresh_state)).await
                }
                None => {
                    // Commits that changed nothing the view reads (TTL, settings): the
                    // watermark moves on.
                    let view = view.clone();
                    blocking(move || {
                        let mut w = view.writer()?;
                        w.set_refresh(fresh_state)?;
                        Ok(w.commit()?)
                    })
                    .await?;
                    Ok(0)
                }
            }
        }
    }
}

/// The bucket-aligned range `[lo, hi)` holding every bucket from `min_ts`'s to `max_ts`'s.
fn bucket_range(buckets: &Buckets, min_ts: i64, max_ts: i64) -> Result<(i64, i64)> {
    let out_of_range =
        || QueryError::Invalid("timestamps out of range for the view's buckets".into());
    let lo = buckets.floor(min_ts).ok_or_else(out_of_range)?;
    let hi = buckets.ceil_after(max_ts).ok_or_else(out_of_range)?;
    Ok((lo, hi))
}

/// Marks the view invalid for `reason`, keeping its rows and watermark.
async fn invalidate(view: &Arc<Table>, state: Option<RefreshState>, reason: &str) -> Result<()> {
    let mut state = state.unwrap_or(RefreshState {
        base_id: 0,
        base_seq: 0,
        refreshed_at_ns: 0,
        invalid: None,
    });
    if state.invalid.is_some() {
        return Ok(());
    }
    tracing::warn!(
        "materialized view '{}' is invalid: {reason}; REFRESH MATERIALIZED VIEW ... FULL \
         rebuilds it",
        view.name()
    );
    state.invalid = Some(reason.to_string());
    let view = view.clone();
    blocking(move || {
        let mut w = view.writer()?;
        w.set_refresh(state)?;
        Ok(w.commit()?)
    })
    .await
}

/// A full refresh: every row from the whole base table, a chunk of base partitions at a time
/// (see the module docs), committed with `state` in one transaction unless the rows pass
/// [`FULL_REFRESH_TXN_BYTES`].
async fn full(
    engine: &dyn Runner,
    view: &Arc<Table>,
    def: &Definition,
    base: &Arc<Table>,
    state: RefreshState,
) -> Result<u64> {
    let snapshot = base.snapshot();
    // Contiguous chunks covering all time, cut at bucket boundaries between base partitions.
    let mut cuts: Vec<i64> = Vec::new();
    for parts in snapshot.partitions().chunk_by(|a, b| a.key == b.key) {
        let first = &parts[0];
        if let Some(cut) = def.buckets.floor(first.min_ts)
            && cuts.last().is_none_or(|last| cut > *last)
        {
            cuts.push(cut);
        }
    }
    if cuts.is_empty() {
        cuts.push(0);
    }
    cuts[0] = i64::MIN;
    cuts.push(i64::MAX);
    let mut rows = 0;
    let (mut held, mut held_from, mut held_bytes) = (Vec::new(), i64::MIN, 0usize);
    let chunks = cuts.len() - 1;
    for (i, range) in cuts.windows(2).enumerate() {
        let batches = compute(engine, view, def, base, range[0], range[1]).await?;
        held_bytes += batches
            .iter()
            .map(RecordBatch::get_array_memory_size)
            .sum::<usize>();
        held.extend(batches);
        let last = i + 1 == chunks;
        if last || held_bytes > FULL_REFRESH_TXN_BYTES {
            let state = last.then(|| state.clone());
            let to = range[1];
            rows += commit_rows(view, held_from, to, std::mem::take(&mut held), state).await?;
            (held_from, held_bytes) = (to, 0);
        }
    }
    Ok(rows)
}

/// Recomputes the buckets in `[lo, hi)`: the view's query over the base rows in that range
/// replaces the view's rows there, in one transaction that commits `state` if given.
async fn recompute(
    engine: &dyn Runner,
    view: &Arc<Table>,
    def: &Definition,
    base: &Arc<Table>,
    lo: i64,
    hi: i64,
    state: Option<RefreshState>,
) -> Result<u64> {
    let batches = compute(engine, view, def, base, lo, hi).await?;
    commit_rows(view, lo, hi, batches, state).await
}

/// The view's rows for the buckets in `[lo, hi)`: its query over the base rows there, in the
/// view's columns.
async fn compute(
    engine: &dyn Runner,
    view: &Arc<Table>,
    def: &Definition,
    base: &Arc<Table>,
    lo: i64,
    hi: i64,
) -> Result<Vec<RecordBatch>> {
    let base_meta = base.meta();
    let ts = base_meta
        .timestamp_column()
        .ok_or_else(|| {
            QueryError::Invalid(format!(
                "base table '{}' has no designated timestamp",
                def.base
            ))
        })?
        .name
        .clone();
    let (plan, _) = engine.plan_query(&def.view.query).await?;
    let plan = restrict(plan, &def.base, &ts, lo, hi)?;
    let batches = engine.collect_plan(plan).await?;
    let meta = view.meta();
    batches
        .iter()
        .filter(|b| b.num_rows() > 0)
        .map(|b| Ok(sundial_storage::conform(b, &meta)?))
        .collect()
}

/// Replaces the view's rows in `[lo, hi)` by `batches`, committing `state` with them if given;
/// returns the rows written.
async fn commit_rows(
    view: &Arc<Table>,
    lo: i64,
    hi: i64,
    batches: Vec<RecordBatch>,
    state: Option<RefreshState>,
) -> Result<u64> {
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    let view = view.clone();
    blocking(move || {
        let mut w = view.writer()?;
        w.replace_range(lo, hi)?;
        w.append_all(&batches)?;
        if let Some(state) = state {
            w.set_refresh(state)?;
        }
        Ok(w.commit()?)
    })
    .await?;
    Ok(rows)
}

/// `plan` with its scans of `base` restricted to rows with `ts` in `[lo, hi)`.
fn restrict(plan: LogicalPlan, base: &str, ts: &str, lo: i64, hi: i64) -> Result<LogicalPlan> {
    let bound = |t: i64| lit(ScalarValue::TimestampNanosecond(Some(t), None));
    let restricted = plan.transform_up_with_subqueries(|node| {
        let LogicalPlan::TableScan(scan) = &node else {
            return Ok(Transformed::no(node));
        };
        if !scan.table_name.table().eq_ignore_ascii_case(base) {
            return Ok(Transformed::no(node));
        }
        let column = Expr::Column(Column::new(
            Some::<TableReference>(scan.table_name.clone()),
            ts,
        ));
        let mut predicate = None;
        if lo > i64::MIN {
            predicate = Some(column.clone().gt_eq(bound(lo)));
        }
        if hi < i64::MAX {
            let below = column.lt(bound(hi));
            predicate = Some(match predicate {
                Some(p) => p.and(below),
                None => below,
            });
        }
        let Some(predicate) = predicate else {
            return Ok(Transformed::no(node));
        };
        let filter = Filter::try_new(predicate, Arc::new(node))?;
        Ok(Transformed::yes(LogicalPlan::Filter(filter)))
    })?;
    Ok(restricted.data)
}

/// Refreshes every view whose refresh is due until `stop` turns true: IMMEDIATE views soon
/// after their base table commits (within [`REFRESH_POLL`] plus the refresh), EVERY views on
/// their timer. Stops too when the engine is dropped. Refresh failures are logged and shown
/// by `materialized_views()`; the next commit tries again.
pub(crate) async fn refresh_views<R: Runner + 'static>(
    engine: std::sync::Weak<R>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut timers: HashMap<std::path::PathBuf, i64> = HashMap::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(REFRESH_POLL) => {}
            _ = stop.changed() => {}
        }
        if *stop.borrow() {
            return;
        }
        let Some(engine) = engine.upgrade() else {
            return;
        };
        for view in engine.db().tables() {
            let meta = view.meta();
            if meta.kind != TableKind::MaterializedView {
                continue;
            }
            if due(engine.as_ref(), &view, &meta, &mut timers)
                && let Err(e) = refresh(engine.as_ref(), &view, RefreshHow::Incremental).await
            {
                tracing::warn!("refreshing materialized view '{}' failed: {e}", meta.name);
            }
        }
    }
}

/// Whether `view` should refresh now.
fn due(
    engine: &dyn Runner,
    view: &Arc<Table>,
    meta: &TableMeta,
    timers: &mut HashMap<std::path::PathBuf, i64>,
) -> bool {
    let Ok(def) = definition(meta) else {
        return false;
    };
    let snapshot = view.snapshot();
    let Some(state) = snapshot.refresh() else {
        return false;
    };
    if state.invalid.is_some() {
        return false;
    }
    // After a failed refresh, the view waits before the next try.
    let log = slot(view).log();
    if log.last_error.is_some()
        && log
            .last_finish_ns
            .is_some_and(|t| now_ns().saturating_sub(t) < RETRY_AFTER_FAILURE_NS)
    {
        return false;
    }
    let behind = engine
        .db()
        .table(&def.base)
        .is_none_or(|b| b.snapshot().seq() != state.base_seq || b.id() != state.base_id);
    match &def.view.refresh {
        Refresh::Immediate => behind,
        Refresh::Manual | Refresh::Period { .. } => false,
        Refresh::Every {
            every,
            start,
            time_zone,
        } => {
            let now = now_ns();
            let Some(step) = every.step() else {
                return false;
            };
            let zone = time_zone
                .as_deref()
                .and_then(|z| sundial_sql::questdb::stride::parse_zone(z).ok());
            // Ticks at START + k * interval (from the first check when START is not given).
            let next = timers.entry(view.path().to_path_buf()).or_insert_with(|| {
                let origin = start
                    .as_deref()
                    .and_then(sundial_sql::rollup::instant_of_text)
                    .unwrap_or(now);
                next_tick(step, origin, zone, now).unwrap_or(i64::MAX)
            });
            if now < *next {
                return false;
            }
            // The next tick after now on the same grid: ticks missed while busy are skipped.
            *next = next_tick(step, *next, zone, now).unwrap_or(i64::MAX);
            behind
        }
    }
}

/// The first tick after `now` (or `origin` itself, if later) of a timer ticking every `step`
/// from `origin`: on the wall clock of `zone` when given, so that a daily timer keeps its local
/// time across daylight-saving changes (a local time a change skips ticks at the first minute
/// after it; one it repeats, at its first occurrence), else in UTC.
fn next_tick(step: Step, origin: i64, zone: Option<chrono_tz::Tz>, now: i64) -> Option<i64> {
    if origin > now {
        return Some(origin);
    }
    let Some(zone) = zone else {
        return step.add(step.floor(now, origin)?, 1);
    };
    use chrono::{Duration as Span, TimeZone};
    // Wall-clock times, as nanoseconds of a timeline without changes.
    let wall = |t: i64| {
        chrono::DateTime::from_timestamp_nanos(t)
            .with_timezone(&zone)
            .naive_local()
            .and_utc()
            .timestamp_nanos_opt()
    };
    let (origin_wall, now_wall) = (wall(origin)?, wall(now)?);
    let mut tick = step.add(step.floor(now_wall, origin_wall)?, 1)?;
    // A few ticks at most: one a change repeats may fall before `now`.
    for _ in 0..4 {
        let naive = chrono::DateTime::from_timestamp_nanos(tick).naive_utc();
        let instant = (0..=180)
            .find_map(|m| {
                zone.from_local_datetime(&(naive + Span::minutes(m)))
                    .earliest()
            })?
            .timestamp_nanos_opt()?;
        if instant > now {
            return Some(instant);
        }
        tick = step.add(tick, 1)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_tick_on_the_zone_s_wall_clock() {
        let ns = |s: &str| sundial_sql::rollup::instant_of_text(s).unwrap();
        let day = Stride::parse("1d").unwrap().step().unwrap();
        let hour = Stride::parse("1h").unwrap().step().unwrap();
        let london = Some(sundial_sql::questdb::stride::parse_zone("Europe/London").unwrap());
        // Daily at 02:00 London time, across the change to summer time (2024-03-31 01:00 UTC).
        let origin = ns("2024-03-29T02:00:00Z");
        let after = |now: &str, zone| next_tick(day, origin, zone, ns(now));
        assert_eq!(
            after("2024-03-30T03:00:00Z", london),
            Some(ns("2024-03-31T01:00:00Z"))
        );
        assert_eq!(
            after("2024-03-31T01:00:00Z", london),
            Some(ns("2024-04-01T01:00:00Z"))
        );
        // In UTC the tick stays at 02:00 UTC.
        assert_eq!(
            after("2024-03-31T01:00:00Z", None),
            Some(ns("2024-03-31T02:00:00Z"))
        );
        // Before START: START.
        assert_eq!(after("2024-03-01T00:00:00Z", london), Some(origin));
        // Hourly from 00:30 London: 01:30 is skipped on the change day, the tick comes at
        // 02:00 summer time (01:00 UTC).
        let origin = ns("2024-03-31T00:30:00Z");
        assert_eq!(
            next_tick(hour, origin, london, ns("2024-03-31T00:45:00Z")),
            Some(ns("2024-03-31T01:00:00Z"))
        );
        // Hourly across the change back (2024-10-27 01:00 UTC): 01:30 local comes twice; the
        // timer never goes back.
        let origin = ns("2024-10-26T23:30:00Z");
        let first = next_tick(hour, origin, london, ns("2024-10-26T23:45:00Z")).unwrap();
        assert_eq!(first, ns("2024-10-27T00:30:00Z"));
        let second = next_tick(hour, origin, london, first).unwrap();
        assert!(second > first);
    }

    #[test]
    fn timer_starts_read_as_instants() {
        let instant = sundial_sql::rollup::instant_of_text;
        assert_eq!(instant("'2024-01-01'"), Some(1_704_067_200_000_000_000));
        assert_eq!(
            instant("'2024-01-01T00:00:01Z'"),
            Some(1_704_067_201_000_000_000)
        );
        assert_eq!(
            instant("'2024-01-01T01:00:00+01:00'"),
            Some(1_704_067_200_000_000_000)
        );
        assert_eq!(instant("'soon'"), None);
    }

    #[test]
    fn queries_default_partitioning_as_questdb_does() {
        let p = |s: &str| default_partitioning(Stride::parse(s).unwrap());
        assert_eq!(p("1s"), PartitionBy::Day);
        assert_eq!(p("1m"), PartitionBy::Day);
        assert_eq!(p("90s"), PartitionBy::Month);
        assert_eq!(p("60m"), PartitionBy::Month);
        assert_eq!(p("61m"), PartitionBy::Year);
        assert_eq!(p("1M"), PartitionBy::Year);
    }
}
