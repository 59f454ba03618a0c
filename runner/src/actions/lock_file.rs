//! `gpuflow.lock`: the commit each remote action runs at, and the digest each pinned image
//! runs at ([`super::image_pins`]), beside the workflows' repository root. One `[[action]]`
//! table per `owner/repo@ref`, then one `[[image]]` table per image, sorted, one key a line,
//! so a change is a one-line diff in review.
//!
//! Version 1 holds actions only; a file with image pins is written as version 2, so a gpuflow
//! that does not know pins says the file is newer than it instead of running unpinned. Both
//! are read.
//!
//! Changes go through [`LockFile::update`]: under an exclusive lock (in the cache folder, so
//! nothing is left beside the file), the file as it is on disk now is read, changed and
//! written to a temporary file that is renamed over it. Two runs adding entries at once both
//! keep theirs; a reader never sees half a file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::image_pins::{self, ImagePin, ImageToRun};
use crate::diag::{Diagnostic, SourceFile, Span};

/// The lock file's name, in the workspace root.
pub const LOCK_FILE: &str = "gpuflow.lock";

/// The version of a file of action entries only (what gpuflow before image pins wrote).
const VERSION: u32 = 1;
/// The version of a file with image pins.
const VERSION_WITH_IMAGES: u32 = 2;

/// The commit one `owner/repo@ref` is pinned to, and where it was fetched from.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockEntry {
    /// `owner/repo`.
    pub repo: String,
    /// The ref written after `@` (`v1`, `main`, a commit).
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// The full commit id.
    pub commit: String,
    /// The URL the commit was fetched from (a source template, filled in).
    pub source: String,
}

impl LockEntry {
    /// `owner/repo@ref`, as `gpuflow actions update` names it.
    pub fn key(&self) -> String {
        format!("{}@{}", self.repo, self.git_ref)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    version: u32,
    #[serde(default, rename = "action")]
    actions: Vec<LockEntry>,
    #[serde(default, rename = "image")]
    images: Vec<ImagePin>,
}

/// A lock file's entries, as read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockFile {
    pub entries: Vec<LockEntry>,
    /// The pinned images, sorted by reference.
    pub images: Vec<ImagePin>,
}

impl LockFile {
    /// Reads `path`; a missing file is an empty lock.
    pub fn read(path: &Path) -> Result<Self, Box<Diagnostic>> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => {
                return Err(Box::new(Diagnostic::unlocated(format!(
                    "cannot read `{}`: {e}",
                    path.display()
                ))));
            }
        };
        let file = SourceFile::new(path.display().to_string(), text);
        let fix = format!(
            "`{LOCK_FILE}` is written by gpuflow: restore it from git, or delete it and run \
             `gpuflow validate` to pin every remote action again"
        );
        let doc: Document = toml::from_str(&file.text).map_err(|e| {
            let span = e.span().map(Span::from).unwrap_or_default();
            let message = e.message().trim().trim_end_matches('.').to_owned();
            Box::new(
                Diagnostic::error(&file, span, format!("invalid lock file: {message}"))
                    .hint(fix.clone()),
            )
        })?;
        if !(VERSION..=VERSION_WITH_IMAGES).contains(&doc.version) {
            return Err(Box::new(
                Diagnostic::error(
                    &file,
                    Span::default(),
                    format!(
                        "`{LOCK_FILE}` has version {}, this gpuflow reads versions {VERSION} and {VERSION_WITH_IMAGES}",
                        doc.version
                    ),
                )
                .hint(fix),
            ));
        }
        // A commit id is hexadecimal: anything else is a hand edit (or a merge gone wrong) that
        // would otherwise reach git, and the messages that shorten it, as it is.
        if let Some(e) = doc
            .actions
            .iter()
            .find(|e| e.commit.is_empty() || !e.commit.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            let written = toml::Value::String(e.commit.clone()).to_string();
            let span = file
                .text
                .find(&written)
                .map_or_else(Span::default, |at| Span::new(at, at + written.len()));
            return Err(Box::new(
                Diagnostic::error(
                    &file,
                    span,
                    format!(
                        "`{LOCK_FILE}` pins `{}` to `{}`, which is not a commit id",
                        e.key(),
                        e.commit.escape_debug()
                    ),
                )
                .label("expected a full commit id: hexadecimal digits")
                .hint(fix),
            ));
        }
        // A source is handed to git, and this file comes with whatever repository is opened:
        // one git would read as an option (`--upload-pack=…`) or a transport that runs a
        // program is refused here, before `validate` fetches anything.
        if let Some(refused) = doc.actions.iter().find_map(|e| refused_source(&file, e)) {
            return Err(refused);
        }
        if let Some(refused) = doc.images.iter().find_map(|p| refused_pin(&file, p)) {
            return Err(refused);
        }
        let mut lock = Self {
            entries: doc.actions,
            images: doc.images,
        };
        lock.sort();
        Ok(lock)
    }

    /// The entry of `owner/repo@ref`.
    pub fn get(&self, repo: &str, git_ref: &str) -> Option<&LockEntry> {
        self.entries
            .iter()
            .find(|e| e.repo == repo && e.git_ref == git_ref)
    }

    fn sort(&mut self) {
        self.entries
            .sort_by(|a, b| (&a.repo, &a.git_ref).cmp(&(&b.repo, &b.git_ref)));
        self.entries
            .dedup_by(|a, b| a.repo == b.repo && a.git_ref == b.git_ref);
        self.images.sort_by(|a, b| a.image.cmp(&b.image));
        // One pin per image as the engine reads the name (`ubuntu` and
        // `docker.io/library/ubuntu:latest` are one image), which sorting does not put together.
        let mut seen = std::collections::HashSet::new();
        self.images
            .retain(|p| seen.insert(image_pins::normalise(&p.image)));
    }

    /// The file's text: a header saying what it is, then one table per entry.
    pub fn render(&self) -> String {
        let quote = |s: &str| toml::Value::String(s.to_owned()).to_string();
        let mut out = format!(
            "# {LOCK_FILE}: the commit each remote action (`uses: owner/repo[/path]@ref`) runs at.\n\
             # Written by gpuflow; `gpuflow actions update [owner/repo@ref]` moves an entry \
             (docs/actions.md).\n"
        );
        if self.images.is_empty() {
            out.push_str(&format!("version = {VERSION}\n"));
        } else {
            out.push_str(&format!(
                "# `[[image]]`: the digest each pinned image runs at; `gpuflow images update [IMAGE]` \
                 moves one (docs/running.md).\n\
                 version = {VERSION_WITH_IMAGES}\n"
            ));
        }
        for e in &self.entries {
            out.push_str(&format!(
                "\n[[action]]\nrepo = {}\nref = {}\ncommit = {}\nsource = {}\n",
                quote(&e.repo),
                quote(&e.git_ref),
                quote(&e.commit),
                quote(&e.source)
            ));
        }
        for p in &self.images {
            out.push_str(&format!(
                "\n[[image]]\nimage = {}\ndigest = {}\n",
                quote(&p.image),
                quote(&p.digest)
            ));
            if let Some(resolved) = &p.resolved {
                out.push_str(&format!("resolved = {}\n", quote(resolved)));
            }
        }
        out
    }

    /// Applies `change` to the lock file as it is on disk now and writes the result, holding
    /// an exclusive lock in `lock_dir` meanwhile. Returns the entries written. The file is
    /// not touched when `change` leaves it as it was.
    pub fn update<T>(
        path: &Path,
        lock_dir: &Path,
        change: impl FnOnce(&mut Self) -> T,
    ) -> Result<(Self, T), Box<Diagnostic>> {
        let _guard = exclusive(lock_dir, path).map_err(|e| {
            Box::new(Diagnostic::unlocated(format!(
                "cannot lock `{}` for writing: {e}",
                path.display()
            )))
        })?;
        let mut lock = Self::read(path)?;
        let before = lock.clone();
        let result = change(&mut lock);
        lock.sort();
        if lock != before || !path.exists() {
            write_atomically(path, &lock.render()).map_err(|e| {
                Box::new(Diagnostic::unlocated(format!(
                    "cannot write `{}`: {e}",
                    path.display()
                )))
            })?;
        }
        Ok((lock, result))
    }
}

/// The lock entry's source, refused when git would read it as an option or a transport that
/// runs a program: this file comes with whatever repository is opened.
fn refused_source(file: &Arc<SourceFile>, e: &LockEntry) -> Option<Box<Diagnostic>> {
    let problem = super::source_url::url_problem(&e.source)?;
    let written = toml::Value::String(e.source.clone()).to_string();
    let span = file
        .text
        .find(&written)
        .map(|at| Span::new(at, at + written.len()))
        .or_else(|| {
            (!e.source.is_empty())
                .then(|| file.text.find(&e.source))
                .flatten()
                .map(|at| Span::new(at, at + e.source.len()))
        })
        .unwrap_or_default();
    Some(Box::new(
            Diagnostic::error(
                file,
                span,
                format!(
                    "`{LOCK_FILE}` gives `{}` the source `{}`, which gpuflow will not fetch: {problem}",
                    e.key(),
                    e.source.escape_debug()
                ),
            )
            .label("not an allowed source")
            .hint(format!(
                "restore `{LOCK_FILE}` from a commit you trust, or delete the entry and run `gpuflow validate` to pin the action again from the sources of `gpuflow.toml`"
            )),
        ))
}

impl LockFile {
    /// The pin of `image` (matched as the engine reads references: `ubuntu` is
    /// `docker.io/library/ubuntu:latest`), if the lock has one.
    pub fn image_pin(&self, image: &str) -> Option<&ImagePin> {
        let wanted = image_pins::normalise(image);
        self.images
            .iter()
            .find(|p| image_pins::normalise(&p.image) == wanted)
    }

    /// What a run pulls and runs for `image`: the pinned `repo@sha256:…` when the lock pins
    /// it, else `image` as written (a digest reference is pinned by itself).
    pub fn image_to_run<'a>(&'a self, image: &'a str) -> ImageToRun<'a> {
        if image_pins::is_digest_reference(image) {
            return ImageToRun::AsWritten(image);
        }
        match self.image_pin(image) {
            Some(pin) => ImageToRun::Pinned {
                reference: pin.reference(),
                pin,
            },
            None => ImageToRun::AsWritten(image),
        }
    }
}

/// An image pin that cannot be used as read ([`image_pins::problem`]), at its place: the
/// digest becomes part of the reference the engine pulls.
fn refused_pin(file: &Arc<SourceFile>, pin: &ImagePin) -> Option<Box<Diagnostic>> {
    let (field, message) = image_pins::problem(pin)?;
    let value = if field == "digest" {
        &pin.digest
    } else {
        &pin.image
    };
    let written = format!("{field} = {}", toml::Value::String(value.clone()));
    let span = file.text.find(&written).map_or_else(Span::default, |at| {
        let start = at + field.len() + 3;
        Span::new(start, at + written.len())
    });
    Some(Box::new(
        Diagnostic::error(file, span, message)
            .label(if field == "digest" {
                "expected `sha256:` and 64 hexadecimal digits"
            } else {
                "expected `registry/repository:tag`"
            })
            .hint(format!(
                "restore `{LOCK_FILE}` from a commit you trust, or delete the `[[image]]` table and run `gpuflow images lock` to pin the image again"
            )),
    ))
}

/// An exclusive lock for `path`, as a file under `lock_dir` named by a hash of the path;
/// released when the returned file is dropped (or the process dies).
pub(super) fn exclusive(lock_dir: &Path, path: &Path) -> std::io::Result<std::fs::File> {
    use sha2::{Digest, Sha256};
    std::fs::create_dir_all(lock_dir)?;
    let absolute = std::path::absolute(path)?;
    let digest = Sha256::digest(absolute.to_string_lossy().as_bytes());
    let name: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock_dir.join(format!("{name}.lock")))?;
    file.lock()?;
    Ok(file)
}

/// Writes a sibling temporary file and renames it over `path`; on failure the temporary
/// file is removed.
pub(crate) fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    let tmp: PathBuf = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The run's pulls read the pins through the backend's trait, so the backend needs nothing
/// of the lock file's format.
impl crate::backend::ImagePins for LockFile {
    fn pinned_reference(&self, image: &str) -> Option<String> {
        match self.image_to_run(image) {
            ImageToRun::Pinned { reference, .. } => Some(reference),
            ImageToRun::AsWritten(_) => None,
        }
    }

    fn refusal(&self, image: &str, now: Option<&str>, why: &str) -> String {
        match self.image_pin(image) {
            Some(pin) => pin.unavailable(now, why),
            None => why.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(repo: &str, git_ref: &str, commit: &str) -> LockEntry {
        LockEntry {
            repo: repo.into(),
            git_ref: git_ref.into(),
            commit: commit.into(),
            source: format!("file:///srv/{repo}.git"),
        }
    }

    #[test]
    fn renders_sorted_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let locks = dir.path().join("locks");
        LockFile::update(&path, &locks, |l| {
            l.entries.push(entry("team/b", "v1", "bb"));
            l.entries.push(entry("team/a", "v2", "aa"));
        })
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.ends_with(
                "version = 1\n\n[[action]]\nrepo = \"team/a\"\nref = \"v2\"\ncommit = \"aa\"\nsource = \"file:///srv/team/a.git\"\n\n[[action]]\nrepo = \"team/b\"\nref = \"v1\"\ncommit = \"bb\"\nsource = \"file:///srv/team/b.git\"\n"
            ),
            "{text}"
        );
        let lock = LockFile::read(&path).unwrap();
        assert_eq!(lock.get("team/b", "v1").unwrap().commit, "bb");
        assert!(lock.get("team/b", "v2").is_none());
        // Nothing but the lock file is left in the folder.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn a_commit_that_is_not_hexadecimal_is_refused_where_it_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        for commit in ["ääää", "", "-c core.x=y", "abc def"] {
            std::fs::write(
                &path,
                format!(
                    "version = 1\n\n[[action]]\nrepo = \"team/a\"\nref = \"v1\"\ncommit = \"{commit}\"\nsource = \"file:///srv/team/a.git\"\n"
                ),
            )
            .unwrap();
            let d = LockFile::read(&path).unwrap_err();
            assert_eq!(
                d.message,
                format!("`gpuflow.lock` pins `team/a@v1` to `{commit}`, which is not a commit id")
            );
            assert_eq!(d.location(), format!("{}:6:10", path.display()));
            assert!(d.hints[0].contains("restore it from git"), "{d:?}");
        }
    }

    #[test]
    fn concurrent_updates_keep_every_entry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let locks = dir.path().join("locks");
        std::thread::scope(|s| {
            for i in 0..8 {
                let (path, locks) = (&path, &locks);
                s.spawn(move || {
                    LockFile::update(path, locks, |l| {
                        l.entries.push(entry(&format!("team/r{i}"), "v1", "c"));
                    })
                    .unwrap();
                });
            }
        });
        assert_eq!(LockFile::read(&path).unwrap().entries.len(), 8);
    }

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn pin(image: &str) -> ImagePin {
        ImagePin {
            image: image.into(),
            digest: DIGEST.into(),
            resolved: Some("2026-05-01T12:00:00Z".into()),
        }
    }

    #[test]
    fn image_pins_are_written_after_the_actions_as_version_2_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let locks = dir.path().join("locks");
        LockFile::update(&path, &locks, |l| {
            l.entries.push(entry("team/a", "v1", "aa"));
        })
        .unwrap();
        let actions_only = std::fs::read_to_string(&path).unwrap();
        assert!(actions_only.contains("\nversion = 1\n"), "{actions_only}");
        LockFile::update(&path, &locks, |l| {
            l.images.push(pin("registry.example/vllm:v1"));
            l.images.push(pin("127.0.0.1:5000/sim:1"));
        })
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\nversion = 2\n"), "{text}");
        // The action entry as it was, then the images in order.
        assert!(
            text.ends_with(&format!(
                "[[action]]\nrepo = \"team/a\"\nref = \"v1\"\ncommit = \"aa\"\nsource = \"file:///srv/team/a.git\"\n\n[[image]]\nimage = \"127.0.0.1:5000/sim:1\"\ndigest = \"{DIGEST}\"\nresolved = \"2026-05-01T12:00:00Z\"\n\n[[image]]\nimage = \"registry.example/vllm:v1\"\ndigest = \"{DIGEST}\"\nresolved = \"2026-05-01T12:00:00Z\"\n"
            )),
            "{text}"
        );
        let lock = LockFile::read(&path).unwrap();
        assert_eq!(lock.entries.len(), 1);
        assert_eq!(
            lock.image_pin("127.0.0.1:5000/sim:1").unwrap().digest,
            DIGEST
        );
        assert!(lock.image_pin("127.0.0.1:5000/sim:2").is_none());
        // Without its pins, the file goes back to version 1 for older readers.
        LockFile::update(&path, &locks, |l| l.images.clear()).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), actions_only);
    }

    #[test]
    fn a_file_written_before_image_pins_reads_as_it_did() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let old = "# gpuflow.lock: the commit each remote action (`uses: owner/repo[/path]@ref`) runs at.\n# Written by gpuflow; `gpuflow actions update [owner/repo@ref]` moves an entry (docs/actions.md).\nversion = 1\n\n[[action]]\nrepo = \"team/a\"\nref = \"v1\"\ncommit = \"aa\"\nsource = \"file:///srv/team/a.git\"\n";
        std::fs::write(&path, old).unwrap();
        let lock = LockFile::read(&path).unwrap();
        assert_eq!(lock.get("team/a", "v1").unwrap().commit, "aa");
        assert!(lock.images.is_empty());
        assert_eq!(lock.render(), old);
        std::fs::write(&path, old.replace("version = 1", "version = 3")).unwrap();
        let d = LockFile::read(&path).unwrap_err();
        assert_eq!(
            d.message,
            "`gpuflow.lock` has version 3, this gpuflow reads versions 1 and 2"
        );
    }

    #[test]
    fn a_pinned_digest_that_is_not_one_is_refused_where_it_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        for (digest, image) in [
            ("sha256:abc", "sim:1"),
            ("sha256:--x", "sim:1"),
            (DIGEST, "--entrypoint=sh"),
        ] {
            std::fs::write(
                &path,
                format!("version = 2\n\n[[image]]\nimage = \"{image}\"\ndigest = \"{digest}\"\n"),
            )
            .unwrap();
            let d = LockFile::read(&path).unwrap_err();
            if image == "sim:1" {
                assert_eq!(
                    d.message,
                    format!(
                        "`gpuflow.lock` pins `sim:1` to `{digest}`, which is not an image digest"
                    )
                );
                assert_eq!(d.location(), format!("{}:5:10", path.display()));
            } else {
                assert_eq!(
                    d.message,
                    "`gpuflow.lock` pins `--entrypoint=sh`, which is not an image reference"
                );
                assert_eq!(d.location(), format!("{}:4:9", path.display()));
            }
            assert!(d.hints[0].contains("gpuflow images lock"), "{d:?}");
        }
    }

    #[test]
    fn a_broken_lock_file_is_an_error_at_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        std::fs::write(
            &path,
            "version = 1\n[[action]]\nrepo = \"a/b\"\nreff = \"v1\"\n",
        )
        .unwrap();
        let d = LockFile::read(&path).unwrap_err();
        assert!(
            d.message
                .starts_with("invalid lock file: unknown field `reff`"),
            "{d:?}"
        );
        assert!(
            d.location().ends_with("gpuflow.lock:4:1"),
            "{}",
            d.location()
        );
    }
}
