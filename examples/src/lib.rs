//! The library behind the `karpenter` binary: its command line ([`cli`]) and the wiring of
//! `karpenter controller` ([`controller`]). The planner is the `karpenter-plan` crate and the
//! controller the `karpenter-controller` crate; this crate only parses arguments, calls them
//! and prints.

pub mod cli;
pub mod controller;
