//! `cargo +nightly fuzz run frontend` (from crates/sundial-pgwire): arbitrary bytes as a
//! client's stream through the PG decoders. The same entry point runs seeded, for a bounded
//! time, in `cargo test -p sundial-pgwire` (`tests::fuzz`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sundial_pgwire::fuzz::frontend_input(data));
