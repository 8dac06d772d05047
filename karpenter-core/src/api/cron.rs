//! Budget schedules: standard 5-field cron expressions and `@` macros, always in UTC.
//!
//! Upstream parses schedules with `robfig/cron`'s standard parser. This module checks a schedule
//! against that dialect (field bounds, names, `*`/`?`, ranges, steps, the messages it gives) and
//! then hands an equivalent, fully explicit pattern to `croner` to find the next hit, so that
//! croner's own extensions (`L`, `W`, `#`, 7 for Sunday, ...) never change the meaning.

use std::fmt::Write as _;

use croner::Cron;
use jiff::civil::DateTime;

/// Why a schedule is not a valid cron expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cron {schedule:?}: {message}")]
pub struct CronError {
    /// The schedule as written.
    pub schedule: String,
    /// What is wrong with it.
    pub message: String,
}

/// A parsed budget schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// `None` when some field matches no value at all, so the schedule never fires.
    cron: Option<Cron>,
}

struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
    /// Whether a `*`/`?` in this field is remembered (day-of-month and day-of-week, whose
    /// combination depends on it).
    star_matters: bool,
}

const MONTH_NAMES: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DOW_NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

const FIELDS: [FieldSpec; 5] = [
    FieldSpec {
        name: "minute",
        min: 0,
        max: 59,
        names: &[],
        star_matters: false,
    },
    FieldSpec {
        name: "hour",
        min: 0,
        max: 23,
        names: &[],
        star_matters: false,
    },
    FieldSpec {
        name: "day of month",
        min: 1,
        max: 31,
        names: &[],
        star_matters: true,
    },
    FieldSpec {
        name: "month",
        min: 1,
        max: 12,
        names: &MONTH_NAMES,
        star_matters: false,
    },
    FieldSpec {
        name: "day of week",
        min: 0,
        max: 6,
        names: &DOW_NAMES,
        star_matters: true,
    },
];

impl Schedule {
    /// Parses a schedule the way upstream does (`robfig/cron` standard parser, UTC): a macro
    /// (`@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`) or five
    /// fields `minute hour day-of-month month day-of-week`. `@every` is rejected: the CRD's
    /// pattern does not allow it.
    pub fn parse(schedule: &str) -> Result<Self, CronError> {
        let err = |message: String| CronError {
            schedule: schedule.to_string(),
            message,
        };
        let spec = schedule.trim();
        if spec.is_empty() {
            return Err(err("empty spec string".into()));
        }
        let expanded = if spec.starts_with('@') {
            match spec {
                "@yearly" | "@annually" => "0 0 1 1 *",
                "@monthly" => "0 0 1 * *",
                "@weekly" => "0 0 * * 0",
                "@daily" | "@midnight" => "0 0 * * *",
                "@hourly" => "0 * * * *",
                _ => return Err(err(format!("unrecognized descriptor: {spec}"))),
            }
        } else {
            spec
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != FIELDS.len() {
            return Err(err(format!(
                "expected exactly 5 fields, found {}: {expanded}",
                fields.len()
            )));
        }
        let mut canonical = String::from("0");
        let mut parsed = Vec::with_capacity(FIELDS.len());
        for (text, field) in fields.iter().zip(FIELDS.iter()) {
            parsed.push(canonical_field(text, field).map_err(&err)?);
        }
        let mut never = false;
        for p in &parsed {
            match p {
                Some(p) => {
                    canonical.push(' ');
                    canonical.push_str(&p.text);
                }
                None => never = true,
            }
        }
        // With a star day-of-week, only the days of month count: if none of them exists in any
        // listed month (`0 0 30 2 *`), the schedule never fires. Found here rather than by
        // letting croner search up to its year limit.
        if let [_, _, Some(dom), Some(month), Some(dow)] = parsed.as_slice() {
            let possible = (1..=12u32)
                .any(|m| month.has(m) && (1..=DAYS_IN_MONTH[(m - 1) as usize]).any(|d| dom.has(d)));
            if dow.star && !dom.star && !possible {
                never = true;
            }
        }
        if never {
            return Ok(Schedule { cron: None });
        }
        let parser = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Required)
            .year(croner::parser::Year::Disallowed)
            .build();
        let cron = parser.parse(&canonical).map_err(|e| err(format!("{e}")))?;
        Ok(Schedule { cron: Some(cron) })
    }

    /// The first hit strictly after `after` (whole seconds; sub-second parts of `after` are
    /// ignored), or `None` if the schedule never fires.
    pub fn next_after(&self, after: DateTime) -> Option<DateTime> {
        let cron = self.cron.as_ref()?;
        let start = after.with().subsec_nanosecond(0).build().unwrap_or(after);
        cron.find_next_occurrence(&start, false).ok()
    }
}

/// Longest length of each month (February in leap years).
const DAYS_IN_MONTH: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/// One checked field: its explicit form for croner and the values it matches.
struct ParsedField {
    text: String,
    values: u64,
    star: bool,
}

impl ParsedField {
    fn has(&self, v: u32) -> bool {
        v < 64 && self.values & (1u64 << v) != 0
    }
}

/// Checks one field in robfig's dialect and writes it as explicit `a-b/s` ranges (or `*` for a
/// day field containing a star, which switches day matching to "both must match"). `None` when
/// the field lists nothing at all (e.g. `,`), so it never matches.
fn canonical_field(text: &str, field: &FieldSpec) -> Result<Option<ParsedField>, String> {
    let mut out = String::new();
    let mut star = false;
    let mut values = 0u64;
    for range in text.split(',').filter(|r| !r.is_empty()) {
        let (lo, hi, step, is_star) = parse_range(range, field)?;
        star |= is_star;
        let mut v = lo;
        while v <= hi && v < 64 {
            values |= 1u64 << v;
            v = v.saturating_add(step.max(1));
        }
        if !out.is_empty() {
            out.push(',');
        }
        let _ = write!(out, "{lo}-{hi}/{step}");
    }
    if out.is_empty() {
        return Ok(None);
    }
    if star && field.star_matters {
        out = "*".into();
    }
    Ok(Some(ParsedField {
        text: out,
        values,
        star,
    }))
}

/// One range `*`, `?`, `n`, `a-b`, each optionally `/step`. Returns (low, high, step, star).
fn parse_range(expr: &str, field: &FieldSpec) -> Result<(u32, u32, u32, bool), String> {
    let mut range_and_step = expr.split('/');
    let range = range_and_step.next().unwrap_or("");
    let step_text = range_and_step.next();
    if range_and_step.next().is_some() {
        return Err(format!("too many slashes: {expr}"));
    }
    let bounds: Vec<&str> = range.split('-').collect();
    let single = bounds.len() == 1;
    let (mut lo, mut hi, mut star);
    match bounds.first().copied() {
        Some("*") | Some("?") => {
            lo = i64::from(field.min);
            hi = i64::from(field.max);
            star = true;
        }
        first => {
            lo = parse_value(first.unwrap_or(""), field)?;
            hi = match bounds.as_slice() {
                [_] => lo,
                [_, h] => parse_value(h, field)?,
                _ => return Err(format!("too many hyphens: {expr}")),
            };
            star = false;
        }
    }
    let step = match step_text {
        None => 1,
        Some(s) => {
            let step = parse_number(s)?;
            if single {
                hi = i64::from(field.max);
            }
            if step > 1 {
                star = false;
            }
            step
        }
    };
    if lo < i64::from(field.min) {
        return Err(format!(
            "beginning of range ({lo}) below minimum ({}): {expr}",
            field.min
        ));
    }
    if hi > i64::from(field.max) {
        return Err(format!(
            "end of range ({hi}) above maximum ({}): {expr}",
            field.max
        ));
    }
    if lo > hi {
        return Err(format!(
            "beginning of range ({lo}) beyond end of range ({hi}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    // lo/hi are within the field's u32 bounds now; clamp the step to the field's span.
    let span = i64::from(field.max) + 1;
    lo = lo.clamp(0, span);
    let to_u32 = |v: i64| u32::try_from(v.clamp(0, span)).unwrap_or(0);
    Ok((to_u32(lo), to_u32(hi), to_u32(step.min(span)), star))
}

fn parse_value(text: &str, field: &FieldSpec) -> Result<i64, String> {
    let lower = text.to_ascii_lowercase();
    if let Some(pos) = field.names.iter().position(|n| *n == lower) {
        let offset = i64::try_from(pos).unwrap_or(0);
        return Ok(i64::from(field.min) + offset);
    }
    parse_number(text).map_err(|e| format!("{e} ({})", field.name))
}

fn parse_number(text: &str) -> Result<i64, String> {
    let n: i64 = text
        .parse()
        .map_err(|_| format!("failed to parse int from {text}"))?;
    if n < 0 {
        return Err(format!("negative number ({n}) not allowed: {text}"));
    }
    Ok(n)
}

/// Whether `schedule` matches the CRD's pattern
/// `^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`
/// (note the alternation: the first branch is anchored only at the start, the second only at
/// the end; `.` does not match a newline).
pub fn matches_schedule_pattern(schedule: &str) -> bool {
    const MACROS: [&str; 7] = [
        "@annually",
        "@yearly",
        "@monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
    ];
    if MACROS.iter().any(|m| schedule.starts_with(m)) {
        return true;
    }
    // Second branch: some suffix splits into five non-empty newline-free segments separated by
    // single whitespace characters. Scan from the end, closing segments as early as possible.
    let is_space = |c: char| matches!(c, ' ' | '\t' | '\n' | '\x0c' | '\r');
    let mut closed = 0;
    let mut current = 0usize;
    for c in schedule.chars().rev() {
        if closed == 4 {
            if current >= 1 {
                return true;
            }
            if c == '\n' {
                return false;
            }
            current += 1;
            continue;
        }
        if current >= 1 && is_space(c) {
            closed += 1;
            current = 0;
        } else if c == '\n' {
            return false;
        } else {
            current += 1;
        }
    }
    closed == 4 && current >= 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dt(s: &str) -> DateTime {
        s.parse().unwrap_or_default()
    }

    fn next(schedule: &str, after: &str) -> Option<String> {
        Schedule::parse(schedule)
            .ok()?
            .next_after(dt(after))
            .map(|d| d.to_string())
    }

    #[test]
    fn robfig_dialect() {
        for good in [
            "* * * * *",
            "0 9 * * 1-5",
            "0 0 25 12 *",
            "30 6 * * SUN",
            "0 9 * * mon-fri",
            "0 22 * * sat,sun",
            "*/15 * ? * *",
            "5/10 * * * *",
            "@yearly",
            "@annually",
            "@monthly",
            "@weekly",
            "@daily",
            "@midnight",
            "@hourly",
            "0 0 1 jan,JUL *",
            "*/100 * * * *",
        ] {
            assert!(Schedule::parse(good).is_ok(), "{good} should parse");
        }
        for (bad, msg) in [
            (
                "0 0 * * tue-mon",
                "beginning of range (2) beyond end of range (1)",
            ),
            ("*", "expected exactly 5 fields"),
            ("* * * * ", "expected exactly 5 fields"),
            ("* * * * * *", "expected exactly 5 fields"),
            ("@wrongly", "unrecognized descriptor"),
            ("@every 1h", "unrecognized descriptor"),
            ("60 * * * *", "above maximum"),
            ("* 24 * * *", "above maximum"),
            ("* * 0 * *", "below minimum"),
            ("* * * 13 *", "above maximum"),
            ("* * * * 7", "above maximum"),
            ("*/0 * * * *", "step of range should be a positive number"),
            ("1-2-3 * * * *", "too many hyphens"),
            ("*/2/3 * * * *", "too many slashes"),
            ("x * * * *", "failed to parse int"),
            ("* * L * *", "failed to parse int"),
            ("* * * * 1#2", "failed to parse int"),
            ("", "empty spec string"),
        ] {
            match Schedule::parse(bad) {
                Ok(_) => panic!("{bad:?} should be rejected"),
                Err(e) => assert!(e.message.contains(msg), "{bad:?}: {e}"),
            }
        }
    }

    #[test]
    fn next_hits() {
        assert_eq!(
            next("* * * * *", "2000-06-15T12:30:30").as_deref(),
            Some("2000-06-15T12:31:00")
        );
        // Strictly after, at one-second resolution.
        assert_eq!(
            next("30 12 * * *", "2000-06-15T12:30:00").as_deref(),
            Some("2000-06-16T12:30:00")
        );
        assert_eq!(
            next("30 12 * * *", "2000-06-15T12:29:59.9").as_deref(),
            Some("2000-06-15T12:30:00")
        );
        assert_eq!(
            next("@weekly", "2024-01-03T00:00:00").as_deref(),
            Some("2024-01-07T00:00:00")
        );
        // Day of month OR day of week when neither is a star.
        assert_eq!(
            next("0 0 13 * 5", "2024-01-01T00:00:00").as_deref(),
            Some("2024-01-05T00:00:00")
        );
        // A star with a step > 1 is no longer a star: day of month OR day of week.
        assert_eq!(
            next("0 0 */2 * 1", "2024-01-01T00:00:00").as_deref(),
            Some("2024-01-03T00:00:00")
        );
        assert_eq!(
            next("0 0 * * 1", "2024-01-02T00:00:00").as_deref(),
            Some("2024-01-08T00:00:00")
        );
        // "5/10" means 5-59/10.
        assert_eq!(
            next("5/10 * * * *", "2024-01-01T00:06:00").as_deref(),
            Some("2024-01-01T00:15:00")
        );
        assert_eq!(
            next("0 0 1 1 *", "1000-01-01T00:00:00").as_deref(),
            Some("1001-01-01T00:00:00")
        );
    }

    #[test]
    fn impossible_dates_never_fire() {
        // A list of nothing never fires.
        assert!(
            Schedule::parse("0 0 , * *").is_ok_and(|s| s.next_after(dt("2024-01-01")).is_none())
        );
        // February 30th parses (upstream's parser accepts it) and has no next hit.
        for never in ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 30,31 feb ?"] {
            let s = Schedule::parse(never);
            assert!(s.is_ok_and(|s| s.cron.is_none()), "{never}");
        }
        // Possible, if rarely.
        assert_eq!(
            next("0 0 29 2 *", "2097-01-01T00:00:00").as_deref(),
            Some("2104-02-29T00:00:00")
        );
        assert_eq!(
            next("0 0 31 2,3 *", "2024-01-01T00:00:00").as_deref(),
            Some("2024-03-31T00:00:00")
        );
        // Day of week given: fires on those days (Mondays of February) even if the day of month
        // never exists.
        assert_eq!(
            next("0 0 30 2 1", "2024-01-01T00:00:00").as_deref(),
            Some("2024-02-05T00:00:00")
        );
    }

    #[test]
    fn crd_pattern() {
        for good in [
            "* * * * *",
            "0 9 * * 1-5",
            "@daily",
            "@hourly garbage",
            "a b c d e",
            "x  a b c d e",
            "a\nb c d e",
            "0 0 * * tue-mon",
        ] {
            assert!(matches_schedule_pattern(good), "{good:?}");
        }
        for bad in [
            "*",
            "* * * * ",
            "@every 1h",
            "@wrongly",
            "a b c d",
            "a b c d\n\ne",
            "",
        ] {
            assert!(!matches_schedule_pattern(bad), "{bad:?}");
        }
    }
}
