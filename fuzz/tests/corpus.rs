//! Replays the committed corpus (`fuzz/corpus/TARGET/*`) through every target without AFL:
//! `cargo test --manifest-path fuzz/Cargo.toml --release`. A crash the fuzzer found and that
//! was fixed stays in the corpus, so this is also its regression test. `bpf_diff` needs root
//! (skipped otherwise).

use std::path::Path;

#[test]
fn corpus_replays_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut total = 0;
    for target in llr_fuzz::TARGETS {
        if target == "bpf_diff" && !llr_io::sys::is_root() {
            eprintln!("bpf_diff: not root, skipped");
            continue;
        }
        let dir = root.join(target);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{}: empty corpus", dir.display());
        for f in &files {
            let data = std::fs::read(f).unwrap();
            eprintln!("{target}: {}", f.display());
            assert!(llr_fuzz::run(target, &data));
        }
        total += files.len();
    }
    eprintln!("{total} corpus files replayed");
}
