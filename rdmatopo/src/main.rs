//! The `rdmatopo` command.
//!
//! Started from C's `main`, without Rust's runtime set-up: that set-up reads
//! `/proc/self/maps` to place a stack guard and installs signal handlers, a tenth of a
//! millisecond of every run of a command that takes a few (BENCHMARKS.md). What the CLI
//! needs of it is done here. The arguments are taken from C's `argv`: std finds them on
//! its own only under glibc, which hands them to initialisers; musl does not.
// The test harness brings its own `main`.
#![cfg_attr(not(test), no_main)]

mod cli;

use std::os::unix::ffi::OsStrExt;

// Rust's unwinder linked in from gcc's static `libgcc_eh.a` rather than `libgcc_s.so`:
// the loader then neither maps that library nor runs its constructor, a CPU feature
// probe whose `cpuid`s each trap to the hypervisor on a VM (0.14 ms of a start on the
// 2-core VM, BENCHMARKS.md). Whole archive, so that nothing is left for `libgcc_s` to
// provide and `--as-needed` drops it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[link(name = "gcc_eh", kind = "static", modifiers = "+whole-archive")]
unsafe extern "C" {}

#[cfg_attr(not(test), unsafe(export_name = "main"))]
#[cfg_attr(test, allow(dead_code))]
extern "C" fn start(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    // A closed pipe is an error the command reports (or ignores), not a kill.
    // SAFETY: setting a signal's disposition to SIG_IGN runs no code in the process.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let args = (0..usize::try_from(argc).unwrap_or(0)).map(|i| {
        // SAFETY: C's `main` receives `argc` valid NUL-terminated strings in `argv`.
        let arg = unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) };
        std::ffi::OsStr::from_bytes(arg.to_bytes()).to_os_string()
    });
    // `exit` flushes std's buffered stdout, as returning from Rust's `main` would.
    std::process::exit(cli::run(args))
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
