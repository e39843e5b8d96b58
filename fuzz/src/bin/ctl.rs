//! AFL++ entry point of the `ctl` target (see `llr_fuzz::ctl`).
fn main() {
    afl::fuzz!(|data: &[u8]| llr_fuzz::ctl::run(data));
}
