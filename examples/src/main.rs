//! The `karpenter` command-line tool.

fn main() {
    println!("karpenter: the planner lands with the `karpenter plan` issue");
}
