//! How many cases a property test runs.

/// The environment variable a fuzz run sets to run every property test longer
/// (`VOLHEALTH_FUZZ_CASES=100000`; see docs/benchmarks.md).
pub const FUZZ_CASES: &str = "VOLHEALTH_FUZZ_CASES";

/// The cases of a property test: `every_run` in a plain `cargo test`, or the count a fuzz run
/// gives in [`FUZZ_CASES`]. A value that is not a whole number is refused loudly rather than
/// silently running the short count.
pub fn fuzz_cases(every_run: u32) -> u32 {
    match std::env::var(FUZZ_CASES) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{FUZZ_CASES}={v:?} is not a whole number of cases")),
        Err(_) => every_run,
    }
}
