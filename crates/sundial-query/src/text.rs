//! Date, time and float text for the wire protocols, written without locks or allocation.
//!
//! Both the HTTP API (ISO 8601, `2016-01-01T00:00:00.000000Z`) and the PostgreSQL protocol
//! (`2016-01-01 00:00:00.5`) format timestamps on their hot paths; they share this code.
//! Both write a float as the shortest text that reads back exactly; most stored values are
//! decimals of a few digits (`58.13`), which [`push_float_decimal`] writes without the
//! general algorithm.

/// How the fraction of a second is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fraction {
    /// Always this many digits (1..=9), widened to 9 when the value has finer detail.
    Fixed(u32),
    /// Microseconds with trailing zeros removed, and no `.` at all for whole seconds
    /// (PostgreSQL's `timestamp` output).
    TrimmedMicros,
}

const NANOS_PER_SECOND: i64 = 1_000_000_000;
const SECONDS_PER_DAY: i64 = 86_400;

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Appends `value` as exactly `width` digits (zero-padded; wider values keep all digits).
fn push_digits(out: &mut Vec<u8>, value: u64, width: usize) {
    if width == 2 && value < 100 {
        // Months, days, hours, minutes and seconds: no division loop.
        out.extend_from_slice(&[b'0' + (value / 10) as u8, b'0' + (value % 10) as u8]);
        return;
    }
    let mut buf = [b'0'; 20];
    let mut v = value;
    let mut i = buf.len();
    while v > 0 {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    let start = (buf.len() - width.min(buf.len())).min(i);
    out.extend_from_slice(&buf[start..]);
}

/// Appends `YYYY-MM-DD` for a day count since 1970-01-01. Years before 1 AD are written with
/// a leading `-`, years past 9999 with all their digits.
pub fn push_date(out: &mut Vec<u8>, days: i64) {
    let (year, month, day) = civil_from_days(days);
    if year < 0 {
        out.push(b'-');
    }
    push_digits(out, year.unsigned_abs(), 4);
    out.push(b'-');
    push_digits(out, u64::from(month), 2);
    out.push(b'-');
    push_digits(out, u64::from(day), 2);
}

/// Appends a timestamp given in nanoseconds since the epoch: date, `separator`, time, fraction.
pub fn push_timestamp(out: &mut Vec<u8>, nanos: i64, separator: u8, fraction: Fraction) {
    let seconds = nanos.div_euclid(NANOS_PER_SECOND);
    let sub_nanos = nanos.rem_euclid(NANOS_PER_SECOND) as u64;
    push_date(out, seconds.div_euclid(SECONDS_PER_DAY));
    out.push(separator);
    let second_of_day = seconds.rem_euclid(SECONDS_PER_DAY) as u64;
    push_digits(out, second_of_day / 3600, 2);
    out.push(b':');
    push_digits(out, second_of_day / 60 % 60, 2);
    out.push(b':');
    push_digits(out, second_of_day % 60, 2);
    match fraction {
        Fraction::Fixed(digits) => {
            let digits = digits.clamp(1, 9);
            let unit = 10u64.pow(9 - digits);
            out.push(b'.');
            if sub_nanos.is_multiple_of(unit) {
                push_digits(out, sub_nanos / unit, digits as usize);
            } else {
                push_digits(out, sub_nanos, 9);
            }
        }
        Fraction::TrimmedMicros => {
            let mut micros = sub_nanos / 1000;
            if micros == 0 {
                return;
            }
            let mut width = 6;
            while micros.is_multiple_of(10) {
                micros /= 10;
                width -= 1;
            }
            out.push(b'.');
            push_digits(out, micros, width);
        }
    }
}

/// Powers of ten a float is scaled by to find its decimal digits (at most 8 fractional).
const FRACTION_SCALES: [f64; 9] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8];

/// Scaled values stay below this: the float spacing there is at most 2^-13, so at most one
/// integer lies close enough to read back and rounding the product cannot pick a wrong one.
const SCALED_MAX: f64 = (1u64 << 40) as f64;

/// Appends finite `v` in plain decimal notation with the fewest fractional digits that read
/// back as `v` (`whole_suffix` after a whole number, e.g. `.0` for JSON), and returns true;
/// returns false, appending nothing, for values this fast path leaves to the general shortest
/// round-trip algorithm (ryu): zero, magnitudes under 1e-5 or over 2^40, more than 8
/// fractional digits, NaN and infinities.
///
/// Where it answers, the text is exactly ryu's digits: with `|v| × 10^k < 2^40` a candidate
/// `r / 10^k` reads back as `v` only within 2^-13 of `|v| × 10^k`, so it is unique for its
/// `k`, found by rounding the product, and the first `k` that reads back gives the fewest
/// digits; `r / 10^k` is exact float division (r and 10^k are exact), which rounds as
/// parsing the text does; magnitudes from 1e-5 to under 1e16 are written in plain notation.
pub fn push_float_decimal(out: &mut Vec<u8>, v: f64, whole_suffix: &[u8]) -> bool {
    let magnitude = v.abs();
    if !(1e-5..SCALED_MAX).contains(&magnitude) {
        return false;
    }
    for (k, &scale) in FRACTION_SCALES.iter().enumerate() {
        let scaled = magnitude * scale;
        if scaled >= SCALED_MAX {
            return false;
        }
        let r = scaled.round();
        if r / scale != magnitude {
            continue;
        }
        // `r` is a whole number under 2^40: exact as an integer.
        let digits = r as u64;
        let unit = 10u64.pow(k as u32);
        if v < 0.0 {
            out.push(b'-');
        }
        push_digits(out, digits / unit, 1);
        if k == 0 {
            out.extend_from_slice(whole_suffix);
        } else {
            out.push(b'.');
            push_digits(out, digits % unit, k);
        }
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// ryu's text with a fast-path answer where there is one.
    fn both(v: f64) -> (String, Option<String>) {
        let mut out = Vec::new();
        let fast = push_float_decimal(&mut out, v, b".0").then(|| String::from_utf8(out).unwrap());
        (ryu::Buffer::new().format_finite(v).to_string(), fast)
    }

    #[test]
    fn float_decimals_are_ryus_digits() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(38);
        let mut answered = 0;
        let mut check = |v: f64| {
            let (ryu, fast) = both(v);
            if let Some(fast) = fast {
                assert_eq!(fast, ryu, "{v:e}");
                assert_eq!(fast.parse::<f64>().unwrap(), v);
                answered += 1;
            }
        };
        for _ in 0..200_000 {
            // Decimals as sensors and people write them, of every size and precision.
            let width = rng.random_range(1..=16);
            let digits: u64 = rng.random_range(0..10u64.pow(width));
            let k = rng.random_range(0..=12);
            let text = format!("{digits}e-{k}");
            let v: f64 = text.parse().unwrap();
            check(v);
            check(-v);
            // Arbitrary doubles, and near the edges of the fast path.
            check(f64::from_bits(rng.random::<u64>()));
            check(rng.random_range(0.0..1e-4));
            check(rng.random_range(1e11..1.2e12));
            check(rng.random::<f64>() * 100.0);
        }
        for v in [
            1e-5,
            0.99999e-5,
            1.00001e-5,
            0.1,
            0.2,
            0.3,
            0.1 + 0.2,
            1.0,
            58.13,
            0.5,
            1.5,
            2.5,
            1e8,
            123_456_789.123,
            1_099_511_627_775.0,
            1_099_511_627_776.0,
            549_755_813_887.5,
            f64::EPSILON,
            f64::MIN_POSITIVE,
            9_007_199_254_740_993.0,
            1e16,
            1e15,
        ] {
            check(v);
            check(-v);
        }
        assert!(answered > 150_000, "the fast path answered only {answered}");
        for v in [
            0.0,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            1e-6,
            2e12,
            0.123_456_789,
        ] {
            assert!(!push_float_decimal(&mut Vec::new(), v, b""), "{v}");
        }
    }

    fn timestamp(nanos: i64, fraction: Fraction) -> String {
        let mut out = Vec::new();
        push_timestamp(&mut out, nanos, b' ', fraction);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn iso_fixed_fraction_widens_for_finer_values() {
        let s = 1_451_606_400 * NANOS_PER_SECOND;
        assert_eq!(
            timestamp(s, Fraction::Fixed(6)),
            "2016-01-01 00:00:00.000000"
        );
        assert_eq!(
            timestamp(-1, Fraction::Fixed(6)),
            "1969-12-31 23:59:59.999999999"
        );
        assert_eq!(
            timestamp(
                951_782_400 * NANOS_PER_SECOND + 5_000_000,
                Fraction::Fixed(3)
            ),
            "2000-02-29 00:00:00.005"
        );
    }

    #[test]
    fn postgres_fraction_is_trimmed_micros() {
        let s = 1_451_606_400 * NANOS_PER_SECOND;
        assert_eq!(timestamp(s, Fraction::TrimmedMicros), "2016-01-01 00:00:00");
        assert_eq!(
            timestamp(s + 500_000_000, Fraction::TrimmedMicros),
            "2016-01-01 00:00:00.5"
        );
        assert_eq!(
            timestamp(s + 123_456_789, Fraction::TrimmedMicros),
            "2016-01-01 00:00:00.123456"
        );
    }

    #[test]
    fn dates_cover_distant_years() {
        let mut out = Vec::new();
        push_date(&mut out, 0);
        out.push(b' ');
        push_date(&mut out, 2_932_896);
        out.push(b' ');
        push_date(&mut out, -719_528);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "1970-01-01 9999-12-31 0000-01-01"
        );
    }
}
