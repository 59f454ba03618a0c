//! Who may change anything: the server is read-only unless it was given a token
//! (`--token-file`), and then a request that changes state (cancel) must carry it, as
//! `Authorization: Bearer TOKEN` or a form field `token`. A server listening beyond the
//! loopback interface must have one.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The shortest token accepted: guessing 32 characters over the network is hopeless.
const MIN_TOKEN_LEN: usize = 32;

/// A shared secret read from a file.
pub struct Token(Vec<u8>);

impl Token {
    /// Reads the token from `path` (its first line). Refused: a file other users can read
    /// (they could act as you), and a token too short to withstand guessing.
    pub fn read(path: &Path) -> Result<Self, String> {
        let shown = path.display();
        let meta = std::fs::metadata(path)
            .map_err(|e| format!("could not read the token file `{shown}`: {e}"))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(format!(
                "the token file `{shown}` can be read by other users (mode {:04o}): `chmod 600 {shown}`",
                meta.permissions().mode() & 0o7777
            ));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("could not read the token file `{shown}`: {e}"))?;
        let token = text.lines().next().unwrap_or_default().trim();
        if token.len() < MIN_TOKEN_LEN {
            return Err(format!(
                "the token in `{shown}` has {} characters; use at least {MIN_TOKEN_LEN}, e.g. `openssl rand -hex 32 > {shown}`",
                token.len()
            ));
        }
        Ok(Self(token.as_bytes().to_vec()))
    }

    /// Whether `given` is the token. Every byte is looked at whatever the first difference,
    /// so the time taken says nothing about how much of a guess was right.
    pub fn matches(&self, given: &str) -> bool {
        let given = given.as_bytes();
        let mut differ = u8::from(given.len() != self.0.len());
        for (i, b) in self.0.iter().enumerate() {
            differ |= b ^ given.get(i).copied().unwrap_or(!b);
        }
        differ == 0
    }
}

/// Why a server on `addr` may not start without a token: anyone who can reach a
/// non-loopback address could cancel runs.
pub fn listen_refusal(addr: &SocketAddr, token: Option<&Token>) -> Option<String> {
    (token.is_none() && !addr.ip().is_loopback()).then(|| {
        format!(
            "`--listen {addr}` is reachable from other machines: give `--token-file FILE` (anything that changes state then needs that token), or listen on 127.0.0.1 and reach it through an ssh tunnel"
        )
    })
}

/// The token a request carries: `Authorization: Bearer …`, else the form's `token` field.
pub fn presented<'r>(
    headers: &'r axum::http::HeaderMap,
    form_token: Option<&'r str>,
) -> Option<&'r str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .or(form_token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> Token {
        Token(b"0123456789abcdef0123456789abcdef".to_vec())
    }

    #[test]
    fn only_the_whole_token_matches() {
        let t = token();
        assert!(t.matches("0123456789abcdef0123456789abcdef"));
        assert!(!t.matches("0123456789abcdef0123456789abcdeF"));
        assert!(!t.matches("0123456789abcdef0123456789abcde"));
        assert!(!t.matches("0123456789abcdef0123456789abcdef0"));
        assert!(!t.matches(""));
    }

    #[test]
    fn a_token_file_others_can_read_or_a_short_token_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "0123456789abcdef0123456789abcdef\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(Token::read(&path).err().unwrap().contains("chmod 600"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(
            Token::read(&path)
                .unwrap()
                .matches("0123456789abcdef0123456789abcdef")
        );
        std::fs::write(&path, "short\n").unwrap();
        assert!(Token::read(&path).err().unwrap().contains("at least 32"));
    }

    #[test]
    fn beyond_loopback_a_token_is_required() {
        let lo: SocketAddr = "127.0.0.1:8470".parse().unwrap();
        let all: SocketAddr = "0.0.0.0:8470".parse().unwrap();
        assert!(listen_refusal(&lo, None).is_none());
        assert!(listen_refusal(&all, None).unwrap().contains("--token-file"));
        assert!(listen_refusal(&all, Some(&token())).is_none());
    }
}
