//! Timestamp precision, as chosen by `/write?precision=`.

/// The unit of ILP timestamps. TCP and UDP senders use nanoseconds; HTTP `/write` takes a
/// `precision` parameter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    #[default]
    Nanos,
    Micros,
    Millis,
    Seconds,
}

impl Precision {
    /// `n`/`ns`, `u`/`us`, `ms` or `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "n" | "ns" => Some(Precision::Nanos),
            "u" | "us" => Some(Precision::Micros),
            "ms" => Some(Precision::Millis),
            "s" => Some(Precision::Seconds),
            _ => None,
        }
    }

    /// The unit's short name as `precision=` takes it: `ns`, `us`, `ms` or `s`.
    pub fn unit(self) -> &'static str {
        match self {
            Precision::Nanos => "ns",
            Precision::Micros => "us",
            Precision::Millis => "ms",
            Precision::Seconds => "s",
        }
    }

    /// How many nanoseconds one unit is.
    pub fn nanos_per_unit(self) -> i64 {
        match self {
            Precision::Nanos => 1,
            Precision::Micros => 1_000,
            Precision::Millis => 1_000_000,
            Precision::Seconds => 1_000_000_000,
        }
    }

    /// Converts a timestamp in this unit to nanoseconds; `None` on overflow.
    pub fn to_nanos(self, value: i64) -> Option<i64> {
        value.checked_mul(self.nanos_per_unit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_converts() {
        assert_eq!(Precision::parse("ms"), Some(Precision::Millis));
        assert_eq!(Precision::parse(""), None);
        assert_eq!(Precision::Seconds.to_nanos(-2), Some(-2_000_000_000));
        assert_eq!(Precision::Micros.to_nanos(i64::MAX), None);
        for p in [
            Precision::Nanos,
            Precision::Micros,
            Precision::Millis,
            Precision::Seconds,
        ] {
            assert_eq!(Precision::parse(p.unit()), Some(p));
        }
    }
}
