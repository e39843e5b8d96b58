//! The nftables table a study owns in the router's namespace: each ruleset is written beside the
//! study's other outputs and loaded with `nft -f`; the table is removed on drop, also on error,
//! and no other table of the host is touched.

use std::path::Path;

use llr_traffic::netns::Topology;

use crate::{LabError, Result, StepContext};

pub(crate) struct StudyTable<'a> {
    topo: &'a Topology,
    name: &'static str,
}

impl<'a> StudyTable<'a> {
    /// Checks that `nft` runs in the router's namespace.
    pub(crate) fn new(topo: &'a Topology, name: &'static str) -> Result<StudyTable<'a>> {
        (topo.router)
            .exec(&["nft", "--version"])
            .map(drop)
            .step(|| {
                "nft, which sets the router's ruleset (scripts/install-deps.sh installs it)".into()
            })?;
        Ok(StudyTable { topo, name })
    }

    /// Writes `ruleset` to `path` and loads it.
    pub(crate) fn apply(&self, path: &Path, ruleset: &str) -> Result<()> {
        std::fs::write(path, ruleset)
            .map_err(|e| LabError::io(format!("write {}", path.display()), e))?;
        let p = path.to_string_lossy();
        (self.topo.router)
            .exec(&["nft", "-f", &p])
            .map(drop)
            .step(|| format!("nft -f {p}"))
    }
}

impl Drop for StudyTable<'_> {
    fn drop(&mut self) {
        let t = self.name;
        // `add` then `delete` removes the table whether or not it exists.
        let _ = (self.topo.router)
            .exec(&["nft", &format!("add table inet {t}; delete table inet {t}")]);
    }
}
