//! Decisions that must be bit-identical to upstream where upstream is deterministic: the
//! in-flight NodeClaim order (Go's `sort.Slice` over a persistent list) and the pod queue's
//! tie-breaks. Expected placements are derived by hand (insertion sort) or from Go's
//! `sort.Slice` on the same keys (pdqsort, more than 12 claims).

use crate::labels;
use crate::model::{Pod, Timestamp};
use crate::resources::{Quantity, ResourceList};

use super::tests::pool;
use super::*;

fn pod(name: &str, milli_cpu: i64) -> Pod {
    let mut p = Pod::new("default", name);
    p.requests = [
        ("cpu", Quantity::from_milli(milli_cpu)),
        ("memory", Quantity::parse("100Mi").expect("quantity")),
    ]
    .into_iter()
    .collect::<ResourceList>();
    p
}

fn in_zone(mut p: Pod, zone: &str) -> Pod {
    p.node_selector
        .insert(labels::ZONE.to_string(), zone.to_string());
    p
}

fn solve_pods(pods: Vec<Pod>) -> Results {
    let input = SchedulingInput {
        node_pools: vec![pool("default")],
        pods,
        ..SchedulingInput::default()
    };
    let r = solve(&input, &SchedulerOptions::default());
    assert!(r.pod_errors.is_empty(), "{:?}", r.pod_errors);
    r
}

/// The claim holding `pod`, by its first pod (the one that created it).
fn claim_of<'r>(r: &'r Results, pod: &str) -> &'r str {
    let key = format!("default/{pod}");
    r.new_node_claims
        .iter()
        .find(|c| c.pods.contains(&key))
        .map(|c| c.pods[0].trim_start_matches("default/"))
        .unwrap_or_else(|| panic!("{pod} is on no claim"))
}

#[test]
fn equal_claims_keep_the_order_the_insertion_sort_left_them_in() {
    // Queue (cpu descending): a1, b1, a2, b2, any.
    //   a1 (zone-a) creates A.                list [A1]
    //   b1 (zone-b) cannot join A: B.         list [A1, B1]
    //   a2 (zone-a) joins A.                  list [A2, B1]
    //   b2: the sort moves B first; joins B.  list [B2, A2]  (sorted: no swap)
    //   any fits both: upstream takes B, the first of two claims with 2 pods each. Breaking
    //   the tie by creation order would pick A.
    let r = solve_pods(vec![
        in_zone(pod("a1", 4000), "zone-a"),
        in_zone(pod("b1", 3900), "zone-b"),
        in_zone(pod("a2", 1000), "zone-a"),
        in_zone(pod("b2", 900), "zone-b"),
        pod("any", 500),
    ]);
    assert_eq!(r.new_node_claims.len(), 2);
    assert_eq!(claim_of(&r, "a2"), "a1");
    assert_eq!(claim_of(&r, "b2"), "b1");
    assert_eq!(claim_of(&r, "any"), "b1");
}

#[test]
fn more_than_twelve_claims_follow_go_pdqsort() {
    // 14 pods of ~5 cpu need 14 claims (C0..C13, one pod each, in creation order); then four
    // 2-cpu pods, each fitting any claim that holds a single pod. Before each one upstream
    // sorts the list by pod count with Go's pdqsort (14 > 12 elements), which does not keep
    // ties in order. Go's sort.Slice on the same keys gives, after each placement:
    //   s0 -> C0; keys [2,1,..,1]          -> [6 12 2 3 4 5 8 13 1 9 10 11 7 0]
    //   s1 -> C6; sorted again              -> [8 7 2 3 4 5 1 13 12 9 10 11 6 0]
    //   s2 -> C8; sorted again              -> [1 10 2 3 4 5 12 13 7 9 11 8 6 0]
    //   s3 -> C1.
    // A creation-order tie-break would give C0, C1, C2, C3.
    let mut pods: Vec<Pod> = (0..14)
        .map(|i| pod(&format!("big-{i:02}"), 5000 - i))
        .collect();
    pods.extend((0..4).map(|i| pod(&format!("s{i}"), 2000 - i)));
    let r = solve_pods(pods);
    assert_eq!(r.new_node_claims.len(), 14);
    assert_eq!(claim_of(&r, "s0"), "big-00");
    assert_eq!(claim_of(&r, "s1"), "big-06");
    assert_eq!(claim_of(&r, "s2"), "big-08");
    assert_eq!(claim_of(&r, "s3"), "big-01");
}

#[test]
fn equal_pods_are_queued_by_creation_time_then_uid() {
    // Equal requests: creation time first, then the UID (not the name). Each pod needs its
    // own claim, created in queue order.
    let with = |name: &str, uid: &str, created: i64| {
        let mut p = pod(name, 5000);
        p.uid = uid.to_string();
        p.creation_timestamp = Timestamp::from_second(created).expect("timestamp");
        p
    };
    let r = solve_pods(vec![
        with("a", "uid-3", 100),
        with("b", "uid-1", 100),
        with("c", "uid-2", 100),
        with("d", "uid-9", 50),
    ]);
    let order: Vec<&str> = r
        .new_node_claims
        .iter()
        .map(|c| c.pods[0].as_str())
        .collect();
    assert_eq!(order, ["default/d", "default/b", "default/c", "default/a"]);
}
