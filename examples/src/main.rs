//! The `karpenter` command-line tool. All logic lives in the `karpenter_cli` library.

use std::io;

fn main() {
    let code = karpenter_cli::cli::run(
        std::env::args_os(),
        &mut io::stdin().lock(),
        // Not locked for the whole run: the controller's log writer needs stdout too.
        &mut io::stdout(),
        &mut io::stderr(),
        jiff::Timestamp::now(),
        true,
    );
    std::process::exit(code);
}
