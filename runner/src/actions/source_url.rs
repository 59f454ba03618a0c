//! Which source URLs are handed to git at all.

/// The URL schemes a source may have; git's own `GIT_ALLOW_PROTOCOL` is set to the same list,
/// so a redirect or a transport helper (`ext::`, which runs a command) cannot widen it.
pub const ALLOWED_SCHEMES: [&str; 4] = ["https", "ssh", "git", "file"];

/// Why `url` will not be handed to git, if it will not. A source comes from files anyone who
/// can push writes (`gpuflow.lock`, `gpuflow.toml`), and `gpuflow validate` fetches: a value
/// git reads as an option (`--upload-pack=touch /tmp/x`) or a transport that runs a program
/// (`ext::sh -c …`) would run code on whoever opens the repository. Only `https://`,
/// `ssh://`, `git://` and `file://` URLs, absolute paths, and ssh's `user@host:path` short
/// form pass; the host must not start with `-` (ssh would read it as an option).
pub fn url_problem(url: &str) -> Option<String> {
    let allowed = "only `https://`, `ssh://`, `git://` and `file://` URLs, `user@host:path` or an absolute path are fetched";
    if url.is_empty() {
        return Some("it is empty".into());
    }
    if url.starts_with('-') {
        return Some(format!(
            "it starts with `-`, so git would read it as an option; {allowed}"
        ));
    }
    if url.chars().any(char::is_control) {
        return Some(format!("it holds a control character; {allowed}"));
    }
    if url.starts_with('/') {
        return None;
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return (!is_scp_form(url)).then(|| format!("it is not a URL; {allowed}"));
    };
    if !ALLOWED_SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()) {
        return Some(format!("`{scheme}://` is not an allowed scheme; {allowed}"));
    }
    let host = rest.split('/').next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    if host.starts_with('-') || rest.starts_with('-') {
        return Some(format!(
            "its host or user starts with `-`, which ssh would read as an option; {allowed}"
        ));
    }
    None
}

/// ssh's short form, `user@host:path` (what `git clone git@github.com:o/r.git` takes): a
/// plain user and host name, so neither can be an option nor name a transport (`ext::`).
fn is_scp_form(url: &str) -> bool {
    let Some((login, path)) = url.split_once(':') else {
        return false;
    };
    let Some((user, host)) = login.split_once('@') else {
        return false;
    };
    let plain = |s: &str| {
        !s.is_empty()
            && !s.starts_with('-')
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c))
    };
    plain(user) && plain(host) && !path.starts_with(':') && !path.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("https://github.com/team/acts.git" ; "https")]
    #[test_case("ssh://git@host/team/acts.git" ; "ssh")]
    #[test_case("git://127.0.0.1:9418/team/acts.git" ; "git")]
    #[test_case("file:///srv/git/team/acts.git" ; "file")]
    #[test_case("/srv/git/team/acts.git" ; "a path")]
    #[test_case("git@git.example.com:team/acts.git" ; "ssh short form")]
    fn allowed(url: &str) {
        assert_eq!(url_problem(url), None);
    }

    #[test_case("--upload-pack=touch /tmp/x;", "option" ; "an option")]
    #[test_case("ext::sh -c touch% /tmp/x", "not a URL" ; "ext")]
    #[test_case("fd::3", "not a URL" ; "fd")]
    #[test_case("http://host/x.git", "not an allowed scheme" ; "plain http")]
    #[test_case("ssh://-oProxyCommand=touch/x", "starts with `-`" ; "ssh option host")]
    #[test_case("ssh://git@-oProxyCommand=x/r", "starts with `-`" ; "ssh option after user")]
    #[test_case("host:team/acts.git", "not a URL" ; "short form without a user")]
    #[test_case("git@-oProxyCommand=x:r", "not a URL" ; "short form option host")]
    #[test_case("", "empty" ; "empty")]
    fn refused(url: &str, says: &str) {
        let problem = url_problem(url).unwrap();
        assert!(problem.contains(says), "{problem}");
    }
}
