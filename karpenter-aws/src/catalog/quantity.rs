//! Small helpers that print byte counts and milli-values as Kubernetes quantity strings.

/// 1 KiB.
pub(crate) const KI: i64 = 1 << 10;
/// 1 MiB.
pub(crate) const MI: i64 = 1 << 20;
/// 1 GiB.
pub(crate) const GI: i64 = 1 << 30;

/// Which suffix family to prefer when printing a byte count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Suffixes {
    /// `Ki`, `Mi`, `Gi`, `Ti`.
    Binary,
    /// `k`, `M`, `G`, `T`.
    Decimal,
}

/// Prints `bytes` with the largest suffix of the preferred family that divides it exactly, else
/// as a plain integer (which is always a valid quantity).
pub(crate) fn bytes(bytes: i64, suffixes: Suffixes) -> String {
    if bytes == 0 {
        return "0".to_owned();
    }
    let table: [(i64, &str); 4] = match suffixes {
        Suffixes::Binary => [(GI << 10, "Ti"), (GI, "Gi"), (MI, "Mi"), (KI, "Ki")],
        Suffixes::Decimal => [
            (1_000_000_000_000, "T"),
            (1_000_000_000, "G"),
            (1_000_000, "M"),
            (1_000, "k"),
        ],
    };
    for (unit, suffix) in table {
        if bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// Prints a milli-value (e.g. milli-cores) canonically: whole units without suffix, else `m`.
pub(crate) fn milli(value: i64) -> String {
    if value % 1000 == 0 {
        (value / 1000).to_string()
    } else {
        format!("{value}m")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_the_largest_exact_suffix() {
        assert_eq!(bytes(20 * GI, Suffixes::Binary), "20Gi");
        assert_eq!(bytes(2 * GI, Suffixes::Binary), "2Gi");
        assert_eq!(bytes(100 * MI, Suffixes::Binary), "100Mi");
        assert_eq!(bytes(3072, Suffixes::Binary), "3Ki");
        assert_eq!(bytes(1536, Suffixes::Binary), "1536");
        assert_eq!(bytes(1000, Suffixes::Binary), "1000");
        assert_eq!(bytes(7_500_000_000, Suffixes::Decimal), "7500M");
        assert_eq!(bytes(75_000_000_000, Suffixes::Decimal), "75G");
        assert_eq!(bytes(0, Suffixes::Decimal), "0");
        assert_eq!(bytes(1001, Suffixes::Decimal), "1001");
    }

    #[test]
    fn prints_milli_values() {
        assert_eq!(milli(80), "80m");
        assert_eq!(milli(2000), "2");
        assert_eq!(milli(0), "0");
    }
}
