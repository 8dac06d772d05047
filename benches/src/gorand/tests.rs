//! Reference vectors printed by a throwaway Go program using only the standard
//! library's `math/rand` (`rand.New(rand.NewSource(seed))`), go1.26.

use super::*;

/// Assorted draws made in sequence on one fresh generator: 6 `Uint32`, 6 `Int31`,
/// 6 `Float64` (as IEEE bits), `Perm(10)`, `Shuffle` of `0..10`, 4 `Intn(3e9)`,
/// 4 `Int63n(1e15)`, then one `Int63`.
struct Misc {
    uint32: [u32; 6],
    int31: [i32; 6],
    float64_bits: [u64; 6],
    perm10: [usize; 10],
    shuffle10: [usize; 10],
    intn_3e9: [usize; 4],
    int63n_1e15: [i64; 4],
    int63_after: i64,
}

/// The bounds of the `Intn` checksum runs (the last one, 2^30 + 1, rejects about half
/// of all `Int31` draws).
const CHECKSUM_BOUNDS: [usize; 6] = [7, 5, 6, 1 << 10, 1_000_000, (1 << 30) + 1];

/// The `n` of the `Shuffle` runs whose first 1000 swaps are folded into a checksum
/// (multiply-shift path with heavy rejection, its largest bound, and the `Int63n` path).
const SHUFFLE_HUGE_N: [usize; 3] = [(1 << 30) + 1, 2_147_483_647, 1 << 40];

/// Checksum fold shared with the Go program: `h = h * FNV_PRIME ^ v` from the FNV offset.
fn fold(h: u64, v: u64) -> u64 {
    h.wrapping_mul(1_099_511_628_211) ^ v
}

const FNV_OFFSET: u64 = 14_695_981_039_346_656_037;

// seed 42
const INT63_S42: [i64; 16] = [
    3440579354231278675,
    608747136543856411,
    5571782338101878760,
    1926012586526624009,
    404153945743547657,
    3534334367214237261,
    7497468244883513247,
    3545887102062614208,
    3532963341805492868,
    5961769557461764184,
    6784982874943501314,
    2010156224608899041,
    3335934666146214990,
    1118224062840270781,
    6124420007038740542,
    4299969443970870044,
];
const INTN_MIX_S42: [usize; 40] = [
    5, 2, 4, 1, 5, 0, 6, 4, 3, 3, 4, 2, 0, 3, 2, 3, 2, 5, 5, 2, 4, 0, 4, 3, 16, 45, 218, 743, 91,
    807, 910, 142, 880115, 732610, 939629, 532298, 633974, 997767, 516572, 996507,
];
const MISC_S42: Misc = Misc {
    uint32: [
        1602144611, 283469975, 2594563336, 896869500, 188198846, 1645802691,
    ],
    int31: [
        1745640357, 825591176, 822582128, 1388082643, 1579751929, 468025967,
    ],
    float64_bits: [
        4600187117312722746,
        4593400546154104543,
        4604156098458400186,
        4602069997738161526,
        4604591640859575991,
        4604623528259837730,
    ],
    perm10: [1, 2, 3, 5, 6, 8, 4, 0, 7, 9],
    shuffle10: [3, 8, 7, 0, 9, 6, 5, 2, 1, 4],
    intn_3e9: [635748408, 1764859219, 910038487, 2665436954],
    int63n_1e15: [
        490225919430754,
        959152108316618,
        317412587104192,
        639282066041812,
    ],
    int63_after: 5274380952544653919,
};
const INTN_CHECKSUMS_S42: [u64; 6] = [
    11763742417020245640,
    14329247061964636197,
    5617078860300352267,
    12781903498119153383,
    14896228767964691070,
    10217944636488363753,
];
const SHUFFLE_HUGE_CHECKSUMS_S42: [u64; 3] = [
    12605826504523158435,
    504512168635841952,
    11624504750182770039,
];
// seed 1
const INT63_S1: [i64; 16] = [
    5577006791947779410,
    8674665223082153551,
    6129484611666145821,
    4037200794235010051,
    3916589616287113937,
    6334824724549167320,
    605394647632969758,
    1443635317331776148,
    894385949183117216,
    2775422040480279449,
    4751997750760398084,
    7504504064263669287,
    1976235410884491574,
    3510942875414458836,
    2933568871211445515,
    4324745483838182873,
];
const INTN_MIX_S1: [usize; 40] = [
    6, 2, 1, 0, 6, 4, 3, 5, 1, 0, 4, 1, 2, 4, 3, 4, 3, 5, 5, 2, 5, 0, 2, 4, 127, 299, 47, 248, 54,
    1015, 821, 888, 7387, 66831, 315429, 625356, 341737, 960631, 111485, 515026,
];
const MISC_S1: Misc = Misc {
    uint32: [
        2596996162, 4039455774, 2854263694, 1879968118, 1823804162, 2949882636,
    ],
    int31: [
        140954425, 336122540, 208240456, 646203300, 1106410694, 1747278511,
    ],
    float64_bits: [
        4596887689864302969,
        4600528930221449785,
        4599401246619490775,
        4602118388441027371,
        4598770309909063430,
        4598951673579840655,
    ],
    perm10: [1, 6, 3, 7, 5, 2, 0, 8, 9, 4],
    shuffle10: [2, 1, 5, 7, 3, 9, 0, 4, 6, 8],
    intn_3e9: [2129038907, 2808658932, 1473387780, 2185383115],
    int63n_1e15: [
        765271833742716,
        949295715050020,
        779411109623071,
        890183311134652,
    ],
    int63_after: 4893789450120281907,
};
const INTN_CHECKSUMS_S1: [u64; 6] = [
    11039903926698875398,
    871141996911759266,
    597006650594557817,
    14579942572349153519,
    14435633444259213911,
    17295202487729005459,
];
const SHUFFLE_HUGE_CHECKSUMS_S1: [u64; 3] = [
    17665457135825115519,
    6479669985757785972,
    7485356531612024407,
];
// seed 0
const INT63_S0: [i64; 16] = [
    8717895732742165505,
    2259404117704393152,
    6050128673802995827,
    501233450539197794,
    3390393562759376202,
    2669985732393126063,
    1774932891286980153,
    6044372234677422456,
    8274930044578894929,
    1543572285742637646,
    2661732831099943416,
    8325060299420976708,
    7837839688282259259,
    2518412263346885298,
    5617773211005988520,
    2339563716805116249,
];
const INTN_MIX_S0: [usize; 40] = [
    5, 2, 0, 4, 0, 1, 5, 0, 3, 3, 3, 2, 4, 3, 2, 1, 5, 2, 4, 0, 5, 0, 2, 0, 129, 234, 992, 464,
    527, 44, 941, 996, 900545, 544764, 669078, 293393, 4200, 328110, 609149, 14514,
];
const MISC_S0: Misc = Misc {
    uint32: [
        4059586549, 1052117029, 2817310706, 233405013, 1578775030, 1243308993,
    ],
    int31: [
        413258767, 1407315077, 1926657288, 359390928, 619732968, 1938329147,
    ],
    float64_bits: [
        4605829359865864560,
        4598590393869755305,
        4603661326196649452,
        4598241080302290913,
        4605152684631154328,
        4580695708060252987,
    ],
    perm10: [9, 4, 7, 1, 8, 3, 2, 6, 0, 5],
    shuffle10: [5, 9, 4, 1, 8, 7, 2, 0, 3, 6],
    intn_3e9: [1833389635, 2167890979, 957544642, 5258714],
    int63n_1e15: [
        542851699319360,
        732843819909978,
        237345453186302,
        762441295307478,
    ],
    int63_after: 771642788862502430,
};
const INTN_CHECKSUMS_S0: [u64; 6] = [
    5114246552511517254,
    16196916385979726724,
    465355786312089628,
    1689279127585405456,
    16188625670691961278,
    9827269403679376299,
];
const SHUFFLE_HUGE_CHECKSUMS_S0: [u64; 3] = [
    16238646235807535665,
    615432501024098386,
    18197226201744510721,
];
// seed -5
const INT63_SNEG5: [i64; 16] = [
    1811683815564572222,
    4427849682616757295,
    188166459856594692,
    3720612653564574438,
    4799732044643461975,
    2765873542824974135,
    4897180953490631350,
    1310770051021197178,
    6469025828274238022,
    51492660285534080,
    9211347567138395036,
    3212546546673105703,
    4205722169772289563,
    8020531894525306388,
    4643197189205132396,
    6482585175170175349,
];
const INTN_MIX_SNEG5: [usize; 40] = [
    2, 0, 3, 0, 6, 4, 5, 6, 2, 4, 2, 0, 4, 3, 0, 3, 2, 2, 0, 1, 1, 1, 0, 4, 28, 225, 527, 14, 280,
    311, 689, 497, 682442, 498433, 879134, 897588, 850566, 461479, 215280, 27710,
];
const MISC_SNEG5: Misc = Misc {
    uint32: [
        843631017, 2061878183, 87621835, 1732545277, 2235049402, 1287960234,
    ],
    int31: [
        1140213793, 305187434, 1506187447, 11989069, 2144683982, 747979280,
    ],
    float64_bits: [
        4601885921030742423,
        4606007770223523786,
        4602709591800359553,
        4604505869130403540,
        4600380152868487806,
        4603470099537675927,
    ],
    perm10: [9, 7, 1, 4, 5, 2, 8, 6, 3, 0],
    shuffle10: [6, 8, 9, 5, 0, 4, 1, 7, 3, 2],
    intn_3e9: [796799946, 2507249597, 2466372671, 718628317],
    int63n_1e15: [
        266358024804008,
        332307196766634,
        671813947750250,
        54064881674457,
    ],
    int63_after: 5476055941999432123,
};
const INTN_CHECKSUMS_SNEG5: [u64; 6] = [
    1629585728337301333,
    11122715044762949522,
    10329146861499951635,
    7898443082569562823,
    6694161905491038419,
    11714544864047944158,
];
const SHUFFLE_HUGE_CHECKSUMS_SNEG5: [u64; 3] = [
    8430176648274366007,
    4143048820097049717,
    5582280204187723557,
];
const EXTREME_SEEDS: [i64; 6] = [
    2147483647,
    -2147483647,
    2147483648,
    -9223372036854775808,
    9223372036854775807,
    89482311,
];
const EXTREME_INT63_CHECKSUMS: [u64; 6] = [
    4828332895504732838,
    4828332895504732838,
    5147138002160388156,
    1343617435132528495,
    5147138002160388156,
    4828332895504732838,
];

struct SeedVectors {
    seed: i64,
    int63: [i64; 16],
    intn_mix: [usize; 40],
    misc: Misc,
    intn_checksums: [u64; 6],
    shuffle_huge_checksums: [u64; 3],
}

const SEEDS: [SeedVectors; 4] = [
    SeedVectors {
        seed: 42,
        int63: INT63_S42,
        intn_mix: INTN_MIX_S42,
        misc: MISC_S42,
        intn_checksums: INTN_CHECKSUMS_S42,
        shuffle_huge_checksums: SHUFFLE_HUGE_CHECKSUMS_S42,
    },
    SeedVectors {
        seed: 1,
        int63: INT63_S1,
        intn_mix: INTN_MIX_S1,
        misc: MISC_S1,
        intn_checksums: INTN_CHECKSUMS_S1,
        shuffle_huge_checksums: SHUFFLE_HUGE_CHECKSUMS_S1,
    },
    SeedVectors {
        seed: 0,
        int63: INT63_S0,
        intn_mix: INTN_MIX_S0,
        misc: MISC_S0,
        intn_checksums: INTN_CHECKSUMS_S0,
        shuffle_huge_checksums: SHUFFLE_HUGE_CHECKSUMS_S0,
    },
    SeedVectors {
        seed: -5,
        int63: INT63_SNEG5,
        intn_mix: INTN_MIX_SNEG5,
        misc: MISC_SNEG5,
        intn_checksums: INTN_CHECKSUMS_SNEG5,
        shuffle_huge_checksums: SHUFFLE_HUGE_CHECKSUMS_SNEG5,
    },
];

#[test]
fn int63_matches_go() {
    for v in &SEEDS {
        let mut r = GoRand::new(v.seed);
        let got: Vec<i64> = (0..16).map(|_| r.int63()).collect();
        assert_eq!(got, v.int63, "seed {}", v.seed);
    }
}

#[test]
fn intn_sequence_matches_go() {
    for v in &SEEDS {
        let mut r = GoRand::new(v.seed);
        let mut got = Vec::new();
        for n in [7, 5, 6, 1 << 10, 1_000_000] {
            for _ in 0..8 {
                got.push(r.intn(n));
            }
        }
        assert_eq!(got, v.intn_mix, "seed {}", v.seed);
    }
}

#[test]
fn assorted_draws_match_go() {
    for v in &SEEDS {
        let m = &v.misc;
        let mut r = GoRand::new(v.seed);
        let uint32: Vec<u32> = (0..6).map(|_| r.uint32()).collect();
        assert_eq!(uint32, m.uint32, "uint32, seed {}", v.seed);
        let int31: Vec<i32> = (0..6).map(|_| r.int31()).collect();
        assert_eq!(int31, m.int31, "int31, seed {}", v.seed);
        let floats: Vec<u64> = (0..6).map(|_| r.float64().to_bits()).collect();
        assert_eq!(floats, m.float64_bits, "float64, seed {}", v.seed);
        assert_eq!(r.perm(10), m.perm10, "perm, seed {}", v.seed);
        let mut items: Vec<usize> = (0..10).collect();
        r.shuffle_slice(&mut items);
        assert_eq!(items, m.shuffle10, "shuffle, seed {}", v.seed);
        let big: Vec<usize> = (0..4).map(|_| r.intn(3_000_000_000)).collect();
        assert_eq!(big, m.intn_3e9, "intn(3e9), seed {}", v.seed);
        let i63n: Vec<i64> = (0..4).map(|_| r.int63n(1_000_000_000_000_000)).collect();
        assert_eq!(i63n, m.int63n_1e15, "int63n, seed {}", v.seed);
        assert_eq!(r.int63(), m.int63_after, "stream position, seed {}", v.seed);
    }
}

#[test]
fn ten_thousand_intn_draws_match_go() {
    for v in &SEEDS {
        for (n, want) in CHECKSUM_BOUNDS.into_iter().zip(v.intn_checksums) {
            let mut r = GoRand::new(v.seed);
            let mut h = FNV_OFFSET;
            for _ in 0..10_000 {
                h = fold(h, r.intn(n) as u64);
            }
            assert_eq!(h, want, "seed {} n {n}", v.seed);
        }
    }
}

#[test]
fn shuffle_of_huge_lengths_matches_go() {
    for v in &SEEDS {
        for (n, want) in SHUFFLE_HUGE_N.into_iter().zip(v.shuffle_huge_checksums) {
            let mut r = GoRand::new(v.seed);
            let mut h = FNV_OFFSET;
            for i in (n - 1000..n).rev() {
                let j = r.shuffle_index(i);
                assert!(j <= i);
                h = fold(fold(h, i as u64), j as u64);
            }
            assert_eq!(h, want, "seed {} n {n}", v.seed);
        }
    }
}

#[test]
fn seed_reduction_matches_go() {
    for (seed, want) in EXTREME_SEEDS.into_iter().zip(EXTREME_INT63_CHECKSUMS) {
        let mut r = GoRand::new(seed);
        let mut h = FNV_OFFSET;
        for _ in 0..10_000 {
            h = fold(h, r.int63() as u64);
        }
        assert_eq!(h, want, "seed {seed}");
    }
    // 0, 2^31 - 1 and 89482311 are the same seed; so are seeds congruent mod 2^31 - 1.
    assert_eq!(GoRand::new(0), GoRand::new(INT32_MAX));
    assert_eq!(GoRand::new(0), GoRand::new(ZERO_SEED_REPLACEMENT));
    assert_eq!(GoRand::new(-5), GoRand::new(INT32_MAX - 5));
    assert_ne!(GoRand::new(1), GoRand::new(2));
}

#[test]
fn bounded_draws_stay_in_range() {
    let bounds = [
        1usize,
        2,
        3,
        7,
        64,
        100,
        1000,
        (1 << 31) - 1,
        1 << 31,
        3_000_000_000,
    ];
    for seed in [42, 7, -1] {
        let mut r = GoRand::new(seed);
        for n in bounds {
            for _ in 0..500 {
                assert!(r.intn(n) < n, "intn({n})");
            }
        }
        for n in [1i32, 2, 5, 1 << 30, i32::MAX] {
            for _ in 0..500 {
                assert!((0..n).contains(&r.int31n(n)), "int31n({n})");
            }
        }
        for n in [1i64, 3, 1 << 40, i64::MAX] {
            for _ in 0..500 {
                assert!((0..n).contains(&r.int63n(n)), "int63n({n})");
            }
        }
        for _ in 0..500 {
            let f = r.float64();
            assert!((0.0..1.0).contains(&f));
            assert!(r.int63() >= 0);
            assert!(r.int31() >= 0);
        }
    }
}

#[test]
fn perm_and_shuffle_are_permutations() {
    let mut r = GoRand::new(42);
    for n in [0usize, 1, 2, 3, 10, 257] {
        let mut p = r.perm(n);
        p.sort_unstable();
        assert_eq!(p, (0..n).collect::<Vec<_>>());
        let mut s: Vec<usize> = (0..n).collect();
        r.shuffle_slice(&mut s);
        s.sort_unstable();
        assert_eq!(s, (0..n).collect::<Vec<_>>());
    }
}

#[test]
fn non_positive_bounds_return_zero_without_drawing() {
    let mut r = GoRand::new(42);
    let before = r.clone();
    assert_eq!(r.intn(0), 0);
    assert_eq!(r.int31n(0), 0);
    assert_eq!(r.int31n(-3), 0);
    assert_eq!(r.int63n(0), 0);
    assert_eq!(r.int63n(i64::MIN), 0);
    assert_eq!(r, before);
    // Shuffling fewer than two items draws nothing either.
    r.shuffle(1, |_, _| unreachable!("no swap for a single item"));
    r.shuffle(0, |_, _| unreachable!("no swap for no items"));
    assert_eq!(r, before);
}

#[test]
fn clone_continues_the_same_stream() {
    let mut a = GoRand::new(42);
    let _ = a.int63();
    let mut b = a.clone();
    for _ in 0..1000 {
        assert_eq!(a.int63(), b.int63());
    }
    assert!(format!("{a:?}").starts_with("GoRand"));
}
