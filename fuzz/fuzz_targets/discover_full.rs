#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| rdmatopo::fuzzing::discover_full(data));
