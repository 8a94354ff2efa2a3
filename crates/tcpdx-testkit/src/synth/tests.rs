//! The model's own behaviour: determinism, the case 000 mechanism, Nagle, drops and the
//! capture point.

use super::*;

fn run_named(name: &str) -> SynthRun {
    run(&scenario(name).expect("known scenario"))
}

fn conn(r: &SynthRun) -> &truth::Connection {
    &r.truth.connections[0]
}

#[test]
fn the_same_config_gives_the_same_bytes() {
    let a = run_named("case000_synth_delack100");
    let b = run_named("case000_synth_delack100");
    assert_eq!(a.pcapng_bytes(), b.pcapng_bytes());
    assert_eq!(a.truth_json(), b.truth_json());
}

#[test]
fn case000_every_loss_gives_one_delayed_ack_pause_of_the_timer() {
    for (name, timer_ms) in [
        ("case000_synth_delack200", 200.0),
        ("case000_synth_delack100", 100.0),
    ] {
        let r = run_named(name);
        let c = conn(&r);
        let eps = &c.episodes;
        assert_eq!(r.truth.injected.drops.len(), 6, "{name}");
        assert_eq!(
            c.retransmitted_segments, 6,
            "{name}: one fast retransmission per drop"
        );
        assert!(eps.rtos.is_empty(), "{name}: {:?}", eps.rtos);
        assert_eq!(eps.delack_pauses.len(), 6, "{name}");
        for p in &eps.delack_pauses {
            let excess_ms = p.excess_ns as f64 / 1e6;
            // The hold is the timer (the path RTT is subtracted; queueing adds a little).
            assert!(
                (excess_ms - timer_ms).abs() < 0.1 * timer_ms,
                "{name}: hold {excess_ms} ms"
            );
            assert_eq!(p.inflight_segments, 1);
        }
        // Each loss halves ssthresh and restarts from one segment.
        assert_eq!(eps.ssthresh_changes.len(), 6);
        assert!(
            c.samples.iter().any(|s| s.cwnd == 1),
            "{name}: cwnd never back to 1"
        );
    }
}

#[test]
fn case000_without_delayed_ack_has_no_pause_and_is_faster() {
    let slow = run_named("case000_synth_delack200");
    let fast = run_named("case000_synth_quickack");
    assert!(conn(&fast).episodes.delack_pauses.is_empty());
    assert_eq!(conn(&fast).retransmitted_segments, 6);
    let (s, f) = (&slow.truth.workload.send, &fast.truth.workload.send);
    assert_eq!(s.bytes, f.bytes);
    let stalls: f64 = conn(&slow)
        .episodes
        .delack_pauses
        .iter()
        .map(|p| p.excess_ns as f64 / 1e9)
        .sum();
    // Removing the holds is what makes the quick-ACK run faster, plus one more timer (the
    // transfer's last, odd segment waits for a delayed ACK too) and a little ACK clocking
    // (one ACK per two segments makes slow start burstier).
    let gained = s.secs - f.secs;
    assert!(
        gained >= stalls && gained <= stalls * 1.1 + 0.2,
        "{} - {} vs {stalls}",
        s.secs,
        f.secs
    );
}

#[test]
fn nagle_holds_each_request_tail_for_the_delayed_ack() {
    let r = run_named("nagle_delack_stall");
    let c = conn(&r);
    assert_eq!(c.retransmitted_segments, 0);
    assert_eq!(c.episodes.nagle_stalls.len(), 40);
    for s in &c.episodes.nagle_stalls {
        let ms = s.excess_ns as f64 / 1e6;
        assert!((ms - 200.0).abs() < 5.0, "hold {ms} ms");
    }
    let q = run_named("nagle_delack_quickack");
    assert!(conn(&q).episodes.nagle_stalls.is_empty());
    assert!(q.truth.workload.send.secs * 10.0 < r.truth.workload.send.secs);
}

#[test]
fn the_receiver_side_capture_does_not_see_network_drops() {
    let at_sender = run_named("case000_synth_delack100");
    let at_receiver = run_named("case000_synth_receiver");
    let data = |r: &SynthRun| r.frames.iter().filter(|f| f.orig_len > 100).count();
    assert_eq!(data(&at_sender), data(&at_receiver) + 6);
    let c = conn(&at_receiver);
    assert!(c.retransmissions.iter().all(|x| x.pcap_t_ns.is_some()));
}

#[test]
fn a_lost_syn_is_retried_after_one_second() {
    let r = run_named("syn_retry");
    let syns: Vec<i64> = r
        .frames
        .iter()
        .filter(|f| f.data.get(47).is_some_and(|b| b & 0x12 == 0x02))
        .map(|f| f.ts.nanos())
        .collect();
    assert_eq!(syns.len(), 2);
    assert_eq!(syns[1] - syns[0], 1_000_000_000);
}

#[test]
fn capture_misses_are_counted_and_absent() {
    let r = run_named("capture_drops");
    assert_eq!(r.truth.files.captures[0].stats.dropped_by_kernel, 3);
    assert_eq!(conn(&r).retransmitted_segments, 0);
}
