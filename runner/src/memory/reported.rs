//! What a server says it allocated for the KV cache, read from its log: the check of the
//! estimate against reality.
//!
//! - SGLang: `KV Cache is allocated. dtype: torch.bfloat16, #tokens: 183768, K size: 10.22 GB,
//!   V size: 10.22 GB` (or `..., KV size: 19.36 GB` for latent attention), or with post-capture
//!   sizing `Post-capture KV sizing: KV cache allocated. dtype: …, #tokens: N, …`;
//! - vLLM: `GPU KV cache size: 183,760 tokens, Maximum concurrency for …`, the pool's device
//!   named (`CPU` on vLLM's CPU build, `GPU + host` with host offload): vLLM 0.32–0.34
//!   `v1/core/kv_cache_utils.py`, `update_kv_cache_capacity`. (V0's `# GPU blocks:` line is
//!   gone from vLLM altogether.)

/// The KV cache size in tokens a server's log line reports, if the line reports it.
pub fn kv_tokens(line: &str) -> Option<u64> {
    let after = |marker: &str| line.find(marker).map(|i| &line[i + marker.len()..]);
    // SGLang's default line, and its post-capture sizing's (`SGLANG_ENABLE_POST_CAPTURE_KV_SIZING=1`,
    // sglang/srt/model_executor/model_runner_components/kv_pool_runtime.py).
    if let Some(rest) =
        after("KV Cache is allocated.").or_else(|| after("KV sizing: KV cache allocated."))
    {
        let rest = &rest[rest.find("#tokens:")? + "#tokens:".len()..];
        return leading_number(rest);
    }
    const MARKER: &str = " KV cache size:";
    let at = line.find(MARKER)?;
    // The pool's device, upper-case (`GPU`, `CPU`, `XPU`), perhaps with ` + host`.
    let pool = line[..at].trim_end_matches(" + host");
    let device = pool.rsplit(' ').next()?;
    if device.is_empty() || !device.chars().all(|c| c.is_ascii_uppercase()) {
        return None;
    }
    let rest = &line[at + MARKER.len()..];
    leading_number(rest)
}

/// The whole number at the start of `text` (after spaces), thousands separators allowed.
fn leading_number(text: &str) -> Option<u64> {
    let digits: String = text
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_servers_line_gives_its_tokens() {
        assert_eq!(
            kv_tokens(
                "[2026-01-02 03:04:05 TP0] KV Cache is allocated. #tokens: 350257, K size: 0.21 GB, V size: 0.21 GB"
            ),
            Some(350_257)
        );
        assert_eq!(
            kv_tokens("KV Cache is allocated. #tokens: 383872, KV size: 19.36 GB"),
            Some(383_872)
        );
        assert_eq!(
            kv_tokens(
                "INFO 01-02 03:04:05 [kv_cache_utils.py:716] GPU KV cache size: 4,455,808 tokens"
            ),
            Some(4_455_808)
        );
        // vLLM's CPU build, as it printed it here (vLLM 0.32.0, images/vllm).
        assert_eq!(
            kv_tokens(
                "(EngineCore pid=8572) INFO 12-03 13:25:26 [kv_cache_utils.py:2327] CPU KV cache size: 2,097,152 tokens, Maximum concurrency for 512 tokens per request: 4096.00x"
            ),
            Some(2_097_152)
        );
        assert_eq!(
            kv_tokens("GPU + host KV cache size: 1,000 tokens, Maximum concurrency"),
            Some(1_000)
        );
        assert_eq!(kv_tokens("the KV cache size: 12 tokens"), None);
        assert_eq!(
            kv_tokens(
                "[2026-12-03 10:02:11 TP0] Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 350257, K size: 0.21 GB, V size: 0.21 GB"
            ),
            Some(350_257)
        );
        assert_eq!(kv_tokens("Load weight end. avail mem=62.10 GB"), None);
        assert_eq!(kv_tokens("KV Cache is allocated. #tokens: many"), None);
    }
}
