//! [`Quantity`]: an exact Kubernetes quantity, its parsing (every form Kubernetes accepts),
//! canonical printing, arithmetic and serde.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::iter::Sum;
use std::ops::{Add, AddAssign, Neg, Sub, SubAssign};
use std::str::FromStr;

/// Nano-units per unit.
pub(super) const NANO: i128 = 1_000_000_000;
/// The largest magnitude a quantity may hold, in nano-units. The range is symmetric so negation
/// never overflows.
pub(super) const MAX_NANOS: i128 = i128::MAX;
/// Decimal exponents beyond this magnitude are clamped while parsing (the value then either
/// overflows or rounds to one nano-unit, exactly as with the unclamped exponent).
pub(super) const EXPONENT_CLAMP: i64 = 1_000_000;

/// How a quantity was written, which decides how it prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Format {
    /// Power-of-ten SI suffixes: `n u m "" k M G T P E`.
    #[default]
    DecimalSI,
    /// Power-of-two suffixes: `Ki Mi Gi Ti Pi Ei`.
    BinarySI,
    /// Scientific notation: `1e3`, `5e-3`.
    DecimalExponent,
}

/// Why a string is not a valid quantity.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuantityError {
    /// The input was empty.
    #[error("invalid quantity \"\": empty string")]
    Empty,
    /// The input does not follow the quantity grammar.
    #[error("invalid quantity {input:?}: {reason}")]
    Invalid {
        /// The rejected input.
        input: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The value does not fit the representable range (±2^127 nano-units).
    #[error("invalid quantity {input:?}: value out of range")]
    Overflow {
        /// The rejected input.
        input: String,
    },
    /// A number (from JSON/YAML) that is not finite.
    #[error("invalid quantity {input}: not a finite number")]
    NotFinite {
        /// The rejected number, as text.
        input: String,
    },
}

/// An exact Kubernetes resource quantity.
///
/// Compared, ordered and hashed by value only; the [`Format`] only affects printing.
#[derive(Clone, Copy)]
pub struct Quantity {
    pub(super) nanos: i128,
    pub(super) format: Format,
}

/// How the suffix scales the mantissa.
pub(super) enum Scale {
    /// Multiply by 10^exp.
    Decimal(i64),
    /// Multiply by 1024^exp.
    Binary(u32),
}

impl Quantity {
    /// Zero (`"0"`), in [`Format::DecimalSI`].
    pub const ZERO: Quantity = Quantity {
        nanos: 0,
        format: Format::DecimalSI,
    };

    /// Parses a Kubernetes quantity string such as `500m`, `1.5Gi`, `-2`, `1e3` or `.5`.
    ///
    /// Values finer than a nano-unit are rounded up (away from zero) to the next nano-unit.
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        parse_quantity(s)
    }

    /// A quantity of `m` thousandths of a unit (e.g. millicores), in [`Format::DecimalSI`].
    pub fn from_milli(m: i64) -> Quantity {
        Quantity {
            nanos: i128::from(m) * 1_000_000,
            format: Format::DecimalSI,
        }
    }

    /// A quantity of `v` whole units (e.g. cores, pods), in [`Format::DecimalSI`].
    pub fn from_units(v: i64) -> Quantity {
        Quantity {
            nanos: i128::from(v) * NANO,
            format: Format::DecimalSI,
        }
    }

    /// A quantity of `b` bytes, in [`Format::BinarySI`].
    pub fn from_bytes(b: i64) -> Quantity {
        Quantity {
            nanos: i128::from(b) * NANO,
            format: Format::BinarySI,
        }
    }

    /// A quantity of exactly `nanos` nano-units in the given format (saturating at the
    /// representable range).
    pub fn from_nanos(nanos: i128, format: Format) -> Quantity {
        Quantity {
            nanos: nanos.clamp(-MAX_NANOS, MAX_NANOS),
            format,
        }
    }

    /// The exact value in nano-units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// The value in thousandths of a unit, like Kubernetes' `MilliValue`: a fractional result is
    /// rounded up in magnitude (away from zero), and the result saturates at the `i64` range.
    pub fn milli_value(&self) -> i64 {
        scaled_round_up(self.nanos, 1_000_000)
    }

    /// The value in whole units, like Kubernetes' `Value`: a fractional result is rounded up in
    /// magnitude (away from zero), and the result saturates at the `i64` range.
    pub fn value(&self) -> i64 {
        scaled_round_up(self.nanos, NANO)
    }

    /// The value as a float, in units. Approximate: for prices and reports only, never for
    /// fit decisions.
    pub fn as_f64(&self) -> f64 {
        // Split to keep precision for large values.
        let whole = self.nanos / NANO;
        let frac = self.nanos % NANO;
        whole as f64 + frac as f64 / 1e9
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// Whether the value is below zero.
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// The format used when printing.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The same value printed in another format.
    pub fn with_format(self, format: Format) -> Quantity {
        Quantity { format, ..self }
    }

    /// `self + other`, or `None` when the result leaves the representable range.
    ///
    /// The result keeps `self`'s format, unless `self` is zero, in which case it takes
    /// `other`'s (as Kubernetes does, so a sum starting from zero keeps the addends' format).
    pub fn checked_add(self, other: Quantity) -> Option<Quantity> {
        let nanos = self.nanos.checked_add(other.nanos)?;
        if nanos < -MAX_NANOS {
            return None;
        }
        Some(Quantity {
            nanos,
            format: combined_format(self, other),
        })
    }

    /// `self - other`, or `None` when the result leaves the representable range.
    /// The format follows the same rule as [`Quantity::checked_add`].
    pub fn checked_sub(self, other: Quantity) -> Option<Quantity> {
        let nanos = self.nanos.checked_sub(other.nanos)?;
        if nanos < -MAX_NANOS {
            return None;
        }
        Some(Quantity {
            nanos,
            format: combined_format(self, other),
        })
    }

    /// `self + other`, saturating at the representable range.
    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity::from_nanos(
            self.nanos.saturating_add(other.nanos),
            combined_format(self, other),
        )
    }

    /// `self - other`, saturating at the representable range.
    pub fn saturating_sub(self, other: Quantity) -> Quantity {
        Quantity::from_nanos(
            self.nanos.saturating_sub(other.nanos),
            combined_format(self, other),
        )
    }
}

pub(super) fn combined_format(left: Quantity, right: Quantity) -> Format {
    if left.nanos == 0 {
        right.format
    } else {
        left.format
    }
}

/// `nanos / per`, rounded away from zero, saturated to `i64`.
pub(super) fn scaled_round_up(nanos: i128, per: i128) -> i64 {
    let q = nanos / per;
    let r = nanos % per;
    let rounded = if r > 0 {
        q + 1
    } else if r < 0 {
        q - 1
    } else {
        q
    };
    rounded.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

pub(super) fn invalid(input: &str, reason: &'static str) -> QuantityError {
    QuantityError::Invalid {
        input: input.to_owned(),
        reason,
    }
}

pub(super) fn parse_quantity(s: &str) -> Result<Quantity, QuantityError> {
    let bytes = s.as_bytes();
    let Some(&first) = bytes.first() else {
        return Err(QuantityError::Empty);
    };
    let mut pos = 0;
    let mut negative = false;
    match first {
        b'+' => pos = 1,
        b'-' => {
            negative = true;
            pos = 1;
        }
        _ => {}
    }

    // Mantissa: digits with at most one decimal point.
    let mut digits: Vec<u8> = Vec::new();
    let mut frac_len: usize = 0;
    let mut seen_point = false;
    let mut any_digit = false;
    while let Some(&c) = bytes.get(pos) {
        if c.is_ascii_digit() {
            any_digit = true;
            if seen_point {
                frac_len += 1;
            }
            // Leading zeros carry no information (after the point they still count in
            // `frac_len`, which keeps the scale right).
            if !(digits.is_empty() && c == b'0') {
                digits.push(c - b'0');
            }
        } else if c == b'.' && !seen_point {
            seen_point = true;
        } else {
            break;
        }
        pos += 1;
    }
    if !any_digit {
        return Err(invalid(s, "expected a number"));
    }
    // Trailing zeros of the fraction carry no information either.
    while frac_len > 0 && digits.last() == Some(&0) {
        digits.pop();
        frac_len -= 1;
    }
    // If all digits were zeros after the point, `digits` may now be empty: the value is zero.

    let suffix = s.get(pos..).unwrap_or("");
    let (scale, format) = parse_suffix(s, suffix)?;

    let frac = i64::try_from(frac_len).unwrap_or(i64::MAX);
    let magnitude = match scale {
        Scale::Decimal(exp) => to_nanos(&digits, exp.saturating_add(9).saturating_sub(frac)),
        Scale::Binary(power) => {
            let factor: u64 = 1u64 << (10 * power);
            let multiplied = mul_digits(&digits, factor);
            to_nanos(&multiplied, 9i64.saturating_sub(frac))
        }
    }
    .ok_or_else(|| QuantityError::Overflow {
        input: s.to_owned(),
    })?;
    let magnitude = i128::try_from(magnitude).map_err(|_| QuantityError::Overflow {
        input: s.to_owned(),
    })?;
    let nanos = if negative { -magnitude } else { magnitude };
    Ok(Quantity { nanos, format })
}

pub(super) fn parse_suffix(input: &str, suffix: &str) -> Result<(Scale, Format), QuantityError> {
    use Format::*;
    let decimal = |e| Ok((Scale::Decimal(e), DecimalSI));
    let binary = |p| Ok((Scale::Binary(p), BinarySI));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        _ => {
            let rest = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .ok_or_else(|| invalid(input, "unknown suffix"))?;
            let (neg, exp_digits) = match rest.as_bytes().first() {
                Some(b'-') => (true, rest.get(1..).unwrap_or("")),
                Some(b'+') => (false, rest.get(1..).unwrap_or("")),
                _ => (false, rest),
            };
            if exp_digits.is_empty() || !exp_digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid(input, "unknown suffix"));
            }
            let mut exp: i64 = 0;
            for b in exp_digits.bytes() {
                exp = (exp * 10 + i64::from(b - b'0')).min(EXPONENT_CLAMP);
            }
            Ok((
                Scale::Decimal(if neg { -exp } else { exp }),
                DecimalExponent,
            ))
        }
    }
}

/// Multiplies a big-endian decimal digit string by `factor`.
pub(super) fn mul_digits(digits: &[u8], factor: u64) -> Vec<u8> {
    if digits.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<u8> = Vec::with_capacity(digits.len() + 20);
    let mut carry: u128 = 0;
    for &d in digits.iter().rev() {
        let v = u128::from(d) * u128::from(factor) + carry;
        out.push((v % 10) as u8);
        carry = v / 10;
    }
    while carry > 0 {
        out.push((carry % 10) as u8);
        carry /= 10;
    }
    while out.len() > 1 && out.last() == Some(&0) {
        out.pop();
    }
    out.reverse();
    out
}

/// `digits × 10^k`, rounded up (in magnitude) to an integer; `None` on overflow.
/// `digits` has no leading zeros (empty means zero).
pub(super) fn to_nanos(digits: &[u8], k: i64) -> Option<u128> {
    if digits.is_empty() || digits == [0] {
        return Some(0);
    }
    let n = i64::try_from(digits.len()).ok()?;
    let parse = |ds: &[u8]| -> Option<u128> {
        ds.iter().try_fold(0u128, |acc, &d| {
            acc.checked_mul(10)?.checked_add(u128::from(d))
        })
    };
    if k >= 0 {
        if n.checked_add(k)? > 40 {
            return None;
        }
        let m = parse(digits)?;
        m.checked_mul(10u128.checked_pow(u32::try_from(k).ok()?)?)
    } else {
        let cut = n + k; // k is negative, no overflow
        if cut <= 0 {
            // Entirely below one nano-unit but non-zero: round up to one.
            return Some(1);
        }
        let cut = usize::try_from(cut).ok()?;
        let (high, low) = digits.split_at(cut);
        let h = parse(high)?;
        if low.iter().any(|&d| d != 0) {
            h.checked_add(1)
        } else {
            Some(h)
        }
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

impl TryFrom<&str> for Quantity {
    type Error = QuantityError;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        Quantity::parse(s)
    }
}

pub(super) const DECIMAL_SUFFIXES: [&str; 10] = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];
pub(super) const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

impl fmt::Display for Quantity {
    /// Kubernetes' canonical form (`Quantity.String()`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let sign = if self.nanos < 0 { "-" } else { "" };
        let magnitude = self.nanos.unsigned_abs();
        let nano = NANO.unsigned_abs();

        if self.format == Format::BinarySI
            && magnitude >= 1024 * nano
            && magnitude.is_multiple_of(nano)
        {
            let mut mantissa = magnitude / nano;
            let mut power = 0;
            while power < 6 && mantissa.is_multiple_of(1024) {
                mantissa /= 1024;
                power += 1;
            }
            let suffix = BINARY_SUFFIXES.get(power).copied().unwrap_or("");
            return write!(f, "{sign}{mantissa}{suffix}");
        }

        // Decimal: the largest exponent (a multiple of 3, from -9 to 18) with an integer mantissa.
        let mut mantissa = magnitude;
        let mut step = 0;
        while step < 9 && mantissa.is_multiple_of(1000) {
            mantissa /= 1000;
            step += 1;
        }
        if self.format == Format::DecimalExponent {
            let exponent = 3 * step as i32 - 9;
            if exponent == 0 {
                write!(f, "{sign}{mantissa}")
            } else {
                write!(f, "{sign}{mantissa}e{exponent}")
            }
        } else {
            let suffix = DECIMAL_SUFFIXES.get(step).copied().unwrap_or("");
            write!(f, "{sign}{mantissa}{suffix}")
        }
    }
}

impl fmt::Debug for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Quantity({self})")
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Hash for Quantity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.nanos.hash(state);
    }
}

impl Default for Quantity {
    fn default() -> Self {
        Quantity::ZERO
    }
}

impl Add for Quantity {
    type Output = Quantity;
    /// Saturating addition; see [`Quantity::checked_add`] for the format rule.
    fn add(self, rhs: Quantity) -> Quantity {
        self.saturating_add(rhs)
    }
}

impl Sub for Quantity {
    type Output = Quantity;
    /// Saturating subtraction; see [`Quantity::checked_add`] for the format rule.
    fn sub(self, rhs: Quantity) -> Quantity {
        self.saturating_sub(rhs)
    }
}

impl AddAssign for Quantity {
    fn add_assign(&mut self, rhs: Quantity) {
        *self = *self + rhs;
    }
}

impl SubAssign for Quantity {
    fn sub_assign(&mut self, rhs: Quantity) {
        *self = *self - rhs;
    }
}

impl Neg for Quantity {
    type Output = Quantity;
    fn neg(self) -> Quantity {
        Quantity {
            nanos: -self.nanos,
            format: self.format,
        }
    }
}

impl Sum for Quantity {
    fn sum<I: Iterator<Item = Quantity>>(iter: I) -> Quantity {
        iter.fold(Quantity::ZERO, |acc, q| acc + q)
    }
}

impl<'a> Sum<&'a Quantity> for Quantity {
    fn sum<I: Iterator<Item = &'a Quantity>>(iter: I) -> Quantity {
        iter.copied().sum()
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

pub(super) struct QuantityVisitor;

impl Visitor<'_> for QuantityVisitor {
    type Value = Quantity;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes quantity (a string such as \"500m\" or \"1Gi\", or a number)")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
        Quantity::parse(v).map_err(E::custom)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
        Ok(Quantity::from_units(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
        Ok(Quantity::from_nanos(
            i128::from(v) * NANO,
            Format::DecimalSI,
        ))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Quantity, E> {
        Quantity::parse(&v.to_string()).map_err(E::custom)
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Quantity, E> {
        Quantity::parse(&v.to_string()).map_err(E::custom)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Quantity, E> {
        if !v.is_finite() {
            return Err(E::custom(QuantityError::NotFinite {
                input: v.to_string(),
            }));
        }
        // `Display` for f64 is the shortest exact round-trip decimal, never in exponent form.
        Quantity::parse(&v.to_string()).map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(QuantityVisitor)
    }
}
