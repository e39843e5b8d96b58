//! AFL++ entry point of the `rules` target (see `llr_fuzz::rules`).
fn main() {
    afl::fuzz!(|data: &[u8]| llr_fuzz::rules::run(data));
}
