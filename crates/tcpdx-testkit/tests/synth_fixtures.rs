//! The committed synthesised fixtures (tests/data/synth/<name>/) are exactly what the model
//! produces today: each is regenerated and compared (the capture after decompression, the
//! truth.json as text). `UPDATE_SYNTH=1 cargo test -p tcpdx-testkit --test synth_fixtures`
//! rewrites them (or `tcpdx-synth-trace write all --out tests/data/synth`).

use std::io::Read;
use std::path::PathBuf;

use tcpdx_testkit::synth::{CAPTURE_FILE, SCENARIOS, TRUTH_FILE, run};

/// Fixtures must stay small (issue 3: "each well under 1 MB").
const MAX_FIXTURE_BYTES: u64 = 700_000;

fn synth_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/synth")
}

#[test]
fn committed_fixtures_match_the_model() {
    let update = std::env::var_os("UPDATE_SYNTH").is_some();
    for (name, make) in SCENARIOS {
        let dir = synth_dir().join(name);
        let r = run(&make());
        if update {
            r.write_dir(&dir).unwrap();
        }
        let truth = std::fs::read_to_string(dir.join(TRUTH_FILE))
            .unwrap_or_else(|e| panic!("{name}: {e} (run with UPDATE_SYNTH=1)"));
        assert!(
            truth == r.truth_json(),
            "{name}: truth.json differs from the model"
        );
        let gz = std::fs::File::open(dir.join(CAPTURE_FILE)).unwrap();
        let mut pcapng = Vec::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_end(&mut pcapng)
            .unwrap();
        assert!(
            pcapng == r.pcapng_bytes(),
            "{name}: capture differs from the model"
        );
        let size: u64 = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(size < MAX_FIXTURE_BYTES, "{name}: {size} bytes");
    }
}
