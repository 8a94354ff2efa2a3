//! Prints an `analyzer` fuzz input as the segments it sends and the rows the analyzer
//! emits: `explain FILE` (to turn a crash into a readable regression test).
#![forbid(unsafe_code)]

use arbitrary::{Arbitrary, Unstructured};
use tcpdx_core::{Analyzer, Event};
use tcpdx_fuzz::analyzer::{Config, Op, Sender};

fn main() {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: explain ANALYZER_INPUT");
        std::process::exit(2);
    };
    let data = std::fs::read(path).expect("read input");
    let mut u = Unstructured::new(&data);
    let cfg = Config::arbitrary(&mut u).expect("config");
    println!("{cfg:?}");
    let mut a = Analyzer::new(cfg.analyzer_config());
    let mut s = Sender::default();
    while !u.is_empty() {
        let Ok(op) = Op::arbitrary(&mut u) else { break };
        let seg = s.segment(&op);
        println!(
            "{op:?}\n  seg {} {}:{} -> {}:{} seq {} ack {} flags {:#x} len {} win {} ts {} sack {:?}",
            seg.frame.0,
            seg.src.addr,
            seg.src.port,
            seg.dst.addr,
            seg.dst.port,
            seg.seq.0,
            seg.ack.0,
            seg.flags.0,
            seg.len,
            seg.window,
            seg.ts.0,
            seg.options.sack_blocks()
        );
        let mut ev: Vec<Event> = Vec::new();
        a.handle_segment(&seg, &mut ev);
        for e in ev {
            println!("  -> {e:?}");
        }
    }
}
