//! A column as the kernels read it: a slice of native values (over the mapped file, no copy)
//! and its validity.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date64Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    TimestampNanosecondType,
};
use arrow_array::{Array, ArrowPrimitiveType};
use arrow_buffer::{BooleanBuffer, NullBuffer};
use arrow_schema::{DataType, TimeUnit};

/// The values of a column the kernels read.
#[derive(Debug, Clone, Copy)]
pub enum Values<'a> {
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    F32(&'a [f32]),
    F64(&'a [f64]),
    Bool(&'a BooleanBuffer),
}

/// A column's values and which are NULL.
#[derive(Debug, Clone, Copy)]
pub struct ColumnValues<'a> {
    pub values: Values<'a>,
    pub nulls: Option<&'a NullBuffer>,
}

/// How a kernel compares a column's values: as integers, or as floating-point numbers the
/// way DataFusion compares them: `-0.0` equals `0.0`, and NaN equals NaN and is above every
/// other number (a negative NaN below, see [`sql_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    Int,
    Float,
}

/// Whether the kernels read arrays of `data_type`, and the domain their values compare in.
/// SYMBOL columns (dictionaries keyed by `Int32`) are read as their codes.
pub fn domain_of(data_type: &DataType) -> Option<Domain> {
    match data_type {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Date64
        | DataType::Timestamp(TimeUnit::Nanosecond, _) => Some(Domain::Int),
        DataType::Dictionary(key, _) if **key == DataType::Int32 => Some(Domain::Int),
        DataType::Float32 | DataType::Float64 => Some(Domain::Float),
        _ => None,
    }
}

impl<'a> ColumnValues<'a> {
    /// The array's values as the kernels read them; `None` for types they do not read.
    pub fn of(array: &'a dyn Array) -> Option<ColumnValues<'a>> {
        fn values<T: ArrowPrimitiveType>(array: &dyn Array) -> &[T::Native] {
            array.as_primitive::<T>().values()
        }
        let values = match array.data_type() {
            DataType::Int8 => Values::I8(values::<Int8Type>(array)),
            DataType::Int16 => Values::I16(values::<Int16Type>(array)),
            DataType::Int32 => Values::I32(values::<Int32Type>(array)),
            DataType::Int64 => Values::I64(values::<Int64Type>(array)),
            DataType::Date64 => Values::I64(values::<Date64Type>(array)),
            DataType::Timestamp(TimeUnit::Nanosecond, _) => {
                Values::I64(values::<TimestampNanosecondType>(array))
            }
            DataType::Float32 => Values::F32(values::<Float32Type>(array)),
            DataType::Float64 => Values::F64(values::<Float64Type>(array)),
            DataType::Boolean => Values::Bool(array.as_boolean().values()),
            DataType::Dictionary(key, _) if **key == DataType::Int32 => {
                let dict = array.as_dictionary_opt::<Int32Type>()?;
                // A dictionary's NULLs are its keys' NULLs.
                return Some(ColumnValues {
                    values: Values::I32(dict.keys().values()),
                    nulls: dict.keys().nulls(),
                });
            }
            _ => return None,
        };
        Some(ColumnValues {
            values,
            nulls: array.nulls(),
        })
    }

    pub fn len(&self) -> usize {
        match self.values {
            Values::I8(v) => v.len(),
            Values::I16(v) => v.len(),
            Values::I32(v) => v.len(),
            Values::I64(v) => v.len(),
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
            Values::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A native value the kernels read, widened to the domain it compares or sums in.
pub(crate) trait Native: Copy + PartialOrd + Send + Sync + 'static {
    /// Whether the type is an integer type (its values sum exactly as `i64`).
    const INT: bool;
    fn to_i64(self) -> i64;
    fn to_f64(self) -> f64;
    /// An integer key as a value of this type, compared natively (more lanes per
    /// instruction than widened): `Err(Ordering)` tells where the key lies when no value of
    /// the type equals it (below or above them all); always `Err(Equal)` for floating-point
    /// types, whose values compare by [`sql_key`].
    fn from_key(key: i64) -> Result<Self, std::cmp::Ordering>;
    /// The values as 32-bit integers, if that is what they are.
    fn as_i32s(values: &[Self]) -> Option<&[i32]> {
        let _ = values;
        None
    }
    /// The values as 64-bit integers, if that is what they are.
    fn as_i64s(values: &[Self]) -> Option<&[i64]> {
        let _ = values;
        None
    }
    /// The values as 64-bit floats, if that is what they are.
    fn as_f64s(values: &[Self]) -> Option<&[f64]> {
        let _ = values;
        None
    }
}

macro_rules! native {
    ($($t:ty: $int:literal { $($own:item)* }),*) => {$(
        impl Native for $t {
            $($own)*
            const INT: bool = $int;
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_key(key: i64) -> Result<Self, std::cmp::Ordering> {
                if !$int {
                    return Err(std::cmp::Ordering::Equal);
                }
                if key < <$t>::MIN as i64 {
                    Err(std::cmp::Ordering::Less)
                } else if key > <$t>::MAX as i64 {
                    Err(std::cmp::Ordering::Greater)
                } else {
                    Ok(key as $t)
                }
            }
        }
    )*};
}
native!(
    i8: true {},
    i16: true {},
    i32: true {
        #[inline(always)]
        fn as_i32s(values: &[i32]) -> Option<&[i32]> {
            Some(values)
        }
    },
    i64: true {
        #[inline(always)]
        fn as_i64s(values: &[i64]) -> Option<&[i64]> {
            Some(values)
        }
    },
    f32: false {},
    f64: false {
        #[inline(always)]
        fn as_f64s(values: &[f64]) -> Option<&[f64]> {
            Some(values)
        }
    }
);

/// How far ahead of the block being read its column is fetched into cache. Mapped files live
/// in 4 KiB pages, at whose edges the processor's own prefetcher stops.
pub(crate) const PREFETCH_AHEAD_BYTES: usize = 4096;

/// Asks the processor to fetch `values[at]` into cache, if it exists.
#[inline(always)]
pub(crate) fn prefetch<T>(values: &[T], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if at < values.len() {
        // SAFETY: a prefetch reads nothing a program sees, and `at` is in bounds.
        unsafe {
            std::arch::x86_64::_mm_prefetch(
                values.as_ptr().add(at).cast::<i8>(),
                std::arch::x86_64::_MM_HINT_T0,
            )
        };
    }
}

/// `x`'s position in IEEE 754's total order as an integer: `a.total_cmp(&b)` is
/// `total_key(a).cmp(&total_key(b))`.
#[inline(always)]
pub fn total_key(x: f64) -> i64 {
    let bits = x.to_bits() as i64;
    bits ^ ((((bits >> 63) as u64) >> 1) as i64)
}

/// `x`'s position in the order DataFusion compares floating-point numbers in, as an integer:
/// IEEE 754's total order with both zeros equal and NaNs told apart only by their sign (a NaN
/// is above every number, a negative NaN, which x86 arithmetic makes of `inf * 0`, below).
#[inline(always)]
pub fn sql_key(x: f64) -> i64 {
    // Adding 0.0 turns -0.0 into 0.0 and leaves every other number as it is.
    let x = if x.is_nan() {
        f64::NAN.copysign(x)
    } else {
        x + 0.0
    };
    total_key(x)
}

/// The number whose [`total_key`] is `key`.
#[inline(always)]
pub fn from_total_key(key: i64) -> f64 {
    f64::from_bits((key ^ ((((key >> 63) as u64) >> 1) as i64)) as u64)
}

/// Calls `$body` with `$v` bound to the values slice of whatever type `$values` holds
/// (Boolean values are the caller's case `$bool`).
macro_rules! with_slice {
    ($values:expr, $v:ident => $body:expr, $b:ident => $bool:expr) => {
        match $values {
            $crate::values::Values::I8($v) => $body,
            $crate::values::Values::I16($v) => $body,
            $crate::values::Values::I32($v) => $body,
            $crate::values::Values::I64($v) => $body,
            $crate::values::Values::F32($v) => $body,
            $crate::values::Values::F64($v) => $body,
            $crate::values::Values::Bool($b) => $bool,
        }
    };
}
pub(crate) use with_slice;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_keys_equate_zeros_and_nans() {
        assert_eq!(sql_key(-0.0), sql_key(0.0));
        let other_nan = f64::from_bits(f64::NAN.to_bits() | 1);
        assert_eq!(sql_key(other_nan), sql_key(f64::NAN));
        assert!(sql_key(f64::NAN) > sql_key(f64::INFINITY));
        assert!(sql_key(-f64::NAN) < sql_key(f64::NEG_INFINITY));
        assert!(sql_key(-1.0) < sql_key(-0.0));
        assert!(sql_key(f64::MIN_POSITIVE) > sql_key(-0.0));
    }

    #[test]
    fn total_keys_order_as_total_cmp() {
        let xs = [
            f64::NEG_INFINITY,
            -1e300,
            -1.5,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            2.5,
            f64::INFINITY,
            f64::NAN,
            -f64::NAN,
        ];
        for a in xs {
            assert_eq!(from_total_key(total_key(a)).to_bits(), a.to_bits());
            for b in xs {
                assert_eq!(total_key(a).cmp(&total_key(b)), a.total_cmp(&b), "{a} {b}");
            }
        }
    }
}
