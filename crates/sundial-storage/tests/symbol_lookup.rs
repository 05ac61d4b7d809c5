//! `Snapshot::symbol_code`: a SYMBOL's code by value, as committed, across commits, rollbacks
//! and reopening.

use std::sync::Arc;

use arrow_array::{Array, RecordBatch, StringArray, TimestampNanosecondArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use sundial_storage::{
    ColumnType, Database, Durability, PartitionBy, Snapshot, StorageOptions, Table, TableDef,
};

const SYM: usize = 1;

fn options() -> StorageOptions {
    StorageOptions {
        durability: Durability::None,
        ..StorageOptions::default()
    }
}

fn create(db: &Database) -> Arc<Table> {
    let def = TableDef {
        name: "t".into(),
        columns: vec![
            ("ts".into(), ColumnType::Timestamp),
            ("sym".into(), ColumnType::Symbol),
        ],
        timestamp: Some("ts".into()),
        partition_by: PartitionBy::Day,
        indexed: Vec::new(),
        dedup_keys: Vec::new(),
        ttl: None,
        cold_after: None,
    };
    db.create_table(def, false).unwrap()
}

/// One row per symbol (`None`: NULL), all at the same timestamp.
fn batch(symbols: &[Option<&str>]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
        Field::new("sym", DataType::Utf8, true),
    ]));
    let ts = TimestampNanosecondArray::from_iter_values(symbols.iter().map(|_| 0));
    let sym = StringArray::from(symbols.to_vec());
    RecordBatch::try_new(schema, vec![Arc::new(ts), Arc::new(sym)]).unwrap()
}

fn commit(table: &Arc<Table>, symbols: &[Option<&str>]) {
    let mut w = table.writer().unwrap();
    w.append(&batch(symbols)).unwrap();
    w.commit().unwrap();
}

/// The code by a scan of the dictionary, as the query layer found it before the index.
fn scanned_code(snapshot: &Snapshot, value: &str) -> Option<i32> {
    let symbols = snapshot.symbols(SYM)?;
    let position = (0..symbols.len()).find(|i| symbols.is_valid(*i) && symbols.value(*i) == value);
    position.and_then(|p| i32::try_from(p).ok())
}

#[test]
fn commits_that_add_symbols_publish_their_codes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    let table = create(&db);
    assert_eq!(table.snapshot().symbol_code(SYM, "a"), None);
    commit(&table, &[Some("a"), Some("b"), Some("a")]);
    let first = table.snapshot();
    assert_eq!(first.symbol_code(SYM, "a"), Some(0));
    assert_eq!(first.symbol_code(SYM, "b"), Some(1));
    commit(&table, &[Some("c"), Some("b")]);
    let second = table.snapshot();
    assert_eq!(second.symbol_code(SYM, "c"), Some(2));
    assert_eq!(second.symbol_code(SYM, "a"), Some(0));
    assert_eq!(
        first.symbol_code(SYM, "c"),
        None,
        "an older snapshot keeps its dictionary"
    );
    // A commit adding no symbol publishes the same dictionary.
    commit(&table, &[Some("a")]);
    assert_eq!(table.snapshot().symbol_code(SYM, "c"), Some(2));
}

#[test]
fn rolled_back_symbols_are_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    let table = create(&db);
    commit(&table, &[Some("a")]);
    let mut w = table.writer().unwrap();
    w.append(&batch(&[Some("gone")])).unwrap();
    assert_eq!(
        table.snapshot().symbol_code(SYM, "gone"),
        None,
        "not yet committed"
    );
    w.rollback();
    w.append(&batch(&[Some("kept")])).unwrap();
    w.commit().unwrap();
    drop(w);
    let snapshot = table.snapshot();
    assert_eq!(snapshot.symbol_code(SYM, "gone"), None);
    assert_eq!(snapshot.symbol_code(SYM, "kept"), Some(1));
    // A writer dropped without committing rolls back too.
    let mut w = table.writer().unwrap();
    w.append(&batch(&[Some("dropped")])).unwrap();
    drop(w);
    commit(&table, &[Some("after")]);
    assert_eq!(table.snapshot().symbol_code(SYM, "dropped"), None);
    assert_eq!(table.snapshot().symbol_code(SYM, "after"), Some(2));
}

#[test]
fn absent_values_nulls_and_other_columns_have_no_code() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    let table = create(&db);
    commit(&table, &[None, Some(""), None, Some("x")]);
    let snapshot = table.snapshot();
    // NULL rows add no symbol; the empty string is one.
    assert_eq!(snapshot.symbols(SYM).unwrap().len(), 2);
    assert_eq!(snapshot.symbol_code(SYM, ""), Some(0));
    assert_eq!(snapshot.symbol_code(SYM, "x"), Some(1));
    assert_eq!(snapshot.symbol_code(SYM, "y"), None);
    assert_eq!(
        snapshot.symbol_code(SYM, "X"),
        None,
        "codes are case-sensitive"
    );
    assert_eq!(snapshot.symbol_code(0, "x"), None, "not a SYMBOL column");
    assert_eq!(snapshot.symbol_code(9, "x"), None, "no such column");
}

#[test]
fn codes_survive_reopening_and_agree_with_a_scan() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..500).map(|i| format!("host_{i}")).collect();
    {
        let db = Database::open(dir.path(), options()).unwrap();
        let table = create(&db);
        for chunk in names.chunks(100) {
            let symbols: Vec<Option<&str>> = chunk.iter().map(|s| Some(s.as_str())).collect();
            commit(&table, &symbols);
            let snapshot = table.snapshot();
            for name in &names {
                assert_eq!(
                    snapshot.symbol_code(SYM, name),
                    scanned_code(&snapshot, name)
                );
            }
        }
    }
    let db = Database::open(dir.path(), options()).unwrap();
    let table = db.table("t").unwrap();
    let snapshot = table.snapshot();
    for (i, name) in names.iter().enumerate() {
        assert_eq!(snapshot.symbol_code(SYM, name), Some(i as i32));
    }
}
