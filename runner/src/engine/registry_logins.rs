//! The run's registry logins: `gpuflow.toml`'s `[registries]`, each password taken from the
//! secret it names. A secret the run was not given is not an error until a pull from that
//! registry needs it: a run that pulls nothing from there runs.

use crate::backend::{RegistryAuth, RegistryLogins};
use crate::engine::options::RunOptions;

/// The logins of `opts.registries`, with their passwords from `opts.secrets`.
pub fn registry_logins(opts: &RunOptions) -> RegistryLogins {
    let mut logins = RegistryLogins::default();
    for config in &opts.registries {
        let name = &config.password_secret;
        // `secrets.NAME` reads names in any case: so does this.
        let password = opts.secrets.get(name).or_else(|| {
            opts.secrets
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        });
        let login = match password {
            Some(password) => Ok(RegistryAuth::new(
                config.username.clone(),
                password.clone(),
                format!("`[registries.\"{}\"]` of {}", config.registry, config.at),
            )),
            None => Err(format!(
                "its password is the secret `{name}` (`[registries.\"{}\"]` of {}), which this run was not given",
                config.registry, config.at
            )),
        };
        logins.insert(&config.registry, login);
    }
    logins
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hosts::RegistryConfig;

    fn opts(secrets: &[(&str, &str)]) -> RunOptions {
        let mut opts = RunOptions::new("r", "/tmp");
        opts.registries = vec![RegistryConfig {
            registry: "nvcr.io".into(),
            username: "$oauthtoken".into(),
            password_secret: "NGC_KEY".into(),
            at: "gpuflow.toml:1:1".into(),
        }];
        opts.secrets = secrets
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        opts
    }

    #[test]
    fn a_registry_gets_the_value_of_the_secret_it_names() {
        let logins = registry_logins(&opts(&[("ngc_key", "pw")]));
        let auth = logins
            .for_image("nvcr.io/nvidia/x:1")
            .unwrap()
            .as_ref()
            .unwrap();
        assert_eq!(
            (auth.username.as_str(), auth.password()),
            ("$oauthtoken", "pw")
        );
        assert!(
            auth.given_by.contains("gpuflow.toml:1:1"),
            "{}",
            auth.given_by
        );
        assert!(logins.for_image("ghcr.io/x/y").is_none());
    }

    #[test]
    fn a_secret_not_given_is_said_when_a_pull_needs_it() {
        let logins = registry_logins(&opts(&[]));
        let why = logins.for_image("nvcr.io/x").unwrap().as_ref().unwrap_err();
        assert!(why.contains("the secret `NGC_KEY`"), "{why}");
        assert!(why.contains("gpuflow.toml:1:1"), "{why}");
    }
}
