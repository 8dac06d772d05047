//! The EC2NodeClass static hash that `NodeClassDrift` compares.
//!
//! Upstream stamps the class and every NodeClaim launched from it with
//! [`HASH_ANNOTATION`] and [`HASH_VERSION_ANNOTATION`]. The hash covers the whole spec except the
//! fields upstream excludes (the subnet, security-group, capacity-reservation and AMI selector
//! terms, `ipPrefixCount`, and the literal `amiFamily` and `kubelet`), and adds the resolved AMI
//! family and the kubelet settings as JSON. Upstream hashes Go structures with a library whose
//! values cannot be reproduced, so this crate uses its own deterministic hash (FNV-1a 64 over
//! canonical JSON) under its own [`HASH_VERSION`]: a NodeClaim stamped by upstream carries a
//! different version and is never reported as drifted by a hash it cannot compare.

use serde_json::{Value, json};

use super::EC2NodeClass;

/// The annotation holding the static hash.
pub const HASH_ANNOTATION: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
/// The annotation holding the hash version.
pub const HASH_VERSION_ANNOTATION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";
/// The version of this crate's hash (distinct from upstream's `v6`).
pub const HASH_VERSION: &str = "rs-v1";

/// FNV-1a, 64 bit.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Sorts every object's keys so equal values give equal text.
pub(crate) fn canonical(v: &Value) -> String {
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push(':');
                    walk(&m[*k], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    walk(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut s = String::new();
    walk(v, &mut s);
    s
}

impl EC2NodeClass {
    /// The static hash (decimal, as upstream writes it) of the drift-relevant spec.
    pub fn static_hash(&self) -> String {
        let mut spec = serde_json::to_value(&self.spec).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut spec {
            for ignored in [
                "subnetSelectorTerms",
                "securityGroupSelectorTerms",
                "capacityReservationSelectorTerms",
                "amiSelectorTerms",
                "ipPrefixCount",
                "amiFamily",
                "kubelet",
            ] {
                m.remove(ignored);
            }
            // The CRD defaults metadataOptions: an unset block and the defaults hash the same.
            let md = self.spec.resolved_metadata_options();
            m.insert(
                "metadataOptions".into(),
                json!({
                    "httpEndpoint": md.http_endpoint,
                    "httpProtocolIPv6": md.http_protocol_ipv6,
                    "httpPutResponseHopLimit": md.http_put_response_hop_limit,
                    "httpTokens": md.http_tokens,
                }),
            );
        }
        let kubelet = self
            .spec
            .kubelet
            .as_ref()
            .and_then(|k| serde_json::to_value(k).ok())
            .map(|v| canonical(&v))
            .unwrap_or_default();
        let family = self
            .spec
            .resolved_ami_family()
            .map(|f| f.name())
            .unwrap_or("");
        let doc = json!({"spec": spec, "amiFamily": family, "kubelet": kubelet});
        fnv1a64(canonical(&doc).as_bytes()).to_string()
    }
}
