use std::path::PathBuf;

use kube::core::object::{HasSpec, HasStatus};
use kube::core::{CustomResourceExt, Resource};

use super::*;

fn fixture_docs() -> Vec<(String, Value)> {
    let dir: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", "seed"]
        .iter()
        .collect();
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    assert!(names.len() >= 10, "fixtures missing in {}", dir.display());
    let mut out = Vec::new();
    for name in names {
        let text = std::fs::read_to_string(dir.join(&name)).unwrap();
        for doc in serde_saphyr::from_multiple::<Value>(&text).unwrap() {
            if doc.is_object() {
                out.push((name.clone(), doc));
            }
        }
    }
    out
}

/// The CRD's schema as JSON.
fn schema_json(crd: &apiext::CustomResourceDefinition) -> Value {
    let v = serde_json::to_value(crd).unwrap();
    v["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// Every field path of `value` (`spec.template.spec.requirements[].key`), skipping metadata
/// and free-form maps (labels, annotations, resource lists).
fn field_paths(value: &Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                let free_form = ["metadata", "labels", "annotations", "limits"]
                    .contains(&k.as_str())
                    || path.ends_with("status.capacity")
                    || path.ends_with("status.allocatable")
                    || path.ends_with("status.resources")
                    || path.ends_with("resources.requests");
                out.push(path.clone());
                if !free_form {
                    field_paths(v, &path, out);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                field_paths(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

fn assert_fields_in_schema(schema: &mut Value, doc: &Value, unknown: &[String], what: &str) {
    let mut paths = Vec::new();
    field_paths(doc, "", &mut paths);
    for path in paths {
        // Unknown fields (dropped by the API types, as by the API server) are not in the schema.
        let plain = path.replace("[]", "");
        if unknown.iter().any(|u| {
            let u = strip_indices(u);
            plain == u || plain.starts_with(&format!("{u}."))
        }) {
            continue;
        }
        assert!(
            schema_at(schema, &path).is_some(),
            "{what}: field {path} is not in the CRD schema"
        );
    }
}

/// `a[0].b[12]` -> `a.b`.
fn strip_indices(path: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in path.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[test]
fn every_patch_finds_its_field() {
    assert_eq!(nodepool_schema_value().1, Vec::<String>::new());
    assert_eq!(nodeclaim_schema_value().1, Vec::<String>::new());
}

#[test]
fn nodepool_crd_names_group_version_kind_scope() {
    let crd = nodepool_crd();
    assert_eq!(crd.metadata.name.as_deref(), Some("nodepools.karpenter.sh"));
    assert_eq!(crd.spec.group, "karpenter.sh");
    assert_eq!(crd.spec.scope, "Cluster");
    let names = &crd.spec.names;
    assert_eq!(names.kind, "NodePool");
    assert_eq!(names.plural, "nodepools");
    assert_eq!(names.singular.as_deref(), Some("nodepool"));
    assert_eq!(names.list_kind.as_deref(), Some("NodePoolList"));
    assert_eq!(
        names.short_names.as_deref(),
        Some(&["np".to_string(), "nps".to_string()][..])
    );
    assert_eq!(
        names.categories.as_deref(),
        Some(&["karpenter".to_string()][..])
    );
    assert_eq!(crd.spec.versions.len(), 1);
    let v = &crd.spec.versions[0];
    assert_eq!(v.name, "v1");
    assert!(v.served && v.storage);
    let sub = v.subresources.as_ref().unwrap();
    assert!(sub.status.is_some());
    let scale = sub.scale.as_ref().unwrap();
    assert_eq!(scale.spec_replicas_path, ".spec.replicas");
    assert_eq!(scale.status_replicas_path, ".status.nodes");
    let columns: Vec<_> = v
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        columns,
        [
            "NodeClass",
            "Nodes",
            "Ready",
            "Age",
            "Weight",
            "CPU",
            "Memory"
        ]
    );
}

#[test]
fn nodeclaim_crd_names_group_version_kind_scope() {
    let crd = nodeclaim_crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("nodeclaims.karpenter.sh")
    );
    assert_eq!(crd.spec.group, "karpenter.sh");
    assert_eq!(crd.spec.scope, "Cluster");
    let names = &crd.spec.names;
    assert_eq!(names.kind, "NodeClaim");
    assert_eq!(names.plural, "nodeclaims");
    assert_eq!(names.singular.as_deref(), Some("nodeclaim"));
    assert_eq!(
        names.short_names.as_deref(),
        Some(&["nc".to_string(), "ncs".to_string()][..])
    );
    let v = &crd.spec.versions[0];
    assert_eq!(v.name, "v1");
    let sub = v.subresources.as_ref().unwrap();
    assert!(sub.status.is_some());
    assert!(sub.scale.is_none());
    let type_column = v
        .additional_printer_columns
        .iter()
        .flatten()
        .find(|c| c.name == "Type")
        .unwrap();
    assert_eq!(
        type_column.json_path,
        ".metadata.labels.node\\.kubernetes\\.io/instance-type"
    );
}

#[test]
fn crds_serialize_as_apiextensions_v1() {
    for (crd, kind) in [(nodepool_crd(), "NodePool"), (nodeclaim_crd(), "NodeClaim")] {
        let v = serde_json::to_value(&crd).unwrap();
        assert_eq!(v["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(v["kind"], "CustomResourceDefinition");
        assert_eq!(v["spec"]["names"]["kind"], kind);
        assert_eq!(
            v["spec"]["versions"][0]["subresources"]["status"],
            json!({})
        );
        // Round-trips through JSON and YAML.
        let back: apiext::CustomResourceDefinition = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, crd);
        let yaml = serde_saphyr::to_string(&crd).unwrap();
        assert!(yaml.contains("openAPIV3Schema"));
        let from_yaml: Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(from_yaml, v);
    }
}

#[test]
fn custom_resource_ext_and_resource() {
    assert_eq!(api::NodePool::crd_name(), "nodepools.karpenter.sh");
    assert_eq!(api::NodePool::shortnames(), ["np", "nps"]);
    assert_eq!(api::NodeClaim::crd_name(), "nodeclaims.karpenter.sh");
    assert_eq!(api::NodeClaim::shortnames(), ["nc", "ncs"]);
    assert_eq!(KubeNodePool::crd(), api::NodePool::crd());
    assert_eq!(KubeNodeClaim::crd_name(), api::NodeClaim::crd_name());

    let ar = api::NodePool::api_resource();
    assert_eq!(
        (
            ar.group.as_str(),
            ar.version.as_str(),
            ar.api_version.as_str()
        ),
        ("karpenter.sh", "v1", "karpenter.sh/v1")
    );
    assert_eq!(
        (ar.kind.as_str(), ar.plural.as_str()),
        ("NodePool", "nodepools")
    );
    let ar = KubeNodeClaim::api_resource();
    assert_eq!(
        (ar.kind.as_str(), ar.plural.as_str()),
        ("NodeClaim", "nodeclaims")
    );

    assert_eq!(KubeNodePool::kind(&()), "NodePool");
    assert_eq!(KubeNodePool::group(&()), "karpenter.sh");
    assert_eq!(KubeNodePool::version(&()), "v1");
    assert_eq!(KubeNodePool::api_version(&()), "karpenter.sh/v1");
    assert_eq!(
        KubeNodePool::url_path(&(), None),
        "/apis/karpenter.sh/v1/nodepools"
    );
    assert_eq!(
        KubeNodeClaim::url_path(&(), None),
        "/apis/karpenter.sh/v1/nodeclaims"
    );
}

#[test]
fn schemas_carry_upstream_validation() {
    let mut np = schema_json(&nodepool_crd());
    let get = |schema: &mut Value, path: &str, key: &str| -> Value {
        schema_at(schema, path)
            .unwrap_or_else(|| panic!("{path}"))
            .get(key)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(get(&mut np, "", "required"), json!(["spec"]));
    assert_eq!(get(&mut np, "metadata", "type"), "object");
    assert_eq!(get(&mut np, "spec", "required"), json!(["template"]));
    assert_eq!(get(&mut np, "spec.weight", "minimum"), json!(1.0));
    assert_eq!(get(&mut np, "spec.weight", "maximum"), json!(100.0));
    assert_eq!(
        get(&mut np, "spec.disruption.budgets[].nodes", "pattern"),
        BUDGET_NODES_PATTERN
    );
    assert_eq!(
        get(&mut np, "spec.disruption.budgets[].duration", "pattern"),
        BUDGET_DURATION_PATTERN
    );
    assert_eq!(
        get(&mut np, "spec.disruption.budgets[].schedule", "pattern"),
        BUDGET_SCHEDULE_PATTERN
    );
    assert_eq!(
        get(&mut np, "spec.disruption.budgets[].reasons[]", "enum"),
        json!(["Underutilized", "Empty", "Drifted"])
    );
    assert_eq!(get(&mut np, "spec.disruption.budgets", "maxItems"), 50);
    assert_eq!(
        get(&mut np, "spec.disruption.budgets", "default"),
        json!([{"nodes": "10%"}])
    );
    assert_eq!(
        get(&mut np, "spec.disruption.consolidateAfter", "pattern"),
        NILLABLE_DURATION_PATTERN
    );
    assert_eq!(
        get(&mut np, "spec.disruption.consolidationPolicy", "enum"),
        json!(["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"])
    );
    assert_eq!(
        get(&mut np, "spec.template.spec.expireAfter", "default"),
        "720h"
    );
    assert_eq!(
        get(&mut np, "spec.template.spec.expireAfter", "pattern"),
        NILLABLE_DURATION_PATTERN
    );
    assert_eq!(
        get(
            &mut np,
            "spec.template.spec.terminationGracePeriod",
            "pattern"
        ),
        DURATION_PATTERN
    );
    assert_eq!(
        get(&mut np, "spec.template.spec", "required"),
        json!(["nodeClassRef", "requirements"])
    );
    assert_eq!(
        get(&mut np, "spec.template.spec.requirements", "maxItems"),
        100
    );
    let rules = get(
        &mut np,
        "spec.template.spec.requirements",
        "x-kubernetes-validations",
    );
    assert_eq!(rules.as_array().map(Vec::len), Some(3));
    assert_eq!(
        get(
            &mut np,
            "spec.template.spec.requirements[].minValues",
            "minimum"
        ),
        json!(1.0)
    );
    assert_eq!(
        get(
            &mut np,
            "spec.template.spec.requirements[].minValues",
            "maximum"
        ),
        json!(50.0)
    );
    assert_eq!(
        get(
            &mut np,
            "spec.template.spec.requirements[].operator",
            "enum"
        ),
        json!([
            "In",
            "NotIn",
            "Exists",
            "DoesNotExist",
            "Gt",
            "Lt",
            "Gte",
            "Lte"
        ])
    );
    assert_eq!(
        get(&mut np, "spec.template.spec.taints[].effect", "enum"),
        json!(["NoSchedule", "PreferNoSchedule", "NoExecute"])
    );
    assert_eq!(
        get(&mut np, "spec.template.spec.nodeClassRef", "required"),
        json!(["group", "kind", "name"])
    );
    assert_eq!(
        get(&mut np, "spec.template.spec.nodeClassRef.group", "default"),
        Value::Null
    );
    assert_eq!(
        get(&mut np, "spec.template.metadata.labels", "maxProperties"),
        100
    );
    // Quantities are int-or-string with the quantity pattern.
    let limits = get(&mut np, "spec.limits", "additionalProperties");
    assert_eq!(limits["x-kubernetes-int-or-string"], true);
    assert_eq!(limits["pattern"], QUANTITY_PATTERN);
    assert_eq!(
        limits["anyOf"],
        json!([{"type": "integer"}, {"type": "string"}])
    );
    assert_eq!(
        get(&mut np, "status.conditions", "x-kubernetes-list-type"),
        "map"
    );

    let mut nc = schema_json(&nodeclaim_crd());
    assert_eq!(
        get(&mut nc, "spec", "required"),
        json!(["nodeClassRef", "requirements"])
    );
    assert_eq!(get(&mut nc, "spec.requirements", "maxItems"), 100);
    // Upstream's rules on requirement keys and template labels: the karpenter.sh domain (but
    // for the capacity type and NodePool labels), the NodePool label in a NodePool only, the
    // hostname label.
    let messages = |rules: Value| -> Vec<String> {
        rules
            .as_array()
            .map(|r| {
                r.iter()
                    .map(|r| r["message"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let domain = "label domain \"karpenter.sh\" is restricted";
    let nodepool = "label \"karpenter.sh/nodepool\" is restricted";
    let hostname = "label \"kubernetes.io/hostname\" is restricted";
    assert_eq!(
        messages(get(
            &mut np,
            "spec.template.spec.requirements[].key",
            "x-kubernetes-validations"
        )),
        [domain, nodepool, hostname]
    );
    assert_eq!(
        messages(get(
            &mut np,
            "spec.template.metadata.labels",
            "x-kubernetes-validations"
        )),
        [domain, nodepool, hostname]
    );
    assert_eq!(
        messages(get(
            &mut nc,
            "spec.requirements[].key",
            "x-kubernetes-validations"
        )),
        [domain, hostname]
    );
    assert_eq!(
        get(&mut nc, "spec.resources.requests", "additionalProperties")["pattern"],
        QUANTITY_PATTERN
    );
    assert_eq!(get(&mut nc, "status.capacity", "type"), "object");
    assert_eq!(get(&mut nc, "status.providerID", "type"), "string");
}

/// Kubernetes only accepts structural schemas: no references, no `type` lists, `anyOf` only
/// for int-or-string here, and a type on every node that is not int-or-string.
fn assert_structural(v: &Value, path: &str) {
    let Value::Object(map) = v else {
        return;
    };
    for banned in ["$ref", "$defs", "definitions", "oneOf", "$schema", "title"] {
        assert!(!map.contains_key(banned), "{path}: {banned}");
    }
    let int_or_string = map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    if map.contains_key("anyOf") {
        assert!(int_or_string, "{path}: anyOf outside int-or-string");
    }
    if !int_or_string {
        assert!(
            map.get("type").is_some_and(Value::is_string),
            "{path}: missing or non-string type: {v}"
        );
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        for (k, p) in props {
            assert_structural(p, &format!("{path}.{k}"));
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = map.get(key) {
            assert_structural(sub, &format!("{path}.{key}"));
        }
    }
}

#[test]
fn schemas_are_structural() {
    assert_structural(&schema_json(&nodepool_crd()), "NodePool");
    assert_structural(&schema_json(&nodeclaim_crd()), "NodeClaim");
}

#[test]
fn schemas_contain_every_fixture_field() {
    let mut np = schema_json(&nodepool_crd());
    let mut nc = schema_json(&nodeclaim_crd());
    let mut checked = 0;
    for (name, doc) in fixture_docs() {
        match doc.get("kind").and_then(Value::as_str) {
            Some("NodeClaim") => {
                let unknown = api::unknown_fields_nodeclaim(&doc);
                assert_fields_in_schema(&mut nc, &doc, &unknown, &name);
            }
            Some("NodePool") | None => {
                let unknown = api::unknown_fields_nodepool(&doc);
                assert_fields_in_schema(&mut np, &doc, &unknown, &name);
            }
            Some(_) => continue,
        }
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} documents checked");
}

#[test]
fn wrappers_round_trip_fixture_objects() {
    let mut pools = 0;
    for (name, doc) in fixture_docs() {
        match doc.get("kind").and_then(Value::as_str) {
            Some("NodePool") => {
                let pool = api::nodepool_from_value(doc.clone()).unwrap().object;
                let kube = KubeNodePool::from_nodepool(&pool).unwrap();
                assert_eq!(kube.metadata.name.as_deref(), Some(pool.name()), "{name}");
                // The wrapper serialises like the API type, and kube can decode it.
                let json = serde_json::to_value(&kube).unwrap();
                assert_eq!(json, serde_json::to_value(&pool).unwrap(), "{name}");
                let decoded: KubeNodePool = serde_json::from_value(json).unwrap();
                assert_eq!(decoded, kube, "{name}");
                assert_eq!(decoded.into_nodepool().unwrap(), pool, "{name}");
                pools += 1;
            }
            Some("NodeClaim") => {
                let claim = api::nodeclaim_from_value(doc.clone()).unwrap().object;
                let kube = KubeNodeClaim::try_from(&claim).unwrap();
                assert!(kube.status().is_some());
                assert_eq!(
                    serde_json::to_value(&kube).unwrap(),
                    serde_json::to_value(&claim).unwrap(),
                    "{name}"
                );
                assert_eq!(api::NodeClaim::try_from(kube).unwrap(), claim, "{name}");
            }
            _ => {}
        }
    }
    assert!(pools >= 5);
}

#[test]
fn wrapper_metadata_conversion() {
    let template = api::NodeClaimTemplate {
        metadata: api::TemplateMetadata::default(),
        spec: api::NodeClaimTemplateSpec::new(api::NodeClassReference::new(
            "karpenter.k8s.aws",
            "EC2NodeClass",
            "default",
        )),
    };
    let mut pool = api::NodePool::new("default", api::NodePoolSpec::new(template));
    pool.metadata.creation_timestamp = Some("2024-05-01T10:00:00Z".to_string());
    pool.metadata.uid = Some("1234".to_string());
    pool.metadata.finalizers = vec!["karpenter.sh/termination".to_string()];
    pool.metadata
        .extra
        .insert("generateName".to_string(), json!("default-"));
    let mut kube = KubeNodePool::from_nodepool(&pool).unwrap();
    assert_eq!(kube.meta().uid.as_deref(), Some("1234"));
    assert_eq!(kube.metadata.generate_name.as_deref(), Some("default-"));
    assert_eq!(
        kube.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
        Some("2024-05-01T10:00:00Z".to_string())
    );
    kube.spec_mut().weight = Some(10);
    *kube.status_mut() = Some(api::NodePoolStatus::default());
    let back = kube.into_nodepool().unwrap();
    assert_eq!(back.spec.weight, Some(10));
    assert_eq!(
        back.metadata.extra.get("generateName"),
        Some(&json!("default-"))
    );
    assert_eq!(back.metadata.finalizers, pool.metadata.finalizers);

    // A timestamp k8s-openapi cannot read is reported with the object's name.
    pool.metadata.creation_timestamp = Some("yesterday".to_string());
    let err = KubeNodePool::from_nodepool(&pool).unwrap_err();
    assert!(
        matches!(err, CrdError::Metadata { kind: "NodePool", ref name, .. } if name == "default")
    );
}

#[test]
fn the_nodeoverlay_crd_carries_upstreams_rules() {
    let (schema, missing) = nodeoverlay_schema_value();
    assert_eq!(missing, Vec::<String>::new());
    let crd = nodeoverlay_crd();
    assert_eq!(crd.metadata.name.as_deref(), Some(NODEOVERLAY_CRD_NAME));
    assert_eq!(crd.spec.versions[0].name, "v1alpha1");
    assert_eq!(
        crd.spec.names.short_names,
        Some(vec!["overlays".to_string()])
    );
    assert_eq!(crd.spec.scope, "Cluster");
    let spec = &schema["properties"]["spec"];
    assert_eq!(spec["required"], json!(["requirements"]));
    assert_eq!(
        spec["x-kubernetes-validations"][0]["rule"],
        "!has(self.price) || !has(self.priceAdjustment)"
    );
    assert_eq!(spec["properties"]["weight"]["maximum"], 10000);
    assert_eq!(spec["properties"]["price"]["pattern"], r"^\d+(\.\d+)?$");
    let rules = spec["properties"]["requirements"]["x-kubernetes-validations"]
        .as_array()
        .unwrap();
    assert_eq!(rules.len(), 3);
    assert!(
        rules
            .iter()
            .all(|r| !r["rule"].as_str().unwrap().contains("minValues"))
    );
    let item = &spec["properties"]["requirements"]["items"];
    assert!(item["properties"].get("minValues").is_none());
    assert_eq!(item["properties"]["key"]["maxLength"], 316);
    // The schema converts to the CRD's typed schema unchanged (no open-object fallback).
    let typed = crd.spec.versions[0].schema.as_ref().unwrap();
    assert_eq!(
        serde_json::to_value(typed.open_api_v3_schema.as_ref().unwrap()).unwrap()["properties"]["spec"]
            ["properties"]["priceAdjustment"]["pattern"],
        spec["properties"]["priceAdjustment"]["pattern"]
    );
}
