//! The fuzzing entry point: arbitrary bytes through everything that decodes what a client
//! sends before a statement runs. Shared by the seeded test in `cargo test` (`tests::fuzz`)
//! and by the cargo-fuzz target in `fuzz/` (nightly only).
//!
//! Invariants checked: nothing panics; the framing never claims more bytes than it was given;
//! every error maps to a five-character SQLSTATE and has a message.

use std::sync::OnceLock;

use arrow::datatypes::{DataType, TimeUnit};

use crate::auth::{AuthMethod, Exchange, Users};
use crate::codec::{self, Reader, Writer};
use crate::copy_decode::{BinaryDecoder, CsvDecoder, Decoder, Spelling, Target, TextDecoder};
use crate::error::PgError;
use crate::types::{self, Format, oid};

/// The type OIDs a Bind's values are decoded as, by index.
const PARAM_OIDS: [i32; 17] = [
    0,
    oid::BOOL,
    oid::INT2,
    oid::INT4,
    oid::INT8,
    oid::FLOAT4,
    oid::FLOAT8,
    oid::TEXT,
    oid::BYTEA,
    oid::DATE,
    oid::TIME,
    oid::TIMESTAMP,
    oid::TIMESTAMPTZ,
    oid::UUID,
    // int8[], text[], timestamp[]: arrays, split and decoded element by element.
    1016,
    1009,
    1115,
];

/// Decodes `data` as a client's byte stream: a startup packet, then messages, each body
/// decoded by what its type byte says (password steps, Bind parameters, COPY data). The
/// first byte picks the message size limit, so both the limit and the framing get exercised.
pub fn frontend_input(data: &[u8]) {
    let Some((&first, data)) = data.split_first() else {
        return;
    };
    let max = 8 + usize::from(first) * 64;
    let mut input = data;
    match codec::next_startup(input, max) {
        Ok(Some((body, n))) => {
            assert!(n <= input.len() && body.len() + 4 == n);
            startup_body(body);
            input = &input[n..];
        }
        Ok(None) => {}
        Err(e) => check(&e),
    }
    // Deriving a user's SCRAM secret costs thousands of hashes: once per process.
    static USERS: OnceLock<Users> = OnceLock::new();
    let users = USERS
        .get_or_init(|| Users::new(AuthMethod::ScramSha256, &[("admin".into(), "quest".into())]));
    let mut copy = copy_decoders();
    let mut copy_out = Vec::new();
    loop {
        match codec::next_message(input, max) {
            Ok(Some((message, n))) => {
                assert!(n <= input.len() && message.body.len() + 5 == n);
                body(message.tag, message.body, users, &mut copy, &mut copy_out);
                copy_out.clear();
                input = &input[n..];
            }
            Ok(None) => break,
            Err(e) => {
                check(&e);
                break;
            }
        }
    }
    for decoder in &mut copy {
        if let Err(e) = decoder.finish(&mut copy_out) {
            let _ = e.to_string();
        }
    }
}

fn check(e: &PgError) {
    let code = e.sqlstate();
    assert_eq!(code.len(), 5, "{e:?}");
    assert!(!e.to_string().is_empty(), "{e:?}");
}

fn startup_body(body: &[u8]) {
    let mut r = Reader::new(body);
    let result = r.i32().and_then(|_| {
        while !r.is_empty() {
            if r.cstr()?.is_empty() {
                break;
            }
            r.cstr()?;
        }
        Ok(())
    });
    if let Err(e) = result {
        check(&e);
    }
}

fn copy_decoders() -> Vec<Decoder> {
    let targets: Vec<Target> = [
        Spelling::Timestamp,
        Spelling::Integer,
        Spelling::Float,
        Spelling::Boolean,
        Spelling::Uuid,
        Spelling::Text,
        Spelling::Bytes,
    ]
    .iter()
    .enumerate()
    .map(|(i, spelling)| Target {
        name: format!("c{i}"),
        spelling: *spelling,
    })
    .collect();
    let field_bytes_max = 256;
    vec![
        Decoder::Text(TextDecoder::new(
            targets.clone(),
            b'\t',
            "\\N",
            false,
            field_bytes_max,
        )),
        Decoder::Csv(CsvDecoder::new(
            targets.clone(),
            b',',
            b'"',
            b'\\',
            "",
            true,
            field_bytes_max,
        )),
        Decoder::Binary(BinaryDecoder::new(targets, field_bytes_max)),
    ]
}

fn body(tag: u8, body: &[u8], users: &Users, copy: &mut [Decoder], copy_out: &mut Vec<u8>) {
    let result = match tag {
        b'p' => password(body, users),
        b'B' => bind(body),
        b'P' => parse(body),
        b'd' => {
            for decoder in copy.iter_mut() {
                if let Err(e) = decoder.feed(body, copy_out) {
                    let _ = e.to_string();
                }
            }
            Ok(())
        }
        b'D' | b'C' => Reader::new(body)
            .u8()
            .and_then(|_| Reader::new(&body[1..]).cstr().map(drop)),
        b'E' => {
            let mut r = Reader::new(body);
            r.cstr().and_then(|_| r.i32()).map(drop)
        }
        _ => Ok(()),
    };
    if let Err(e) = result {
        check(&e);
    }
}

/// Every step of every login method, fed the same body.
fn password(body: &[u8], users: &Users) -> Result<(), PgError> {
    let mut out = Writer::default();
    let mut results = Vec::new();
    for method in [AuthMethod::Password, AuthMethod::Md5] {
        let users = Users::new(method, &[]);
        let first = users.begin("admin", &mut out);
        results.push(first.step(&users, body, &mut out).map(drop));
    }
    let first = Exchange::ScramFirst {
        user: "admin".into(),
    };
    results.push(first.step(users, body, &mut out).map(drop));
    let last = Exchange::ScramFinal {
        user: "admin".into(),
        transcript: "n=,r=abc,r=abcdef,s=c2FsdA==,i=4096".into(),
        nonce: "abcdef".into(),
    };
    results.push(last.step(users, body, &mut out).map(drop));
    for result in results {
        if let Err(e) = result {
            check(&e);
        }
    }
    Ok(())
}

fn parse(body: &[u8]) -> Result<(), PgError> {
    let mut r = Reader::new(body);
    r.cstr()?;
    r.cstr()?;
    for _ in 0..r.count()? {
        r.i32()?;
    }
    Ok(())
}

/// A Bind's structure, each value decoded as every parameter type, with and without a
/// planner's target type.
fn bind(body: &[u8]) -> Result<(), PgError> {
    let mut r = Reader::new(body);
    r.cstr()?;
    r.cstr()?;
    let mut formats = Vec::new();
    for _ in 0..r.count()? {
        formats.push(Format::from_code(r.i16()?)?);
    }
    let targets = [
        None,
        Some(DataType::Timestamp(TimeUnit::Nanosecond, None)),
        Some(DataType::Int64),
        Some(DataType::Date32),
        Some(DataType::new_list(DataType::Int64, true)),
    ];
    for i in 0..r.count()? {
        let value = r.value()?;
        let format = Format::for_column(&formats, i);
        for type_oid in PARAM_OIDS {
            for target in &targets {
                if let Err(e) = types::decode_param(value, format, type_oid, target.as_ref()) {
                    check(&e);
                }
            }
        }
    }
    for _ in 0..r.count()? {
        Format::from_code(r.i16()?)?;
    }
    Ok(())
}
