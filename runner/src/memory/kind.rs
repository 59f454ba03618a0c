//! Which server's rules apply: SGLang's or vLLM's, and their names for the same things.

/// Which server's rules apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerKind {
    Sglang,
    Vllm,
}

impl ServerKind {
    /// The flag that sets the share of GPU memory the server takes for weights and KV cache.
    pub fn fraction_flag(self) -> &'static str {
        match self {
            Self::Sglang => "--mem-fraction-static",
            Self::Vllm => "--gpu-memory-utilization",
        }
    }

    /// The flag that sets the context length.
    pub fn context_flag(self) -> &'static str {
        match self {
            Self::Sglang => "--context-length",
            Self::Vllm => "--max-model-len",
        }
    }
}
