//! Will a model server's weights and KV cache fit its GPUs? Estimated before the server
//! starts, from the model's `config.json` ([`model`]), the server's memory flags on its command
//! line ([`flags`]) and the GPUs' memory ([`estimate`]); and checked after it loaded against
//! the KV cache size the server reports in its log ([`reported`]).
//!
//! Preflight refuses a server whose weights alone exceed its budget, `start-container` records
//! the estimate, `wait-for-health` records the server's own number beside it, and `gpuflow-sim`
//! allocates by the same arithmetic, so the whole path is tested without a GPU
//! (docs/memory.md). Knows nothing of workflows, Docker or the engine.

pub mod estimate;
pub mod flags;
pub mod kind;
pub mod model;
pub mod reported;
pub mod sglang;
pub mod sizing;
pub mod vllm;
pub mod words;

pub use estimate::Estimate;
pub use flags::{ServerFlags, ServerKind};
pub use model::ModelShape;
