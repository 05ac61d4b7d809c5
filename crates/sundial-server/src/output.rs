//! Printing results: aligned tables, CSV or JSON, with row counts and timings.

use std::io::Write;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use futures::StreamExt;
use sundial_query::{Engine, Output, QueryError};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    Json,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "table" => Some(Format::Table),
            "csv" => Some(Format::Csv),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

/// Formats an error with the statement's position when known.
pub fn describe(e: &QueryError) -> String {
    e.to_string()
}

/// Runs every statement of `sql`, printing each result. Stops at the first error.
pub async fn run_script(
    engine: &Engine,
    sql: &str,
    format: Format,
    timer: bool,
) -> Result<(), String> {
    let statements = Engine::split(sql).map_err(|e| describe(&e))?;
    for statement in statements {
        let started = Instant::now();
        let output = engine
            .run(&statement.text)
            .await
            .map_err(|e| describe(&e.in_statement_at(statement.line, statement.column)))?;
        let rows = print(output, format).await.map_err(|e| describe(&e))?;
        if format == Format::Table {
            let mut footer = rows;
            if timer {
                footer.push_str(&format!(" in {:.3} s", started.elapsed().as_secs_f64()));
            }
            eprintln!("{footer}");
        }
    }
    Ok(())
}

/// Prints one statement's output; returns the footer text ("3 rows", "OK").
pub async fn print(output: Output, format: Format) -> Result<String, QueryError> {
    match output {
        Output::Done { tag, rows } => {
            let text = match rows {
                Some(n) => format!("{tag} {n}"),
                None => format!("{tag} OK"),
            };
            if format != Format::Table {
                println!("{text}");
            }
            Ok(text)
        }
        Output::Rows(mut stream) => {
            let schema = stream.schema();
            let mut stdout = std::io::stdout().lock();
            let mut rows = 0usize;
            match format {
                Format::Table => {
                    // Aligned output needs every width, so the result is gathered first.
                    let mut batches: Vec<RecordBatch> = Vec::new();
                    while let Some(b) = stream.next().await {
                        let b = b?;
                        rows += b.num_rows();
                        batches.push(b);
                    }
                    if batches.is_empty() {
                        batches.push(RecordBatch::new_empty(schema));
                    }
                    let table = arrow::util::pretty::pretty_format_batches(&batches)?;
                    let _ = writeln!(stdout, "{table}");
                }
                Format::Csv => {
                    let mut writer = arrow::csv::WriterBuilder::new()
                        .with_header(true)
                        .build(&mut stdout);
                    let mut wrote = false;
                    while let Some(b) = stream.next().await {
                        let b = b?;
                        rows += b.num_rows();
                        writer.write(&b)?;
                        wrote = true;
                    }
                    if !wrote {
                        writer.write(&RecordBatch::new_empty(schema))?;
                    }
                }
                Format::Json => {
                    let mut writer = arrow::json::ArrayWriter::new(&mut stdout);
                    while let Some(b) = stream.next().await {
                        let b = b?;
                        rows += b.num_rows();
                        writer.write(&b)?;
                    }
                    writer.finish()?;
                    drop(writer);
                    let _ = writeln!(stdout);
                }
            }
            let _ = stdout.flush();
            Ok(format!("{rows} row{}", if rows == 1 { "" } else { "s" }))
        }
    }
}
