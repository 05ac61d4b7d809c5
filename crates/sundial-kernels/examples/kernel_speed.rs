//! Rough single-thread speed of the filter and fold kernels over in-memory columns:
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
    let cols = [
        ColumnValues::of(a.as_ref()).unwrap(),
        ColumnValues::of(b.as_ref()).unwrap(),
        ColumnValues::of(l.as_ref()).unwrap(),
    ];
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
    let mut acc = Accumulator::new(Fold::SumFloat);
    acc.ensure(1);
    let t = Instant::now();
    acc.update(Some(&cols[0]), None, Slots::One, n);
    println!(
        "sum f64 all rows         {:7.2} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
}
