//! The `karpenter` command-line tool. All logic lives in the `karpenter_cli` library.

use std::io;

fn main() {
    let code = karpenter_cli::cli::run(
        std::env::args_os(),
        &mut io::stdin().lock(),
        &mut io::stdout().lock(),
        &mut io::stderr().lock(),
        jiff::Timestamp::now(),
        true,
    );
    std::process::exit(code);
}
