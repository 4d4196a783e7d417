//! Finding the crate's command-line tools from a test: where cargo built them, or, for a test
//! executable staged for the GPU machine as `.gpu/tests/test-*`, in `../bin` beside it.

/// The CLI `name`: `built` (cargo's `CARGO_BIN_EXE_<name>`) when it exists, else `../bin/<name>`
/// beside this test executable; `None` (the caller skips with the printed notice) when neither
/// exists.
pub fn bin(name: &str, built: &str) -> Option<String> {
    if std::path::Path::new(built).exists() {
        return Some(built.to_string());
    }
    let staged = std::env::current_exe()
        .ok()?
        .parent()?
        .join("../bin")
        .join(name);
    if staged.exists() {
        return Some(staged.to_string_lossy().into_owned());
    }
    eprintln!("skipped: {name} is neither at {built} nor in ../bin beside this test");
    None
}
