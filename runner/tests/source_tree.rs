//! runner/src as a tree of modules read with `syn`: what the code-shape and import checks
//! (`code_shape.rs`, `imports.rs`) walk.
//!
//! Files are found the way rustc finds them, by following `mod NAME;` from each crate root
//! (`lib.rs`, `main.rs`, `bin/*.rs`), so a module declared under `#[cfg(test)]` counts as test
//! code even when it lives in a file of its own (`plan/matrix/tests.rs`). Every `.rs` file under
//! src/ must be reached that way: a file outside the tree would slip past both checks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::{Attribute, Item, UseTree};

/// Every module of the crates in runner/src, and the files that hold them.
pub(crate) struct SourceTree {
    pub(crate) files: Vec<SourceFile>,
    pub(crate) modules: Vec<Module>,
}

pub(crate) struct SourceFile {
    /// Relative to runner/src, with `/`: `plan/matrix.rs`.
    pub(crate) name: String,
    pub(crate) text: String,
    pub(crate) syntax: syn::File,
    /// The module whose body this file is.
    pub(crate) module: usize,
}

pub(crate) struct Module {
    pub(crate) file: usize,
    pub(crate) parent: Option<usize>,
    /// The crate root this module belongs to (lib.rs, main.rs or a bin).
    pub(crate) root: usize,
    /// Declared under `#[cfg(test)]` (itself or an ancestor).
    pub(crate) is_test: bool,
    pub(crate) children: BTreeMap<String, usize>,
    /// Names a non-test `use` brings into this module (the alias, or the last segment) → the
    /// path as written. Re-exports are followed through these, so an arrow points at the file
    /// that defines an item rather than at the `mod.rs` that re-exports it.
    pub(crate) uses: BTreeMap<String, Vec<String>>,
}

/// runner/src of this package.
pub(crate) fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

impl SourceTree {
    pub(crate) fn load() -> Self {
        let src = src_dir();
        let mut tree = Self {
            files: Vec::new(),
            modules: Vec::new(),
        };
        let mut roots = vec![src.join("lib.rs"), src.join("main.rs")];
        let mut bins: Vec<PathBuf> = std::fs::read_dir(src.join("bin"))
            .map(|dir| dir.map(|entry| entry.unwrap().path()).collect())
            .unwrap_or_default();
        bins.retain(|path| path.extension().is_some_and(|ext| ext == "rs"));
        bins.sort();
        roots.extend(bins);
        for root in roots {
            let dir = root.parent().unwrap().to_path_buf();
            tree.add_file_module(&root, None, false, &dir);
        }
        tree.check_every_file_is_reached(&src);
        tree
    }

    /// The files a non-test build compiles.
    pub(crate) fn production_files(&self) -> impl Iterator<Item = &SourceFile> {
        self.files
            .iter()
            .filter(|file| !self.modules[file.module].is_test)
    }

    fn add_file_module(
        &mut self,
        path: &Path,
        parent: Option<usize>,
        is_test: bool,
        child_dir: &Path,
    ) -> usize {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let syntax = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()));
        let name = path
            .strip_prefix(src_dir())
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let file = self.files.len();
        let module = self.new_module(file, parent, is_test);
        self.files.push(SourceFile {
            name,
            text,
            syntax: syntax.clone(),
            module,
        });
        self.add_items(module, &syntax.items, child_dir);
        module
    }

    fn new_module(&mut self, file: usize, parent: Option<usize>, is_test: bool) -> usize {
        let id = self.modules.len();
        self.modules.push(Module {
            file,
            parent,
            root: parent.map_or(id, |p| self.modules[p].root),
            is_test,
            children: BTreeMap::new(),
            uses: BTreeMap::new(),
        });
        id
    }

    /// Records a module's child modules (reading their files) and the names its `use`s bind.
    fn add_items(&mut self, module: usize, items: &[Item], child_dir: &Path) {
        let is_test = self.modules[module].is_test;
        for item in items {
            match item {
                Item::Mod(m) => {
                    let name = m.ident.to_string();
                    let test = is_test || is_test_code(&m.attrs);
                    let dir = child_dir.join(&name);
                    let child = if let Some((_, content)) = &m.content {
                        let file = self.modules[module].file;
                        let child = self.new_module(file, Some(module), test);
                        self.add_items(child, content, &dir);
                        child
                    } else {
                        let flat = child_dir.join(format!("{name}.rs"));
                        let path = if flat.exists() {
                            flat
                        } else {
                            dir.join("mod.rs")
                        };
                        self.add_file_module(&path, Some(module), test, &dir)
                    };
                    self.modules[module].children.insert(name, child);
                }
                Item::Use(u) if !is_test && !is_test_code(&u.attrs) => {
                    for (name, path) in use_bindings(&u.tree) {
                        self.modules[module].uses.insert(name, path);
                    }
                }
                _ => {}
            }
        }
    }

    fn check_every_file_is_reached(&self, src: &Path) {
        let reached: BTreeSet<&str> = self.files.iter().map(|f| f.name.as_str()).collect();
        let missing: Vec<String> = walkdir::WalkDir::new(src)
            .into_iter()
            .map(|entry| entry.unwrap().into_path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
            .map(|path| {
                path.strip_prefix(src)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|name| !reached.contains(name.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "files under runner/src that no `mod` declares (the checks would miss them): {missing:?}"
        );
    }

    /// The absolute module path (from the crate root) a path written in `module` starts with,
    /// or `None` when it leaves the crate (std, a dependency, a prelude name).
    fn absolute(&self, module: usize, segments: &[String], depth: usize) -> Option<Vec<String>> {
        let (first, rest) = segments.split_first()?;
        let base: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.module_path(module),
            "super" => {
                let mut at = self.modules[module].parent?;
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    at = self.modules[at].parent?;
                    rest = &rest[1..];
                }
                let mut path = self.module_path(at);
                path.extend(rest.iter().cloned());
                return Some(path);
            }
            name if self.modules[module].children.contains_key(name) => {
                let mut path = self.module_path(module);
                path.push(name.to_owned());
                path
            }
            name => {
                let bound = self.modules[module].uses.get(name)?;
                if depth > 16 || bound.first().is_some_and(|s| s == name) {
                    return None;
                }
                self.absolute(module, &bound.clone(), depth + 1)?
            }
        };
        let mut path = base;
        path.extend(rest.iter().cloned());
        Some(path)
    }

    /// The file that defines what a path written in `module` names: child modules are
    /// entered, re-exports followed, and the rest is taken as an item of the module reached.
    pub(crate) fn file_of(&self, module: usize, segments: &[String]) -> Option<usize> {
        let absolute = self.absolute(module, segments, 0)?;
        Some(self.file_of_absolute(self.modules[module].root, &absolute, 0))
    }

    fn file_of_absolute(&self, root: usize, path: &[String], depth: usize) -> usize {
        let mut at = root;
        for (index, segment) in path.iter().enumerate() {
            let module = &self.modules[at];
            if let Some(&child) = module.children.get(segment) {
                at = child;
                continue;
            }
            if let Some(bound) = module.uses.get(segment)
                && depth < 16
                && let Some(mut target) = self.absolute(at, bound, 0)
            {
                target.extend(path[index + 1..].iter().cloned());
                return self.file_of_absolute(root, &target, depth + 1);
            }
            break;
        }
        self.modules[at].file
    }

    fn module_path(&self, module: usize) -> Vec<String> {
        let mut path = Vec::new();
        let mut at = module;
        while let Some(parent) = self.modules[at].parent {
            let name = self.modules[parent]
                .children
                .iter()
                .find(|&(_, &child)| child == at)
                .map(|(name, _)| name.clone())
                .unwrap();
            path.push(name);
            at = parent;
        }
        path.reverse();
        path
    }
}

/// `#[cfg(test)]`, `#[test]`, `#[tokio::test]`, `#[test_case(..)]`: code a non-test build
/// leaves out.
pub(crate) fn is_test_code(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let path = attr.path();
        let last = path.segments.last().map(|s| s.ident.to_string());
        if matches!(last.as_deref(), Some("test" | "test_case")) {
            return true;
        }
        if !path.is_ident("cfg") {
            return false;
        }
        let Ok(list) = attr.meta.require_list() else {
            return false;
        };
        let tokens = list.tokens.to_string();
        tokens == "test" || (tokens.starts_with("all") && tokens.contains("test"))
    })
}

/// The names a `use` tree binds, each with the path as written (`self` leaves and renames
/// bind the name they end with; a glob binds nothing nameable).
pub(crate) fn use_bindings(tree: &UseTree) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    walk_use_tree(tree, &mut Vec::new(), &mut |prefix, leaf| match leaf {
        UseLeaf::Name(name) => out.push((name.clone(), prefix.to_vec())),
        UseLeaf::Rename(alias) => out.push((alias.clone(), prefix.to_vec())),
        UseLeaf::Glob => {}
    });
    out
}

/// Every path a `use` tree imports, as written (a glob imports its module).
pub(crate) fn use_paths(tree: &UseTree) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    walk_use_tree(tree, &mut Vec::new(), &mut |prefix, _| {
        out.push(prefix.to_vec());
    });
    out
}

enum UseLeaf<'a> {
    Name(&'a String),
    Rename(&'a String),
    Glob,
}

fn walk_use_tree(
    tree: &UseTree,
    prefix: &mut Vec<String>,
    leaf: &mut dyn FnMut(&[String], UseLeaf<'_>),
) {
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            walk_use_tree(&p.tree, prefix, leaf);
            prefix.pop();
        }
        UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                // `use a::b::{self}` binds `b` and names the module itself.
                if let Some(last) = prefix.last().cloned() {
                    leaf(prefix, UseLeaf::Name(&last));
                }
            } else {
                prefix.push(name.clone());
                leaf(prefix, UseLeaf::Name(&name));
                prefix.pop();
            }
        }
        UseTree::Rename(r) => {
            let alias = r.rename.to_string();
            if r.ident == "self" {
                leaf(prefix, UseLeaf::Rename(&alias));
            } else {
                prefix.push(r.ident.to_string());
                leaf(prefix, UseLeaf::Rename(&alias));
                prefix.pop();
            }
        }
        UseTree::Glob(_) => leaf(prefix, UseLeaf::Glob),
        UseTree::Group(g) => {
            for item in &g.items {
                walk_use_tree(item, prefix, leaf);
            }
        }
    }
}
