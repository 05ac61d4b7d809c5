//! CSV into a table: the one implementation behind HTTP `/imp` and `sundial import`.
//!
//! ```text
//!  csv_options() ── an existing table's column types decide how its columns are parsed
//!        │
//!  CsvReader (sundial-csv, streaming) ──▶ load(): table_for() creates / replaces the table
//!        └── batches ─▶ conform (casts to the table's types) ─▶ TableWriter::append
//!                          commit at the end (earlier only when out-of-order rows held in
//!                          memory pass `commit_bytes`); any error rolls back what is uncommitted
//! ```
//!
//! It lives here rather than in sundial-csv because it needs storage and the query layer's
//! `conform`, which sundial-csv deliberately does not depend on.

use std::io::Read;
use std::sync::Arc;

use sundial_csv::{ColumnKind, CsvOptions, CsvReader};
use sundial_query::conform;
use sundial_storage::{ColumnType, Database, PartitionBy, Table, TableDef};

use crate::error::Error;

/// Where and how rows go.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub table: String,
    /// Designated timestamp of a table this load creates.
    pub timestamp: Option<String>,
    /// Partitioning of a table this load creates.
    pub partition_by: PartitionBy,
    /// Replace an existing table: drop it and create it anew from the file's columns. (Not
    /// atomic: should the load then fail, the table stays, empty.)
    pub overwrite: bool,
    /// Create the table when it does not exist (else that is an error).
    pub create: bool,
    /// SQL types of columns of a table this load creates, by column name, where the file's
    /// detected type is not wanted (`INT`, `FLOAT`, `DATE`, ... of `/imp`'s `schema`).
    pub column_types: Vec<(String, ColumnType)>,
    /// Commit early once the writer holds this many bytes of out-of-order rows in memory.
    pub commit_bytes: usize,
}

/// What a load did, per column too.
#[derive(Debug, Clone)]
pub struct LoadReport {
    pub table: String,
    /// Whether the file's first line was its header.
    pub header: bool,
    pub rows_imported: u64,
    /// Lines dropped: a wrong number of fields, or (under `skipRow`) a value that does not parse.
    pub rows_rejected: u64,
    pub partition_by: PartitionBy,
    pub timestamp: Option<String>,
    pub columns: Vec<ColumnReport>,
}

#[derive(Debug, Clone)]
pub struct ColumnReport {
    pub name: String,
    pub column_type: ColumnType,
    /// Values that did not parse as the column's type.
    pub errors: u64,
}

/// Bytes a value of the type takes (QuestDB's column `size`); -1 for variable-size types.
pub fn type_size(t: ColumnType) -> i64 {
    match t {
        ColumnType::Boolean | ColumnType::Byte => 1,
        ColumnType::Short => 2,
        ColumnType::Int | ColumnType::Float | ColumnType::Symbol => 4,
        ColumnType::Long | ColumnType::Double | ColumnType::Timestamp | ColumnType::Date => 8,
        ColumnType::Uuid => 16,
        ColumnType::Varchar | ColumnType::Binary => -1,
    }
}

/// Reader settings for loading into `load.table`: when it exists (and is not being replaced),
/// its column types decide how the file's columns of the same names are parsed, and a file
/// without a header names its columns after the table's.
pub fn csv_options(db: &Database, load: &LoadOptions, mut csv: CsvOptions) -> CsvOptions {
    if load.overwrite {
        return csv;
    }
    if let Some(table) = db.table(&load.table) {
        let meta = table.meta();
        for column in &meta.columns {
            csv.type_overrides.push((
                column.name.clone(),
                ColumnKind::for_column_type(column.column_type),
            ));
        }
        csv.timestamp_column = None;
        csv.default_names = meta.columns.iter().map(|c| c.name.clone()).collect();
        csv.lenient_overrides = true;
    }
    csv
}

/// Streams every row of `reader` into the table; `progress` is told after each batch (rows so
/// far). Nothing is committed unless the whole input loads (except early commits forced by
/// `commit_bytes`).
pub fn load<R: Read>(
    db: &Arc<Database>,
    reader: &mut CsvReader<R>,
    options: &LoadOptions,
    mut progress: impl FnMut(&CsvReader<R>, u64),
) -> Result<LoadReport, Error> {
    let table = table_for(db, reader, options)?;
    let mut writer = table.writer()?;
    let meta = writer.meta();
    for field in reader.schema().fields() {
        if meta.column_index(field.name()).is_none() {
            return Err(Error::BadRequest(format!(
                "column '{}' of the file is not in table '{}'",
                field.name(),
                meta.name
            )));
        }
    }
    let mut rows = 0u64;
    while let Some(batch) = reader.next_batch()? {
        let batch = conform(&batch, &meta)?;
        writer.append(&batch)?;
        rows += batch.num_rows() as u64;
        if writer.pending_bytes() > options.commit_bytes {
            writer.commit()?;
        }
        progress(reader, rows);
    }
    writer.commit()?;
    let stats = reader.stats();
    let columns = reader
        .schema()
        .fields()
        .iter()
        .enumerate()
        .map(|(i, field)| ColumnReport {
            name: field.name().clone(),
            column_type: meta
                .column_index(field.name())
                .map_or(ColumnType::Varchar, |c| meta.columns[c].column_type),
            errors: stats.column_errors.get(i).copied().unwrap_or(0),
        })
        .collect();
    Ok(LoadReport {
        table: meta.name.clone(),
        header: reader.has_header(),
        rows_imported: rows,
        rows_rejected: stats.rows_rejected,
        partition_by: meta.partition_by,
        timestamp: meta.timestamp_column().map(|c| c.name.clone()),
        columns,
    })
}

/// The table to load into: the existing one, or a new one with the file's columns.
fn table_for<R: Read>(
    db: &Arc<Database>,
    reader: &CsvReader<R>,
    options: &LoadOptions,
) -> Result<Arc<Table>, Error> {
    if let Some(table) = db.table(&options.table) {
        if !options.overwrite {
            return Ok(table);
        }
        db.drop_table(&options.table)?;
    } else if !options.create {
        return Err(Error::BadRequest(format!(
            "table '{}' does not exist (create=false)",
            options.table
        )));
    }
    let schema = reader.schema();
    let mut columns = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let declared = options
            .column_types
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(field.name()))
            .map(|(_, t)| *t);
        let column_type = match declared.or_else(|| ColumnType::from_arrow(field.data_type())) {
            Some(t) => t,
            None => {
                return Err(Error::Internal(format!(
                    "column '{}' has unsupported type {}",
                    field.name(),
                    field.data_type()
                )));
            }
        };
        columns.push((field.name().clone(), column_type));
    }
    // The designated timestamp as the file spells it.
    let timestamp = options.timestamp.as_ref().map(|ts| {
        columns
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(ts))
            .map_or_else(|| ts.clone(), |(name, _)| name.clone())
    });
    let def = TableDef {
        name: options.table.clone(),
        columns,
        timestamp,
        partition_by: options.partition_by,
        indexed: Vec::new(),
    };
    Ok(db.create_table(def, false)?)
}
