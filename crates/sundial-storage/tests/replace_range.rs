//! Range replacement (`TableWriter::replace_range`), as a materialized view's refresh uses it,
//! against a model: the rows outside the range stay, the range holds exactly the new rows,
//! readers see one or the other, and the refresh state commits with the rows and survives
//! reopening. Also what the change log (`Table::changes_since`) reports.

mod common;

use common::*;
use sundial_storage::{
    Changes, Database, PartitionBy, RefreshState, TableDef, TableKind, TableWriter,
};

fn def(name: &str, partition_by: PartitionBy) -> TableDef {
    TableDef {
        name: name.into(),
        columns: columns(),
        timestamp: Some("ts".into()),
        partition_by,
        indexed: Vec::new(),
        dedup_keys: Vec::new(),
        ttl: None,
        cold_after: None,
    }
}

fn refresh(base_seq: u64) -> RefreshState {
    RefreshState {
        base_id: 7,
        base_seq,
        refreshed_at_ns: base_seq as i64 * 1_000,
        invalid: None,
    }
}

/// A materialized view `v`, partitioned by hour, of the model's columns.
fn view(db: &Database) -> std::sync::Arc<sundial_storage::Table> {
    db.create_derived(
        def("v", PartitionBy::Hour),
        TableKind::MaterializedView,
        "CREATE MATERIALIZED VIEW v AS (SELECT 1)",
        false,
    )
    .unwrap()
}

/// Replaces `lo..hi` by `rows` in the table and in the model.
fn replace(w: &mut TableWriter, model: &mut Vec<Row>, lo: i64, hi: i64, rows: &[Row]) {
    w.replace_range(lo, hi).unwrap();
    if !rows.is_empty() {
        w.append(&batch(rows)).unwrap();
    }
    w.commit().unwrap();
    model.retain(|r| !(lo..hi).contains(&r.ts));
    model.extend_from_slice(rows);
}

#[test]
fn random_replacements_match_the_model_across_reopens() {
    let base = 1_451_606_400_000_000_000i64; // 2016-01-01
    for (seed, partition_by) in [(11u64, PartitionBy::Hour), (12, PartitionBy::Day)] {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = Rng(seed * 104_729);
        let mut model: Vec<Row> = Vec::new();
        let mut serial = 0;
        for round in 0..3 {
            let db = Database::open(dir.path(), options()).unwrap();
            // A plain table, so that plain appends come between the replacements.
            let table = db.create_table(def("t", partition_by), true).unwrap();
            assert_rows(
                &read_all(&table.snapshot()),
                &expected(&model),
                &format!("seed {seed} reopen {round}"),
            );
            let mut w = table.writer().unwrap();
            for step in 0..12 {
                // Plain appends between replacements, in order and out of order.
                let n = 1 + rng.below(200) as usize;
                let rows: Vec<Row> = (0..n)
                    .map(|_| {
                        serial += 1;
                        random_row(&mut rng, base, serial)
                    })
                    .collect();
                w.append(&batch(&rows)).unwrap();
                w.commit().unwrap();
                model.extend(rows);
                // A replacement anywhere in (or past) the rows, sometimes with no new rows.
                let lo = base + rng.below(7 * HOUR_NS as u64) as i64 - HOUR_NS / 2;
                let hi = lo + 1 + rng.below(3 * HOUR_NS as u64) as i64;
                let fresh: Vec<Row> = if rng.chance(20) {
                    Vec::new()
                } else {
                    (0..rng.below(150))
                        .map(|_| {
                            serial += 1;
                            let mut r = random_row(&mut rng, lo, serial);
                            r.ts = lo + (r.ts - lo) % (hi - lo);
                            r
                        })
                        .collect()
                };
                replace(&mut w, &mut model, lo, hi, &fresh);
                let snapshot = table.snapshot();
                // Rows of equal timestamps: the model keeps insertion order, and so do merges.
                let mut actual = read_all(&snapshot);
                let mut want = expected(&model);
                actual.sort_by_key(|r| (r.ts, r.v));
                want.sort_by_key(|r| (r.ts, r.v));
                assert_rows(
                    &actual,
                    &want,
                    &format!("seed {seed} round {round} step {step}"),
                );
                let ts: Vec<i64> = read_all(&snapshot).iter().map(|r| r.ts).collect();
                assert!(
                    ts.windows(2).all(|w| w[0] <= w[1]),
                    "rows stay in time order"
                );
            }
        }
    }
}

#[test]
fn an_uncommitted_replacement_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    let table = view(&db);
    let mut rng = Rng(5);
    let base = 1_451_606_400_000_000_000i64;
    let rows: Vec<Row> = (0..100).map(|i| random_row(&mut rng, base, i)).collect();
    let mut w = table.writer().unwrap();
    w.replace_range(base, base + 6 * HOUR_NS).unwrap();
    w.append(&batch(&rows)).unwrap();
    w.set_refresh(refresh(2)).unwrap();
    w.commit().unwrap();
    let before = read_all(&table.snapshot());
    assert_eq!(before, expected(&rows));
    w.replace_range(base, base + 2 * HOUR_NS).unwrap();
    w.set_refresh(refresh(3)).unwrap();
    // A row outside the range is refused, and the transaction discarded.
    let outside = random_row(&mut rng, base + 3 * HOUR_NS, 1000);
    let e = w.append(&batch(&[outside])).unwrap_err();
    assert!(e.to_string().contains("outside the range"), "{e}");
    w.commit().unwrap();
    assert_eq!(read_all(&table.snapshot()), before);
    assert_eq!(table.snapshot().refresh(), Some(&refresh(2)));
    // Dropped before its commit: nothing either.
    w.replace_range(base, base + 2 * HOUR_NS).unwrap();
    drop(w);
    assert_eq!(read_all(&table.snapshot()), before);
    // Only materialized views have a refresh state; only tables with a timestamp ranges.
    let plain = db.create_table(def("t", PartitionBy::Hour), false).unwrap();
    let e = plain.writer().unwrap().set_refresh(refresh(1)).unwrap_err();
    assert!(e.to_string().contains("not a materialized view"), "{e}");
    // A refresh state alone commits, and survives reopening with the rows.
    let mut w = table.writer().unwrap();
    w.set_refresh(refresh(4)).unwrap();
    w.commit().unwrap();
    drop((w, table, plain, db));
    let db = Database::open(dir.path(), options()).unwrap();
    let table = db.table("v").unwrap();
    assert_eq!(table.snapshot().refresh(), Some(&refresh(4)));
    assert_eq!(read_all(&table.snapshot()), before);
}

#[test]
fn the_change_log_reports_rows_removals_and_schema_changes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    let table = db.create_table(def("t", PartitionBy::Hour), false).unwrap();
    let base = 1_451_606_400_000_000_000i64;
    let opened = table.snapshot().seq();
    let mut rng = Rng(9);
    let mut rows: Vec<Row> = (0..50).map(|i| random_row(&mut rng, base, i)).collect();
    rows.sort_by_key(|r| r.ts);
    commit(&table, &rows);
    let after_first = table.snapshot().seq();
    let changes = table.changes_since(opened).unwrap();
    assert_eq!(changes.rows, Some((rows[0].ts, rows[49].ts)));
    // An out-of-order row reports its own time only.
    let late = Row {
        ts: base + 1,
        ..rows[0].clone()
    };
    commit(&table, &[late]);
    assert_eq!(
        table.changes_since(after_first).unwrap(),
        Changes::rows(base + 1, base + 1)
    );
    let mut w = table.writer().unwrap();
    w.add_column("extra", sundial_storage::ColumnType::Long)
        .unwrap();
    let added = table.snapshot().seq();
    assert!(table.changes_since(after_first + 1).unwrap().is_empty());
    w.rename_column("v", "v2").unwrap();
    w.truncate().unwrap();
    let c = table.changes_since(added).unwrap();
    assert_eq!(c.schema.as_deref(), Some("rename column operation"));
    assert_eq!(c.removed.as_deref(), Some("truncate operation"));
    drop(w);
    drop(table);
    drop(db);
    // After reopening, only commits after the reopen are known.
    let db = Database::open(dir.path(), options()).unwrap();
    let table = db.table("t").unwrap();
    let seq = table.snapshot().seq();
    assert_eq!(table.changes_since(seq - 1), None);
    assert!(table.changes_since(seq).unwrap().is_empty());
}

#[test]
fn only_a_refresh_writes_a_view() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    let view = view(&db);
    let mut rng = Rng(3);
    let row = random_row(&mut rng, 1_451_606_400_000_000_000, 1);
    let mut w = view.writer().unwrap();
    let e = w.append(&batch(std::slice::from_ref(&row))).unwrap_err();
    assert!(e.to_string().contains("is a materialized view"), "{e}");
    w.replace_range(row.ts, row.ts + 1).unwrap();
    w.append(&batch(std::slice::from_ref(&row))).unwrap();
    w.commit().unwrap();
    assert_eq!(read_all(&view.snapshot()), vec![row.clone()]);
    let mut plain = def("p", PartitionBy::None);
    plain.timestamp = None;
    let p = db
        .create_derived(plain, TableKind::View, "CREATE VIEW p AS SELECT 1", false)
        .unwrap();
    let e = p.writer().unwrap().append(&batch(&[row])).unwrap_err();
    assert!(e.to_string().contains("is a view"), "{e}");
    // One namespace: a table cannot take a view's name.
    let e = db
        .create_table(def("V", PartitionBy::Hour), false)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("materialized view 'V' already exists"),
        "{e}"
    );
}
