//! `POST /imp`: a CSV upload into a table, as QuestDB takes it.
//!
//! ```text
//!  POST /imp?name=t&timestamp=ts&partitionBy=DAY&overwrite=true&atomicity=abort&fmt=json
//!       &forceHeader=true&delimiter=,&create=false          (every parameter optional)
//!  multipart/form-data:  [schema: [{"name":"ts","type":"TIMESTAMP","pattern":"yyyy-MM-dd HH:mm"}]]
//!                         data: the CSV file (its file name is the default table name)
//!
//!  data part ─chunks─▶ bounded channel ─▶ blocking task: CsvReader ─▶ load: a commit through
//!                                          the table's sink per chunk of rows ─▶ answer
//! ```
//!
//! The file is streamed: only a few chunks of the upload and one chunk of rows (half the
//! storage's `uncommitted_bytes_max`, see `load`) are in memory at a time; ILP senders and
//! INSERTs to the table commit between the chunks. The `schema` part, if any, must come before
//! `data`. `atomicity`: `skipCol` (QuestDB's default, also `2`: a bad value becomes NULL),
//! `skipRow` (`1`: the row is dropped) or `abort` (`0`: the answer is 400 naming the line,
//! column and value; nothing is imported when the file fits in one chunk of rows, else the
//! chunks before the bad line's stay). Without `forceHeader=true` the first line is taken as a
//! header when it does not look like data (see `CsvOptions::detect_header`); when it was taken
//! as data and the `timestamp` column is therefore missing, the error says so. Without
//! `delimiter` it is guessed from the first lines. A new table with a `timestamp` is
//! partitioned by `DAY` unless `partitionBy` says otherwise (as `sundial import`; QuestDB's
//! default is `NONE`). The answer is QuestDB's text table followed
//! by the first `maxErrors` (default 10, at most 1000) refused rows and values, each with its
//! line and reason, and the columns left as text although most of their values are typed; or
//! with `fmt=json` `{"status":"OK","location":..,"rowsRejected":..,"rowsImported":..,"header":..,
//! "partitionBy":..,"timestamp":..,"columns":[{"name","type","size","errors"}],"errorsTotal":..,
//! "errors":[{"line","column","action","reason"}],"warnings":[..]}`; errors are 400 (413 past
//! `--http-import-bytes-max`, 500 for a server fault) with `{"status":message}` or the message
//! as text. Records are at most `IMPORT_RECORD_BYTES_MAX` bytes.

use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::multipart::{Field, MultipartError, MultipartRejection};
use axum::extract::{Extension, Multipart, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sundial_csv::{
    Atomicity, ColumnKind, CsvOptions, CsvReader, TimestampFormat, detect_delimiter,
};
use sundial_query::{Caller, Role};
use sundial_storage::{ColumnType, PartitionBy};
use tokio::sync::mpsc;

use crate::HttpSql;
use crate::error::Error;
use crate::exec::flag;
use crate::json::{CONTENT_TYPE, write_json_string};
use crate::load::{IMPORT_RECORD_BYTES_MAX, LoadOptions, LoadReport, csv_options, load, type_size};

/// Chunks of the upload that may wait for the loader.
const CHANNEL_CHUNKS: usize = 8;
/// Bytes looked at to guess the delimiter.
const DELIMITER_SAMPLE_BYTES: usize = 64 << 10;
/// Largest `schema` part.
const SCHEMA_BYTES_MAX: usize = 1 << 20;
/// Refused rows and values an answer lists by default, and at most (`maxErrors`).
const REPORTED_ERRORS_DEFAULT: usize = 10;
const REPORTED_ERRORS_MAX: usize = 1000;

pub(crate) async fn imp(
    State(http): State<Arc<HttpSql>>,
    Extension(caller): Extension<Caller>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    let json = params
        .get("fmt")
        .is_some_and(|f| f.trim().eq_ignore_ascii_case("json"));
    // Before any of the body is read: a caller that may not write uploads nothing.
    let allowed = http.engine.check_role(&caller, Role::Write, "/imp");
    let result = match (allowed, multipart) {
        (Err(e), _) => Err(Error::Query(e)),
        (Ok(()), Ok(multipart)) => import(&http, &params, &headers, multipart).await,
        (Ok(()), Err(rejection)) => Err(Error::BadRequest(format!(
            "/imp takes multipart/form-data: {}",
            rejection.body_text()
        ))),
    };
    match result {
        Ok(report) if json => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, CONTENT_TYPE)],
            json_report(&report),
        )
            .into_response(),
        Ok(report) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            text_report(&report),
        )
            .into_response(),
        Err(e) => {
            if e.status().is_server_error() {
                tracing::error!("/imp failed: {e}");
            }
            e.import_response(json)
        }
    }
}

/// The request's parameters.
struct Params {
    name: Option<String>,
    timestamp: Option<String>,
    partition_by: PartitionBy,
    overwrite: bool,
    create: bool,
    atomicity: Atomicity,
    force_header: bool,
    delimiter: Option<u8>,
    max_errors: usize,
}

impl Params {
    fn parse(params: &HashMap<String, String>) -> Result<Params, Error> {
        let text = |name: &str| {
            params
                .get(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let timestamp = text("timestamp");
        // As `sundial import`: a new table with a designated timestamp is partitioned by day.
        let partition_by = match text("partitionBy") {
            None if timestamp.is_some() => PartitionBy::Day,
            None => PartitionBy::None,
            Some(p) => PartitionBy::parse(&p).ok_or_else(|| {
                Error::BadRequest(format!(
                    "invalid partitionBy '{p}': use NONE, HOUR, DAY, WEEK, MONTH or YEAR"
                ))
            })?,
        };
        if partition_by != PartitionBy::None && timestamp.is_none() {
            return Err(Error::BadRequest(
                "when specifying partitionBy you must also specify timestamp".into(),
            ));
        }
        let atomicity = match text("atomicity") {
            None => Atomicity::SkipColumn,
            Some(a) => Atomicity::parse(&a).ok_or_else(|| {
                Error::BadRequest(format!(
                    "invalid atomicity '{a}': use skipCol (2), skipRow (1) or abort (0)"
                ))
            })?,
        };
        let max_errors = match text("maxErrors") {
            None => REPORTED_ERRORS_DEFAULT,
            Some(n) => n
                .parse::<usize>()
                .ok()
                .filter(|n| *n <= REPORTED_ERRORS_MAX)
                .ok_or_else(|| {
                    Error::BadRequest(format!(
                        "invalid maxErrors '{n}': use a number from 0 to {REPORTED_ERRORS_MAX}"
                    ))
                })?,
        };
        let delimiter = match params.get("delimiter").map(String::as_bytes) {
            None | Some(b"") => None,
            Some([d]) if d.is_ascii() && !matches!(d, b'"' | b'\r' | b'\n') => Some(*d),
            Some(_) => {
                return Err(Error::BadRequest(
                    "the delimiter must be one ASCII character".into(),
                ));
            }
        };
        Ok(Params {
            name: text("name"),
            timestamp,
            partition_by,
            overwrite: flag(params, "overwrite"),
            create: params
                .get("create")
                .is_none_or(|v| !v.trim().eq_ignore_ascii_case("false")),
            atomicity,
            force_header: flag(params, "forceHeader"),
            delimiter,
            max_errors,
        })
    }
}

/// One column of the `schema` part.
struct SchemaColumn {
    name: String,
    column_type: ColumnType,
    pattern: Option<TimestampFormat>,
}

/// The `schema` part: `[{"name":..,"type":..,"pattern":..},..]` (or `{"columns":[..]}`).
fn parse_schema(text: &str) -> Result<Vec<SchemaColumn>, Error> {
    let bad = |why: &str| Error::BadRequest(format!("bad schema part: {why}"));
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(&e.to_string()))?;
    let columns = match &value {
        serde_json::Value::Array(columns) => columns,
        serde_json::Value::Object(o) => match o.get("columns") {
            Some(serde_json::Value::Array(columns)) => columns,
            _ => return Err(bad("expected a JSON array of columns")),
        },
        _ => return Err(bad("expected a JSON array of columns")),
    };
    let mut out = Vec::with_capacity(columns.len());
    for column in columns {
        let field = |key: &str| column.get(key).and_then(serde_json::Value::as_str);
        let name = field("name").ok_or_else(|| bad("every column needs a \"name\""))?;
        let type_name = field("type").ok_or_else(|| bad("every column needs a \"type\""))?;
        let column_type = ColumnType::parse(type_name)
            .ok_or_else(|| bad(&format!("unknown type '{type_name}' of column '{name}'")))?;
        let pattern = match field("pattern").filter(|p| !p.trim().is_empty()) {
            Some(p) if matches!(column_type, ColumnType::Timestamp | ColumnType::Date) => {
                Some(TimestampFormat::compile(p).map_err(|e| bad(&e))?)
            }
            _ => None,
        };
        out.push(SchemaColumn {
            name: name.to_string(),
            column_type,
            pattern,
        });
    }
    Ok(out)
}

fn multipart_error(e: MultipartError) -> Error {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        Error::TooLarge(0)
    } else {
        Error::BadRequest(format!("bad multipart body: {}", e.body_text()))
    }
}

async fn import(
    http: &HttpSql,
    params: &HashMap<String, String>,
    headers: &HeaderMap,
    mut multipart: Multipart,
) -> Result<LoadReport, Error> {
    let limit = http.options.import_bytes_max;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(Error::TooLarge(limit));
    }
    let params = Params::parse(params)?;
    let mut schema = Vec::new();
    while let Some(field) = multipart
        .next_field()
        .await
        .map_err(|e| limited(multipart_error(e), limit))?
    {
        match field.name() {
            Some("schema") => {
                let text = field
                    .text()
                    .await
                    .map_err(|e| limited(multipart_error(e), limit))?;
                if text.len() > SCHEMA_BYTES_MAX {
                    return Err(Error::BadRequest("the schema part is too large".into()));
                }
                schema = parse_schema(&text)?;
            }
            Some("data") => return import_data(http, &params, &schema, field).await,
            None => {
                return Err(Error::BadRequest(
                    "'Content-Disposition' multipart header missing".into(),
                ));
            }
            Some(_) => {
                return Err(Error::BadRequest(
                    "invalid value in 'Content-Disposition' multipart header: parts are 'schema' and 'data'"
                        .into(),
                ));
            }
        }
    }
    Err(Error::BadRequest(
        "no 'data' part: send the CSV file as the multipart part named 'data'".into(),
    ))
}

fn limited(e: Error, limit: u64) -> Error {
    match e {
        Error::TooLarge(_) => Error::TooLarge(limit),
        other => other,
    }
}

/// What the HTTP side feeds the loader.
enum Feed {
    Data(Bytes),
    /// The upload ended normally.
    End,
    /// The upload failed: nothing may be committed.
    Fail(String),
}

/// The upload as a `Read` for the CSV reader, on a blocking thread. An upload that stops
/// without `Feed::End` (the client went away) is an error, never a short file.
struct ChannelReader {
    rx: mpsc::Receiver<Feed>,
    current: Bytes,
    ended: bool,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            if self.ended {
                return Ok(0);
            }
            match self.rx.blocking_recv() {
                Some(Feed::Data(bytes)) => self.current = bytes,
                Some(Feed::End) => self.ended = true,
                Some(Feed::Fail(message)) => return Err(std::io::Error::other(message)),
                None => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the upload ended early",
                    ));
                }
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        let _ = self.current.split_to(n);
        Ok(n)
    }
}

async fn import_data(
    http: &HttpSql,
    params: &Params,
    schema: &[SchemaColumn],
    mut field: Field<'_>,
) -> Result<LoadReport, Error> {
    let limit = http.options.import_bytes_max;
    let table = params
        .name
        .clone()
        .or_else(|| field.file_name().map(str::to_string))
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| Error::BadRequest("no file name given: pass name=TABLE".into()))?;
    let mut received = 0u64;
    // The first bytes, to guess the delimiter from.
    let mut head: Vec<Bytes> = Vec::new();
    let mut head_bytes = 0usize;
    let mut finished = false;
    while head_bytes < DELIMITER_SAMPLE_BYTES {
        match field
            .chunk()
            .await
            .map_err(|e| limited(multipart_error(e), limit))?
        {
            Some(bytes) => {
                received += bytes.len() as u64;
                if received > limit {
                    return Err(Error::TooLarge(limit));
                }
                head_bytes += bytes.len();
                let lines = bytes.iter().filter(|b| **b == b'\n').count();
                head.push(bytes);
                if lines >= 2 && head_bytes >= 4096 {
                    break;
                }
            }
            None => {
                finished = true;
                break;
            }
        }
    }
    let delimiter = params.delimiter.unwrap_or_else(|| {
        let sample: Vec<u8> = head.iter().flat_map(|b| b.iter().copied()).collect();
        detect_delimiter(&sample)
    });
    let db = http.engine.db().clone();
    let load_options = LoadOptions {
        table,
        timestamp: params.timestamp.clone(),
        partition_by: params.partition_by,
        overwrite: params.overwrite,
        create: params.create,
        column_types: schema
            .iter()
            .map(|c| (c.name.clone(), c.column_type))
            .collect(),
        chunk_bytes: db.options().uncommitted_bytes_max / 2,
    };
    let csv = CsvOptions {
        delimiter,
        has_header: true,
        atomicity: params.atomicity,
        timestamp_column: params.timestamp.clone(),
        type_overrides: schema
            .iter()
            .filter(|c| c.pattern.is_none())
            .map(|c| (c.name.clone(), ColumnKind::for_column_type(c.column_type)))
            .collect(),
        detect_header: !params.force_header,
        timestamp_formats: schema
            .iter()
            .filter_map(|c| c.pattern.clone().map(|p| (c.name.clone(), p)))
            .collect(),
        lenient_overrides: true,
        max_reported_errors: params.max_errors,
        max_record_bytes: IMPORT_RECORD_BYTES_MAX,
        ..CsvOptions::default()
    };
    let csv = csv_options(&db, &load_options, csv);

    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    let inserts = http.engine.inserts().clone();
    let loader = tokio::task::spawn_blocking(move || {
        let input = ChannelReader {
            rx,
            current: Bytes::new(),
            ended: false,
        };
        let mut reader = CsvReader::new(input, csv)?;
        load(&inserts, &mut reader, &load_options, |_, _| {})
    });
    // Feed the loader; it may stop early (a bad file), which closes the channel.
    let mut failure = None;
    for bytes in head {
        if tx.send(Feed::Data(bytes)).await.is_err() {
            finished = true;
            break;
        }
    }
    while !finished {
        match field.chunk().await {
            Ok(Some(bytes)) => {
                received += bytes.len() as u64;
                if received > limit {
                    failure = Some(Error::TooLarge(limit));
                    break;
                }
                if tx.send(Feed::Data(bytes)).await.is_err() {
                    break;
                }
            }
            Ok(None) => finished = true,
            Err(e) => {
                failure = Some(limited(multipart_error(e), limit));
                break;
            }
        }
    }
    let _ = tx
        .send(match &failure {
            None => Feed::End,
            Some(e) => Feed::Fail(e.to_string()),
        })
        .await;
    drop(tx);
    let loaded = loader
        .await
        .map_err(|e| Error::Internal(format!("the import task failed: {e}")))?;
    match failure {
        Some(e) => Err(e),
        None => loaded,
    }
}

fn json_report(report: &LoadReport) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"status\":\"OK\",\"location\":");
    write_json_string(&mut out, &report.table);
    out.extend_from_slice(
        format!(
            ",\"rowsRejected\":{},\"rowsImported\":{},\"header\":{},\"partitionBy\":\"{}\",\"timestamp\":",
            report.rows_rejected,
            report.rows_imported,
            report.header,
            report.partition_by.name()
        )
        .as_bytes(),
    );
    match &report.timestamp {
        Some(ts) => write_json_string(&mut out, ts),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"columns\":[");
    for (i, c) in report.columns.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"name\":");
        write_json_string(&mut out, &c.name);
        out.extend_from_slice(
            format!(
                ",\"type\":\"{}\",\"size\":{},\"errors\":{}}}",
                c.column_type.name(),
                type_size(c.column_type),
                c.errors
            )
            .as_bytes(),
        );
    }
    out.extend_from_slice(
        format!("],\"errorsTotal\":{},\"errors\":[", report.errors_total).as_bytes(),
    );
    for (i, e) in report.errors.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(format!("{{\"line\":{},\"column\":", e.line).as_bytes());
        match &e.column {
            Some(c) => write_json_string(&mut out, c),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(
            format!(",\"action\":\"{}\",\"reason\":", e.action.name()).as_bytes(),
        );
        write_json_string(&mut out, &e.reason);
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"warnings\":[");
    for (i, f) in report.fallbacks.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_string(&mut out, &f.to_string());
    }
    out.extend_from_slice(b"]}");
    out
}

/// QuestDB's text table: widths of its five columns, the separator line, padded cells.
const PADS: [usize; 5] = [15, 50, 15, 7, 12];

fn pad(out: &mut String, width: usize, value: &str) {
    let len = value.chars().count();
    if len > width {
        let keep: String = value.chars().skip(len - width + 3).collect();
        out.push_str("...");
        out.push_str(&keep);
    } else {
        out.extend(std::iter::repeat_n(' ', width - len));
        out.push_str(value);
    }
    out.push_str("  |");
}

fn text_report(report: &LoadReport) -> String {
    let line = format!("+{}+\r\n", "-".repeat(PADS.iter().sum::<usize>() + 14));
    let row = |cells: [&str; 5]| {
        let mut out = String::from("|");
        for (width, cell) in PADS.iter().zip(cells) {
            pad(&mut out, *width, cell);
        }
        out.push_str("\r\n");
        out
    };
    let mut out = line.clone();
    out += &row(["Location:", &report.table, "Pattern", "Locale", "Errors"]);
    out += &row(["Partition by", report.partition_by.name(), "", "", ""]);
    out += &row([
        "Timestamp",
        report.timestamp.as_deref().unwrap_or("NONE"),
        "",
        "",
        "",
    ]);
    out += &line;
    out += &row([
        "Rows handled",
        &(report.rows_imported + report.rows_rejected).to_string(),
        "",
        "",
        "",
    ]);
    out += &row([
        "Rows imported",
        &report.rows_imported.to_string(),
        "",
        "",
        "",
    ]);
    out += &line;
    for (i, c) in report.columns.iter().enumerate() {
        out.push('|');
        pad(&mut out, PADS[0], &i.to_string());
        pad(&mut out, PADS[1], &c.name);
        pad(&mut out, PADS[2] + PADS[3] + 3, c.column_type.name());
        pad(&mut out, PADS[4], &c.errors.to_string());
        out.push_str("\r\n");
    }
    out += &line;
    if report.errors_total > 0 {
        let shown = report.errors.len() as u64;
        out += &format!(
            "Rejected rows and values: {} (first {shown} shown)\r\n",
            report.errors_total
        );
        for e in &report.errors {
            out += &format!("{e}\r\n");
        }
    }
    for f in &report.fallbacks {
        out += &format!("Warning: {f}\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_part() {
        let columns = parse_schema(
            r#"[{"name":"ts","type":"TIMESTAMP","pattern":"yyyy-MM-dd - HH:mm:ss"},{"name":"n","type":"INT"}]"#,
        )
        .unwrap();
        assert_eq!(columns.len(), 2);
        assert!(columns[0].pattern.is_some());
        assert_eq!(columns[1].column_type, ColumnType::Int);
        assert!(parse_schema(r#"[{"name":"x","type":"NOPE"}]"#).is_err());
        assert!(parse_schema("not json").is_err());
    }

    #[test]
    fn params_follow_questdb() {
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<HashMap<_, _>>()
        };
        assert!(Params::parse(&map(&[("partitionBy", "DAY")])).is_err());
        let p = Params::parse(&map(&[("partitionBy", "day"), ("timestamp", "ts")])).unwrap();
        assert_eq!(p.partition_by, PartitionBy::Day);
        assert_eq!(p.atomicity, Atomicity::SkipColumn);
        // Without partitionBy: by day with a timestamp (as `sundial import`), else none.
        let p = Params::parse(&map(&[("timestamp", "ts")])).unwrap();
        assert_eq!(p.partition_by, PartitionBy::Day);
        let p = Params::parse(&map(&[("name", "t")])).unwrap();
        assert_eq!(p.partition_by, PartitionBy::None);
        let p = Params::parse(&map(&[("timestamp", "ts"), ("partitionBy", "NONE")])).unwrap();
        assert_eq!(p.partition_by, PartitionBy::None);
        assert!(Params::parse(&map(&[("atomicity", "sometimes")])).is_err());
    }
}
