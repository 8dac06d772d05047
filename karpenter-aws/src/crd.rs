//! `karpenter.k8s.aws/v1` EC2NodeClass as a Kubernetes custom resource (feature `kube`).
//!
//! [`ec2nodeclass_crd`] builds the CustomResourceDefinition: group `karpenter.k8s.aws`,
//! version `v1`, cluster-scoped, status subresource, short names `ec2nc` / `ec2ncs`,
//! upstream's printer columns, and a structural OpenAPI schema generated with `schemars` from
//! the [`crate::nodeclass`] types by karpenter-core's generator
//! ([`karpenter_core::crd::schema_for`], with the derived defaults stripped), patched with
//! upstream's validation: the id patterns, alias pattern and length, enums, ranges, list sizes,
//! the `metadataOptions` default (IMDSv2 required, hop limit 1) and the CEL
//! rules of the spec, the selector terms, the tags and the block devices. `kubelet` keeps
//! unknown fields (upstream's open map).
//!
//! ```
//! let crd = karpenter_aws::crd::ec2nodeclass_crd();
//! assert_eq!(crd.spec.group, "karpenter.k8s.aws");
//! assert_eq!(crd.metadata.name.as_deref(), Some("ec2nodeclasses.karpenter.k8s.aws"));
//! ```

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use schemars::JsonSchema;
use serde_json::{Value, json};

use karpenter_core::crd::{SchemaStyle, cel, patch, schema_at as at, schema_for, schema_props};

use crate::nodeclass::{EC2NodeClassSpec, EC2NodeClassStatus, GROUP, KIND};

/// The CRD's name.
pub const CRD_NAME: &str = "ec2nodeclasses.karpenter.k8s.aws";
/// Short names (`kubectl get ec2nc`).
pub const SHORT_NAMES: &[&str] = &["ec2nc", "ec2ncs"];

/// The schema of `T` in core's generator style with the derived defaults stripped (upstream's
/// CRD has none of them; its own, `metadataOptions`, are patched in afterwards), not nullable
/// at the root.
fn schema_value<T: JsonSchema>() -> Value {
    let mut value = schema_for::<T>(SchemaStyle::new().with_defaults_stripped());
    if let Some(map) = value.as_object_mut() {
        map.remove("nullable");
    }
    value
}

fn selector_tags() -> Value {
    json!({
        "maxProperties": 20,
        "x-kubernetes-validations": [cel(
            "self.all(k, k != '' && self[k] != '')",
            "empty tag keys or values aren't supported"
        )]
    })
}

/// The spec schema with upstream's validation, and the paths of patches that found no field.
fn spec_schema() -> (Value, Vec<String>) {
    let mut s = schema_value::<EC2NodeClassSpec>();
    let mut missing = Vec::new();
    let m = &mut missing;
    patch(
        &mut s,
        "",
        json!({
            "required": ["amiSelectorTerms", "securityGroupSelectorTerms", "subnetSelectorTerms"],
            "x-kubernetes-validations": [
                cel("has(self.role) != has(self.instanceProfile)", "must specify exactly one of ['role', 'instanceProfile']"),
                cel("has(self.amiFamily) || self.amiSelectorTerms.exists(x, has(x.alias))", "must specify amiFamily if amiSelectorTerms does not contain an alias"),
                cel("!has(self.amiFamily) || self.amiFamily == 'Custom' || !self.amiSelectorTerms.exists(x, has(x.alias)) || self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+').lowerAscii() == self.amiFamily.lowerAscii())", "amiFamily must match the alias family or be Custom"),
            ]
        }),
        m,
    );
    patch(
        &mut s,
        "amiSelectorTerms",
        json!({
            "minItems": 1, "maxItems": 30,
            "x-kubernetes-validations": [
                cel("!(self.exists(x, has(x.alias)) && self.size() != 1)", "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"),
            ]
        }),
        m,
    );
    patch(
        &mut s,
        "amiSelectorTerms[]",
        json!({"x-kubernetes-validations": [
            cel("has(self.tags) || has(self.id) || has(self.name) || has(self.alias) || has(self.ssmParameter)", "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"),
            cel("!has(self.id) || !(has(self.alias) || has(self.tags) || has(self.name) || has(self.owner))", "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms[*]"),
            cel("!has(self.alias) || !(has(self.id) || has(self.tags) || has(self.name) || has(self.owner))", "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms[*]"),
        ]}),
        m,
    );
    patch(
        &mut s,
        "amiSelectorTerms[].alias",
        json!({
            "maxLength": 30,
            "pattern": "^[a-zA-Z0-9]+@.+$",
            "x-kubernetes-validations": [
                cel("self.find('^[^@]+') in ['al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025']", "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"),
                cel("self.find('^[^@]+') in ['windows2019', 'windows2022', 'windows2025'] ? self.find('[^@]+$') == 'latest' : true", "windows families may only specify version 'latest'"),
            ]
        }),
        m,
    );
    patch(
        &mut s,
        "amiSelectorTerms[].id",
        json!({"pattern": "ami-[0-9a-z]+"}),
        m,
    );
    patch(&mut s, "amiSelectorTerms[].tags", selector_tags(), m);
    patch(
        &mut s,
        "amiFamily",
        json!({"enum": ["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"]}),
        m,
    );
    patch(
        &mut s,
        "subnetSelectorTerms",
        json!({"minItems": 1, "maxItems": 30, "x-kubernetes-validations": [
            cel("self.size() != 0", "subnetSelectorTerms cannot be empty"),
            cel("!self.all(x, has(x.id) && has(x.tags))", "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"),
        ]}),
        m,
    );
    patch(
        &mut s,
        "subnetSelectorTerms[]",
        json!({"x-kubernetes-validations": [cel("has(self.tags) || has(self.id)", "expected at least one, got none, ['tags', 'id']")]}),
        m,
    );
    patch(
        &mut s,
        "subnetSelectorTerms[].id",
        json!({"pattern": "subnet-[0-9a-z]+"}),
        m,
    );
    patch(&mut s, "subnetSelectorTerms[].tags", selector_tags(), m);
    patch(
        &mut s,
        "securityGroupSelectorTerms",
        json!({"minItems": 1, "maxItems": 30, "x-kubernetes-validations": [
            cel("self.size() != 0", "securityGroupSelectorTerms cannot be empty"),
            cel("!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))", "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"),
            cel("!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))", "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"),
        ]}),
        m,
    );
    patch(
        &mut s,
        "securityGroupSelectorTerms[]",
        json!({"x-kubernetes-validations": [cel("has(self.tags) || has(self.id) || has(self.name)", "expected at least one, got none, ['tags', 'id', 'name']")]}),
        m,
    );
    patch(
        &mut s,
        "securityGroupSelectorTerms[].id",
        json!({"pattern": "sg-[0-9a-z]+"}),
        m,
    );
    patch(
        &mut s,
        "securityGroupSelectorTerms[].tags",
        selector_tags(),
        m,
    );
    patch(
        &mut s,
        "capacityReservationSelectorTerms",
        json!({"maxItems": 30, "x-kubernetes-validations": [
            cel("!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID)))", "'id' is mutually exclusive, cannot be set along with tags in a capacity reservation selector term"),
        ]}),
        m,
    );
    patch(
        &mut s,
        "capacityReservationSelectorTerms[].id",
        json!({"pattern": "^cr-[0-9a-z]+$"}),
        m,
    );
    patch(
        &mut s,
        "capacityReservationSelectorTerms[].ownerID",
        json!({"pattern": "^[0-9]{12}$"}),
        m,
    );
    patch(
        &mut s,
        "capacityReservationSelectorTerms[].instanceMatchCriteria",
        json!({"enum": ["open", "targeted"]}),
        m,
    );
    patch(
        &mut s,
        "capacityReservationSelectorTerms[].tags",
        selector_tags(),
        m,
    );
    patch(
        &mut s,
        "placementGroupSelector",
        json!({"x-kubernetes-validations": [cel("has(self.name) != has(self.id)", "exactly one of 'name' or 'id' must be specified")]}),
        m,
    );
    patch(
        &mut s,
        "placementGroupSelector.id",
        json!({"pattern": "^pg-[0-9a-z]+$"}),
        m,
    );
    patch(
        &mut s,
        "placementGroupSelector.name",
        json!({"minLength": 1}),
        m,
    );
    patch(&mut s, "ipPrefixCount", json!({"minimum": 0}), m);
    patch(
        &mut s,
        "role",
        json!({"x-kubernetes-validations": [cel("self != ''", "role cannot be empty")]}),
        m,
    );
    patch(
        &mut s,
        "instanceProfile",
        json!({"x-kubernetes-validations": [cel("self != ''", "instanceProfile cannot be empty")]}),
        m,
    );
    patch(
        &mut s,
        "tags",
        json!({"x-kubernetes-validations": [
            cel("self.all(k, k != '')", "empty tag keys aren't supported"),
            cel("self.all(k, k != 'eks:eks-cluster-name')", "tag contains a restricted tag matching eks:eks-cluster-name"),
            cel("self.all(k, !k.startsWith('kubernetes.io/cluster'))", "tag contains a restricted tag matching kubernetes.io/cluster/"),
            cel("self.all(k, k != 'karpenter.sh/nodepool')", "tag contains a restricted tag matching karpenter.sh/nodepool"),
            cel("self.all(k, k != 'karpenter.sh/nodeclaim')", "tag contains a restricted tag matching karpenter.sh/nodeclaim"),
            cel("self.all(k, k != 'karpenter.k8s.aws/ec2nodeclass')", "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass"),
        ]}),
        m,
    );
    patch(
        &mut s,
        "blockDeviceMappings",
        json!({"maxItems": 50, "x-kubernetes-validations": [cel("self.filter(x, has(x.rootVolume) ? x.rootVolume == true : false).size() <= 1", "must have only one blockDeviceMappings with rootVolume")]}),
        m,
    );
    patch(
        &mut s,
        "blockDeviceMappings[].ebs",
        json!({"x-kubernetes-validations": [cel("has(self.snapshotID) || has(self.volumeSize)", "snapshotID or volumeSize must be defined")]}),
        m,
    );
    patch(
        &mut s,
        "blockDeviceMappings[].ebs.volumeSize",
        json!({"pattern": "^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"}),
        m,
    );
    patch(
        &mut s,
        "blockDeviceMappings[].ebs.volumeType",
        json!({"enum": ["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"]}),
        m,
    );
    patch(
        &mut s,
        "blockDeviceMappings[].ebs.volumeInitializationRate",
        json!({"minimum": 100, "maximum": 300}),
        m,
    );
    patch(&mut s, "instanceStorePolicy", json!({"enum": ["RAID0"]}), m);
    patch(&mut s, "networkInterfaces", json!({"maxItems": 150}), m);
    patch(
        &mut s,
        "networkInterfaces[].interfaceType",
        json!({"enum": ["interface", "efa-only"]}),
        m,
    );
    patch(
        &mut s,
        "networkInterfaces[].networkCardIndex",
        json!({"minimum": 0}),
        m,
    );
    patch(
        &mut s,
        "networkInterfaces[].deviceIndex",
        json!({"minimum": 0}),
        m,
    );
    patch(
        &mut s,
        "metadataOptions",
        json!({"default": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"}}),
        m,
    );
    patch(
        &mut s,
        "metadataOptions.httpEndpoint",
        json!({"enum": ["enabled", "disabled"], "default": "enabled"}),
        m,
    );
    patch(
        &mut s,
        "metadataOptions.httpProtocolIPv6",
        json!({"enum": ["enabled", "disabled"], "default": "disabled"}),
        m,
    );
    patch(
        &mut s,
        "metadataOptions.httpPutResponseHopLimit",
        json!({"minimum": 1, "maximum": 64, "default": 1}),
        m,
    );
    patch(
        &mut s,
        "metadataOptions.httpTokens",
        json!({"enum": ["required", "optional"], "default": "required"}),
        m,
    );
    patch(
        &mut s,
        "connectionTracking",
        json!({"x-kubernetes-validations": [cel("has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)", "at least one of tcpEstablishedTimeout, udpStreamTimeout or udpTimeout must be set")]}),
        m,
    );
    patch(
        &mut s,
        "connectionTracking.tcpEstablishedTimeout",
        json!({"minimum": 60, "maximum": 432000}),
        m,
    );
    patch(
        &mut s,
        "connectionTracking.udpStreamTimeout",
        json!({"minimum": 60, "maximum": 180}),
        m,
    );
    patch(
        &mut s,
        "connectionTracking.udpTimeout",
        json!({"minimum": 30, "maximum": 60}),
        m,
    );
    patch(
        &mut s,
        "cpuOptions.nestedVirtualization",
        json!({"enum": ["enabled", "disabled"]}),
        m,
    );
    // kubelet: upstream's open map; the typed fields keep their schema.
    patch(
        &mut s,
        "kubelet",
        json!({
            "additionalProperties": null,
            "x-kubernetes-preserve-unknown-fields": true,
            "x-kubernetes-validations": [
                cel("!has(self.imageGCHighThresholdPercent) || !has(self.imageGCLowThresholdPercent) || self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent", "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"),
                cel("has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)) : true", "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"),
                cel("has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)) : true", "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft"),
            ]
        }),
        m,
    );
    patch(&mut s, "kubelet.maxPods", json!({"minimum": 0}), m);
    patch(&mut s, "kubelet.podsPerCore", json!({"minimum": 0}), m);
    patch(
        &mut s,
        "kubelet.imageGCHighThresholdPercent",
        json!({"minimum": 0, "maximum": 100}),
        m,
    );
    patch(
        &mut s,
        "kubelet.imageGCLowThresholdPercent",
        json!({"minimum": 0, "maximum": 100}),
        m,
    );
    for map in ["systemReserved", "kubeReserved"] {
        patch(
            &mut s,
            &format!("kubelet.{map}"),
            json!({"x-kubernetes-validations": [
                cel("self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')", &format!("valid keys for {map} are ['cpu','memory','ephemeral-storage','pid']")),
                cel("self.all(x, !self[x].startsWith('-'))", &format!("{map} value cannot be a negative resource quantity")),
            ]}),
            m,
        );
    }
    for map in ["evictionHard", "evictionSoft", "evictionSoftGracePeriod"] {
        patch(
            &mut s,
            &format!("kubelet.{map}"),
            json!({"x-kubernetes-validations": [cel(
                "self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])",
                &format!("valid keys for {map} are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']"),
            )]}),
            m,
        );
    }
    (s, missing)
}

/// The whole object schema, and the paths of patches that found no field (empty unless the
/// types and this module disagree).
fn schema() -> (Value, Vec<String>) {
    let (spec, missing) = spec_schema();
    let mut status = schema_value::<EC2NodeClassStatus>();
    if let Some(conds) = at(&mut status, "conditions") {
        conds.insert("x-kubernetes-list-type".into(), json!("map"));
        conds.insert("x-kubernetes-list-map-keys".into(), json!(["type"]));
    }
    let root = json!({
        "description": "EC2NodeClass is the Schema for the EC2NodeClass API",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status
        },
        "x-kubernetes-validations": [cel("self.metadata.name.size() <= 63", "name must be at most 63 characters")]
    });
    (root, missing)
}

/// The `ec2nodeclasses.karpenter.k8s.aws` CustomResourceDefinition (see the module docs).
pub fn ec2nodeclass_crd() -> apiext::CustomResourceDefinition {
    let column = |name: &str, path: &str, ty: &str, priority: Option<i32>| {
        apiext::CustomResourceColumnDefinition {
            name: name.into(),
            json_path: path.into(),
            type_: ty.into(),
            priority,
            ..Default::default()
        }
    };
    let props = schema_props(schema().0);
    apiext::CustomResourceDefinition {
        metadata: meta::ObjectMeta {
            name: Some(CRD_NAME.into()),
            ..Default::default()
        },
        spec: apiext::CustomResourceDefinitionSpec {
            group: GROUP.into(),
            names: apiext::CustomResourceDefinitionNames {
                categories: Some(vec!["karpenter".into()]),
                kind: KIND.into(),
                list_kind: Some(format!("{KIND}List")),
                plural: "ec2nodeclasses".into(),
                short_names: Some(SHORT_NAMES.iter().map(|s| s.to_string()).collect()),
                singular: Some("ec2nodeclass".into()),
            },
            scope: "Cluster".into(),
            versions: vec![apiext::CustomResourceDefinitionVersion {
                name: "v1".into(),
                served: true,
                storage: true,
                additional_printer_columns: Some(vec![
                    column(
                        "Ready",
                        ".status.conditions[?(@.type==\"Ready\")].status",
                        "string",
                        None,
                    ),
                    column("Age", ".metadata.creationTimestamp", "date", None),
                    column("Role", ".spec.role", "string", Some(1)),
                ]),
                schema: Some(apiext::CustomResourceValidation {
                    open_api_v3_schema: Some(props),
                }),
                subresources: Some(apiext::CustomResourceSubresources {
                    status: Some(apiext::CustomResourceSubresourceStatus(json!({}))),
                    scale: None,
                }),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The structural-schema rules the API server enforces: every node has a type (or keeps
    /// unknown fields / is int-or-string), no `$ref`, no `properties` next to
    /// `additionalProperties`, no types inside `anyOf`/`oneOf`/`allOf`.
    fn check_structural(v: &Value, path: &str, errs: &mut Vec<String>) {
        let Some(m) = v.as_object() else { return };
        if m.contains_key("$ref") || m.contains_key("definitions") || m.contains_key("$defs") {
            errs.push(format!("{path}: reference"));
        }
        let typed = m.contains_key("type")
            || m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
            || m.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
        if !typed {
            errs.push(format!("{path}: no type"));
        }
        if m.contains_key("properties") && m.contains_key("additionalProperties") {
            errs.push(format!("{path}: properties and additionalProperties"));
        }
        for k in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(alts)) = m.get(k) {
                for a in alts {
                    if a.get("type").is_some() || a.get("properties").is_some() {
                        errs.push(format!("{path}: {k} with types"));
                    }
                }
            }
        }
        if let Some(Value::Object(props)) = m.get("properties") {
            for (k, p) in props {
                check_structural(p, &format!("{path}.{k}"), errs);
            }
        }
        if let Some(items) = m.get("items") {
            check_structural(items, &format!("{path}[]"), errs);
        }
        if let Some(ap @ Value::Object(_)) = m.get("additionalProperties") {
            check_structural(ap, &format!("{path}{{}}"), errs);
        }
    }

    #[test]
    fn every_patch_finds_its_field() {
        assert_eq!(schema().1, Vec::<String>::new());
    }

    #[test]
    fn the_schema_is_structural() {
        let crd = ec2nodeclass_crd();
        let v = serde_json::to_value(&crd).unwrap();
        let s = &v["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        assert_eq!(s["type"], "object");
        let mut errs = Vec::new();
        check_structural(s, "", &mut errs);
        assert!(errs.is_empty(), "{errs:#?}");
        let spec = &s["properties"]["spec"];
        assert_eq!(
            spec["properties"]["metadataOptions"]["default"]["httpTokens"],
            "required"
        );
        assert_eq!(
            spec["properties"]["metadataOptions"]["default"]["httpPutResponseHopLimit"],
            1
        );
        assert_eq!(
            spec["properties"]["kubelet"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
        assert_eq!(spec["properties"]["amiSelectorTerms"]["maxItems"], 30);
        assert_eq!(v["spec"]["names"]["shortNames"], json!(["ec2nc", "ec2ncs"]));
        assert_eq!(
            v["spec"]["versions"][0]["subresources"]["status"],
            json!({})
        );
    }

    #[test]
    fn every_fixture_field_is_in_the_schema() {
        fn walk(doc: &Value, schema: &Value, path: &str, errs: &mut Vec<String>) {
            let Some(obj) = doc.as_object() else {
                if let (Some(items), Some(arr)) = (schema.get("items"), doc.as_array()) {
                    for d in arr {
                        walk(d, items, &format!("{path}[]"), errs);
                    }
                }
                return;
            };
            if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
                return;
            }
            for (k, v) in obj {
                let sub = schema
                    .get("properties")
                    .and_then(|p| p.get(k))
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
                match sub {
                    Some(sub) => walk(v, sub, &format!("{path}.{k}"), errs),
                    None => errs.push(format!("{path}.{k}")),
                }
            }
        }
        let crd = serde_json::to_value(ec2nodeclass_crd()).unwrap();
        let s = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
        let doc: Value =
            serde_saphyr::from_str(include_str!("../tests/fixtures/ec2nodeclass/full.yaml"))
                .unwrap();
        let mut errs = Vec::new();
        walk(&doc["spec"], &s["spec"], "spec", &mut errs);
        walk(&doc["status"], &s["status"], "status", &mut errs);
        assert!(errs.is_empty(), "fields the schema would prune: {errs:?}");
    }
}
