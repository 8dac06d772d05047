//! The benchmark reporter's plumbing, shared by its row kinds (the reporter binary and
//! [`crate::cost`]): each row runs in a child process that prints one line of figures, tagged
//! by its kind; the parent reads the lines back and prints one table per kind.

use std::time::{Duration, Instant};

/// A row name split into its kind and numbers: `cost:1000:2` → (`cost`, [1000, 2]); an error
/// names the row when a part is not a number.
pub fn parse_row(row: &str) -> Result<(&str, Vec<u64>), String> {
    let mut parts = row.split(':');
    let kind = parts.next().unwrap_or_default();
    let numbers = parts
        .map(|p| {
            p.parse()
                .map_err(|_| format!("row {row:?}: {p:?} is not a number"))
        })
        .collect::<Result<Vec<u64>, _>>()?;
    if numbers.is_empty() {
        return Err(format!("row {row:?} is not KIND:N"));
    }
    Ok((kind, numbers))
}

/// A child's output line: `tag` and the figures, separated by spaces (a scheduling row has no
/// tag).
pub fn tagged_line(tag: &str, figures: &[String]) -> String {
    let mut line = tag.to_string();
    for f in figures {
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(f);
    }
    line
}

/// The figures of a child's line if it carries `tag` (`Some("")`-free: the text after
/// `"{tag} "`).
pub fn strip_tag<'a>(line: &'a str, tag: &str) -> Option<&'a str> {
    line.trim().strip_prefix(tag)?.strip_prefix(' ')
}

/// Exactly `N` whitespace-separated figures parsed as `T`, or `None`.
pub fn figures<T: std::str::FromStr + Copy, const N: usize>(text: &str) -> Option<[T; N]> {
    let parsed: Vec<T> = text
        .split_whitespace()
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    parsed.try_into().ok()
}

/// The process's peak resident memory (`VmHWM` of `/proc/self/status`) in KiB; 0 where it
/// cannot be read.
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// The CPU time the calling thread has run so far (the first field of
/// `/proc/thread-self/schedstat`), in nanoseconds; 0 where it cannot be read. Unlike wall-clock
/// time it does not grow while the thread waits for a CPU, so figures taken on a loaded machine
/// stay comparable.
pub fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// The fastest of a few runs of `f`: at least one, at most `max_runs` or about `budget`.
pub fn fastest<T>(max_runs: u32, budget: Duration, mut f: impl FnMut() -> T) -> Duration {
    let mut best = Duration::MAX;
    let start = Instant::now();
    let mut runs = 0;
    while runs < 1 || (runs < max_runs && start.elapsed() < budget) {
        let t = Instant::now();
        std::hint::black_box(f());
        best = best.min(t.elapsed());
        runs += 1;
    }
    best
}

/// Prints a table: Markdown, or columns right-aligned to their widest cell.
pub fn print_table(header: &[&str], lines: &[Vec<String>], markdown: bool) {
    if markdown {
        println!("| {} |", header.join(" | "));
        println!("|{}", " --- |".repeat(header.len()));
        for l in lines {
            println!("| {} |", l.join(" | "));
        }
        return;
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            lines
                .iter()
                .filter_map(|l| l.get(i))
                .map(|c| c.chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let row = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect::<Vec<_>>()
            .join("  ")
    };
    println!("{}", row(header.to_vec()));
    for l in lines {
        println!("{}", row(l.iter().map(String::as_str).collect()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_split_into_kind_and_numbers() {
        assert_eq!(parse_row("cost:1000:2"), Ok(("cost", vec![1000, 2])));
        assert_eq!(parse_row("diverse:5"), Ok(("diverse", vec![5])));
        assert!(parse_row("cost").unwrap_err().contains("KIND:N"));
        assert!(parse_row("cost:x").unwrap_err().contains("\"x\""));
    }

    #[test]
    fn tagged_lines_round_trip() {
        let line = tagged_line("K", &["1".to_string(), "2.5".to_string()]);
        assert_eq!(line, "K 1 2.5");
        let text = strip_tag(&line, "K").expect("tagged");
        assert_eq!(figures::<f64, 2>(text), Some([1.0, 2.5]));
        assert_eq!(figures::<f64, 3>(text), None);
        assert_eq!(strip_tag(&line, "C"), None);
        assert_eq!(tagged_line("", &["7".to_string()]), "7");
    }
}
