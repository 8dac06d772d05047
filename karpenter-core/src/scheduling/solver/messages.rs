//! Error and message text of the solver: pod errors, resource lists, filter explanations.

use super::*;

pub(super) fn pod_error(kind: PodErrorKind, message: String) -> PodError {
    PodError { kind, message }
}

pub(super) fn format_resources(list: &ResourceList) -> String {
    let parts: Vec<String> = list.iter().map(|(k, q)| format!("{k}={q}")).collect();
    format!("{{{}}}", parts.join(", "))
}

/// With BestEffort minValues: the achieved counts of keys whose minValues the survivors miss.
pub(super) fn min_values_relaxation(
    reqs: &Requirements,
    survivors: &super::TypeSet,
    solver: &Solver<'_>,
    t: usize,
) -> Option<BTreeMap<String, usize>> {
    if !reqs.has_min_values() {
        return None;
    }
    let tpl = &solver.templates[t];
    match reqs.satisfies_min_values(
        survivors
            .iter()
            .map(|i| tpl.instance_types[i as usize].requirements()),
    ) {
        Ok(_) => None,
        Err(e) => Some(e.achieved),
    }
}

pub(super) fn filter_error_message(
    s: &FilterStats,
    min_values: Option<&str>,
    reqs: &Requirements,
    total: &Res,
    index: &ResourceIndex,
) -> String {
    let mut shown = reqs.clone();
    for key in [labels::REGISTERED, labels::INITIALIZED, labels::HOSTNAME] {
        shown.remove(key);
    }
    let resources = dense_summary(index, total);
    let context = format!("requirements={shown}, resources={resources}");
    if let Some(m) = min_values {
        return format!("{m}, {context}");
    }
    let msg = if !s.requirements && !s.fits && !s.offering {
        "no instance type met the scheduling requirements or had enough resources or had a required offering".to_string()
    } else if !s.requirements && !s.fits {
        "no instance type met the scheduling requirements or had enough resources".to_string()
    } else if !s.requirements && !s.offering {
        "no instance type met the scheduling requirements or had a required offering".to_string()
    } else if !s.fits && !s.offering {
        "no instance type had enough resources or had a required offering".to_string()
    } else if !s.requirements {
        "no instance type met all requirements".to_string()
    } else if !s.fits {
        let cpu = total.first().copied().unwrap_or(0);
        if cpu >= 1_000_000_000 {
            "no instance type has enough resources (CPU request >= 1 Million, m vs M typo?)"
                .to_string()
        } else {
            "no instance type has enough resources".to_string()
        }
    } else if !s.offering {
        "no instance type has the required offering".to_string()
    } else if !s.requirements_and_fits {
        "no instance type which met the scheduling requirements had enough resources".to_string()
    } else if !s.requirements_and_offering {
        "no instance type which met the scheduling requirements had a required offering".to_string()
    } else if !s.fits_and_offering {
        "no instance type which had enough resources had a required offering".to_string()
    } else {
        "no instance type met the requirements/resources/offering tuple".to_string()
    };
    format!("{msg}, {context}")
}

fn dense_summary(index: &ResourceIndex, v: &Res) -> String {
    let parts: Vec<String> = (0..index.len())
        .filter(|&i| v[i] != 0)
        .map(|i| format!("{}={}", index.name(i), format_milli(v[i])))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

fn format_milli(m: i64) -> String {
    if m % 1000 == 0 {
        (m / 1000).to_string()
    } else {
        format!("{m}m")
    }
}
