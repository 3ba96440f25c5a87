//! Shared helpers of the example CLIs that hcp's gold packs wrap.
