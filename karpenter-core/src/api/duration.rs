//! Go-style durations as the `karpenter.sh/v1` API writes them (`720h`, `1h30m`, `30s`, `Never`).
//!
//! Parsing accepts Go's full `time.ParseDuration` syntax (signs, fractions, `ns`/`us`/`µs`/`ms`
//! units), exactly as upstream's JSON decoding does; the stricter patterns of the CRD
//! (`^([0-9]+(s|m|h))+$` and friends) are checked by validation, see
//! [`Duration::matches_api_pattern`]. The text is kept as written, so serialising gives back the
//! same string (upstream keeps the raw bytes of a `NillableDuration` for the same reason).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The value of a [`NillableDuration`] that disables the duration.
pub const NEVER: &str = "Never";

/// Why a duration string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// The string is empty (or only a sign).
    #[error("invalid duration {0:?}: empty")]
    Empty(String),
    /// A number was expected (digits or `.`).
    #[error("invalid duration {0:?}: expected a number")]
    ExpectedNumber(String),
    /// A number is not followed by a unit.
    #[error("invalid duration {0:?}: missing unit")]
    MissingUnit(String),
    /// The unit is not one of `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`.
    #[error("invalid duration {text:?}: unknown unit {unit:?}")]
    UnknownUnit {
        /// The whole duration string.
        text: String,
        /// The unit that is not known.
        unit: String,
    },
    /// The value does not fit in a signed 64-bit count of nanoseconds (about 292 years).
    #[error("invalid duration {0:?}: out of range")]
    Overflow(String),
}

/// A Go `time.Duration` as written in YAML: the original text and its length in nanoseconds.
///
/// Two durations are equal when they were written the same way (`1h` and `60m` differ as values of
/// this type; compare [`Duration::as_nanos`] for length equality).
///
/// ```
/// use karpenter_core::api::Duration;
///
/// let d: Duration = "1h30m".parse().unwrap();
/// assert_eq!(d.as_secs(), 5400);
/// assert_eq!(d.as_str(), "1h30m");
/// assert!(d.matches_api_pattern());
/// assert!(!"1.5h".parse::<Duration>().unwrap().matches_api_pattern());
/// assert_eq!(Duration::from_secs(3600).as_str(), "1h0m0s");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Duration {
    text: String,
    nanos: i64,
}

const NANOS_PER_SEC: i64 = 1_000_000_000;

impl Duration {
    /// Parses Go's duration syntax: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or `0`.
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        let nanos = parse_go_duration(text)?;
        Ok(Duration {
            text: text.to_string(),
            nanos,
        })
    }

    /// A duration of `nanos` nanoseconds, written the way Go's `Duration.String` prints it
    /// (`1h0m0s`, `1.5s`, `300ms`, `0s`).
    pub fn from_nanos(nanos: i64) -> Self {
        Duration {
            text: format_go_duration(nanos),
            nanos,
        }
    }

    /// A duration whose text is known to denote `nanos` (for built-in defaults).
    pub(crate) fn from_parts(text: &str, nanos: i64) -> Self {
        Duration {
            text: text.to_string(),
            nanos,
        }
    }

    /// A duration of `secs` seconds, written the way Go prints it (`3600` → `1h0m0s`). Values
    /// beyond Go's range saturate at the largest representable duration.
    pub fn from_secs(secs: u64) -> Self {
        let nanos = i64::try_from(secs)
            .ok()
            .and_then(|s| s.checked_mul(NANOS_PER_SEC))
            .unwrap_or(i64::MAX);
        Self::from_nanos(nanos)
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The length in nanoseconds (negative for negative durations).
    pub fn as_nanos(&self) -> i64 {
        self.nanos
    }

    /// The length in whole seconds, truncated toward zero.
    pub fn as_secs(&self) -> i64 {
        self.nanos / NANOS_PER_SEC
    }

    /// The length as a [`jiff::SignedDuration`].
    pub fn as_signed_duration(&self) -> jiff::SignedDuration {
        jiff::SignedDuration::from_nanos(self.nanos)
    }

    /// The length as a [`std::time::Duration`], or `None` if negative.
    pub fn to_std(&self) -> Option<std::time::Duration> {
        u64::try_from(self.nanos)
            .ok()
            .map(std::time::Duration::from_nanos)
    }

    /// Whether the text matches the CRD pattern used for `terminationGracePeriod` (and, with
    /// `Never`, for `expireAfter` and `consolidateAfter`): `^([0-9]+(s|m|h))+$`.
    pub fn matches_api_pattern(&self) -> bool {
        matches_units(&self.text, b"smh")
    }

    /// Whether the text matches the CRD pattern for a budget's `duration`, which allows hours and
    /// minutes only (and a trailing `0s`, because Go prints durations that way):
    /// `^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`.
    pub fn matches_budget_pattern(&self) -> bool {
        let body = self.text.strip_suffix("0s").unwrap_or(&self.text);
        budget_body(body) || budget_body(&self.text)
    }
}

/// `[0-9]+(h|m)` or `[0-9]+h[0-9]+m`.
fn budget_body(s: &str) -> bool {
    let parts = split_components(s);
    match parts.as_deref() {
        Some([(_, u)]) => *u == b'h' || *u == b'm',
        Some([(_, b'h'), (_, b'm')]) => true,
        _ => false,
    }
}

/// Splits `s` into `(digits, unit)` components where each unit is one ASCII letter; `None` if `s`
/// is empty or not of the form `([0-9]+[a-z])+`.
fn split_components(s: &str) -> Option<Vec<(&str, u8)>> {
    if s.is_empty() {
        return None;
    }
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let digits_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if i == digits_start || i >= bytes.len() || !bytes[i].is_ascii_alphabetic() {
            return None;
        }
        out.push((&s[start..i], bytes[i]));
        i += 1;
        start = i;
    }
    Some(out)
}

/// Whether `s` matches `^([0-9]+(u1|u2|...))+$` for the given single-letter units.
fn matches_units(s: &str, units: &[u8]) -> bool {
    split_components(s).is_some_and(|parts| parts.iter().all(|(_, u)| units.contains(u)))
}

impl FromStr for Duration {
    type Err = DurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Duration::parse(s)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Duration::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A duration that may be disabled with `Never` (upstream's `NillableDuration`).
///
/// ```
/// use karpenter_core::api::NillableDuration;
///
/// let never: NillableDuration = "Never".parse().unwrap();
/// assert!(never.is_never());
/// let d: NillableDuration = "720h".parse().unwrap();
/// assert_eq!(d.duration().map(|d| d.as_secs()), Some(720 * 3600));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NillableDuration {
    /// `Never`: the duration is disabled.
    Never,
    /// A duration.
    Duration(Duration),
}

impl NillableDuration {
    /// Parses `Never` or a Go duration.
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        if text == NEVER {
            Ok(NillableDuration::Never)
        } else {
            Duration::parse(text).map(NillableDuration::Duration)
        }
    }

    /// Whether this is `Never`.
    pub fn is_never(&self) -> bool {
        matches!(self, NillableDuration::Never)
    }

    /// The duration, or `None` for `Never`.
    pub fn duration(&self) -> Option<&Duration> {
        match self {
            NillableDuration::Never => None,
            NillableDuration::Duration(d) => Some(d),
        }
    }

    /// The text as written (`Never` or the duration's text).
    pub fn as_str(&self) -> &str {
        match self {
            NillableDuration::Never => NEVER,
            NillableDuration::Duration(d) => d.as_str(),
        }
    }

    /// Whether the text matches the CRD pattern `^(([0-9]+(s|m|h))+|Never)$`.
    pub fn matches_api_pattern(&self) -> bool {
        match self {
            NillableDuration::Never => true,
            NillableDuration::Duration(d) => d.matches_api_pattern(),
        }
    }
}

impl From<Duration> for NillableDuration {
    fn from(d: Duration) -> Self {
        NillableDuration::Duration(d)
    }
}

impl FromStr for NillableDuration {
    type Err = DurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NillableDuration::parse(s)
    }
}

impl fmt::Display for NillableDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for NillableDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for NillableDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        NillableDuration::parse(&text).map_err(serde::de::Error::custom)
    }
}

const LIMIT: u64 = 1 << 63;

/// Go's `time.ParseDuration`, re-stated: returns nanoseconds.
fn parse_go_duration(orig: &str) -> Result<i64, DurationError> {
    let mut s = orig;
    let mut neg = false;
    if let Some(rest) = s.strip_prefix('-') {
        neg = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(DurationError::Empty(orig.to_string()));
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        let first = s.as_bytes().first().copied().unwrap_or(b'x');
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(DurationError::ExpectedNumber(orig.to_string()));
        }
        // Integer part.
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let mut v: u64 = 0;
        for b in s[..int_len].bytes() {
            if v > LIMIT / 10 {
                return Err(DurationError::Overflow(orig.to_string()));
            }
            v = v * 10 + u64::from(b - b'0');
            if v > LIMIT {
                return Err(DurationError::Overflow(orig.to_string()));
            }
        }
        let pre = int_len > 0;
        s = &s[int_len..];
        // Fraction.
        let mut frac: u64 = 0;
        let mut scale: f64 = 1.0;
        let mut post = false;
        if let Some(rest) = s.strip_prefix('.') {
            s = rest;
            let frac_len = s.bytes().take_while(u8::is_ascii_digit).count();
            let mut overflow = false;
            for b in s[..frac_len].bytes() {
                if overflow {
                    continue;
                }
                if frac > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let y = frac * 10 + u64::from(b - b'0');
                if y > LIMIT {
                    overflow = true;
                    continue;
                }
                frac = y;
                scale *= 10.0;
            }
            post = frac_len > 0;
            s = &s[frac_len..];
        }
        if !pre && !post {
            return Err(DurationError::ExpectedNumber(orig.to_string()));
        }
        // Unit: everything up to the next digit or '.'.
        let unit_len = s
            .bytes()
            .take_while(|b| *b != b'.' && !b.is_ascii_digit())
            .count();
        if unit_len == 0 {
            return Err(DurationError::MissingUnit(orig.to_string()));
        }
        let unit_text = &s[..unit_len];
        s = &s[unit_len..];
        let unit: u64 = match unit_text {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => {
                return Err(DurationError::UnknownUnit {
                    text: orig.to_string(),
                    unit: unit_text.to_string(),
                });
            }
        };
        if v > LIMIT / unit {
            return Err(DurationError::Overflow(orig.to_string()));
        }
        v *= unit;
        if frac > 0 {
            // Go computes the fractional part in floating point; so do we, to agree on rounding.
            #[allow(
                clippy::cast_precision_loss,
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss
            )]
            let extra = (frac as f64 * (unit as f64 / scale)) as u64;
            v = v.saturating_add(extra);
            if v > LIMIT {
                return Err(DurationError::Overflow(orig.to_string()));
            }
        }
        total = total.saturating_add(v);
        if total > LIMIT {
            return Err(DurationError::Overflow(orig.to_string()));
        }
    }
    if neg {
        // total <= 2^63, so the negation fits.
        Ok(0i64.wrapping_sub_unsigned(total))
    } else {
        i64::try_from(total).map_err(|_| DurationError::Overflow(orig.to_string()))
    }
}

/// Go's `Duration.String`, re-stated.
fn format_go_duration(nanos: i64) -> String {
    let neg = nanos < 0;
    let u = nanos.unsigned_abs();
    let sign = if neg { "-" } else { "" };
    if u < 1_000_000_000 {
        if u == 0 {
            return "0s".to_string();
        }
        let (unit, scale, prec) = if u < 1_000 {
            ("ns", 1u64, 0usize)
        } else if u < 1_000_000 {
            ("\u{b5}s", 1_000, 3)
        } else {
            ("ms", 1_000_000, 6)
        };
        return format!("{sign}{}{unit}", fixed(u, scale, prec));
    }
    let secs_total = u / 1_000_000_000;
    let sub = u % 1_000_000_000;
    let hours = secs_total / 3600;
    let mins = (secs_total / 60) % 60;
    let secs = secs_total % 60;
    let sec_text = fixed(secs * 1_000_000_000 + sub, 1_000_000_000, 9);
    if hours > 0 {
        format!("{sign}{hours}h{mins}m{sec_text}s")
    } else if mins > 0 {
        format!("{sign}{mins}m{sec_text}s")
    } else {
        format!("{sign}{sec_text}s")
    }
}

/// `value / scale` with up to `prec` fractional digits, trailing zeros (and a bare `.`) removed.
fn fixed(value: u64, scale: u64, prec: usize) -> String {
    let int = value / scale;
    let frac = value % scale;
    if frac == 0 || prec == 0 {
        return int.to_string();
    }
    let digits = format!("{frac:0prec$}");
    format!("{int}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nanos(s: &str) -> i64 {
        match Duration::parse(s) {
            Ok(d) => d.as_nanos(),
            Err(e) => panic!("{s}: {e}"),
        }
    }

    #[test]
    fn go_syntax() {
        assert_eq!(nanos("0"), 0);
        assert_eq!(nanos("-0"), 0);
        assert_eq!(nanos("720h"), 720 * 3600 * NANOS_PER_SEC);
        assert_eq!(nanos("1h30m"), 5400 * NANOS_PER_SEC);
        assert_eq!(nanos("1h0m0s"), 3600 * NANOS_PER_SEC);
        assert_eq!(nanos("300ms"), 300_000_000);
        assert_eq!(nanos("1.5h"), 5400 * NANOS_PER_SEC);
        assert_eq!(nanos(".5s"), 500_000_000);
        assert_eq!(nanos("1.s"), NANOS_PER_SEC);
        assert_eq!(nanos("-1m"), -60 * NANOS_PER_SEC);
        assert_eq!(nanos("+2s"), 2 * NANOS_PER_SEC);
        assert_eq!(nanos("1us"), 1_000);
        assert_eq!(nanos("1\u{b5}s"), 1_000);
        assert_eq!(nanos("1\u{3bc}s"), 1_000);
        assert_eq!(nanos("3ns"), 3);
        assert_eq!(nanos("1h1m1s1ms1us1ns"), 3_661_001_001_001);
        assert_eq!(nanos("2562047h47m16.854775807s"), i64::MAX);
        assert_eq!(nanos("-2562047h47m16.854775808s"), i64::MIN);
    }

    #[test]
    fn go_syntax_errors() {
        for bad in [
            "",
            "-",
            "1",
            "s",
            "1x",
            "1hr",
            ".s",
            "1..5s",
            "Never",
            "1h 2m",
            "2562048h",
            "9223372036854775808ns",
        ] {
            assert!(Duration::parse(bad).is_err(), "{bad:?} should be rejected");
        }
        assert!(matches!(
            Duration::parse("1hr"),
            Err(DurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            Duration::parse("2562048h"),
            Err(DurationError::Overflow(_))
        ));
    }

    #[test]
    fn go_formatting() {
        assert_eq!(Duration::from_secs(0).as_str(), "0s");
        assert_eq!(Duration::from_secs(3600).as_str(), "1h0m0s");
        assert_eq!(Duration::from_secs(90).as_str(), "1m30s");
        assert_eq!(Duration::from_secs(30).as_str(), "30s");
        assert_eq!(Duration::from_nanos(1_500_000_000).as_str(), "1.5s");
        assert_eq!(Duration::from_nanos(300_000_000).as_str(), "300ms");
        assert_eq!(Duration::from_nanos(1_500).as_str(), "1.5\u{b5}s");
        assert_eq!(Duration::from_nanos(7).as_str(), "7ns");
        assert_eq!(Duration::from_nanos(-90 * NANOS_PER_SEC).as_str(), "-1m30s");
        for n in [
            0,
            1,
            999,
            1_000_001,
            61 * NANOS_PER_SEC + 5,
            i64::MAX,
            i64::MIN,
        ] {
            assert_eq!(nanos(Duration::from_nanos(n).as_str()), n, "{n}");
        }
    }

    #[test]
    fn api_patterns() {
        let ok = |s: &str| Duration::parse(s).map(|d| d.matches_api_pattern());
        assert_eq!(ok("30s"), Ok(true));
        assert_eq!(ok("1h30m5s"), Ok(true));
        assert_eq!(ok("1h0m0s"), Ok(true));
        assert_eq!(ok("1.5h"), Ok(false));
        assert_eq!(ok("300ms"), Ok(false));
        assert_eq!(ok("-1s"), Ok(false));
        assert_eq!(ok("0"), Ok(false));
        let budget = |s: &str| Duration::parse(s).map(|d| d.matches_budget_pattern());
        for good in ["8h", "20m", "2h20m", "8h0m0s", "20m0s", "1h0s"] {
            assert_eq!(budget(good), Ok(true), "{good}");
        }
        for bad in ["30s", "1h30m5s", "-20m", "20m1s", "1m2h", "1h2h", "0s"] {
            assert_eq!(budget(bad), Ok(false), "{bad}");
        }
        assert!(NillableDuration::parse("Never").is_ok_and(|d| d.matches_api_pattern()));
        assert!(NillableDuration::parse("never").is_err());
    }

    #[test]
    fn serde_keeps_text() {
        let d: NillableDuration =
            serde_json::from_str("\"1h0m\"").unwrap_or(NillableDuration::Never);
        assert_eq!(serde_json::to_string(&d).ok().as_deref(), Some("\"1h0m\""));
        let n: NillableDuration = serde_json::from_str("\"Never\"")
            .unwrap_or_else(|_| NillableDuration::Duration(Duration::from_secs(1)));
        assert!(n.is_never());
        assert!(serde_json::from_str::<Duration>("30").is_err());
    }
}
