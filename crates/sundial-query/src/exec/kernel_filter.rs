//! A scan's row filter compiled into a kernel [`Predicate`] (see `sundial-kernels`): every
//! conjunction and disjunction of comparisons of a column with a constant (`=`, `<>`, `<`,
//! `<=`, `>`, `>=`, BETWEEN as DataFusion plans it, `IN`, `IS [NOT] NULL`, `IS [NOT] DISTINCT
//! FROM`, which QuestDB's `!=` becomes) over fixed-width
//! columns and SYMBOL codes, and of a DOUBLE column with a constant added, subtracted,
//! multiplied or divided. A filter with anything else is left to DataFusion's expression.
//!
//! Comparisons keep DataFusion's meaning exactly: a NULL operand fails; floating-point
//! values compare as DataFusion compares them (`-0.0 = 0.0`; NaN equals NaN and is above
//! every number, a negative NaN below); a cast of an integer column to DOUBLE compares
//! the converted value; a symbol the dictionary never held equals no row.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, Schema, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{
    BinaryExpr, CastExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, Literal, NotExpr,
    TryCastExpr,
};
use sundial_kernels::{
    Arith, ArithOp, CmpOp, ColumnValues, Domain, Leaf, Predicate, Selection, Test, domain_of,
    sql_key,
};
use sundial_storage::Snapshot;

/// What compiling needs to know of the columns the filter reads.
pub(crate) struct FilterColumns<'a> {
    /// The filter's input: the columns it reads.
    pub schema: &'a Schema,
    /// The table column of each input column, for SYMBOL dictionary lookups.
    pub table_columns: &'a [usize],
    pub snapshot: &'a Snapshot,
}

/// The rows of `batch` that pass `kernel`; `None` when a column is of a kind the kernels do
/// not read (the caller then evaluates the filter's expression).
pub(crate) fn select(kernel: &Predicate, batch: &RecordBatch) -> Option<Selection> {
    let columns: Vec<ColumnValues> = batch
        .columns()
        .iter()
        .map(|c| ColumnValues::of(c.as_ref()))
        .collect::<Option<_>>()?;
    Some(kernel.select(&columns, batch.num_rows()))
}

/// `expr` as a kernel predicate, if every part of it is one the kernels evaluate.
pub(crate) fn compile(expr: &Arc<dyn PhysicalExpr>, columns: &FilterColumns) -> Option<Predicate> {
    if let Some(binary) = expr.downcast_ref::<BinaryExpr>() {
        return match binary.op() {
            Operator::And | Operator::Or => {
                let left = compile(binary.left(), columns)?;
                let right = compile(binary.right(), columns)?;
                let parts = |p: Predicate, and: bool| match p {
                    Predicate::And(parts) if and => parts,
                    Predicate::Or(parts) if !and => parts,
                    other => vec![other],
                };
                let and = *binary.op() == Operator::And;
                let mut all = parts(left, and);
                all.extend(parts(right, and));
                Some(if and {
                    Predicate::and(all)
                } else {
                    Predicate::or(all)
                })
            }
            Operator::IsDistinctFrom | Operator::IsNotDistinctFrom => {
                distinctness(*binary.op(), binary.left(), binary.right(), columns)
            }
            op => comparison(*op, binary.left(), binary.right(), columns),
        };
    }
    if let Some(list) = expr.downcast_ref::<InListExpr>() {
        return in_list(list, columns);
    }
    if let Some(e) = expr.downcast_ref::<IsNullExpr>() {
        return null_test(e.arg(), Test::IsNull, columns);
    }
    if let Some(e) = expr.downcast_ref::<IsNotNullExpr>() {
        return null_test(e.arg(), Test::IsNotNull, columns);
    }
    if let Some(literal) = expr.downcast_ref::<Literal>() {
        return match literal.value() {
            ScalarValue::Boolean(v) => Some(Predicate::Const(v.unwrap_or(false))),
            _ => None,
        };
    }
    if let Some(not) = expr.downcast_ref::<NotExpr>() {
        let column = boolean_column(not.arg(), columns)?;
        return Some(leaf(column, Domain::Int, Test::IsBool(false), 1));
    }
    let column = boolean_column(expr, columns)?;
    Some(leaf(column, Domain::Int, Test::IsBool(true), 1))
}

fn leaf(column: usize, domain: Domain, test: Test, width: usize) -> Predicate {
    Predicate::Leaf(Leaf {
        column,
        domain,
        arith: None,
        test,
        width,
    })
}

/// The leaf testing `operand` (its arithmetic included).
fn operand_leaf(operand: &Operand, test: Test) -> Predicate {
    Predicate::Leaf(Leaf {
        column: operand.column,
        domain: operand.domain,
        arith: operand.arith,
        test,
        width: operand.width,
    })
}

fn boolean_column(expr: &Arc<dyn PhysicalExpr>, columns: &FilterColumns) -> Option<usize> {
    let c = expr.downcast_ref::<Column>()?;
    (columns.schema.fields().get(c.index())?.data_type() == &DataType::Boolean).then_some(c.index())
}

fn null_test(
    arg: &Arc<dyn PhysicalExpr>,
    test: Test,
    columns: &FilterColumns,
) -> Option<Predicate> {
    let c = arg.downcast_ref::<Column>()?;
    let data_type = columns.schema.fields().get(c.index())?.data_type();
    (domain_of(data_type).is_some() || data_type == &DataType::Boolean)
        .then(|| leaf(c.index(), Domain::Int, test, 1))
}

/// A column as a comparison reads it: its position, the domain its values compare in, and
/// whether it is a SYMBOL (compared by code).
struct Operand {
    column: usize,
    domain: Domain,
    symbol: bool,
    /// The type the constant must have (the column's, or its cast's).
    compared_as: DataType,
    width: usize,
    /// Arithmetic with a constant applied to a DOUBLE column's values first.
    arith: Option<Arith>,
}

/// A DOUBLE column with a constant added, subtracted, multiplied or divided (`velocity * 2`):
/// compared after the same double arithmetic DataFusion does.
fn arithmetic_operand(binary: &BinaryExpr, columns: &FilterColumns) -> Option<Operand> {
    let op = match binary.op() {
        Operator::Plus => ArithOp::Add,
        Operator::Minus => ArithOp::Sub,
        Operator::Multiply => ArithOp::Mul,
        Operator::Divide => ArithOp::Div,
        _ => return None,
    };
    let (column, literal, constant_first) = match (
        binary.left().downcast_ref::<Column>(),
        binary.right().downcast_ref::<Literal>(),
        binary.left().downcast_ref::<Literal>(),
        binary.right().downcast_ref::<Column>(),
    ) {
        (Some(c), Some(l), _, _) => (c, l, false),
        (_, _, Some(l), Some(c)) => (c, l, true),
        _ => return None,
    };
    let ScalarValue::Float64(Some(constant)) = literal.value() else {
        return None;
    };
    // Dividing by zero is DataFusion's error to report, not a value to compare.
    if op == ArithOp::Div && *constant == 0.0 {
        return None;
    }
    let field = columns.schema.fields().get(column.index())?;
    (field.data_type() == &DataType::Float64).then(|| Operand {
        column: column.index(),
        domain: Domain::Float,
        symbol: false,
        compared_as: DataType::Float64,
        width: 8,
        arith: Some(Arith {
            op,
            constant: *constant,
            constant_first,
        }),
    })
}

fn operand(expr: &Arc<dyn PhysicalExpr>, columns: &FilterColumns) -> Option<Operand> {
    if let Some(binary) = expr.downcast_ref::<BinaryExpr>() {
        return arithmetic_operand(binary, columns);
    }
    let (inner, cast_to) = if let Some(cast) = expr.downcast_ref::<CastExpr>() {
        (cast.expr(), Some(cast.cast_type().clone()))
    } else if let Some(cast) = expr.downcast_ref::<TryCastExpr>() {
        (cast.expr(), Some(cast.cast_type().clone()))
    } else {
        (expr, None)
    };
    let c = inner.downcast_ref::<Column>()?;
    let data_type = columns.schema.fields().get(c.index())?.data_type().clone();
    let domain = domain_of(&data_type)?;
    let symbol = matches!(data_type, DataType::Dictionary(..));
    let width = data_type.primitive_width().unwrap_or(4);
    let compared_as = match cast_to {
        None => data_type,
        // Widening integers keeps every value; any number converts to DOUBLE as the cast does.
        Some(DataType::Float64) if !symbol => {
            return Some(Operand {
                column: c.index(),
                domain: Domain::Float,
                symbol,
                compared_as: DataType::Float64,
                width,
                arith: None,
            });
        }
        Some(DataType::Int64) if domain == Domain::Int && data_type.is_integer() => DataType::Int64,
        Some(_) => return None,
    };
    Some(Operand {
        column: c.index(),
        domain,
        symbol,
        compared_as,
        width,
        arith: None,
    })
}

/// The key of constant `value` for comparisons with `operand`: `Some(None)` for NULL (no
/// row passes), `None` if the kernels cannot compare the two.
fn constant_key(
    value: &ScalarValue,
    operand: &Operand,
    columns: &FilterColumns,
) -> Option<Option<i64>> {
    if value.is_null() {
        return Some(None);
    }
    if operand.symbol {
        // A symbol the dictionary never held has no code: it equals no row (-1 is no code).
        let table_column = *columns.table_columns.get(operand.column)?;
        let code = crate::snapshot::symbol_code(columns.snapshot, table_column, value);
        return match value {
            ScalarValue::Utf8(_)
            | ScalarValue::LargeUtf8(_)
            | ScalarValue::Utf8View(_)
            | ScalarValue::Dictionary(..) => Some(Some(code.map_or(-1, i64::from))),
            _ => None,
        };
    }
    let key = match (operand.domain, value) {
        (Domain::Float, ScalarValue::Float64(Some(v)))
            if operand.compared_as == DataType::Float64 =>
        {
            sql_key(*v)
        }
        (Domain::Float, ScalarValue::Float32(Some(v)))
            if operand.compared_as == DataType::Float32 =>
        {
            sql_key(f64::from(*v))
        }
        (Domain::Int, value) => {
            let same_type = value.data_type() == operand.compared_as
                || matches!(
                    (&value.data_type(), &operand.compared_as),
                    (
                        DataType::Timestamp(TimeUnit::Nanosecond, a),
                        DataType::Timestamp(TimeUnit::Nanosecond, b)
                    ) if a == b
                );
            if !same_type {
                return None;
            }
            match value {
                ScalarValue::Int8(Some(v)) => i64::from(*v),
                ScalarValue::Int16(Some(v)) => i64::from(*v),
                ScalarValue::Int32(Some(v)) => i64::from(*v),
                ScalarValue::Int64(Some(v)) => *v,
                ScalarValue::Date64(Some(v)) => *v,
                ScalarValue::TimestampNanosecond(Some(v), _) => *v,
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(Some(key))
}

fn comparison(
    op: Operator,
    left: &Arc<dyn PhysicalExpr>,
    right: &Arc<dyn PhysicalExpr>,
    columns: &FilterColumns,
) -> Option<Predicate> {
    let op = match op {
        Operator::Eq => CmpOp::Eq,
        Operator::NotEq => CmpOp::NotEq,
        Operator::Lt => CmpOp::Lt,
        Operator::LtEq => CmpOp::LtEq,
        Operator::Gt => CmpOp::Gt,
        Operator::GtEq => CmpOp::GtEq,
        _ => return None,
    };
    let (operand_expr, literal, op) = match (constant(left), constant(right)) {
        (None, Some(l)) => (left, l, op),
        (Some(l), None) => (right, l, op.swap()),
        _ => return None,
    };
    let operand = operand(operand_expr, columns)?;
    if operand.symbol && !matches!(op, CmpOp::Eq | CmpOp::NotEq) {
        // Codes are in order of first appearance, not of the strings.
        return None;
    }
    let Some(key) = constant_key(literal.value(), &operand, columns)? else {
        return Some(Predicate::Const(false));
    };
    Some(operand_leaf(&operand, Test::Compare { op, key }))
}

/// `x IS [NOT] DISTINCT FROM constant` (QuestDB's `!=` and `=` with NULL as a value): a NULL
/// `x` is distinct from every value but NULL.
fn distinctness(
    op: Operator,
    left: &Arc<dyn PhysicalExpr>,
    right: &Arc<dyn PhysicalExpr>,
    columns: &FilterColumns,
) -> Option<Predicate> {
    let (operand_expr, literal) = match (constant(left), constant(right)) {
        (None, Some(l)) => (left, l),
        (Some(l), None) => (right, l),
        _ => return None,
    };
    let distinct = op == Operator::IsDistinctFrom;
    if literal.value().is_null() {
        let test = if distinct {
            Test::IsNotNull
        } else {
            Test::IsNull
        };
        return null_test(operand_expr, test, columns);
    }
    let is_null = null_test(operand_expr, Test::IsNull, columns)?;
    let (cmp, constant) = (operand_expr.clone(), right_literal(&literal));
    if distinct {
        let differs = comparison(Operator::NotEq, &cmp, &constant, columns)?;
        Some(Predicate::or(vec![is_null, differs]))
    } else {
        comparison(Operator::Eq, &cmp, &constant, columns)
    }
}

/// A constant: a literal, or a literal cast (as an unsimplified plan leaves `k = 'a'` over a
/// SYMBOL: the text cast to the dictionary type), cast as evaluating the cast would.
fn constant(e: &Arc<dyn PhysicalExpr>) -> Option<Literal> {
    if let Some(literal) = e.downcast_ref::<Literal>() {
        return Some(Literal::new(literal.value().clone()));
    }
    let cast = e.downcast_ref::<CastExpr>()?;
    let literal = cast.expr().downcast_ref::<Literal>()?;
    let value = match cast.cast_type() {
        // What the cast makes of a value, without building and hashing a dictionary array
        // of one row for it (which cost a LATEST ON of 40 keys a quarter of its time).
        DataType::Dictionary(key_type, value_type) => ScalarValue::Dictionary(
            key_type.clone(),
            Box::new(literal.value().cast_to(value_type).ok()?),
        ),
        to => literal.value().cast_to(to).ok()?,
    };
    Some(Literal::new(value))
}

/// A literal as a physical expression, for [`comparison`].
fn right_literal(literal: &Literal) -> Arc<dyn PhysicalExpr> {
    Arc::new(Literal::new(literal.value().clone()))
}

fn in_list(list: &InListExpr, columns: &FilterColumns) -> Option<Predicate> {
    let operand = operand(list.expr(), columns)?;
    let mut keys = Vec::with_capacity(list.list().len());
    let mut has_null = false;
    for item in list.list() {
        let literal = constant(item)?;
        match constant_key(literal.value(), &operand, columns)? {
            Some(key) => keys.push(key),
            None => has_null = true,
        }
    }
    // `x NOT IN (.., NULL)` is never TRUE; a NULL in a plain IN list matches nothing.
    if list.negated() && has_null {
        return Some(Predicate::Const(false));
    }
    keys.sort_unstable();
    keys.dedup();
    Some(operand_leaf(
        &operand,
        Test::In {
            keys: keys.into(),
            negated: list.negated(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A constant cast to a dictionary type is what evaluating the cast gives, NULL included,
    /// and other casts are evaluated.
    #[test]
    fn cast_constants_are_what_the_cast_evaluates_to() {
        let dictionary = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        for (value, to) in [
            (
                ScalarValue::Utf8(Some("truck_299".into())),
                dictionary.clone(),
            ),
            (ScalarValue::Utf8(None), dictionary.clone()),
            (ScalarValue::LargeUtf8(Some("a".into())), dictionary),
            (ScalarValue::Int32(Some(7)), DataType::Int64),
            (ScalarValue::Utf8(Some("1.5".into())), DataType::Float64),
        ] {
            let literal: Arc<dyn PhysicalExpr> = Arc::new(Literal::new(value.clone()));
            let cast: Arc<dyn PhysicalExpr> = Arc::new(CastExpr::new(literal, to.clone(), None));
            let made = constant(&cast).expect("a constant");
            assert_eq!(
                made.value(),
                &value.cast_to(&to).unwrap(),
                "{value:?} as {to}"
            );
        }
    }
}
