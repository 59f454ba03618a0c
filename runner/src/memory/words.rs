//! Reading a server's command line as its own argparse parser does: `--flag value` and
//! `--flag=value` (the last one wins), lists of `nargs="+"` flags, and token counts by each
//! server's own rules.

use super::kind::ServerKind;

/// The value of `--name` (or one of its aliases) in `words`: `--name value` or `--name=value`.
pub fn value<'a>(words: &'a [String], names: &[&str]) -> Option<&'a str> {
    let mut found = None;
    for (i, w) in words.iter().enumerate() {
        for name in names {
            if w == name {
                found = words.get(i + 1).map(String::as_str);
            } else if let Some(v) = w.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
                found = Some(v);
            }
        }
    }
    // The last one wins, as with argparse.
    found
}

pub fn number<T: std::str::FromStr>(words: &[String], names: &[&str]) -> Result<Option<T>, String> {
    match value(words, names) {
        None => Ok(None),
        Some(v) => v
            .parse()
            .map(Some)
            .map_err(|_| format!("`{}` is `{v}`, not a number", names[0])),
    }
}

/// The numbers of a flag that takes one or more (argparse's `nargs="+"`): `--name 1 2 4` (the
/// words up to the next flag) or `--name=1`; the last use wins.
pub fn list(words: &[String], name: &str) -> Result<Option<Vec<u64>>, String> {
    let mut found = None;
    for (i, w) in words.iter().enumerate() {
        let values: Vec<&String> = if w == name {
            words[i + 1..]
                .iter()
                .take_while(|v| !v.starts_with('-'))
                .collect()
        } else if w.strip_prefix(name).is_some_and(|r| r.starts_with('=')) {
            vec![w]
        } else {
            continue;
        };
        let numbers = values
            .iter()
            .map(|v| {
                let v = v.rsplit('=').next().unwrap_or(v);
                v.parse()
                    .map_err(|_| format!("`{name}` has `{v}`, not a number"))
            })
            .collect::<Result<Vec<u64>, String>>()?;
        found = Some(numbers);
    }
    Ok(found)
}

/// A token count as the server's own parser reads it (`32k`, `128Ki`), `Some(None)` for
/// vLLM's "the model's own length" (`auto`, `-1`); `None` when it is not one.
/// - vLLM (`human_readable_int_or_auto`, vllm/utils/argparse_utils.py): `k m g t` ×10³ⁿ with
///   decimals, `K M G T` ×2¹⁰ⁿ whole numbers only;
/// - SGLang (`human_readable_int`, sglang/srt/utils/common.py): `k M G T` ×10³ⁿ with decimals,
///   `Ki Mi Gi Ti` ×2¹⁰ⁿ whole numbers only; case-sensitive.
pub fn token_count(kind: ServerKind, text: &str) -> Option<Option<u64>> {
    let text = text.trim();
    if kind == ServerKind::Vllm && (text == "-1" || text.eq_ignore_ascii_case("auto")) {
        return Some(None);
    }
    if let Ok(n) = text.parse::<u64>() {
        return Some(Some(n));
    }
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, suffix) = text.split_at(split);
    let (power, binary) = match (kind, suffix) {
        (ServerKind::Vllm, "k") | (ServerKind::Sglang, "k") => (1, false),
        (ServerKind::Vllm, "m") | (ServerKind::Sglang, "M") => (2, false),
        (ServerKind::Vllm, "g") | (ServerKind::Sglang, "G") => (3, false),
        (ServerKind::Vllm, "t") | (ServerKind::Sglang, "T") => (4, false),
        (ServerKind::Vllm, "K") | (ServerKind::Sglang, "Ki") => (1, true),
        (ServerKind::Vllm, "M") | (ServerKind::Sglang, "Mi") => (2, true),
        (ServerKind::Vllm, "G") | (ServerKind::Sglang, "Gi") => (3, true),
        (ServerKind::Vllm, "T") | (ServerKind::Sglang, "Ti") => (4, true),
        _ => return None,
    };
    if binary {
        let whole: u64 = number.parse().ok()?;
        return Some(Some(whole << (10 * power)));
    }
    let value: f64 = number.parse().ok()?;
    Some(Some((value * 1000f64.powi(power)) as u64))
}

/// The token count `--name` gives (see [`token_count`]); `Err` when it is not one.
pub fn tokens(kind: ServerKind, words: &[String], names: &[&str]) -> Result<Option<u64>, String> {
    match value(words, names) {
        None => Ok(None),
        Some(v) => token_count(kind, v)
            .ok_or_else(|| format!("`{}` is `{v}`, not a number of tokens", names[0])),
    }
}
