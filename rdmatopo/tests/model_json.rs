//! The inventory JSON is the contract between Rust, Python and C: reading it back must
//! give the same model, on every fixture.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;
use rdmatopo::Topology;

#[test]
fn every_fixture_model_round_trips_through_json() {
    let dir = support::fixtures_dir();
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let root = entry.unwrap().path().join("root");
        if !root.is_dir() {
            continue;
        }
        let topo = rdmatopo::discover(Some(&root)).unwrap();
        let back = Topology::from_json(&topo.to_json()).unwrap();
        assert!(
            back == topo,
            "{}: model differs after a JSON round trip",
            root.display()
        );
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} fixtures");
}
