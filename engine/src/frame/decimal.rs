//! Decimal text to `f64` for the CSV fast path, quicker than a general
//! parser on the shape most float columns have: an optional `-`, up to
//! three integer digits, a point and up to 19 fraction digits (what
//! NumPy, pandas and Arrow write for values below 1000). Sixteen fraction
//! digits are read at once (SSE2 on x86-64, eight-byte words elsewhere)
//! with the digits past the number's end read as zeros, which leaves the
//! value unchanged; the mantissa is then rounded to the nearest double by
//! the Eisel–Lemire method (as fast-float does, for the few decimal
//! exponents met here). Anything else (exponents, long integer parts,
//! `nan`, `+`, the last bytes of a buffer) goes to fast-float, so the
//! answer is always the correctly rounded one that fast-float and
//! `str::parse` give.

/// The number at the start of `b` and the bytes it took, as
/// `fast_float2::parse_partial` gives them; `None` when `b` does not start
/// with a number.
#[inline]
pub(crate) fn parse_prefix(b: &[u8]) -> Option<(f64, usize)> {
    match b.first_chunk::<48>().and_then(plain) {
        Some(r) => Some(r),
        None => general(b),
    }
}

#[cold]
#[inline(never)]
fn general(b: &[u8]) -> Option<(f64, usize)> {
    fast_float2::parse_partial::<f64, _>(b).ok()
}

/// The plain shape, or `None`. 48 bytes are there, so every 8-byte load
/// below stays inside `b`.
#[inline(always)]
fn plain(b: &[u8; 48]) -> Option<(f64, usize)> {
    let neg = b[0] == b'-';
    let i = usize::from(neg);
    let w = word(b, i);
    let ni = leading_digits(w);
    if ni == 0 || ni > 3 || b[i + ni as usize] != b'.' {
        return None;
    }
    let int = small_value(w, ni);
    let j = i + ni as usize + 1;
    let (frac, n) = sixteen_digits(b, j);
    // Digits past sixteen (n is 16 only when all sixteen were digits).
    let w3 = word(b, j + 16);
    let k3 = (n >> 4) * leading_digits(w3);
    // The mantissa must fit a u64: at most 19 digits, counting the
    // sixteen (zero-padded) fraction digits and a nonzero integer part.
    if k3 > 3 || (int != 0 && ni + k3 > 3) {
        return None;
    }
    let m = (int * POW10[16] + frac) * POW10[k3 as usize] + small_value(w3, k3);
    let end = j + (n + k3) as usize;
    if b[end] | 0x20 == b'e' {
        return None;
    }
    let v = if m == 0 { 0.0 } else { eisel_lemire(m, 16 + k3) };
    Some((f64::from_bits(v.to_bits() | u64::from(neg) << 63), end))
}

static POW10: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

const ZEROS: u64 = 0x3030_3030_3030_3030;

#[inline(always)]
fn word(b: &[u8; 48], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// How many of the eight bytes of `w` (first byte lowest) are ASCII digits
/// before the first that is not. A byte below `'0'` borrows from the
/// bytes above it, and one above `'9'` may carry into them, so only the
/// lowest flag is trusted, which is all that is used.
#[inline(always)]
fn leading_digits(w: u64) -> u32 {
    let not_digit = (w.wrapping_sub(ZEROS) | w.wrapping_add(0x4646_4646_4646_4646)) & 0x8080_8080_8080_8080;
    not_digit.trailing_zeros() / 8
}

/// The value of eight digits (their bytes less `'0'`, the first byte the
/// most significant): pairs, then quads, then the whole, by multiplies.
#[inline(always)]
fn eight_digits(v: u64) -> u64 {
    let v = v.wrapping_mul(10).wrapping_add(v >> 8);
    let v1 = (v & 0x0000_00FF_0000_00FF).wrapping_mul(0x000F_4240_0000_0064);
    let v2 = ((v >> 16) & 0x0000_00FF_0000_00FF).wrapping_mul(0x0000_2710_0000_0001);
    u64::from((v1.wrapping_add(v2) >> 32) as u32)
}

/// The bytes of `w` below byte `k` (k ≤ 8); two shifts, as one by 64 would
/// overflow.
#[inline(always)]
fn low_bytes(k: u32) -> u64 {
    ((1u64 << (4 * k)) << (4 * k)).wrapping_sub(1)
}

/// The value of the first `k` digits of `w` (k ≤ 8): shifted to the top,
/// zeros come in below them as leading zero digits.
#[inline(always)]
fn small_value(w: u64, k: u32) -> u64 {
    let s = 32 - 4 * k;
    eight_digits((w.wrapping_sub(ZEROS) << s) << s)
}

/// The sixteen bytes at `j` as sixteen digits, those from the first
/// non-digit on read as zeros, and how many were digits.
#[inline(always)]
fn sixteen_digits(b: &[u8; 48], j: usize) -> (u64, u32) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: SSE2 is part of the x86-64 baseline, so every x86-64
        // CPU has the feature this function is compiled for.
        #[allow(unsafe_code)]
        unsafe {
            sse2::sixteen_digits(b, j)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    sixteen_digits_swar(b, j)
}

/// `sixteen_digits` in two eight-byte words.
#[inline(always)]
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn sixteen_digits_swar(b: &[u8; 48], j: usize) -> (u64, u32) {
    let (w1, w2) = (word(b, j), word(b, j + 8));
    let n1 = leading_digits(w1);
    // Only when all of the first eight were digits do the next count.
    let n2 = (n1 >> 3) * leading_digits(w2);
    let (d1, d2) = (w1.wrapping_sub(ZEROS) & low_bytes(n1), w2.wrapping_sub(ZEROS) & low_bytes(n2));
    (eight_digits(d1) * 100_000_000 + eight_digits(d2), n1 + n2)
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::*;

    /// `super::sixteen_digits` in one 16-byte register: the digit test,
    /// the mask past the end and the sum of digits times powers of ten in
    /// three multiply-adds.
    #[inline]
    #[target_feature(enable = "sse2")]
    pub(super) fn sixteen_digits(b: &[u8; 48], j: usize) -> (u64, u32) {
        let v = _mm_set_epi64x(super::word(b, j + 8) as i64, super::word(b, j) as i64);
        let d = _mm_sub_epi8(v, _mm_set1_epi8(b'0' as i8));
        let is_digit = _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(9)), d);
        let n = (!(_mm_movemask_epi8(is_digit) as u32)).trailing_zeros();
        let index = _mm_set_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
        let d = _mm_and_si128(d, _mm_cmpgt_epi8(_mm_set1_epi8(n as i8), index));
        let zero = _mm_setzero_si128();
        // Lanes of (10, 1), then (100, 1), then (10000, 1): pairs, quads, eights.
        let tens = _mm_set1_epi32(0x0001_000a);
        let lo = _mm_madd_epi16(_mm_unpacklo_epi8(d, zero), tens);
        let hi = _mm_madd_epi16(_mm_unpackhi_epi8(d, zero), tens);
        let quads = _mm_madd_epi16(_mm_packs_epi32(lo, hi), _mm_set1_epi32(0x0001_0064));
        let eights = _mm_madd_epi16(_mm_packs_epi32(quads, quads), _mm_set1_epi32(0x0001_2710));
        let first = u64::from(_mm_cvtsi128_si32(eights) as u32);
        let second = u64::from(_mm_cvtsi128_si32(_mm_srli_si128::<4>(eights)) as u32);
        (first * 100_000_000 + second, n)
    }
}

/// 5^-k as the top 128 bits of its binary expansion (scaled into
/// [2^127, 2^128), rounded up), as fast-float's table holds it.
const fn pow5_neg(k: u32) -> (u64, u64) {
    let d = 5u128.pow(k);
    let bits = 128 - d.leading_zeros();
    // floor(2^(bits + 127) / 5^k) by long division, one bit at a time.
    let (mut r, mut q) = (0u128, 0u128);
    let mut i = 0;
    while i <= bits + 127 {
        r = r * 2 + if i == 0 { 1 } else { 0 };
        q <<= 1;
        if r >= d {
            r -= d;
            q |= 1;
        }
        i += 1;
    }
    q += 1;
    while q < 1 << 127 {
        q <<= 1;
    }
    ((q >> 64) as u64, q as u64)
}

/// 5^-16 .. 5^-19, the only decimal exponents `plain` gives.
static POW5: [(u64, u64); 4] = [pow5_neg(16), pow5_neg(17), pow5_neg(18), pow5_neg(19)];

/// `m` × 10^-k (k in 16..=19, m > 0) rounded to the nearest double:
/// fast-float's `compute_float`, which is exact for decimal exponents in
/// -27..=55 and needs no fallback there. No result here is subnormal or
/// infinite (m ≥ 1, k ≤ 19).
#[inline(always)]
fn eisel_lemire(m: u64, k: u32) -> f64 {
    let q = -(k as i32);
    let lz = m.leading_zeros();
    let w = m << lz;
    let (hi5, lo5) = POW5[(k - 16) as usize];
    let product = u128::from(w) * u128::from(hi5);
    let (lo, mut hi) = (product as u64, (product >> 64) as u64);
    // 52 mantissa bits + 3: only when all the bits below them are ones can
    // the second word of 5^-k change the rounding.
    const MASK: u64 = u64::MAX >> 55;
    if hi & MASK == MASK {
        let second = ((u128::from(w) * u128::from(lo5)) >> 64) as u64;
        if lo.checked_add(second).is_none() {
            hi += 1;
        }
    }
    let upper = (hi >> 63) as i32;
    let mut mantissa = hi >> (upper + 9);
    // floor(log2(10^q)) + 63, plus the IEEE bias 1023.
    let mut power2 = ((q * (152_170 + 65536)) >> 16) + 63 + upper - lz as i32 + 1023;
    // fast-float checks for an exact tie here (round to even), which
    // needs q ≥ -4: m × 10^-k is a tie only if 5^k divides m, and then it
    // has fewer than 53 significant bits (m < 10^19), so it is exact.
    mantissa += mantissa & 1;
    mantissa >>= 1;
    if mantissa >= 2 << 52 {
        mantissa = 1 << 52;
        power2 += 1;
    }
    mantissa &= !(1 << 52);
    f64::from_bits(mantissa | (power2 as u64) << 52)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parse of `s` (padded past 48 bytes, as mid-buffer) is std's.
    fn check(s: &str) {
        let mut padded = s.as_bytes().to_vec();
        padded.extend_from_slice(b",0.5,abc\n1234567890123456789012345678901234567890123456789");
        let want: f64 = s.parse().expect("a valid float");
        let (got, n) = parse_prefix(&padded).unwrap_or_else(|| panic!("{s} does not parse"));
        assert_eq!(n, s.len(), "{s}: length");
        assert_eq!(got.to_bits(), want.to_bits(), "{s}: {got:e} vs {want:e}");
        if let Some(b) = padded.first_chunk::<48>() {
            for j in [0usize, 1, 5, 17] {
                if j + 24 <= 48 {
                    assert_eq!(sixteen_digits(b, j), sixteen_digits_swar(b, j), "{s} at {j}");
                }
            }
        }
    }

    #[test]
    fn powers_of_five_match_fast_float_table() {
        assert_eq!(pow5_neg(1), (0xcccc_cccc_cccc_cccc, 0xcccc_cccc_cccc_cccd));
        assert_eq!(pow5_neg(2), (0xa3d7_0a3d_70a3_d70a, 0x3d70_a3d7_0a3d_70a4));
        assert_eq!(POW5[0], (0xe695_94be_c44d_e15b, 0x4c2e_be68_7989_a9b4));
        assert_eq!(POW5[1], (0xb877_aa32_36a4_b449, 0x09be_feb9_fad4_87c3));
        assert_eq!(POW5[2], (0x9392_ee8e_921d_5d07, 0x3aff_322e_6243_9fd0));
        assert_eq!(POW5[3], (0xec1e_4a7d_b695_61a5, 0x2b31_e9e3_d06c_32e6));
    }

    #[test]
    fn plain_decimals_round_as_std_does() {
        for s in [
            "0.0",
            "-0.0",
            "1.",
            "0.5",
            "-0.5",
            "1.5",
            "999.999",
            "0.1",
            "0.2",
            "0.3",
            "0.6619498820806536",
            "0.15923151445219075",
            "-0.3484574102938527",
            "1.110526711065803",
            "0.0000000000000000001",
            "0.9999999999999999999",
            "9.999999999999999999",
            "99.99999999999999999",
            "0.00000000000000000000001",
            "0.30000000000000004",
            "0.1000000000000000055511151231257827",
            // Halfway between two doubles near 1 and 0.5, and just either side.
            "1.00000000000000011102230246251565",
            "1.0000000000000001110223024625156",
            "1.0000000000000001110223024625157",
            "0.50000000000000005551115123125783",
            "0.5000000000000000555111512312578",
            "0.5000000000000000555111512312579",
            "123.456",
            "007.25",
            "1234.5",
            "1.5e3",
            "-1.5E-3",
            "+1.5",
            ".5",
            "5",
            "-7",
        ] {
            check(s);
        }
        assert!(parse_prefix(b"nan,                                                  ").is_some());
        assert!(parse_prefix(b"abc,                                                  ").is_none());
        assert!(parse_prefix(b"-,                                                    ").is_none());
        assert!(parse_prefix(b"").is_none());
    }

    /// Shortest round-trip text of many doubles (the text CSV writers
    /// give), and random digit strings of every length, parse as std does.
    #[test]
    fn random_decimals_round_as_std_does() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..200_000 {
            let r = next();
            let unit = (r >> 11) as f64 / (1u64 << 53) as f64;
            let v = match r % 4 {
                0 => unit,
                1 => -unit * 10.0,
                2 => unit * 999.0,
                _ => unit / 1e6,
            };
            check(&format!("{v}"));
            let int = next() % 1000;
            let digits = (next() % 22) as usize;
            let frac: String = (0..digits).map(|_| char::from(b'0' + (next() % 10) as u8)).collect();
            check(&format!("{int}.{frac}"));
            check(&format!("-{}.{frac}", int % 10));
        }
    }
}
