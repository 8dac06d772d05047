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
