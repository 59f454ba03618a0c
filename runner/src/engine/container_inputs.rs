//! From a step's evaluated `with:` (or a job's `container:` / `services:`) to a
//! [`ContainerSpec`]: ports, volumes, sizes, ulimits, GPUs and commands parsed from the forms
//! users write. Pure, so every form and refusal is unit-tested.

use indexmap::IndexMap;

use crate::backend::{
    ContainerSpec, GpuRequest, PortMapping, Protocol, RegistryAuth, Ulimit, VolumeMount,
};
use crate::expr::Value;

/// The inputs of `start-container`, evaluated. Errors are messages naming the input.
pub fn start_container_spec(
    inputs: &IndexMap<String, Value>,
    job_gpus: Option<GpuRequest>,
) -> Result<ContainerSpec, String> {
    let text = |name: &str| {
        inputs
            .get(name)
            .map(Value::to_expr_string)
            .filter(|s| !s.is_empty())
    };
    let image = text("image").ok_or("the input `image` is required")?;
    let mut spec = ContainerSpec::new(image);
    if let Some(c) = inputs.get("command") {
        spec.command = Some(words(c, "command")?);
    }
    if let Some(e) = inputs.get("entrypoint") {
        spec.entrypoint = Some(words(e, "entrypoint")?);
    }
    if let Some(env) = inputs.get("env") {
        spec.env = map(env, "env")?;
    }
    for p in list(inputs.get("ports"), "ports")? {
        spec.ports.push(port(&p)?);
    }
    for v in list(inputs.get("volumes"), "volumes")? {
        spec.volumes.push(volume(&v)?);
    }
    spec.workdir = text("workdir");
    spec.network = text("network");
    if let Some(s) = text("shm-size") {
        spec.shm_size =
            Some(byte_size(&s).ok_or_else(|| {
                format!("`shm-size` is `{s}`, not a size such as `512m` or `16g`")
            })?);
    }
    if let Some(m) = text("memory") {
        spec.memory = Some(
            byte_size(&m)
                .ok_or_else(|| format!("`memory` is `{m}`, not a size such as `512m` or `16g`"))?,
        );
    }
    if let Some(r) = text("restart") {
        spec.restart = crate::backend::Restart::parse(&r).ok_or_else(|| {
            format!(
                "`restart` is `{r}`; write `no`, `always`, `unless-stopped`, `on-failure` or `on-failure:N`"
            )
        })?;
    }
    spec.ipc = text("ipc");
    if let Some(u) = inputs.get("ulimits") {
        for (name, value) in map(u, "ulimits")? {
            spec.ulimits.push(ulimit(&name, &value)?);
        }
    }
    spec.gpus = match inputs.get("gpus") {
        Some(g) => gpus(g)?,
        None => job_gpus.unwrap_or_default(),
    };
    spec.user = text("user");
    spec.registry_auth = credentials(inputs.get("credentials"))?;
    if let Some(init) = inputs.get("init") {
        spec.init = match init {
            Value::Bool(b) => *b,
            other => other.to_expr_string() != "false",
        };
    }
    Ok(spec)
}

/// Where credentials from a step's `credentials:` are said to come from.
pub const GIVEN_BY_STEP: &str = "the step's `credentials:`";

/// `credentials: { username, password }` (GitHub's `container.credentials`): `None` when
/// both are empty (a composite action passing its empty inputs on), an error naming what is
/// missing when only one is. The values are never put in a message: the password is a secret.
pub fn credentials(v: Option<&Value>) -> Result<Option<RegistryAuth>, String> {
    const SHAPE: &str = "`credentials` must be a mapping of `username` and `password`";
    let entries = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) if s.is_empty() => return Ok(None),
        Some(Value::Object(m)) => m,
        Some(other) => return Err(format!("{SHAPE}, not {}", other.kind())),
    };
    if let Some(key) = entries
        .keys()
        .find(|k| !matches!(k.as_str(), "username" | "password"))
    {
        return Err(format!("{SHAPE}; `{key}` is not one of them"));
    }
    let field = |name: &str| {
        entries
            .get(name)
            .map(Value::to_expr_string)
            .unwrap_or_default()
    };
    match (field("username"), field("password")) {
        (u, p) if u.is_empty() && p.is_empty() => Ok(None),
        (u, _) if u.is_empty() => Err(
            "`credentials` has a `password` but no `username` (help: give both, or neither)"
                .into(),
        ),
        (_, p) if p.is_empty() => Err(
            "`credentials` has a `username` but no `password` (help: give both, or neither; is the secret given with `--secret`?)"
                .into(),
        ),
        (u, p) => Ok(Some(RegistryAuth::new(
            u,
            p,
            GIVEN_BY_STEP.into(),
        ))),
    }
}

/// A command given as a string (split like a shell would) or a list.
pub fn words(v: &Value, input: &str) -> Result<Vec<String>, String> {
    match v {
        Value::Array(items) => Ok(items.iter().map(Value::to_expr_string).collect()),
        other => split_words(&other.to_expr_string()).ok_or_else(|| {
            format!(
                "`{input}` has an unclosed quote: `{}`",
                other.to_expr_string()
            )
        }),
    }
}

/// Splits like a POSIX shell: blanks separate words; single quotes keep text as is; double
/// quotes and backslashes escape. `None` when a quote is left open.
pub fn split_words(s: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => word.push(c),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => word.push(chars.next()?),
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.push(chars.next()?);
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        out.push(word);
    }
    Some(out)
}

/// A list, or text: each item (or the one text) holding one entry per line, blank lines and
/// empty items left out. A composite action passes its text inputs so (`volumes: ["${{
/// inputs.volumes }}"]`), and an input left empty adds nothing.
fn list(v: Option<&Value>, input: &str) -> Result<Vec<String>, String> {
    let items = match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.iter().map(Value::to_expr_string).collect(),
        Some(Value::Object(_)) => return Err(format!("`{input}` is a mapping; give a list")),
        Some(one) => vec![one.to_expr_string()],
    };
    Ok(items
        .iter()
        .flat_map(|i| i.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect())
}

/// A mapping, or (from an expression, such as a composite action's text input) `NAME=VALUE`
/// lines; blank lines and `#` comments are left out, and a later line wins.
pub(crate) fn map(v: &Value, input: &str) -> Result<IndexMap<String, String>, String> {
    match v {
        Value::Object(m) => Ok(m
            .iter()
            .map(|(k, v)| (k.clone(), v.to_expr_string()))
            .collect()),
        Value::Null => Ok(IndexMap::new()),
        Value::String(text) => {
            let mut out = IndexMap::new();
            for (n, line) in text.lines().enumerate() {
                let line = line.trim_start();
                if line.trim().is_empty() || line.starts_with('#') {
                    continue;
                }
                match line.split_once('=') {
                    Some((name, value)) if !name.trim().is_empty() => {
                        out.insert(name.trim().to_string(), value.to_string());
                    }
                    _ => {
                        // The line itself is not shown: it may be a secret's value.
                        return Err(format!(
                            "`{input}` is text, and its line {} is not `NAME=VALUE` (help: one variable a line, or a mapping)",
                            n + 1
                        ));
                    }
                }
            }
            Ok(out)
        }
        other => Err(format!("`{input}` must be a mapping, not {}", other.kind())),
    }
}

/// `8000`, `8000:80`, `127.0.0.1:8000:80`, each with an optional `/udp`.
pub fn port(s: &str) -> Result<PortMapping, String> {
    let bad = || format!("port `{s}` is not `CONTAINER`, `HOST:CONTAINER` or `IP:HOST:CONTAINER`");
    let (spec, protocol) = match s.rsplit_once('/') {
        Some((p, "udp")) => (p, Protocol::Udp),
        Some((p, "tcp")) => (p, Protocol::Tcp),
        Some(_) => return Err(bad()),
        None => (s, Protocol::Tcp),
    };
    let parts: Vec<&str> = spec.split(':').collect();
    let num = |p: &str| p.trim().parse::<u16>().map_err(|_| bad());
    let (host_ip, host_port, container_port) = match parts.as_slice() {
        [c] => (None, None, num(c)?),
        [h, c] => (None, Some(num(h)?), num(c)?),
        [ip, h, c] => (
            Some((*ip).to_string()),
            if h.is_empty() { None } else { Some(num(h)?) },
            num(c)?,
        ),
        _ => return Err(bad()),
    };
    Ok(PortMapping {
        container_port,
        protocol,
        host_port,
        host_ip,
    })
}

/// `SOURCE:TARGET` or `SOURCE:TARGET:ro|rw`.
pub fn volume(s: &str) -> Result<VolumeMount, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let (source, target, read_only) = match parts.as_slice() {
        [src, dst] => (src, dst, false),
        [src, dst, "ro"] => (src, dst, true),
        [src, dst, "rw"] => (src, dst, false),
        _ => {
            return Err(format!(
                "volume `{s}` is not `SOURCE:TARGET` or `SOURCE:TARGET:ro`"
            ));
        }
    };
    if source.is_empty() || !target.starts_with('/') {
        return Err(format!(
            "volume `{s}` needs a source and an absolute target"
        ));
    }
    Ok(VolumeMount {
        source: (*source).to_string(),
        target: (*target).to_string(),
        read_only,
    })
}

/// `512m`, `16g`, `1gb`, `1048576`.
pub fn byte_size(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(digits);
    let n: u64 = n.parse().ok()?;
    let mult: u64 = match unit.trim().trim_end_matches('b') {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// `-1`, `1024`, or `SOFT:HARD`.
pub fn ulimit(name: &str, value: &str) -> Result<Ulimit, String> {
    let num = |p: &str| {
        p.trim()
            .parse::<i64>()
            .map_err(|_| format!("ulimit `{name}` is `{value}`, not a number or `SOFT:HARD`"))
    };
    let (soft, hard) = match value.split_once(':') {
        Some((s, h)) => (num(s)?, num(h)?),
        None => (num(value)?, num(value)?),
    };
    Ok(Ulimit {
        name: name.to_string(),
        soft,
        hard,
    })
}

/// `all`, a count, or device ids / UUIDs.
pub fn gpus(v: &Value) -> Result<GpuRequest, String> {
    match v {
        Value::Null => Ok(GpuRequest::None),
        Value::Number(n) if *n >= 0.0 && n.fract() == 0.0 => Ok(GpuRequest::Count(*n as u32)),
        Value::Array(ids) => Ok(GpuRequest::Devices(
            ids.iter().map(Value::to_expr_string).collect(),
        )),
        Value::String(s) if s == "all" => Ok(GpuRequest::All),
        // A container of a GPU job that needs none of the job's GPUs (a client, a sidecar).
        Value::String(s) if s == "none" => Ok(GpuRequest::None),
        Value::String(s) => match s.parse::<u32>() {
            Ok(n) => Ok(GpuRequest::Count(n)),
            Err(_) => Ok(GpuRequest::Devices(
                s.split(',')
                    .map(|p| p.trim().to_string())
                    .filter(|p| !p.is_empty())
                    .collect(),
            )),
        },
        other => Err(format!(
            "`gpus` is {}, not `all`, a count or a list of ids",
            other.kind()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("a b  c", &["a", "b", "c"] ; "blanks")]
    #[test_case("sh -c 'echo hi; sleep 1'", &["sh", "-c", "echo hi; sleep 1"] ; "single quotes")]
    #[test_case(r#"x "a \"b\"" c\ d"#, &["x", "a \"b\"", "c d"] ; "double quotes and escapes")]
    #[test_case("''", &[""] ; "empty word")]
    fn splits(s: &str, want: &[&str]) {
        assert_eq!(split_words(s).unwrap(), want);
    }

    #[test]
    fn volumes_and_env_as_an_actions_text_inputs_give_them() {
        let s = |t: &str| Value::String(t.into());
        let inputs = IndexMap::from([
            ("image".to_string(), s("img")),
            (
                "volumes".to_string(),
                Value::Array(vec![s("/srv/m:/models:ro"), s(""), s("/a:/a\n\n/b:/b\n")]),
            ),
            (
                "env".to_string(),
                s("HF_HOME=/hf\n\n# a comment\nNCCL_IB_DISABLE=1\nX=a=b\nHF_HOME=/other\n"),
            ),
        ]);
        let spec = start_container_spec(&inputs, None).unwrap();
        let targets: Vec<&str> = spec.volumes.iter().map(|v| v.target.as_str()).collect();
        assert_eq!(targets, ["/models", "/a", "/b"]);
        assert!(spec.volumes[0].read_only);
        assert_eq!(spec.env["HF_HOME"], "/other");
        assert_eq!(spec.env["NCCL_IB_DISABLE"], "1");
        assert_eq!(spec.env["X"], "a=b");
        assert_eq!(spec.env.len(), 3);
        // Nothing given: nothing mounted, no variable.
        let empty = IndexMap::from([
            ("image".to_string(), s("img")),
            ("volumes".to_string(), Value::Array(vec![s(""), s("")])),
            ("env".to_string(), s("\n")),
        ]);
        let spec = start_container_spec(&empty, None).unwrap();
        assert!(spec.volumes.is_empty() && spec.env.is_empty());
        // A line without `=` is refused without showing it (it may be a secret).
        let bad = IndexMap::from([
            ("image".to_string(), s("img")),
            ("env".to_string(), s("A=1\nsecret-value")),
        ]);
        let e = start_container_spec(&bad, None).unwrap_err();
        assert!(e.contains("line 2 is not `NAME=VALUE`"), "{e}");
        assert!(!e.contains("secret-value"), "{e}");
    }

    #[test]
    fn open_quotes_are_errors() {
        assert!(split_words("echo 'x").is_none());
    }

    #[test]
    fn ports_volumes_sizes_ulimits() {
        assert_eq!(port("8000:80").unwrap().host_port, Some(8000));
        assert_eq!(port("80").unwrap().host_port, None);
        assert_eq!(
            port("127.0.0.1:9000:90/udp").unwrap().protocol,
            Protocol::Udp
        );
        assert!(port("x:y").is_err());
        assert!(volume("/models:/models:ro").unwrap().read_only);
        assert!(volume("/a:relative").is_err());
        assert_eq!(byte_size("16g"), Some(16 << 30));
        assert_eq!(byte_size("1gb"), Some(1 << 30));
        assert_eq!(byte_size("12q"), None);
        assert_eq!(ulimit("memlock", "-1").unwrap().hard, -1);
        assert_eq!(ulimit("nofile", "1024:2048").unwrap().hard, 2048);
        assert_eq!(gpus(&Value::String("all".into())).unwrap(), GpuRequest::All);
        assert_eq!(gpus(&Value::Number(2.0)).unwrap(), GpuRequest::Count(2));
    }

    #[test]
    fn a_spec_from_inputs() {
        let inputs: IndexMap<String, Value> = [
            ("image".to_string(), Value::String("img:1".into())),
            (
                "command".to_string(),
                Value::String("server --port 1".into()),
            ),
            (
                "ports".to_string(),
                Value::Array(vec![Value::String("1:1".into())]),
            ),
        ]
        .into_iter()
        .collect();
        let spec = start_container_spec(&inputs, None).unwrap();
        assert_eq!(spec.command.unwrap(), ["server", "--port", "1"]);
        assert_eq!(spec.ports.len(), 1);
        let mut no_image = inputs.clone();
        no_image.shift_remove("image");
        assert!(
            start_container_spec(&no_image, None)
                .unwrap_err()
                .contains("image")
        );
    }

    fn creds(pairs: &[(&str, &str)]) -> Value {
        Value::Object(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
                .collect(),
        )
    }

    #[test]
    fn credentials_are_a_username_and_a_password_sent_with_the_pull() {
        let inputs = IndexMap::from([
            ("image".to_string(), Value::String("nvcr.io/x:1".into())),
            (
                "credentials".to_string(),
                creds(&[("username", "me"), ("password", "pw-1")]),
            ),
        ]);
        let spec = start_container_spec(&inputs, None).unwrap();
        let auth = spec.registry_auth.unwrap();
        assert_eq!((auth.username.as_str(), auth.password()), ("me", "pw-1"));
        assert_eq!(auth.given_by, "the step's `credentials:`");
    }

    #[test_case(&[] ; "an empty mapping")]
    #[test_case(&[("username", ""), ("password", "")] ; "an action's empty inputs")]
    fn empty_credentials_are_none(pairs: &[(&str, &str)]) {
        assert_eq!(credentials(Some(&creds(pairs))).unwrap(), None);
        assert_eq!(credentials(None).unwrap(), None);
        assert_eq!(
            credentials(Some(&Value::String(String::new()))).unwrap(),
            None
        );
    }

    #[test_case(&[("username", "me"), ("password", "")], "no `password`" ; "no password")]
    #[test_case(&[("username", ""), ("password", "hunter2")], "no `username`" ; "no username")]
    #[test_case(&[("user", "me"), ("password", "hunter2")], "`user` is not one of them" ; "unknown key")]
    fn half_given_credentials_are_refused_without_showing_the_password(
        pairs: &[(&str, &str)],
        said: &str,
    ) {
        let e = credentials(Some(&creds(pairs))).unwrap_err();
        assert!(e.contains(said), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn credentials_as_text_are_refused() {
        let e = credentials(Some(&Value::String("me:hunter2".into()))).unwrap_err();
        assert!(
            e.contains("must be a mapping of `username` and `password`"),
            "{e}"
        );
        assert!(!e.contains("hunter2"), "{e}");
    }
}
