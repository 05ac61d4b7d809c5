//! PostgreSQL's binary array input (`array_recv`'s form), split into its elements' own bytes.
//! Only one-dimensional arrays, the kind `x = ANY($1)` takes; each element is then decoded as a
//! parameter of the element type (see `types::decode_param`). The text form is split by
//! [`sundial_query::array_text`].

use sundial_query::array_text::{ARRAY_ELEMENTS_MAX, ArrayTextError};

use crate::error::PgError;

/// An array parameter in text form that is not one [`sundial_query::array_text`] takes.
pub(crate) fn text_error(e: ArrayTextError) -> PgError {
    match e {
        ArrayTextError::Multidimensional => multidimensional(),
        e => PgError::BadValue(format!("array parameter: {e}")),
    }
}

/// The elements of a binary array: their type and their bytes (`None` for NULL).
#[derive(Debug)]
pub(crate) struct BinaryElements<'a> {
    pub element_oid: i32,
    pub elements: Vec<Option<&'a [u8]>>,
}

fn bad(what: &str) -> PgError {
    PgError::BadValue(format!("malformed array parameter: {what}"))
}

fn multidimensional() -> PgError {
    PgError::NotSupported("multidimensional array parameters".into())
}

fn too_many(n: usize) -> PgError {
    PgError::BadValue(format!(
        "array parameter of {n} elements: at most {ARRAY_ELEMENTS_MAX} are taken"
    ))
}

/// The elements of `bytes`, an array in PostgreSQL's binary form.
pub(crate) fn split_binary(bytes: &[u8]) -> Result<BinaryElements<'_>, PgError> {
    let mut r = Cursor { bytes, at: 0 };
    let dimensions = r.i32("header")?;
    let flags = r.i32("header")?;
    let element_oid = r.i32("header")?;
    if flags & !1 != 0 {
        return Err(bad("unknown flags"));
    }
    let count = match dimensions {
        0 => 0,
        1 => {
            let len = r.i32("dimension")?;
            let _lower_bound = r.i32("dimension")?;
            usize::try_from(len).map_err(|_| bad("negative dimension"))?
        }
        d if d > 1 => return Err(multidimensional()),
        _ => return Err(bad("negative number of dimensions")),
    };
    if count > ARRAY_ELEMENTS_MAX {
        return Err(too_many(count));
    }
    // Each element takes at least its 4-byte length.
    if count > r.remaining() / 4 {
        return Err(bad("fewer elements than its dimension says"));
    }
    let mut elements = Vec::with_capacity(count);
    for _ in 0..count {
        let len = r.i32("element")?;
        if len == -1 {
            elements.push(None);
            continue;
        }
        let len = usize::try_from(len).map_err(|_| bad("negative element length"))?;
        elements.push(Some(r.take(len, "element")?));
    }
    if r.remaining() != 0 {
        return Err(bad("bytes after the last element"));
    }
    Ok(BinaryElements {
        element_oid,
        elements,
    })
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], PgError> {
        let taken = self
            .bytes
            .get(self.at..self.at.saturating_add(len))
            .ok_or_else(|| bad(&format!("truncated {what}")))?;
        self.at += len;
        Ok(taken)
    }

    fn i32(&mut self, what: &str) -> Result<i32, PgError> {
        let word = self.take(4, what)?;
        Ok(i32::from_be_bytes([word[0], word[1], word[2], word[3]]))
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An array in binary form: `dims` one length per dimension, then `elements`.
    pub(crate) fn binary(dims: &[i32], oid: i32, elements: &[Option<&[u8]>]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend((dims.len() as i32).to_be_bytes());
        out.extend(i32::from(elements.iter().any(Option::is_none)).to_be_bytes());
        out.extend(oid.to_be_bytes());
        for d in dims {
            out.extend(d.to_be_bytes());
            out.extend(1i32.to_be_bytes());
        }
        for e in elements {
            match e {
                None => out.extend((-1i32).to_be_bytes()),
                Some(b) => {
                    out.extend((b.len() as i32).to_be_bytes());
                    out.extend(*b);
                }
            }
        }
        out
    }

    #[test]
    fn binary_arrays_split_into_their_elements() {
        let one = 1i64.to_be_bytes();
        let bytes = binary(&[3], 20, &[Some(&one), None, Some(b"")]);
        let split = split_binary(&bytes).unwrap();
        assert_eq!(split.element_oid, 20);
        assert_eq!(split.elements, vec![Some(&one[..]), None, Some(&b""[..])]);
        let bytes = binary(&[], 23, &[]);
        let empty = split_binary(&bytes).unwrap();
        assert!(empty.elements.is_empty());
    }

    #[test]
    fn malformed_binary_arrays_are_refused() {
        let one = 1i64.to_be_bytes();
        let good = binary(&[1], 20, &[Some(&one)]);
        for cut in 0..good.len() {
            assert!(split_binary(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(split_binary(&trailing).is_err());
        // A dimension claiming more elements than the bytes can hold, before allocating.
        let mut huge = binary(&[1], 20, &[]);
        huge[12..16].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(
            split_binary(&huge)
                .unwrap_err()
                .to_string()
                .contains("at most")
        );
        let mut lying = binary(&[1], 20, &[]);
        lying[12..16].copy_from_slice(&1000i32.to_be_bytes());
        assert!(split_binary(&lying).is_err());
        let nested = binary(&[1, 1], 20, &[Some(&one)]);
        assert!(
            split_binary(&nested)
                .unwrap_err()
                .to_string()
                .contains("multidimensional")
        );
        let mut negative = binary(&[1], 20, &[Some(&one)]);
        negative[0..4].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(split_binary(&negative).is_err());
    }
}
