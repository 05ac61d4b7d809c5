//! Zone maps against the rows they describe: after appends that complete zones across commits,
//! rollbacks, out-of-order rewrites, a column added mid-zone, reopening and damaged entries.

mod common;

use common::*;
use sundial_kernels::{ColumnValues, Domain};
use sundial_storage::{ColumnType, Database, PartitionBy, Snapshot, TableDef, ZONE_ROWS, Zone};

fn def() -> TableDef {
    TableDef {
        name: "t".into(),
        columns: columns(),
        timestamp: Some("ts".into()),
        partition_by: PartitionBy::None,
        indexed: Vec::new(),
        dedup_keys: Vec::new(),
        ttl: None,
        cold_after: None,
    }
}

fn rows(rng: &mut Rng, from_ts: i64, n: usize, serial: &mut u64) -> Vec<Row> {
    (0..n)
        .map(|i| {
            *serial += 1;
            let mut r = random_row(rng, from_ts + i as i64, *serial);
            r.ts = from_ts + i as i64;
            r
        })
        .collect()
}

/// The zone of rows `[k * ZONE_ROWS, (k + 1) * ZONE_ROWS)` of a column, computed from its rows.
fn zone_of_rows(snapshot: &Snapshot, partition: usize, column: usize, k: u64) -> Option<Zone> {
    let domain = match snapshot.meta().columns[column].column_type {
        ColumnType::Double | ColumnType::Float => Domain::Float,
        ColumnType::Long | ColumnType::Timestamp | ColumnType::Int => Domain::Int,
        _ => return None,
    };
    let array = snapshot
        .read_column(partition, column, k * ZONE_ROWS..(k + 1) * ZONE_ROWS)
        .unwrap();
    Zone::of(&ColumnValues::of(array.as_ref()).unwrap(), domain)
}

/// Every zone entry of the snapshot is the zone of its rows (none missing); returns how many
/// zones were checked.
fn assert_zones(snapshot: &Snapshot, context: &str) -> usize {
    let mut checked = 0;
    for (p, part) in snapshot.partitions().iter().enumerate() {
        for c in 0..snapshot.meta().columns.len() {
            let zones = snapshot.zones(p, c).unwrap();
            assert_eq!(
                zones.len() as u64,
                part.row_count / ZONE_ROWS,
                "{context}: zones of partition {p} column {c}"
            );
            for (k, z) in zones.iter().enumerate() {
                let want = zone_of_rows(snapshot, p, c, k as u64);
                assert_eq!(*z, want, "{context}: zone {k} of partition {p} column {c}");
                checked += usize::from(want.is_some());
            }
        }
    }
    checked
}

#[test]
fn zones_describe_their_rows_through_appends_rewrites_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(11);
    let mut serial = 0;
    let zone = ZONE_ROWS as usize;
    {
        let db = Database::open(dir.path(), options()).unwrap();
        let table = db.create_table(def(), false).unwrap();
        let mut w = table.writer().unwrap();
        // Commits that end mid-zone, one that completes two zones at once, and a rollback of
        // rows that would have completed a zone.
        let mut ts = 1_000_000i64;
        let committed = [zone / 3, zone / 2, zone + zone / 2];
        for n in committed {
            w.append(&batch(&rows(&mut rng, ts, n, &mut serial)))
                .unwrap();
            ts += n as i64;
            w.commit().unwrap();
            assert_zones(&table.snapshot(), "append");
        }
        w.append(&batch(&rows(&mut rng, ts, zone, &mut serial)))
            .unwrap();
        w.rollback();
        assert_eq!(
            table.snapshot().row_count(),
            committed.iter().sum::<usize>() as u64
        );
        // A column added in the middle of zone 2: its rows below the top are NULL.
        drop(w);
        let mut w = table.writer().unwrap();
        w.add_column("late", ColumnType::Double).unwrap();
        let mut b = batch(&rows(&mut rng, ts, zone, &mut serial));
        let late: arrow_array::ArrayRef =
            std::sync::Arc::new(arrow_array::Float64Array::from_iter(
                (0..zone).map(|i| (i % 5 != 0).then_some(i as f64 - 7.5)),
            ));
        let mut fields = b.schema().fields().to_vec();
        fields.push(std::sync::Arc::new(arrow_schema::Field::new(
            "late",
            arrow_schema::DataType::Float64,
            true,
        )));
        let mut cols = b.columns().to_vec();
        cols.push(late);
        b = arrow_array::RecordBatch::try_new(
            std::sync::Arc::new(arrow_schema::Schema::new(fields)),
            cols,
        )
        .unwrap();
        w.append(&b).unwrap();
        w.commit().unwrap();
        let snapshot = table.snapshot();
        let late = snapshot.meta().column_index("late").unwrap();
        let zones = snapshot.zones(0, late).unwrap();
        assert_eq!(zones.len(), 3);
        assert!(!zones[0].unwrap().has_values(), "zone 0 is below the top");
        assert_zones(&snapshot, "added column");
        // Out of order: older rows rewrite the partition into a new version.
        let old = rows(&mut rng, 0, 500, &mut serial);
        w.append(&batch(&old)).unwrap();
        w.commit().unwrap();
        let checked = assert_zones(&table.snapshot(), "rewrite");
        assert!(checked >= 3 * 4, "zones of every numeric column: {checked}");
    }
    // Reopened: the entries are read from the files.
    let db = Database::open(dir.path(), options()).unwrap();
    let table = db.table("t").unwrap();
    assert_zones(&table.snapshot(), "reopen");
    // A damaged entry makes its zone unknown and leaves the others.
    let part_dir = std::fs::read_dir(table.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('_'))
        .unwrap();
    let v = table.meta().columns[table.meta().column_index("v").unwrap()].id;
    let file = part_dir.join(format!("{v}.z"));
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[24 + 3] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    drop(table);
    drop(db);
    let db = Database::open(dir.path(), options()).unwrap();
    let table = db.table("t").unwrap();
    let snapshot = table.snapshot();
    let zones = snapshot
        .zones(0, snapshot.meta().column_index("v").unwrap())
        .unwrap();
    assert!(zones[0].is_some() && zones[1].is_none() && zones[2].is_some());
}
