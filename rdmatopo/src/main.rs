//! The `rdmatopo` command: parses its arguments and runs one subcommand
//! (`rdmatopo::cli::run`, in the library beside the layers it formats).

// Rust's unwinder linked in from gcc's static `libgcc_eh.a` rather than `libgcc_s.so`:
// the loader then neither maps that library nor runs its constructor, a CPU feature
// probe whose `cpuid`s each trap to the hypervisor on a VM (BENCHMARKS.md). Whole
// archive, so that nothing is left for `libgcc_s` to provide and `--as-needed` drops it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[link(name = "gcc_eh", kind = "static", modifiers = "+whole-archive")]
unsafe extern "C" {}

fn main() {
    // Rust's runtime ignores SIGPIPE before `main`: a closed pipe is an error the
    // command reports (or ignores), not a kill. `exit` flushes std's buffered stdout.
    std::process::exit(rdmatopo::cli::run(std::env::args_os()))
}

// The static build's allocator (Cargo.toml says why).
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

#[cfg(test)]
mod tests {
    /// A panic still unwinds to `catch_unwind`, the path of the CLI's internal-error
    /// message, with the unwinder linked from `libgcc_eh.a`.
    #[test]
    #[allow(clippy::panic)]
    fn a_panic_unwinds_to_catch_unwind() {
        let caught = std::panic::catch_unwind(|| {
            if std::hint::black_box(true) {
                panic!("unwound");
            }
        });
        assert!(caught.is_err());
    }
}
