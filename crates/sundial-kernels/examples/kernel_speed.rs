//! Rough single-thread speed of the filter and fold kernels over in-memory columns (the
//! folds over columns larger than the caches, beside a plain sum for scale):
//! `cargo run --release -p sundial-kernels --example kernel_speed`.

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Float64Array, Int64Array};
use sundial_kernels::*;

fn main() {
    let n = 4_500_000usize;
    let a: ArrayRef = Arc::new(Float64Array::from_iter_values(
        (0..n).map(|i| (i * 7919 % 1000) as f64 / 10.0),
    ));
    let b: ArrayRef = Arc::new(Float64Array::from_iter_values(
        (0..n).map(|i| (i * 104729 % 1000) as f64 / 20.0),
    ));
    let l: ArrayRef = Arc::new(Int64Array::from_iter_values(
        (0..n).map(|i| (i * 7919 % 1000) as i64),
    ));
    let leaf = |column, domain, op, key| {
        Predicate::Leaf(Leaf {
            column,
            domain,
            arith: None,
            test: Test::Compare { op, key },
            width: 8,
        })
    };
    let cases = [
        ("f64 > c", leaf(0, Domain::Float, CmpOp::Gt, sql_key(75.0))),
        ("i64 > c", leaf(2, Domain::Int, CmpOp::Gt, 750)),
        (
            "f64 > c AND f64 < c",
            Predicate::and(vec![
                leaf(0, Domain::Float, CmpOp::Gt, sql_key(75.0)),
                leaf(1, Domain::Float, CmpOp::Lt, sql_key(10.0)),
            ]),
        ),
    ];
    for (name, p) in &cases {
        let mut best = f64::MAX;
        let mut passing = 0;
        for _ in 0..20 {
            let t = Instant::now();
            let mut count = 0;
            for chunk in (0..n).step_by(65536) {
                let len = 65536.min(n - chunk);
                let sliced: Vec<ArrayRef> =
                    [&a, &b, &l].iter().map(|c| c.slice(chunk, len)).collect();
                let cols: Vec<ColumnValues> = sliced
                    .iter()
                    .map(|c| ColumnValues::of(c.as_ref()).unwrap())
                    .collect();
                count += p.select(&cols, len).count();
            }
            passing = count;
            best = best.min(t.elapsed().as_secs_f64());
        }
        let bytes = (n * 8) as f64 * if name.contains("AND") { 2.0 } else { 1.0 };
        println!(
            "{name:24} {:7.2} ms  {:6.1} GB/s  passing {passing}",
            best * 1e3,
            bytes / best / 1e9
        );
    }
    // Ungrouped folds over columns larger than the caches, in the scan's 64 Ki-row chunks.
    let rows = 50_000_000usize;
    let longs: ArrayRef = Arc::new(Int64Array::from_iter_values(
        (0..rows).map(|i| (i * 7919 % 1000) as i64),
    ));
    let floats: ArrayRef = Arc::new(Float64Array::from_iter_values(
        (0..rows).map(|i| (i * 7919 % 1000) as f64 / 10.0),
    ));
    let with_nulls: ArrayRef = Arc::new(Float64Array::from_iter(
        (0..rows).map(|i| (i % 10 != 3).then(|| (i * 7919 % 1000) as f64 / 10.0)),
    ));
    let folds = [
        ("sum i64", Fold::SumInt, &longs),
        ("avg i64 (sum as f64)", Fold::SumFloat, &longs),
        ("min i64", Fold::MinInt, &longs),
        ("sum f64", Fold::SumFloat, &floats),
        ("max f64", Fold::MaxFloat, &floats),
        ("sum f64, 10% NULL", Fold::SumFloat, &with_nulls),
        ("max f64, 10% NULL", Fold::MaxFloat, &with_nulls),
    ];
    for (name, fold, column) in folds {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let mut acc = Accumulator::new(fold);
            acc.ensure(1);
            let t = Instant::now();
            for chunk in (0..rows).step_by(65536) {
                let len = 65536.min(rows - chunk);
                let sliced = column.slice(chunk, len);
                let values = ColumnValues::of(sliced.as_ref()).unwrap();
                acc.update(Some(&values), None, Slots::One, len);
            }
            best = best.min(t.elapsed().as_secs_f64());
            std::hint::black_box(acc.count(0));
        }
        println!(
            "{name:24} {:7.2} ms  {:6.1} GB/s",
            best * 1e3,
            (rows * 8) as f64 / best / 1e9
        );
    }
    // Filters over columns larger than the caches: one LONG column, then three.
    let longs2: ArrayRef = Arc::new(Int64Array::from_iter_values(
        (0..rows).map(|i| (i * 104729 % 1000) as i64),
    ));
    let longs3: ArrayRef = Arc::new(Int64Array::from_iter_values(
        (0..rows).map(|i| (i * 7907 % 1000) as i64),
    ));
    let big = [&longs, &longs2, &longs3];
    let int_leaf = |column, op, key| {
        Predicate::Leaf(Leaf {
            column,
            domain: Domain::Int,
            arith: None,
            test: Test::Compare { op, key },
            width: 8,
        })
    };
    let big_cases = [
        ("i64 > c (large)", int_leaf(0, CmpOp::Gt, 300), 1.0),
        (
            "3 x i64 AND (large)",
            Predicate::and(vec![
                int_leaf(0, CmpOp::Gt, 300),
                int_leaf(1, CmpOp::Gt, 300),
                int_leaf(2, CmpOp::Lt, 700),
            ]),
            3.0,
        ),
    ];
    for (name, p, columns) in &big_cases {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            let mut count = 0;
            for chunk in (0..rows).step_by(65536) {
                let len = 65536.min(rows - chunk);
                let sliced: Vec<ArrayRef> = big.iter().map(|c| c.slice(chunk, len)).collect();
                let cols: Vec<ColumnValues> = sliced
                    .iter()
                    .map(|c| ColumnValues::of(c.as_ref()).unwrap())
                    .collect();
                count += p.select(&cols, len).count();
            }
            std::hint::black_box(count);
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{name:24} {:7.2} ms  {:6.1} GB/s",
            best * 1e3,
            (rows * 8) as f64 * columns / best / 1e9
        );
    }
    // The machine's single-thread read bandwidth, for scale: a plain sum in eight lanes.
    let plain = floats
        .as_any()
        .downcast_ref::<Float64Array>()
        .unwrap()
        .values();
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        let mut lanes = [0f64; 8];
        for c in plain.chunks_exact(8) {
            for l in 0..8 {
                lanes[l] += c[l];
            }
        }
        std::hint::black_box(lanes);
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "{:24} {:7.2} ms  {:6.1} GB/s",
        "plain sum f64",
        best * 1e3,
        (rows * 8) as f64 / best / 1e9
    );
}
