//! House rules of the crate's source tree: no import circle between its modules, at any depth,
//! by the checker of `karpenter-core`'s `house` test (its rules are documented there).

#[path = "../../../karpenter-core/tests/it/module_cycles.rs"]
mod module_cycles;

use std::path::Path;

use module_cycles::ModuleGraph;

#[test]
fn modules_have_no_import_cycle_at_any_depth() {
    let graph = ModuleGraph::of_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(graph.has_module("sim::chaos") && graph.has_module("provider"));
    let cycles = graph.cycles();
    assert!(cycles.is_empty(), "import circles:\n{}", cycles.join("\n"));
}

/// The same rule for the crates above this one in the workspace, which have no house test of
/// their own: the controller, the planner and the binary's wiring.
#[test]
fn the_controller_and_planner_crates_have_no_import_cycle_at_any_depth() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (krate, module) in [
        ("karpenter-controller", "operate"),
        ("karpenter-plan", "simulate::workload"),
        ("examples", "cli"),
    ] {
        let graph = ModuleGraph::of_dir(&root.join(krate).join("src"));
        assert!(graph.has_module(module), "{krate}: {module} not found");
        let cycles = graph.cycles();
        assert!(
            cycles.is_empty(),
            "{krate}: import circles:\n{}",
            cycles.join("\n")
        );
    }
}
