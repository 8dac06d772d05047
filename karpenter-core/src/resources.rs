//! Exact Kubernetes resource quantities and resource lists.
//!
//! A [`Quantity`] holds its value exactly, as a signed count of nano-units (`i128`), together with
//! the [`Format`] it was written in. Parsing accepts every form Kubernetes accepts (`500m`, `1.5`,
//! `2Gi`, `1e3`, `.5`, …), rounds values finer than a nano-unit up (away from zero) like
//! Kubernetes, and rejects values beyond the representable range instead of silently capping
//! them. Printing follows Kubernetes' canonical form (`Quantity.String()`), so `1024Mi` prints as
//! `1Gi` and `1.5` as `1500m`.
//!
//! Equality, ordering and hashing look at the value only: `1Gi == 1024Mi == 1073741824`.
//!
//! A [`ResourceList`] maps resource names (see [`names`]) to quantities, iterates in name order
//! and offers the arithmetic the scheduler needs ([`ResourceList::add`], [`ResourceList::sub`],
//! [`ResourceList::fits`], …).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::iter::Sum;
use std::ops::{Add, AddAssign, Neg, Sub, SubAssign};
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Well-known resource names.
pub mod names {
    /// CPU, in cores (`1`, `500m`).
    pub const CPU: &str = "cpu";
    /// Memory, in bytes (`1Gi`).
    pub const MEMORY: &str = "memory";
    /// Number of pods.
    pub const PODS: &str = "pods";
    /// Local ephemeral storage, in bytes.
    pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
    /// Number of nodes (used in NodePool limits).
    pub const NODES: &str = "nodes";
}

/// Nano-units per unit.
const NANO: i128 = 1_000_000_000;
/// The largest magnitude a quantity may hold, in nano-units. The range is symmetric so negation
/// never overflows.
const MAX_NANOS: i128 = i128::MAX;
/// Decimal exponents beyond this magnitude are clamped while parsing (the value then either
/// overflows or rounds to one nano-unit, exactly as with the unclamped exponent).
const EXPONENT_CLAMP: i64 = 1_000_000;

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
    nanos: i128,
    format: Format,
}

/// How the suffix scales the mantissa.
enum Scale {
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

fn combined_format(left: Quantity, right: Quantity) -> Format {
    if left.nanos == 0 {
        right.format
    } else {
        left.format
    }
}

/// `nanos / per`, rounded away from zero, saturated to `i64`.
fn scaled_round_up(nanos: i128, per: i128) -> i64 {
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

fn invalid(input: &str, reason: &'static str) -> QuantityError {
    QuantityError::Invalid {
        input: input.to_owned(),
        reason,
    }
}

fn parse_quantity(s: &str) -> Result<Quantity, QuantityError> {
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

fn parse_suffix(input: &str, suffix: &str) -> Result<(Scale, Format), QuantityError> {
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
fn mul_digits(digits: &[u8], factor: u64) -> Vec<u8> {
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
fn to_nanos(digits: &[u8], k: i64) -> Option<u128> {
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

const DECIMAL_SUFFIXES: [&str; 10] = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];
const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

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

struct QuantityVisitor;

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

/// A map from resource name to quantity, iterated in name order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ResourceList(BTreeMap<String, Quantity>);

impl ResourceList {
    /// An empty list.
    pub fn new() -> Self {
        ResourceList(BTreeMap::new())
    }

    /// The quantity of `name`, if present.
    pub fn get(&self, name: &str) -> Option<Quantity> {
        self.0.get(name).copied()
    }

    /// The quantity of `name`, or zero when absent.
    pub fn get_or_zero(&self, name: &str) -> Quantity {
        self.get(name).unwrap_or(Quantity::ZERO)
    }

    /// Sets `name` to `q`, replacing any previous value.
    pub fn insert(&mut self, name: impl Into<String>, q: Quantity) {
        self.0.insert(name.into(), q);
    }

    /// Removes `name`, returning its quantity.
    pub fn remove(&mut self, name: &str) -> Option<Quantity> {
        self.0.remove(name)
    }

    /// The entries, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Quantity)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// The resource names, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the list has no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `name` has an entry.
    pub fn contains_key(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// The per-resource sum over the union of both lists' names.
    pub fn add(&self, other: &ResourceList) -> ResourceList {
        let mut out = self.clone();
        out.add_assign(other);
        out
    }

    /// Adds `other` into `self`, per resource, over the union of names.
    pub fn add_assign(&mut self, other: &ResourceList) {
        for (name, q) in other.iter() {
            match self.0.get_mut(name) {
                Some(existing) => *existing += q,
                None => {
                    self.0.insert(name.to_owned(), q);
                }
            }
        }
    }

    /// `self - other` per resource, over the union of names (an absent entry counts as zero,
    /// so results may be negative).
    pub fn sub(&self, other: &ResourceList) -> ResourceList {
        let mut out = self.clone();
        for (name, q) in other.iter() {
            match out.0.get_mut(name) {
                Some(existing) => *existing -= q,
                None => {
                    out.0.insert(name.to_owned(), -q);
                }
            }
        }
        out
    }

    /// Whether `candidate` fits in `total` (Karpenter's `Fits`): false if any quantity of
    /// `total` is negative; otherwise every resource of `candidate` must be at most `total`'s
    /// (an absent entry of `total` counts as zero, so a zero request of an unknown resource
    /// fits and a non-zero one does not).
    pub fn fits(candidate: &ResourceList, total: &ResourceList) -> bool {
        if total.0.values().any(Quantity::is_negative) {
            return false;
        }
        candidate
            .iter()
            .all(|(name, q)| q <= total.get_or_zero(name))
    }

    /// The per-resource maximum over the union of all lists' names.
    pub fn max_per_key<'a>(lists: impl IntoIterator<Item = &'a ResourceList>) -> ResourceList {
        let mut out = ResourceList::new();
        for list in lists {
            for (name, q) in list.iter() {
                match out.0.get_mut(name) {
                    Some(existing) => *existing = Ord::max(*existing, q),
                    None => {
                        out.0.insert(name.to_owned(), q);
                    }
                }
            }
        }
        out
    }

    /// The per-resource minimum over the names present in every list; empty input gives an
    /// empty list.
    pub fn min_common<'a>(lists: impl IntoIterator<Item = &'a ResourceList>) -> ResourceList {
        let mut iter = lists.into_iter();
        let Some(first) = iter.next() else {
            return ResourceList::new();
        };
        let mut out = first.clone();
        for list in iter {
            out.0.retain(|name, existing| match list.get(name) {
                Some(q) => {
                    *existing = Ord::min(*existing, q);
                    true
                }
                None => false,
            });
        }
        out
    }

    /// Replaces negative quantities with zero.
    pub fn clamp_non_negative(&mut self) {
        for q in self.0.values_mut() {
            if q.is_negative() {
                *q = Quantity {
                    nanos: 0,
                    format: q.format,
                };
            }
        }
    }

    /// The name of the first resource (in name order) of `self` whose quantity is greater than
    /// its limit, considering only names present in `limits`; `None` when all are within limits.
    pub fn exceeds(&self, limits: &ResourceList) -> Option<String> {
        self.iter()
            .find(|(name, q)| limits.get(name).is_some_and(|limit| *q > limit))
            .map(|(name, _)| name.to_owned())
    }
}

impl fmt::Display for ResourceList {
    /// `{cpu: 1, memory: 1Gi}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (name, q)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{name}: {q}")?;
        }
        f.write_str("}")
    }
}

impl<K: Into<String>> FromIterator<(K, Quantity)> for ResourceList {
    fn from_iter<I: IntoIterator<Item = (K, Quantity)>>(iter: I) -> Self {
        ResourceList(iter.into_iter().map(|(k, q)| (k.into(), q)).collect())
    }
}

impl<K: Into<String>> Extend<(K, Quantity)> for ResourceList {
    fn extend<I: IntoIterator<Item = (K, Quantity)>>(&mut self, iter: I) {
        self.0.extend(iter.into_iter().map(|(k, q)| (k.into(), q)));
    }
}

type EntryFn = for<'a> fn((&'a String, &'a Quantity)) -> (&'a str, Quantity);

/// Iterator over a [`ResourceList`]'s entries in name order.
pub struct Iter<'a>(
    std::iter::Map<std::collections::btree_map::Iter<'a, String, Quantity>, EntryFn>,
);

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, Quantity);
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<'a> IntoIterator for &'a ResourceList {
    type Item = (&'a str, Quantity);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        fn entry<'b>((k, v): (&'b String, &'b Quantity)) -> (&'b str, Quantity) {
            (k.as_str(), *v)
        }
        Iter(self.0.iter().map(entry as EntryFn))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(s: &str) -> Quantity {
        match Quantity::parse(s) {
            Ok(v) => v,
            Err(e) => panic!("{s}: {e}"),
        }
    }

    fn rl(entries: &[(&str, &str)]) -> ResourceList {
        entries.iter().map(|(k, v)| (*k, q(v))).collect()
    }

    #[test]
    fn decimal_suffixes() {
        let cases: [(&str, i128); 12] = [
            ("1n", 1),
            ("1u", 1_000),
            ("1m", 1_000_000),
            ("1", NANO),
            ("1k", NANO * 1_000),
            ("1M", NANO * 1_000_000),
            ("1G", NANO * 1_000_000_000),
            ("1T", NANO * 1_000_000_000_000),
            ("1P", NANO * 1_000_000_000_000_000),
            ("1E", NANO * 1_000_000_000_000_000_000),
            ("500m", 500_000_000),
            ("-2", -2 * NANO),
        ];
        for (s, nanos) in cases {
            let v = q(s);
            assert_eq!(v.nanos(), nanos, "{s}");
            assert_eq!(v.format(), Format::DecimalSI, "{s}");
        }
    }

    #[test]
    fn binary_suffixes() {
        let cases: [(&str, i128); 7] = [
            ("1Ki", 1 << 10),
            ("1Mi", 1 << 20),
            ("1Gi", 1 << 30),
            ("1Ti", 1 << 40),
            ("1Pi", 1 << 50),
            ("1Ei", 1 << 60),
            ("1.5Gi", 3 << 29),
        ];
        for (s, units) in cases {
            let v = q(s);
            assert_eq!(v.nanos(), units * NANO, "{s}");
            assert_eq!(v.format(), Format::BinarySI, "{s}");
        }
        // 0.1Ki = 102.4 bytes exactly.
        assert_eq!(q("0.1Ki").nanos(), 102_400_000_000);
        // 1e-9 Ki = 1.024e-6 units = 1024 nanos... at finer precision rounds up.
        assert_eq!(q("0.000000001Ki").nanos(), 1024);
        assert_eq!(q("0.0000000000001Ki").nanos(), 1);
    }

    #[test]
    fn exponents() {
        assert_eq!(q("1e3"), q("1000"));
        assert_eq!(q("1E3"), q("1k"));
        assert_eq!(q("1.5E-2"), q("15m"));
        assert_eq!(q("2e+2"), q("200"));
        assert_eq!(q("1e3").format(), Format::DecimalExponent);
        assert_eq!(q("1e0").format(), Format::DecimalExponent);
        assert_eq!(q("0e99999999999999999999"), Quantity::ZERO);
        assert_eq!(q("1e-99999999999999999999").nanos(), 1);
    }

    #[test]
    fn decimal_point_forms() {
        assert_eq!(q(".5"), q("500m"));
        assert_eq!(q("5."), q("5"));
        assert_eq!(q("+5"), q("5"));
        assert_eq!(q("-.5").nanos(), -500_000_000);
        assert_eq!(q("0.000"), Quantity::ZERO);
        assert_eq!(q("00012.3400k"), q("12340"));
    }

    #[test]
    fn sub_nano_rounds_up_away_from_zero() {
        assert_eq!(q("0.1n").nanos(), 1);
        assert_eq!(q("1.0000000001").nanos(), NANO + 1);
        assert_eq!(q("-0.1n").nanos(), -1);
        assert_eq!(q("1.5n").nanos(), 2);
    }

    #[test]
    fn errors() {
        for bad in [
            "", " ", "1 ", " 1", "abc", "1x", "1KiB", "1kk", "1Mi2", "1e", "1e+", "1e1.5", "1..2",
            ".", "+", "-", "--1", "1ki", "1K", "e3", "1ee3", "1e3m", "1Ki3", "0x10", "1,000", "∞",
        ] {
            let err = Quantity::parse(bad);
            assert!(err.is_err(), "{bad:?} parsed as {err:?}");
        }
        assert_eq!(Quantity::parse(""), Err(QuantityError::Empty));
        let msg = Quantity::parse("12xyz").unwrap_err().to_string();
        assert!(msg.contains("12xyz"), "{msg}");
    }

    #[test]
    fn overflow_is_rejected() {
        // i128::MAX nanos is about 1.7e29 units.
        assert!(matches!(
            Quantity::parse("1e30"),
            Err(QuantityError::Overflow { .. })
        ));
        assert!(matches!(
            Quantity::parse("200000000000Ei"),
            Err(QuantityError::Overflow { .. })
        ));
        assert!(Quantity::parse(&"9".repeat(60)).is_err());
        assert!(Quantity::parse("100000000000E").is_ok());
        assert!(Quantity::parse("1e29").is_ok());
        let msg = Quantity::parse("1e30").unwrap_err().to_string();
        assert!(msg.contains("1e30"), "{msg}");
    }

    #[test]
    fn canonical_forms() {
        let cases = [
            ("1536Mi", "1536Mi"),
            ("1024Mi", "1Gi"),
            ("16Gi", "16Gi"),
            ("1.5", "1500m"),
            ("2000m", "2"),
            ("100M", "100M"),
            ("0.1", "100m"),
            ("1000k", "1M"),
            ("1000", "1k"),
            ("1e3", "1e3"),
            ("1.5e3", "1500"),
            ("0.5e0", "500e-3"),
            ("12e6", "12e6"),
            ("0", "0"),
            ("0Gi", "0"),
            ("-0", "0"),
            ("512Ki", "512Ki"),
            ("1023", "1023"),
            ("1Ki", "1Ki"),
            ("0.5Ki", "512"),
            ("1.5Ki", "1536"),
            ("0.1Ki", "102400m"),
            ("1025", "1025"),
            ("-1Gi", "-1Gi"),
            ("-1500m", "-1500m"),
            ("1n", "1n"),
            ("1u", "1u"),
            ("110", "110"),
            ("1E", "1E"),
            ("1000E", "1000E"),
            ("1024Ei", "1024Ei"),
            ("1Gi", "1Gi"),
            ("4096Mi", "4Gi"),
        ];
        for (input, canonical) in cases {
            assert_eq!(q(input).to_string(), canonical, "{input}");
        }
        assert_eq!(Quantity::from_bytes(1 << 30).to_string(), "1Gi");
        assert_eq!(Quantity::from_milli(1500).to_string(), "1500m");
        assert_eq!(Quantity::from_units(4).to_string(), "4");
        assert_eq!(Quantity::ZERO.to_string(), "0");
    }

    #[test]
    fn value_equality_and_hash() {
        use std::collections::BTreeSet;
        assert_eq!(q("1Gi"), q("1073741824"));
        assert_eq!(q("1Gi"), q("1024Mi"));
        assert!(q("1G") < q("1Gi"));
        let set: BTreeSet<Quantity> = [q("1Gi"), q("1024Mi"), q("1073741824")].into();
        assert_eq!(set.len(), 1);
    }

    #[test]
    fn milli_and_value_round_up() {
        assert_eq!(q("1").milli_value(), 1000);
        assert_eq!(q("1.0001").milli_value(), 1001);
        assert_eq!(q("1n").milli_value(), 1);
        assert_eq!(q("1n").value(), 1);
        assert_eq!(q("1.5").value(), 2);
        assert_eq!(q("-1.5").value(), -2);
        assert_eq!(q("2Gi").value(), 2 << 30);
        assert_eq!(q("1e29").value(), i64::MAX);
        assert_eq!(q("-1e29").milli_value(), i64::MIN);
        assert!((q("1.5").as_f64() - 1.5).abs() < 1e-12);
        assert!((q("-2Gi").as_f64() + 2147483648.0).abs() < 1e-3);
    }

    #[test]
    fn arithmetic_and_formats() {
        assert_eq!(q("1Gi") + q("512Mi"), q("1536Mi"));
        assert_eq!((q("1Gi") + q("512Mi")).to_string(), "1536Mi");
        // The left operand's format wins, unless it is zero.
        assert_eq!((q("1") + q("1Ki")).to_string(), "1025");
        assert_eq!((Quantity::ZERO + q("1Ki")).format(), Format::BinarySI);
        let total: Quantity = [q("1Gi"), q("1Gi")].into_iter().sum();
        assert_eq!(total.to_string(), "2Gi");
        assert_eq!(q("1") - q("1500m"), q("-500m"));
        assert_eq!(-q("1"), q("-1"));
        let mut a = q("1");
        a += q("1");
        a -= q("500m");
        assert_eq!(a, q("1.5"));
        let big = Quantity::from_nanos(i128::MAX, Format::DecimalSI);
        assert_eq!(big.checked_add(q("1n")), None);
        assert_eq!((big + q("1")).nanos(), i128::MAX);
        assert_eq!((-big - q("1")).nanos(), -i128::MAX);
        assert_eq!((-big).checked_sub(q("1n")), None);
        assert!(!q("1").is_zero());
        assert!(q("0m").is_zero());
        assert!(q("-1").is_negative());
        assert!(!q("0").is_negative());
    }

    #[test]
    fn serde_forms() {
        let v: Quantity = serde_json::from_str("\"1Gi\"").unwrap_or_default();
        assert_eq!(v, q("1Gi"));
        let v: Quantity = serde_json::from_str("110").unwrap_or_default();
        assert_eq!(v, q("110"));
        let v: Quantity = serde_json::from_str("0.5").unwrap_or_default();
        assert_eq!(v, q("500m"));
        let v: Quantity = serde_json::from_str("-3").unwrap_or_default();
        assert_eq!(v, q("-3"));
        assert!(serde_json::from_str::<Quantity>("\"1 Gi\"").is_err());
        assert!(serde_json::from_str::<Quantity>("true").is_err());
        assert_eq!(
            serde_json::to_string(&q("1024Mi")).ok().as_deref(),
            Some("\"1Gi\"")
        );

        let list: ResourceList =
            serde_saphyr::from_str("cpu: 0.5\nmemory: 1Gi\npods: 110\n").unwrap_or_default();
        assert_eq!(
            list,
            rl(&[("cpu", "500m"), ("memory", "1Gi"), ("pods", "110")])
        );
        assert_eq!(
            serde_json::to_string(&list).ok().as_deref(),
            Some(r#"{"cpu":"500m","memory":"1Gi","pods":"110"}"#)
        );
        let back: ResourceList =
            serde_json::from_str(r#"{"cpu":"500m","memory":"1Gi","pods":110}"#).unwrap_or_default();
        assert_eq!(back, list);
    }

    #[test]
    fn list_basics() {
        let mut l = ResourceList::new();
        assert!(l.is_empty());
        l.insert(names::MEMORY, q("1Gi"));
        l.insert(names::CPU, q("1"));
        assert_eq!(l.len(), 2);
        assert!(l.contains_key("cpu"));
        assert_eq!(l.keys().collect::<Vec<_>>(), ["cpu", "memory"]);
        assert_eq!(l.get("pods"), None);
        assert_eq!(l.get_or_zero("pods"), Quantity::ZERO);
        let pairs: Vec<(&str, Quantity)> = (&l).into_iter().collect();
        assert_eq!(pairs, [("cpu", q("1")), ("memory", q("1Gi"))]);
        assert_eq!(l.remove("cpu"), Some(q("1")));
        assert_eq!(l.to_string(), "{memory: 1Gi}");
    }

    #[test]
    fn list_arithmetic() {
        let a = rl(&[("cpu", "1"), ("memory", "1Gi")]);
        let b = rl(&[("cpu", "500m"), ("pods", "1")]);
        assert_eq!(
            a.add(&b),
            rl(&[("cpu", "1500m"), ("memory", "1Gi"), ("pods", "1")])
        );
        assert_eq!(
            a.sub(&b),
            rl(&[("cpu", "500m"), ("memory", "1Gi"), ("pods", "-1")])
        );
        let mut c = a.clone();
        c.add_assign(&b);
        assert_eq!(c, a.add(&b));
        let mut d = a.sub(&b);
        d.clamp_non_negative();
        assert_eq!(d, rl(&[("cpu", "500m"), ("memory", "1Gi"), ("pods", "0")]));
    }

    #[test]
    fn fits_semantics() {
        let total = rl(&[("cpu", "2"), ("memory", "4Gi")]);
        assert!(ResourceList::fits(&rl(&[("cpu", "2")]), &total));
        assert!(!ResourceList::fits(&rl(&[("cpu", "2001m")]), &total));
        assert!(ResourceList::fits(&ResourceList::new(), &total));
        // Unknown resource: zero fits, non-zero does not.
        assert!(ResourceList::fits(&rl(&[("nvidia.com/gpu", "0")]), &total));
        assert!(!ResourceList::fits(&rl(&[("nvidia.com/gpu", "1")]), &total));
        // Any negative total blocks everything, even an empty candidate.
        let negative = rl(&[("cpu", "2"), ("pods", "-1")]);
        assert!(!ResourceList::fits(&ResourceList::new(), &negative));
        assert!(!ResourceList::fits(&rl(&[("cpu", "1")]), &negative));
    }

    #[test]
    fn max_min_exceeds() {
        let a = rl(&[("cpu", "1"), ("memory", "4Gi")]);
        let b = rl(&[("cpu", "2"), ("pods", "10")]);
        assert_eq!(
            ResourceList::max_per_key([&a, &b]),
            rl(&[("cpu", "2"), ("memory", "4Gi"), ("pods", "10")])
        );
        assert_eq!(ResourceList::min_common([&a, &b]), rl(&[("cpu", "1")]));
        assert_eq!(ResourceList::min_common([&a]), a);
        assert_eq!(
            ResourceList::min_common(std::iter::empty::<&ResourceList>()),
            ResourceList::new()
        );
        assert_eq!(
            ResourceList::max_per_key(std::iter::empty::<&ResourceList>()),
            ResourceList::new()
        );

        let usage = rl(&[("cpu", "10"), ("memory", "1Gi"), ("pods", "5")]);
        assert_eq!(usage.exceeds(&rl(&[("memory", "2Gi")])), None);
        assert_eq!(usage.exceeds(&rl(&[("memory", "1Gi")])), None);
        assert_eq!(
            usage
                .exceeds(&rl(&[("pods", "1"), ("cpu", "1")]))
                .as_deref(),
            Some("cpu")
        );
        assert_eq!(usage.exceeds(&rl(&[("nodes", "0")])), None);
    }

    fn any_format() -> impl Strategy<Value = Format> {
        prop_oneof![
            Just(Format::DecimalSI),
            Just(Format::BinarySI),
            Just(Format::DecimalExponent)
        ]
    }

    fn any_quantity() -> impl Strategy<Value = Quantity> {
        let nanos = prop_oneof![
            any::<i64>().prop_map(i128::from),
            (any::<i32>(), 0u32..7).prop_map(|(m, p)| i128::from(m) * NANO * (1i128 << (10 * p))),
            (any::<i32>(), 0u32..28).prop_map(|(m, p)| i128::from(m) * 10i128.pow(p)),
            (-MAX_NANOS..=MAX_NANOS),
        ];
        (nanos, any_format()).prop_map(|(n, f)| Quantity::from_nanos(n, f))
    }

    fn quantity_string() -> impl Strategy<Value = String> {
        let suffix = prop_oneof![
            Just(String::new()),
            prop::sample::select(vec![
                "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"
            ])
            .prop_map(str::to_owned),
            (-20i32..20).prop_map(|e| format!("e{e}")),
        ];
        (
            prop::sample::select(vec!["", "+", "-"]),
            0u64..10_000_000,
            prop::option::of(0u64..1_000_000),
            suffix,
        )
            .prop_map(|(sign, int, frac, suffix)| match frac {
                Some(fr) => format!("{sign}{int}.{fr}{suffix}"),
                None => format!("{sign}{int}{suffix}"),
            })
    }

    proptest! {
        #[test]
        fn print_parse_round_trip(v in any_quantity()) {
            let printed = v.to_string();
            let parsed = Quantity::parse(&printed);
            prop_assert!(parsed.is_ok(), "{printed}: {parsed:?}");
            let parsed = parsed.unwrap_or_default();
            prop_assert_eq!(parsed, v);
            let reprinted = parsed.to_string();
            // Kubernetes prints an integer BinarySI value that no power of 1024 divides without a
            // suffix (`2000`), which then reads back as DecimalSI (`2k`). Everything else keeps
            // its string; that exception is a fixed point after one round.
            let binary_without_suffix = v.format() == Format::BinarySI
                && printed.bytes().all(|b| b.is_ascii_digit() || b == b'-');
            if !binary_without_suffix {
                prop_assert_eq!(&reprinted, &printed);
            }
            let again = Quantity::parse(&reprinted).unwrap_or_default();
            prop_assert_eq!(again, v);
            prop_assert_eq!(again.to_string(), reprinted);
        }

        #[test]
        fn parsed_strings_round_trip(s in quantity_string()) {
            let v = Quantity::parse(&s);
            prop_assert!(v.is_ok(), "{s}: {v:?}");
            let v = v.unwrap_or_default();
            let printed = v.to_string();
            let back = Quantity::parse(&printed).unwrap_or_default();
            prop_assert_eq!(back, v);
            prop_assert_eq!(back.to_string(), printed);
        }

        #[test]
        fn add_sub_inverse(a in any::<i64>(), b in any::<i64>(), fa in any_format(), fb in any_format()) {
            let x = Quantity::from_nanos(i128::from(a), fa);
            let y = Quantity::from_nanos(i128::from(b), fb);
            prop_assert_eq!((x + y) - y, x);
            prop_assert_eq!((x - y) + y, x);
            prop_assert_eq!(x.checked_add(y).and_then(|s| s.checked_sub(y)), Some(x));
            prop_assert_eq!(x + y, y + x);
            prop_assert_eq!(-(-x), x);
        }

        #[test]
        fn ordering_matches_value(a in any_quantity(), b in any_quantity()) {
            prop_assert_eq!(a.cmp(&b), a.nanos().cmp(&b.nanos()));
            prop_assert_eq!(a == b, a.nanos() == b.nanos());
        }

        #[test]
        fn fits_matches_definition(
            cand in prop::collection::btree_map("[a-d]", -5i64..10, 0..4),
            total in prop::collection::btree_map("[a-d]", -2i64..10, 0..4),
        ) {
            let c: ResourceList = cand.iter().map(|(k, v)| (k.clone(), Quantity::from_units(*v))).collect();
            let t: ResourceList = total.iter().map(|(k, v)| (k.clone(), Quantity::from_units(*v))).collect();
            let expected = total.values().all(|v| *v >= 0)
                && cand.iter().all(|(k, v)| *v <= total.get(k).copied().unwrap_or(0));
            prop_assert_eq!(ResourceList::fits(&c, &t), expected);
            // Whatever fits in the total fits in the total plus anything non-negative.
            if expected {
                let extra: ResourceList = [("a", Quantity::from_units(1))].into_iter().collect();
                prop_assert!(ResourceList::fits(&c, &t.add(&extra)));
            }
        }

        #[test]
        fn list_add_sub_inverse(
            a in prop::collection::btree_map("[a-d]", any::<i32>(), 0..4),
            b in prop::collection::btree_map("[a-d]", any::<i32>(), 0..4),
        ) {
            let a: ResourceList = a.iter().map(|(k, v)| (k.clone(), Quantity::from_milli(i64::from(*v)))).collect();
            let b: ResourceList = b.iter().map(|(k, v)| (k.clone(), Quantity::from_milli(i64::from(*v)))).collect();
            let round = a.add(&b).sub(&b);
            for (name, v) in round.iter() {
                prop_assert_eq!(v, a.get_or_zero(name));
            }
            prop_assert!(a.keys().all(|k| round.contains_key(k)));
        }
    }
}
