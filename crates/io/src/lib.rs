//! (in progress)
pub mod netns;
