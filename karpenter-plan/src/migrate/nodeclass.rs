//! The EC2NodeClass half of the migration: a v1beta1 class rewritten as v1, and the NodePools'
//! kubelet settings moved onto their classes.

use super::*;

const NODECLASS_TOP: &[&str] = &["apiVersion", "kind", "metadata", "spec", "status"];
const NODECLASS_SPEC: &[&str] = &[
    "amiFamily",
    "amiSelectorTerms",
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "associatePublicIPAddress",
    "userData",
    "role",
    "instanceProfile",
    "tags",
    "blockDeviceMappings",
    "instanceStorePolicy",
    "detailedMonitoring",
    "metadataOptions",
    "context",
];
/// The AMI families v1 turns into an alias.
const ALIAS_FAMILIES: &[&str] = &[
    "AL2",
    "AL2023",
    "Bottlerocket",
    "Windows2019",
    "Windows2022",
];
/// v1beta1's metadataOptions defaults (v1's hop limit is 1).
fn v1beta1_metadata_defaults() -> [(&'static str, Value); 4] {
    [
        ("httpEndpoint", json!("enabled")),
        ("httpProtocolIPv6", json!("disabled")),
        ("httpPutResponseHopLimit", json!(2)),
        ("httpTokens", json!("required")),
    ]
}

/// A v1beta1 EC2NodeClass as v1.
pub(super) fn nodeclass(run: &mut Run, cx: &Ctx<'_>, input: &Value) -> Option<Value> {
    let errors_before = run.errors.len();
    let top = as_map(run, cx, "", Some(input))?;
    run.known_fields(cx, "", top, NODECLASS_TOP);
    let mut out = top.clone();
    out.insert("apiVersion".into(), json!(AWS_V1));
    run.change(cx, "apiVersion", format!("{AWS_V1BETA1} -> {AWS_V1}"));
    if out.remove("status").is_some() {
        run.change(cx, "status", "dropped: the controller writes the status");
    }
    let spec_in = as_map(run, cx, "spec", input.get("spec"))
        .cloned()
        .unwrap_or_default();
    run.known_fields(cx, "spec", &spec_in, NODECLASS_SPEC);
    let mut spec = spec_in.clone();
    let terms = spec_in
        .get("amiSelectorTerms")
        .and_then(Value::as_array)
        .filter(|t| !t.is_empty());
    let alias_version = input
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .and_then(|a| a.get(ALIAS_VERSION_ANNOTATION))
        .and_then(Value::as_str)
        .unwrap_or("latest")
        .to_string();
    match str_field(run, cx, "spec.amiFamily", spec_in.get("amiFamily")) {
        Some(family) if ALIAS_FAMILIES.contains(&family) => {
            if terms.is_none() {
                let alias = format!("{}@{alias_version}", family.to_lowercase());
                spec.remove("amiFamily");
                spec.insert("amiSelectorTerms".into(), json!([{ "alias": alias }]));
                run.change(
                    cx,
                    "spec.amiFamily",
                    format!(
                        "{family} without amiSelectorTerms -> amiSelectorTerms [{{alias: {alias}}}] \
                         (v1 requires amiSelectorTerms; the alias picks the same EKS-optimized \
                         AMIs and implies the family)"
                    ),
                );
            } else {
                run.change(
                    cx,
                    "spec.amiFamily",
                    format!("kept {family}: amiSelectorTerms choose the AMIs, the family bootstraps them"),
                );
            }
        }
        Some("Ubuntu") => {
            if terms.is_none() {
                run.error(
                    cx,
                    "spec.amiFamily",
                    "Ubuntu is not an AMI family in v1 and has no alias: add amiSelectorTerms \
                     choosing your Ubuntu AMIs (they then bootstrap as AL2, whose user data \
                     Ubuntu shares)",
                );
            } else {
                spec.insert("amiFamily".into(), json!("AL2"));
                run.change(
                    cx,
                    "spec.amiFamily",
                    "Ubuntu -> AL2: v1 dropped Ubuntu; AL2's user data format is Ubuntu's, and \
                     the amiSelectorTerms keep choosing the Ubuntu AMIs",
                );
                if spec_in.get("blockDeviceMappings").is_none() {
                    spec.insert(
                        "blockDeviceMappings".into(),
                        json!([{
                            "deviceName": "/dev/sda1",
                            "rootVolume": true,
                            "ebs": {"encrypted": true, "volumeType": "gp3", "volumeSize": "20Gi"}
                        }]),
                    );
                    run.change(
                        cx,
                        "spec.blockDeviceMappings",
                        "set to Ubuntu's root volume (/dev/sda1, 20Gi gp3, encrypted), which AL2's \
                         default (/dev/xvda) would not be",
                    );
                }
            }
        }
        Some("Custom") => run.change(
            cx,
            "spec.amiFamily",
            "kept Custom: in v1 your user data must register the node with the taint \
             karpenter.sh/unregistered:NoExecute",
        ),
        Some(other) => run.error(
            cx,
            "spec.amiFamily",
            format!(
                "Unsupported value: {other:?}: v1beta1 allows AL2, AL2023, Bottlerocket, Ubuntu, \
                 Custom, Windows2019, Windows2022"
            ),
        ),
        None => run.error(cx, "spec.amiFamily", "required in v1beta1"),
    }
    if let Some(Value::Object(meta)) = out.get_mut("metadata")
        && let Some(Value::Object(annotations)) = meta.get_mut("annotations")
        && annotations.remove(ALIAS_VERSION_ANNOTATION).is_some()
    {
        run.change(
            cx,
            &format!("metadata.annotations[{ALIAS_VERSION_ANNOTATION}]"),
            "dropped: the version is in the alias",
        );
    }
    let mut metadata = match spec_in.get("metadataOptions") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => {
            run.error(cx, "spec.metadataOptions", "must be an object");
            Map::new()
        }
    };
    let mut filled = Vec::new();
    for (key, default) in v1beta1_metadata_defaults() {
        if !metadata.contains_key(key) {
            metadata.insert(key.to_string(), default);
            filled.push(key);
        }
    }
    if !filled.is_empty() {
        run.change(
            cx,
            "spec.metadataOptions",
            format!(
                "{} written with v1beta1's defaults (enabled, disabled, hop limit 2, required): \
                 v1's default hop limit is 1, which would cut pods without hostNetwork off IMDS",
                filled.join(", ")
            ),
        );
    }
    spec.insert("metadataOptions".into(), Value::Object(metadata));
    out.insert("spec".into(), Value::Object(spec));
    if run.errors.len() > errors_before {
        return None;
    }
    Some(Value::Object(out))
}

/// Moves every NodePool's kubelet to its class; NodePools sharing a class with different
/// kubelets get a class each.
pub(super) fn move_kubelets(run: &mut Run, objects: &mut Vec<Migrated>, moves: &[KubeletMove]) {
    let mut by_class: BTreeMap<&str, Vec<&KubeletMove>> = BTreeMap::new();
    for m in moves {
        by_class.entry(m.class.as_str()).or_default().push(m);
    }
    let class_index = |objects: &[Migrated], name: &str| {
        objects.iter().position(|o| {
            o.value.get("apiVersion").and_then(Value::as_str) == Some(AWS_V1)
                && o.value.get("kind").and_then(Value::as_str) == Some(EC2NODECLASS)
                && name_of(&o.value) == name
        })
    };
    let mut taken: BTreeSet<String> = objects
        .iter()
        .filter(|o| o.value.get("kind").and_then(Value::as_str) == Some(EC2NODECLASS))
        .map(|o| name_of(&o.value))
        .collect();
    // Classes created for NodePools, inserted after the class they copy once every index into
    // `objects` is used.
    let mut created: Vec<(usize, Migrated)> = Vec::new();
    for (class, pools) in by_class {
        let with: Vec<&&KubeletMove> = pools.iter().filter(|m| m.kubelet.is_some()).collect();
        if with.is_empty() {
            continue;
        }
        let Some(ci) = class_index(objects, class) else {
            for m in with {
                let cx = Ctx {
                    origin: &m.origin,
                    object: &m.object,
                };
                run.error(
                    &cx,
                    "spec.template.spec.kubelet",
                    format!(
                        "v1 keeps the kubelet in the EC2NodeClass, and EC2NodeClass {class} is \
                         not among the inputs: add its manifest to -f"
                    ),
                );
            }
            continue;
        };
        let existing = objects[ci].value.pointer("/spec/kubelet").cloned();
        let first = pools[0].kubelet.as_ref();
        let agree = pools.iter().all(|m| m.kubelet.as_ref() == first)
            && (existing.is_none() || existing.as_ref() == first);
        let class_cx_origin = objects[ci].origin.clone();
        let class_object = objects[ci].object.clone();
        if agree {
            // Every NodePool of the class has the same kubelet.
            let kubelet = with[0].kubelet.clone().unwrap_or(Value::Null);
            set_kubelet(&mut objects[ci].value, kubelet);
            let names: Vec<&str> = pools.iter().map(|m| m.pool_name.as_str()).collect();
            for m in &with {
                let cx = Ctx {
                    origin: &m.origin,
                    object: &m.object,
                };
                run.change(
                    &cx,
                    "spec.template.spec.kubelet",
                    format!("moved to EC2NodeClass {class} spec.kubelet (v1 keeps it there)"),
                );
            }
            let cx = Ctx {
                origin: &class_cx_origin,
                object: &class_object,
            };
            run.change(
                &cx,
                "spec.kubelet",
                format!("set from the kubelet of NodePool(s) {}", names.join(", ")),
            );
            continue;
        }
        // They disagree: a class per NodePool with a kubelet.
        let names: Vec<&str> = pools.iter().map(|m| m.pool_name.as_str()).collect();
        for m in with {
            let new_name = format!("{class}-{}", m.pool_name);
            let cx = Ctx {
                origin: &m.origin,
                object: &m.object,
            };
            if !taken.insert(new_name.clone()) {
                run.error(
                    &cx,
                    "spec.template.spec.kubelet",
                    format!(
                        "NodePools {} share EC2NodeClass {class} with different kubelets, and \
                         the class this NodePool would get, {new_name}, already exists",
                        names.join(", ")
                    ),
                );
                continue;
            }
            let mut copy = objects[ci].value.clone();
            if let Some(Value::Object(meta)) = copy.get_mut("metadata") {
                meta.retain(|k, _| matches!(k.as_str(), "labels" | "annotations"));
                meta.insert("name".into(), json!(new_name));
            }
            if let Some(o) = copy.as_object_mut() {
                o.remove("status");
            }
            set_kubelet(&mut copy, m.kubelet.clone().unwrap_or(Value::Null));
            if let Some(Value::Object(r)) = objects[m.pool]
                .value
                .pointer_mut("/spec/template/spec/nodeClassRef")
            {
                r.insert("name".into(), json!(new_name));
            }
            run.change(
                &cx,
                "spec.template.spec.kubelet",
                format!(
                    "NodePools {} share EC2NodeClass {class} with different kubelets: created \
                     EC2NodeClass {new_name} (a copy of {class} with this kubelet) and pointed \
                     nodeClassRef at it; its nodes will drift and be replaced",
                    names.join(", ")
                ),
            );
            created.push((
                ci,
                Migrated {
                    origin: class_cx_origin.clone(),
                    object: format!("{EC2NODECLASS}/{new_name}"),
                    value: copy,
                },
            ));
        }
    }
    // Insert from the last position back, so earlier positions stay valid; classes copied from
    // the same class keep their order.
    created.sort_by_key(|(at, _)| *at);
    for (at, m) in created.into_iter().rev() {
        objects.insert(at + 1, m);
    }
}

fn set_kubelet(class: &mut Value, kubelet: Value) {
    if let Some(Value::Object(spec)) = class.get_mut("spec") {
        spec.insert("kubelet".into(), kubelet);
    }
}
