//! A run's checkout: the tree of its commit written into a fresh folder with git2, as
//! `git archive` would (files, executable bits, symbolic links; no `.git`, submodules left
//! out). Works the same for a bare repository, which has no work tree to check out into.

use std::path::Path;

use git2::{ObjectType, Repository, Tree};

pub fn export(repo: &Repository, sha: &str, dir: &Path) -> Result<usize, String> {
    // Peeled, so an annotated tag's object id still checks out the commit it tags.
    let commit = git2::Oid::from_str(sha)
        .and_then(|oid| repo.find_object(oid, None))
        .and_then(|object| object.peel_to_commit())
        .map_err(|e| format!("commit `{sha}` cannot be read: {e}"))?;
    let tree = commit
        .tree()
        .map_err(|e| format!("the tree of `{sha}` cannot be read: {e}"))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("`{}`: {e}", dir.display()))?;
    let mut files = 0;
    write_tree(repo, &tree, dir, &mut files)?;
    Ok(files)
}

fn write_tree(
    repo: &Repository,
    tree: &Tree<'_>,
    dir: &Path,
    files: &mut usize,
) -> Result<(), String> {
    for entry in tree.iter() {
        let Ok(name) = entry.name() else { continue };
        // Never outside `dir`: git refuses such names, but a crafted tree could hold them.
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            continue;
        }
        let path = dir.join(name);
        let fail = |e: &dyn std::fmt::Display| format!("`{}`: {e}", path.display());
        match entry.kind() {
            Some(ObjectType::Tree) => {
                std::fs::create_dir_all(&path).map_err(|e| fail(&e))?;
                let sub = entry
                    .to_object(repo)
                    .and_then(|o| o.peel_to_tree())
                    .map_err(|e| fail(&e))?;
                write_tree(repo, &sub, &path, files)?;
            }
            Some(ObjectType::Blob) => {
                let blob = entry
                    .to_object(repo)
                    .and_then(|o| o.peel_to_blob())
                    .map_err(|e| fail(&e))?;
                let mode = entry.filemode();
                if mode == 0o120_000 {
                    let target = String::from_utf8_lossy(blob.content()).into_owned();
                    std::os::unix::fs::symlink(target, &path).map_err(|e| fail(&e))?;
                } else {
                    std::fs::write(&path, blob.content()).map_err(|e| fail(&e))?;
                    if mode == 0o100_755 {
                        use std::os::unix::fs::PermissionsExt;
                        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                            .map_err(|e| fail(&e))?;
                    }
                }
                *files += 1;
            }
            // Submodules (commits) are not part of this repository's objects.
            _ => {}
        }
    }
    Ok(())
}
