//! Bitmaps in Arrow's bit order (bit `i` is bit `i % 8` of byte `i / 8`).

pub(crate) fn bytes_for(bits: usize) -> usize {
    bits.div_ceil(8)
}

#[inline]
pub(crate) fn get(bits: &[u8], i: usize) -> bool {
    bits[i >> 3] & (1 << (i & 7)) != 0
}

#[inline]
pub(crate) fn set(bits: &mut [u8], i: usize, value: bool) {
    let mask = 1u8 << (i & 7);
    if value {
        bits[i >> 3] |= mask;
    } else {
        bits[i >> 3] &= !mask;
    }
}

/// Appends `len` bits of `src` starting at bit `src_offset` to a bitmap holding `dst_len` bits.
pub(crate) fn append(dst: &mut Vec<u8>, dst_len: usize, src: &[u8], src_offset: usize, len: usize) {
    dst.resize(bytes_for(dst_len + len), 0);
    if dst_len.is_multiple_of(8) && src_offset.is_multiple_of(8) {
        let start = src_offset / 8;
        let n = bytes_for(len);
        dst[dst_len / 8..dst_len / 8 + n].copy_from_slice(&src[start..start + n]);
        clear_tail(dst, dst_len + len);
        return;
    }
    for i in 0..len {
        set(dst, dst_len + i, get(src, src_offset + i));
    }
}

/// Appends `len` copies of `value`.
pub(crate) fn append_constant(dst: &mut Vec<u8>, dst_len: usize, value: bool, len: usize) {
    dst.resize(bytes_for(dst_len + len), 0);
    if value {
        for i in dst_len..dst_len + len {
            set(dst, i, true);
        }
    }
}

/// Zeroes the bits at and after `len` in the last byte, so files are deterministic.
pub(crate) fn clear_tail(bits: &mut [u8], len: usize) {
    if !len.is_multiple_of(8)
        && let Some(last) = bits.get_mut(len / 8)
    {
        *last &= (1u8 << (len % 8)) - 1;
    }
}

/// Number of set bits among the first `len`.
pub(crate) fn count_ones(bits: &[u8], len: usize) -> usize {
    let full = len / 8;
    let mut n: usize = bits[..full].iter().map(|b| b.count_ones() as usize).sum();
    for i in full * 8..len {
        n += usize::from(get(bits, i));
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_at_unaligned_offsets() {
        let src = [0b1010_1101u8, 0b0000_0011];
        let mut dst = Vec::new();
        append(&mut dst, 0, &src, 0, 3);
        append(&mut dst, 3, &src, 3, 7);
        for i in 0..10 {
            assert_eq!(get(&dst, i), get(&src, i), "bit {i}");
        }
        assert_eq!(count_ones(&dst, 10), count_ones(&src, 10));
        append_constant(&mut dst, 10, true, 9);
        assert_eq!(count_ones(&dst, 19), count_ones(&src, 10) + 9);
    }
}
