//! AFL++ entry point of the `config` target (see `llr_fuzz::config`).
fn main() {
    afl::fuzz!(|data: &[u8]| llr_fuzz::config::run(data));
}
