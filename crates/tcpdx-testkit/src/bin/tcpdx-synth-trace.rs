//! `tcpdx-synth-trace`: writes the trace synthesiser's scenarios (capture + truth.json).
//!
//! ```text
//! tcpdx-synth-trace list
//! tcpdx-synth-trace write NAME... --out DIR     # DIR/NAME/capture.pcapng.gz + truth.json
//! tcpdx-synth-trace write all --out tests/data/synth
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use tcpdx_testkit::synth::{SCENARIOS, run, scenario};

fn usage() -> ExitCode {
    eprintln!("usage: tcpdx-synth-trace list | write NAME...|all --out DIR");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("list") => {
            for (name, f) in SCENARIOS {
                println!("{name:<26} {}", f().description);
            }
            ExitCode::SUCCESS
        }
        Some("write") => {
            let Some(i) = args.iter().position(|a| a == "--out") else {
                return usage();
            };
            let Some(out) = args.get(i + 1).map(PathBuf::from) else {
                return usage();
            };
            let mut names: Vec<String> = args[1..i].to_vec();
            if names.iter().any(|n| n == "all") {
                names = SCENARIOS.iter().map(|(n, _)| (*n).to_string()).collect();
            }
            if names.is_empty() {
                return usage();
            }
            for name in names {
                let Some(cfg) = scenario(&name) else {
                    eprintln!("tcpdx-synth-trace: unknown scenario {name} (see `list`)");
                    return ExitCode::from(2);
                };
                let dir = out.join(&name);
                if let Err(e) = run(&cfg).write_dir(&dir) {
                    eprintln!("tcpdx-synth-trace: {}: {e}", dir.display());
                    return ExitCode::from(2);
                }
                println!("{}", dir.display());
            }
            ExitCode::SUCCESS
        }
        _ => usage(),
    }
}
