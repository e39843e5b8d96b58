//! README.md's results table and docs/results.md's generated blocks are what the stored
//! figures (docs/results/*.toml, written by `scripts/results.sh`) render: a figure edited by
//! hand in either file, or a stored run not rendered, fails here.

#[test]
fn readme_and_the_results_page_render_the_stored_figures() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let all = llr_lab::results::load_all(repo).expect("docs/results/*.toml");
    assert!(!all.is_empty(), "no stored results in docs/results/");
    let stale = llr_lab::results::check_docs(repo).expect("render");
    assert!(
        stale.is_empty(),
        "{stale:?} differ from the stored figures: `llrouter results --render`"
    );
    // Every figure README.md shows is in the results page too, with the same text.
    let page = std::fs::read_to_string(repo.join("docs/results.md")).unwrap();
    for r in &all {
        for f in r.figures.iter().filter(|f| f.readme) {
            let line = format!("| {} | {} | {} |", f.what, f.measured(), f.status_text());
            assert!(page.contains(&line), "{} not in docs/results.md", f.what);
        }
    }
}
