//! Gives the shared library its soname: `librdmatopo.so.0.MINOR` while the version is
//! 0.x (a minor release may change the ABI), `librdmatopo.so.MAJOR` from 1.0 on. The
//! Makefile installs the links of that name (README.md, "Stability").

fn main() {
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if !linux {
        return;
    }
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_default();
    let minor = std::env::var("CARGO_PKG_VERSION_MINOR").unwrap_or_default();
    let soname = if major == "0" {
        format!("librdmatopo.so.0.{minor}")
    } else {
        format!("librdmatopo.so.{major}")
    };
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
}
