//! `capture-quality` scenarios.

use super::*;

#[test]
fn one_direction_only_is_a_capture_problem() {
    let mut t = Script::new();
    t.at_ms(0).client_sends(1, MSS);
    t.at_ms(1).client_sends(AUTO, MSS);
    let d = diagnose(&t);
    let f = find(&d, K::CaptureQuality);
    assert!(f.explanation.contains("one direction"), "{}", f.explanation);
    // It cost nothing: information, however much it matters to the reading.
    assert_eq!(f.severity, Severity::Info);
}
