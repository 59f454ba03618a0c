//! What a server says it allocated for the KV cache, read from its log: the check of the
//! estimate against reality.
//!
//! - SGLang: `KV Cache is allocated. #tokens: 183768, K size: 10.22 GB, V size: 10.22 GB`
//!   (or `..., KV size: 19.36 GB` for latent attention);
//! - vLLM V1: `GPU KV cache size: 183,760 tokens`;
//! - vLLM V0: `# GPU blocks: 11485, # CPU blocks: 2048`, blocks of `--block-size` tokens (16).

/// vLLM's default `--block-size`, in tokens.
pub const VLLM_BLOCK_TOKENS: u64 = 16;

/// The KV cache size in tokens a server's log line reports, if the line reports it.
pub fn kv_tokens(line: &str) -> Option<u64> {
    let after = |marker: &str| line.find(marker).map(|i| &line[i + marker.len()..]);
    if let Some(rest) = after("KV Cache is allocated.") {
        let rest = &rest[rest.find("#tokens:")? + "#tokens:".len()..];
        return leading_number(rest);
    }
    if let Some(rest) = after("GPU KV cache size:") {
        return leading_number(rest);
    }
    if let Some(rest) = after("# GPU blocks:") {
        return leading_number(rest).map(|blocks| blocks * VLLM_BLOCK_TOKENS);
    }
    None
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
        assert_eq!(
            kv_tokens("INFO: # GPU blocks: 11485, # CPU blocks: 2048"),
            Some(183_760)
        );
        assert_eq!(kv_tokens("Load weight end. avail mem=62.10 GB"), None);
        assert_eq!(kv_tokens("KV Cache is allocated. #tokens: many"), None);
    }
}
