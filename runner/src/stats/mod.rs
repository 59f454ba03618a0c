//! Statistics over benchmark samples: the numbers behind a verdict, one method per file, each
//! citing where its formula comes from. Pure functions over `f64` slices: this module knows
//! nothing of metrics, units, stores or verdicts.

mod confidence_interval;
mod mann_whitney;
mod prediction_interval;
mod summary;
mod variation;

pub use confidence_interval::{Interval, mean_confidence_interval, one_sample_t_test};
pub use mann_whitney::{MannWhitney, MannWhitneyMethod, mann_whitney_u};
pub use prediction_interval::{PredictionInterval, prediction_interval};
pub use summary::{Summary, quantile};
pub use variation::{coefficient_of_variation, log_spread};
