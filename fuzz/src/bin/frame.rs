//! AFL++ entry point of the `frame` target (see `llr_fuzz::frame`).
fn main() {
    llr_fuzz::frame::rules();
    afl::fuzz!(|data: &[u8]| llr_fuzz::frame::run(data));
}
