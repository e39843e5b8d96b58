//! AFL++ entry point of the `bpf_diff` target (see `llr_fuzz::bpf_diff`; needs root).
fn main() {
    // Loaded before the fork server starts: every run reuses the program and its maps.
    if let Err(e) = llr_fuzz::bpf_diff::BpfDiff::new() {
        eprintln!("bpf_diff: cannot load the classifier (needs root): {e:#}");
        std::process::exit(1);
    }
    llr_fuzz::bpf_diff::with_global(|_| ());
    afl::fuzz!(|data: &[u8]| llr_fuzz::bpf_diff::with_global(|d| d.run(data)));
}
