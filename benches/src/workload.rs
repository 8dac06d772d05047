//! Upstream Karpenter's scheduling-benchmark pods, as plain data.
//!
//! Upstream's `scheduling_benchmark_test.go` builds its pods with `makeDiversePods(count)`
//! (the `Scheduling{1…20000}` benchmarks) and `makePreferencePods(4000)` (the
//! `RespectPreferences` / `IgnorePreferences` benchmarks), drawing labels and resource requests
//! from a `math/rand` generator seeded with 42. This module reproduces the same pod sequence,
//! draw for draw, using [`GoRand`], and describes each pod as a [`PodDraw`]: its kind (which
//! fixes its constraints, see [`PodKind`]), its labels, its requests and, for the spread pods,
//! the independently drawn selector value. Turning a draw into a scheduler pod (namespace,
//! name, UID, the `testing/cluster: unspecified` label added by upstream's `test.Pod`,
//! creation order) is left to the caller.
//!
//! # Generator sharing
//!
//! Upstream uses **one package-level generator** for the whole test binary. Every benchmark
//! function (and every re-invocation of it during Go's `b.N` ramp-up) keeps consuming the same
//! stream, so the pods a benchmark sees depend on which benchmarks ran before it in that
//! process. A [`Workload`] likewise owns one generator and successive calls continue its
//! stream. Our benchmark reporter deliberately creates a **fresh** `Workload` (seed 42) for
//! every row, so each row is reproducible on its own; its pods therefore equal upstream's only
//! for a benchmark that is the first to draw in its process (for example
//! `go test -bench 'BenchmarkScheduling5000$'` with a single invocation), and otherwise match
//! upstream's distribution rather than its exact values.

use crate::gorand::GoRand;

/// Seed of upstream's package-level benchmark generator (`rand.NewSource(42)`).
pub const SEED: i64 = 42;

/// Values of the random labels (`randomLabelValue()`), indexed by `Intn(7)`.
pub const LABEL_VALUES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];

/// CPU requests in millicores (`randomCPU()`), indexed by `Intn(5)`.
pub const CPU_MILLIS: [i64; 5] = [100, 250, 500, 1000, 1500];

/// Memory requests in MiB (`randomMemory()`), indexed by `Intn(6)`.
pub const MEMORY_MIS: [i64; 6] = [100, 256, 512, 1024, 2048, 4096];

/// Label key of generic and spread pods (`randomLabels()`).
pub const LABEL_KEY: &str = "my-label";

/// Label key of the zonal self-affinity pods (`randomAffinityLabels()`), misspelled exactly
/// as upstream spells it.
pub const AFFINITY_LABEL_KEY: &str = "my-affininity";

/// Label key of the anti-affinity and preference pods.
pub const APP_LABEL_KEY: &str = "app";

/// Label value of the anti-affinity and preference pods.
pub const APP_LABEL_VALUE: &str = "nginx";

/// Well-known zone topology key.
pub const ZONE_KEY: &str = "topology.kubernetes.io/zone";

/// Well-known hostname topology key.
pub const HOSTNAME_KEY: &str = "kubernetes.io/hostname";

/// The zone the preference pods prefer (preferred node affinity, weight 1).
pub const PREFERRED_ZONE: &str = "test-zone-1";

/// Which upstream pod constructor produced a pod; it fixes the pod's constraints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PodKind {
    /// `makeGenericPods`: labels `{my-label: R}`, requests only, no constraints.
    Generic,
    /// `makeTopologySpreadPods(_, zone)`: labels `{my-label: R1}` and one topology spread
    /// constraint `{maxSkew: 1, topologyKey: topology.kubernetes.io/zone,
    /// whenUnsatisfiable: DoNotSchedule, labelSelector: matchLabels {my-label: R2}}` where R2 is
    /// [`PodDraw::spread_selector_value`] (drawn independently of R1).
    ZonalSpread,
    /// `makeTopologySpreadPods(_, hostname)`: as [`PodKind::ZonalSpread`] with topology key
    /// `kubernetes.io/hostname`.
    HostnameSpread,
    /// `makePodAffinityPods(_, zone)`: labels `{my-affininity: R}` and one required pod
    /// affinity term `{labelSelector: matchLabels {my-affininity: R},
    /// topologyKey: topology.kubernetes.io/zone}` (self-affinity: the selector is the pod's own
    /// label).
    ZonalSelfAffinity,
    /// `makePodAntiAffinityPods(_, hostname)`: labels `{app: nginx}` and one required pod
    /// anti-affinity term `{labelSelector: matchLabels {app: nginx},
    /// topologyKey: kubernetes.io/hostname}`, so every such pod needs a node of its own.
    HostnameAntiAffinity,
    /// `makePreferencePods`: labels `{app: nginx}`; a preferred node affinity (weight 1)
    /// `topology.kubernetes.io/zone In [test-zone-1]`; preferred pod anti-affinity terms, in
    /// this order, weight 10 `{matchLabels {app: nginx}, topologyKey: zone}` and weight 1
    /// `{matchLabels {app: nginx}, topologyKey: hostname}`.
    Preference,
}

impl PodKind {
    /// The topology key of the pod's spread constraint or (anti-)affinity term; `None` for
    /// generic pods and for preference pods (whose preferred terms use both keys).
    #[must_use]
    pub fn topology_key(self) -> Option<&'static str> {
        match self {
            Self::ZonalSpread | Self::ZonalSelfAffinity => Some(ZONE_KEY),
            Self::HostnameSpread | Self::HostnameAntiAffinity => Some(HOSTNAME_KEY),
            Self::Generic | Self::Preference => None,
        }
    }
}

/// One benchmark pod, as drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDraw {
    /// Position in the generated list (0-based). Upstream gives pods strictly increasing
    /// creation timestamps in this order, which the scheduler's queue uses as a tie-break.
    pub index: usize,
    /// The constructor that produced the pod; it determines the constraints.
    pub kind: PodKind,
    /// The pod's own labels (without `testing/cluster: unspecified`, which upstream's
    /// `test.Pod` adds to every pod).
    pub labels: Vec<(String, String)>,
    /// CPU request in millicores.
    pub cpu_milli: i64,
    /// Memory request in MiB (2^20 bytes).
    pub memory_mi: i64,
    /// For [`PodKind::ZonalSpread`] and [`PodKind::HostnameSpread`]: the value R2 of the spread
    /// constraint's selector `{my-label: R2}`. `None` for every other kind (the affinity
    /// selector repeats the pod's own label; the anti-affinity and preference selectors are
    /// `{app: nginx}`).
    pub spread_selector_value: Option<String>,
}

/// Upstream's benchmark pod generator: one shared `math/rand` stream seeded with 42.
///
/// Successive calls on the same `Workload` continue the stream, as upstream's package-level
/// generator does; see the [module documentation](self) for why the reporter uses a fresh
/// `Workload` per benchmark row.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The shared generator.
    rng: GoRand,
}

impl Default for Workload {
    fn default() -> Self {
        Self::new()
    }
}

impl Workload {
    /// A workload whose generator is in upstream's initial state (`rand.NewSource(42)`).
    #[must_use]
    pub fn new() -> Self {
        Self {
            rng: GoRand::new(SEED),
        }
    }

    /// Reproduces upstream's `makeDiversePods(count)`.
    ///
    /// With `k = count / 5`, the result is, in order: `k` generic pods, `k` zonal spread pods,
    /// `k` hostname spread pods, `k` zonal self-affinity pods, `k` hostname anti-affinity pods,
    /// then `count − 5k` more generic pods. Draws per pod, in upstream's evaluation order:
    /// generic R, C, M; spread R1 (label), R2 (selector), C, M; affinity R, C, M;
    /// anti-affinity C, M — where R is `Intn(7)` into [`LABEL_VALUES`], C is `Intn(5)` into
    /// [`CPU_MILLIS`] and M is `Intn(6)` into [`MEMORY_MIS`].
    pub fn diverse_pods(&mut self, count: usize) -> Vec<PodDraw> {
        let k = count / 5;
        let mut pods = Vec::with_capacity(count);
        self.push_generic(&mut pods, k);
        self.push_spread(&mut pods, k, PodKind::ZonalSpread);
        self.push_spread(&mut pods, k, PodKind::HostnameSpread);
        for _ in 0..k {
            let value = self.label_value();
            let (cpu_milli, memory_mi) = self.requests();
            pods.push(PodDraw {
                index: pods.len(),
                kind: PodKind::ZonalSelfAffinity,
                labels: vec![(AFFINITY_LABEL_KEY.to_owned(), value)],
                cpu_milli,
                memory_mi,
                spread_selector_value: None,
            });
        }
        for _ in 0..k {
            let (cpu_milli, memory_mi) = self.requests();
            pods.push(PodDraw {
                index: pods.len(),
                kind: PodKind::HostnameAntiAffinity,
                labels: app_labels(),
                cpu_milli,
                memory_mi,
                spread_selector_value: None,
            });
        }
        self.push_generic(&mut pods, count - 5 * k);
        pods
    }

    /// Reproduces upstream's `makePreferencePods(count)` (the benchmarks use 4000).
    ///
    /// Upstream builds one set of pod options and stamps out `count` copies (`test.Pods`), so
    /// the CPU and then the memory request are drawn **once** (C, M) and shared by all pods.
    /// Every pod is a [`PodKind::Preference`] pod labelled `{app: nginx}`.
    pub fn preference_pods(&mut self, count: usize) -> Vec<PodDraw> {
        let (cpu_milli, memory_mi) = self.requests();
        (0..count)
            .map(|index| PodDraw {
                index,
                kind: PodKind::Preference,
                labels: app_labels(),
                cpu_milli,
                memory_mi,
                spread_selector_value: None,
            })
            .collect()
    }

    /// `n` generic pods (`makeGenericPods`): draws R, C, M each.
    fn push_generic(&mut self, pods: &mut Vec<PodDraw>, n: usize) {
        for _ in 0..n {
            let value = self.label_value();
            let (cpu_milli, memory_mi) = self.requests();
            pods.push(PodDraw {
                index: pods.len(),
                kind: PodKind::Generic,
                labels: vec![(LABEL_KEY.to_owned(), value)],
                cpu_milli,
                memory_mi,
                spread_selector_value: None,
            });
        }
    }

    /// `n` spread pods (`makeTopologySpreadPods`): draws R1 (label), R2 (selector), C, M each.
    fn push_spread(&mut self, pods: &mut Vec<PodDraw>, n: usize, kind: PodKind) {
        for _ in 0..n {
            let value = self.label_value();
            let selector = self.label_value();
            let (cpu_milli, memory_mi) = self.requests();
            pods.push(PodDraw {
                index: pods.len(),
                kind,
                labels: vec![(LABEL_KEY.to_owned(), value)],
                cpu_milli,
                memory_mi,
                spread_selector_value: Some(selector),
            });
        }
    }

    /// `randomLabelValue()`: one `Intn(7)` draw.
    fn label_value(&mut self) -> String {
        pick(&mut self.rng, &LABEL_VALUES)
            .unwrap_or_default()
            .to_owned()
    }

    /// `randomCPU()` then `randomMemory()`: one `Intn(5)` and one `Intn(6)` draw, in that order.
    fn requests(&mut self) -> (i64, i64) {
        let cpu = pick(&mut self.rng, &CPU_MILLIS).unwrap_or_default();
        let memory = pick(&mut self.rng, &MEMORY_MIS).unwrap_or_default();
        (cpu, memory)
    }
}

/// `choices[Intn(len(choices))]`; `None` only for an empty table.
fn pick<T: Copy>(rng: &mut GoRand, choices: &[T]) -> Option<T> {
    choices.get(rng.intn(choices.len())).copied()
}

/// The `{app: nginx}` label set.
fn app_labels() -> Vec<(String, String)> {
    vec![(APP_LABEL_KEY.to_owned(), APP_LABEL_VALUE.to_owned())]
}

#[cfg(test)]
mod tests {
    //! Expected values were printed by a throwaway Go program that makes the same sequence of
    //! `Intn` calls on `rand.New(rand.NewSource(42))` (standard library `math/rand`).

    use super::*;

    type Row = (PodKind, &'static str, &'static str, i64, i64);

    /// `makeDiversePods(10)` on a fresh generator: (kind, label value, selector value or "",
    /// cpu millis, memory MiB).
    const DIVERSE_10: [Row; 10] = [
        (PodKind::Generic, "f", "", 500, 512),
        (PodKind::Generic, "b", "", 1000, 256),
        (PodKind::ZonalSpread, "g", "e", 1000, 256),
        (PodKind::ZonalSpread, "a", "d", 100, 2048),
        (PodKind::HostnameSpread, "f", "g", 500, 4096),
        (PodKind::HostnameSpread, "d", "f", 500, 100),
        (PodKind::ZonalSelfAffinity, "f", "", 100, 2048),
        (PodKind::ZonalSelfAffinity, "a", "", 500, 256),
        (PodKind::HostnameAntiAffinity, "nginx", "", 500, 4096),
        (PodKind::HostnameAntiAffinity, "nginx", "", 500, 512),
    ];

    /// `makeDiversePods(23)` on a fresh generator (k = 4, then 3 trailing generic pods).
    const DIVERSE_23: [Row; 23] = [
        (PodKind::Generic, "f", "", 500, 512),
        (PodKind::Generic, "b", "", 1000, 256),
        (PodKind::Generic, "g", "", 250, 512),
        (PodKind::Generic, "d", "", 1500, 4096),
        (PodKind::ZonalSpread, "c", "e", 500, 1024),
        (PodKind::ZonalSpread, "d", "g", 100, 512),
        (PodKind::ZonalSpread, "f", "a", 1500, 1024),
        (PodKind::ZonalSpread, "e", "a", 500, 256),
        (PodKind::HostnameSpread, "c", "g", 500, 512),
        (PodKind::HostnameSpread, "d", "d", 1500, 2048),
        (PodKind::HostnameSpread, "a", "e", 500, 4096),
        (PodKind::HostnameSpread, "e", "f", 1500, 512),
        (PodKind::ZonalSelfAffinity, "c", "", 500, 100),
        (PodKind::ZonalSelfAffinity, "g", "", 1500, 1024),
        (PodKind::ZonalSelfAffinity, "e", "", 500, 4096),
        (PodKind::ZonalSelfAffinity, "g", "", 500, 100),
        (PodKind::HostnameAntiAffinity, "nginx", "", 1000, 1024),
        (PodKind::HostnameAntiAffinity, "nginx", "", 250, 4096),
        (PodKind::HostnameAntiAffinity, "nginx", "", 1500, 100),
        (PodKind::HostnameAntiAffinity, "nginx", "", 250, 512),
        (PodKind::Generic, "d", "", 100, 512),
        (PodKind::Generic, "a", "", 250, 256),
        (PodKind::Generic, "g", "", 500, 100),
    ];

    /// Checksums of `makeDiversePods(n)` on a fresh generator, folding for each pod the bytes
    /// of `"<Kind>|<label value>|<selector value or empty>"`, then cpu, then memory.
    const DIVERSE_CHECKSUMS: [(usize, u64); 5] = [
        (1, 11_047_817_536_026_624_126),
        (4, 646_898_052_209_791_134),
        (23, 7_766_170_158_248_815_662),
        (1000, 18_307_458_916_253_193_587),
        (20_000, 11_547_150_324_673_200_978),
    ];

    fn row(p: &PodDraw) -> (PodKind, String, String, i64, i64) {
        let value = p.labels.first().map(|(_, v)| v.clone()).unwrap_or_default();
        let selector = p.spread_selector_value.clone().unwrap_or_default();
        (p.kind, value, selector, p.cpu_milli, p.memory_mi)
    }

    fn expected(rows: &[Row]) -> Vec<(PodKind, String, String, i64, i64)> {
        rows.iter()
            .map(|&(k, v, s, c, m)| (k, v.to_owned(), s.to_owned(), c, m))
            .collect()
    }

    fn checksum(pods: &[PodDraw]) -> u64 {
        let fold = |h: u64, v: u64| h.wrapping_mul(1_099_511_628_211) ^ v;
        let mut h: u64 = 14_695_981_039_346_656_037;
        for p in pods {
            let (kind, value, selector, cpu, memory) = row(p);
            for b in format!("{kind:?}|{value}|{selector}").bytes() {
                h = fold(h, u64::from(b));
            }
            h = fold(h, cpu as u64);
            h = fold(h, memory as u64);
        }
        h
    }

    #[test]
    fn diverse_10_has_upstream_shape() {
        let pods = Workload::new().diverse_pods(10);
        assert_eq!(pods.len(), 10);
        for (i, p) in pods.iter().enumerate() {
            assert_eq!(p.index, i);
            assert_eq!(p.labels.len(), 1);
            let (key, _) = &p.labels[0];
            let want_key = match p.kind {
                PodKind::Generic | PodKind::ZonalSpread | PodKind::HostnameSpread => LABEL_KEY,
                PodKind::ZonalSelfAffinity => AFFINITY_LABEL_KEY,
                PodKind::HostnameAntiAffinity | PodKind::Preference => APP_LABEL_KEY,
            };
            assert_eq!(key, want_key, "pod {i}");
            let is_spread = matches!(p.kind, PodKind::ZonalSpread | PodKind::HostnameSpread);
            assert_eq!(p.spread_selector_value.is_some(), is_spread, "pod {i}");
            assert!(CPU_MILLIS.contains(&p.cpu_milli));
            assert!(MEMORY_MIS.contains(&p.memory_mi));
        }
        let kinds: Vec<PodKind> = pods.iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            [
                PodKind::Generic,
                PodKind::Generic,
                PodKind::ZonalSpread,
                PodKind::ZonalSpread,
                PodKind::HostnameSpread,
                PodKind::HostnameSpread,
                PodKind::ZonalSelfAffinity,
                PodKind::ZonalSelfAffinity,
                PodKind::HostnameAntiAffinity,
                PodKind::HostnameAntiAffinity,
            ]
        );
        assert_eq!(pods[8].labels, [("app".to_owned(), "nginx".to_owned())]);
    }

    #[test]
    fn diverse_pods_match_go_draws() {
        let got: Vec<_> = Workload::new().diverse_pods(10).iter().map(row).collect();
        assert_eq!(got, expected(&DIVERSE_10));
        let got: Vec<_> = Workload::new().diverse_pods(23).iter().map(row).collect();
        assert_eq!(got, expected(&DIVERSE_23));
    }

    #[test]
    fn diverse_pod_checksums_match_go() {
        for (n, want) in DIVERSE_CHECKSUMS {
            let pods = Workload::new().diverse_pods(n);
            assert_eq!(pods.len(), n);
            assert_eq!(checksum(&pods), want, "diverse_pods({n})");
        }
    }

    #[test]
    fn small_counts_are_all_generic() {
        for n in 0..5 {
            let pods = Workload::new().diverse_pods(n);
            assert_eq!(pods.len(), n);
            assert!(pods.iter().all(|p| p.kind == PodKind::Generic));
        }
    }

    #[test]
    fn diverse_20000_has_upstream_group_sizes() {
        let pods = Workload::new().diverse_pods(20_000);
        let count = |k: PodKind| pods.iter().filter(|p| p.kind == k).count();
        assert_eq!(count(PodKind::Generic), 4000);
        assert_eq!(count(PodKind::ZonalSpread), 4000);
        assert_eq!(count(PodKind::HostnameSpread), 4000);
        assert_eq!(count(PodKind::ZonalSelfAffinity), 4000);
        assert_eq!(count(PodKind::HostnameAntiAffinity), 4000);
        // Every label value occurs (7 zonal and 7 hostname spread groups upstream).
        for v in LABEL_VALUES {
            assert!(
                pods.iter()
                    .any(|p| p.spread_selector_value.as_deref() == Some(v))
            );
        }
    }

    #[test]
    fn preference_pods_share_one_draw() {
        let pods = Workload::new().preference_pods(4000);
        assert_eq!(pods.len(), 4000);
        for (i, p) in pods.iter().enumerate() {
            assert_eq!(p.index, i);
            assert_eq!(p.kind, PodKind::Preference);
            assert_eq!(p.labels, app_labels());
            assert_eq!((p.cpu_milli, p.memory_mi), (100, 4096), "fresh generator");
            assert_eq!(p.spread_selector_value, None);
        }
    }

    #[test]
    fn calls_continue_the_shared_stream() {
        // Go: makeDiversePods(10) then makePreferencePods on the same generator.
        let mut w = Workload::new();
        let _ = w.diverse_pods(10);
        let pods = w.preference_pods(3);
        assert!(
            pods.iter()
                .all(|p| (p.cpu_milli, p.memory_mi) == (100, 100))
        );
        // A fresh workload starts over.
        assert_eq!(Workload::new().preference_pods(1)[0].memory_mi, 4096);
        assert_eq!(
            Workload::default().diverse_pods(3),
            Workload::new().diverse_pods(3)
        );
    }

    #[test]
    fn topology_keys_follow_kinds() {
        assert_eq!(PodKind::ZonalSpread.topology_key(), Some(ZONE_KEY));
        assert_eq!(PodKind::ZonalSelfAffinity.topology_key(), Some(ZONE_KEY));
        assert_eq!(PodKind::HostnameSpread.topology_key(), Some(HOSTNAME_KEY));
        assert_eq!(
            PodKind::HostnameAntiAffinity.topology_key(),
            Some(HOSTNAME_KEY)
        );
        assert_eq!(PodKind::Generic.topology_key(), None);
        assert_eq!(PodKind::Preference.topology_key(), None);
    }
}
