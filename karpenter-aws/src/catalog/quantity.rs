//! Small helpers that build core quantities from byte counts and milli-values, printed the way
//! the catalog has always printed them.

use karpenter_core::resources::{Format, Quantity};

/// 1 KiB.
#[cfg(test)]
pub(crate) const KI: i64 = 1 << 10;
/// 1 MiB.
pub(crate) const MI: i64 = 1 << 20;
/// 1 GiB.
#[cfg(test)]
pub(crate) const GI: i64 = 1 << 30;

/// Which suffix family a byte count prints with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Suffixes {
    /// `Ki`, `Mi`, `Gi`, `Ti` (the largest that divides exactly, else a plain integer).
    Binary,
    /// `k`, `M`, `G`, `T` (the largest that divides exactly, else a plain integer).
    Decimal,
}

/// `bytes` as a quantity printed with the preferred suffix family.
pub(crate) fn bytes(bytes: i64, suffixes: Suffixes) -> Quantity {
    match suffixes {
        Suffixes::Binary => Quantity::from_bytes(bytes),
        Suffixes::Decimal => Quantity::from_units(bytes),
    }
}

/// A milli-value (e.g. milli-cores): whole units print without suffix, else with `m`.
pub(crate) fn milli(value: i64) -> Quantity {
    Quantity::from_milli(value)
}

/// `mib` MiB, printed as `<n>Mi` (or a larger binary suffix when exact).
pub(crate) fn mebibytes(mib: i64) -> Quantity {
    Quantity::from_nanos(
        i128::from(mib) * i128::from(MI) * 1_000_000_000,
        Format::BinarySI,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(n: i64, s: Suffixes) -> String {
        bytes(n, s).to_string()
    }

    #[test]
    fn prints_the_largest_exact_suffix() {
        assert_eq!(b(20 * GI, Suffixes::Binary), "20Gi");
        assert_eq!(b(2 * GI, Suffixes::Binary), "2Gi");
        assert_eq!(b(100 * MI, Suffixes::Binary), "100Mi");
        assert_eq!(b(3072, Suffixes::Binary), "3Ki");
        assert_eq!(b(1536, Suffixes::Binary), "1536");
        // Below 1Ki a binary quantity prints in decimal form, as Kubernetes prints it.
        assert_eq!(b(1000, Suffixes::Binary), "1k");
        assert_eq!(b(7_500_000_000, Suffixes::Decimal), "7500M");
        assert_eq!(b(75_000_000_000, Suffixes::Decimal), "75G");
        assert_eq!(b(0, Suffixes::Decimal), "0");
        assert_eq!(b(1001, Suffixes::Decimal), "1001");
        assert_eq!(mebibytes(15155).to_string(), "15155Mi");
        assert_eq!(mebibytes(893).to_string(), "893Mi");
        assert_eq!(mebibytes(2048).to_string(), "2Gi");
        assert_eq!(bytes(KI, Suffixes::Binary), Quantity::parse("1Ki").unwrap());
    }

    #[test]
    fn prints_milli_values() {
        assert_eq!(milli(80).to_string(), "80m");
        assert_eq!(milli(2000).to_string(), "2");
        assert_eq!(milli(0).to_string(), "0");
    }
}
