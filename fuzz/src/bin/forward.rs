//! AFL++ entry point of the `forward` target (see `llr_fuzz::forward`).
fn main() {
    llr_fuzz::forward::forwarder();
    afl::fuzz!(|data: &[u8]| llr_fuzz::forward::run(data));
}
