//! `public-api-listing RUSTDOC_JSON`: the public API of the crate that rustdoc JSON
//! describes, one item a line, sorted, as `cargo public-api` prints it.

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: public-api-listing RUSTDOC_JSON");
        return ExitCode::from(2);
    };
    let api = public_api::Builder::from_rustdoc_json(&path).build();
    match api {
        Ok(api) => {
            print!("{api}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}: {e}", std::path::Path::new(&path).display());
            ExitCode::FAILURE
        }
    }
}
