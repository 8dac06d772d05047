//! Host-port usage on a node (upstream `hostportusage.go`).
//!
//! A pod's host ports are the `(IP, port, protocol)` of every container port with a non-zero
//! `hostPort`. Two entries conflict when they have the same protocol and port and either the same
//! IP or one of them binds the unspecified address (`0.0.0.0` or `::`), and they belong to
//! different pods. Re-adding the same pod (same `namespace/name` key) is never a conflict.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The IPv4 unspecified address, used when a port's `hostIP` is empty.
const UNSPECIFIED_V4: &str = "0.0.0.0";
/// The IPv6 unspecified address.
const UNSPECIFIED_V6: &str = "::";

/// One host port a pod binds.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HostPort {
    /// The host IP; an empty `hostIP` is normalised to `0.0.0.0`.
    pub ip: String,
    /// The host port number.
    pub port: i32,
    /// The protocol as written (`TCP` when absent).
    pub protocol: String,
}

impl HostPort {
    /// A host port, normalising an empty `ip` to `0.0.0.0` and an empty `protocol` to `TCP`.
    pub fn new(ip: &str, port: i32, protocol: &str) -> HostPort {
        HostPort {
            ip: if ip.is_empty() { UNSPECIFIED_V4 } else { ip }.to_owned(),
            port,
            protocol: if protocol.is_empty() { "TCP" } else { protocol }.to_owned(),
        }
    }

    /// Whether this port binds the unspecified address (`0.0.0.0` or `::`; empty counts too).
    pub fn is_unspecified_ip(&self) -> bool {
        self.ip.is_empty() || self.ip == UNSPECIFIED_V4 || self.ip == UNSPECIFIED_V6
    }

    /// Whether the two ports cannot both be bound on one node: same protocol and port, and the
    /// same IP or either IP unspecified. (Pod identity is checked by [`HostPortUsage`].)
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.protocol == other.protocol
            && self.port == other.port
            && (self.ip == other.ip || self.is_unspecified_ip() || other.is_unspecified_ip())
    }
}

impl fmt::Display for HostPort {
    /// `ip:port/protocol`, with IPv6 addresses in brackets (`[::1]:80/TCP`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ip.contains(':') {
            write!(f, "[{}]:{}/{}", self.ip, self.port, self.protocol)
        } else {
            write!(f, "{}:{}/{}", self.ip, self.port, self.protocol)
        }
    }
}

/// A requested host port clashes with one already used by another pod.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("hostPort conflict: {port} with pod {pod}")]
#[non_exhaustive]
pub struct HostPortConflict {
    /// The requested port that cannot be bound.
    pub port: HostPort,
    /// The `namespace/name` key of the pod using `existing`.
    pub pod: String,
}

/// The host ports in use on one node, by pod key (`namespace/name`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostPortUsage {
    reserved: BTreeMap<String, Vec<HostPort>>,
}

impl HostPortUsage {
    /// An empty usage.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks `ports` (requested by pod `pod_key`) against the ports of every *other* pod.
    /// Reports the first conflict, taking requested ports in the given order and existing pods
    /// in key order.
    pub fn conflicts(&self, pod_key: &str, ports: &[HostPort]) -> Result<(), HostPortConflict> {
        for port in ports {
            for (other_key, used) in &self.reserved {
                if other_key == pod_key {
                    continue;
                }
                if used.iter().any(|u| u.conflicts(port)) {
                    return Err(HostPortConflict {
                        port: port.clone(),
                        pod: other_key.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Records `ports` as used by `pod_key`, replacing what that pod had recorded before (so
    /// adding a pod twice is idempotent). A pod with no ports is not recorded.
    pub fn add(&mut self, pod_key: &str, ports: &[HostPort]) {
        if ports.is_empty() {
            self.reserved.remove(pod_key);
        } else {
            self.reserved.insert(pod_key.to_owned(), ports.to_vec());
        }
    }

    /// Forgets the ports of `pod_key`.
    pub fn remove(&mut self, pod_key: &str) {
        self.reserved.remove(pod_key);
    }

    /// Whether no pod has host ports recorded.
    pub fn is_empty(&self) -> bool {
        self.reserved.is_empty()
    }

    /// The recorded ports, by pod key in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[HostPort])> {
        self.reserved
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation() {
        let p = HostPort::new("", 80, "");
        assert_eq!(p.ip, "0.0.0.0");
        assert_eq!(p.protocol, "TCP");
        assert!(p.is_unspecified_ip());
        assert_eq!(HostPort::new("10.0.0.1", 80, "UDP").protocol, "UDP");
        assert_eq!(p.to_string(), "0.0.0.0:80/TCP");
        assert_eq!(HostPort::new("::1", 80, "TCP").to_string(), "[::1]:80/TCP");
    }

    #[test]
    fn conflict_rule() {
        let any = HostPort::new("", 8080, "TCP");
        let a = HostPort::new("10.0.0.1", 8080, "TCP");
        let b = HostPort::new("10.0.0.2", 8080, "TCP");
        let v6any = HostPort::new("::", 8080, "TCP");
        assert!(a.conflicts(&a));
        assert!(!a.conflicts(&b));
        assert!(any.conflicts(&a) && a.conflicts(&any));
        assert!(v6any.conflicts(&a) && a.conflicts(&v6any));
        assert!(any.conflicts(&v6any));
        assert!(!a.conflicts(&HostPort::new("10.0.0.1", 8081, "TCP")));
        assert!(!a.conflicts(&HostPort::new("10.0.0.1", 8080, "UDP")));
        assert!(!any.conflicts(&HostPort::new("", 8080, "SCTP")));
    }

    #[test]
    fn usage_tracks_pods() {
        let mut usage = HostPortUsage::new();
        assert!(usage.is_empty());
        let web = [HostPort::new("", 8080, "TCP")];
        usage.add("default/web-0", &web);
        assert!(!usage.is_empty());

        // Same pod again is not a conflict.
        assert_eq!(usage.conflicts("default/web-0", &web), Ok(()));
        // Another pod on the same port is.
        let err = usage.conflicts("default/web-1", &[HostPort::new("10.0.0.1", 8080, "TCP")]);
        let err = match err {
            Err(e) => e,
            Ok(()) => panic!("expected a conflict"),
        };
        assert_eq!(err.pod, "default/web-0");
        assert_eq!(
            err.to_string(),
            "hostPort conflict: 10.0.0.1:8080/TCP with pod default/web-0"
        );
        let err = usage
            .conflicts("default/web-1", &web)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("hostPort conflict: 0.0.0.0:8080/TCP with pod default/web-0")
        );
        // Different port or protocol is fine.
        assert_eq!(
            usage.conflicts(
                "default/web-1",
                &[
                    HostPort::new("", 8081, "TCP"),
                    HostPort::new("", 8080, "UDP")
                ]
            ),
            Ok(())
        );
        // No ports never conflict.
        assert_eq!(usage.conflicts("default/web-1", &[]), Ok(()));

        // Re-adding replaces; removing frees the port.
        usage.add("default/web-0", &[HostPort::new("", 9090, "TCP")]);
        assert_eq!(usage.conflicts("default/web-1", &web), Ok(()));
        usage.remove("default/web-0");
        assert!(usage.is_empty());
        usage.add("default/none", &[]);
        assert!(usage.is_empty());
    }

    #[test]
    fn first_conflict_is_deterministic() {
        let mut usage = HostPortUsage::new();
        usage.add("ns/b", &[HostPort::new("", 80, "TCP")]);
        usage.add(
            "ns/a",
            &[HostPort::new("", 80, "TCP"), HostPort::new("", 443, "TCP")],
        );
        let err = usage.conflicts(
            "ns/c",
            &[HostPort::new("", 443, "TCP"), HostPort::new("", 80, "TCP")],
        );
        assert_eq!(
            err.err().map(|e| (e.port.port, e.pod)),
            Some((443, "ns/a".to_owned()))
        );
        let keys: Vec<&str> = usage.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["ns/a", "ns/b"]);
    }
}
