//! The provisioning scheduler.
