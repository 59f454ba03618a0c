//! Code that fits a screen: no function longer than [`MAX_FUNCTION_LINES`] outside tests, no file
//! longer than [`MAX_FILE_LINES`] (issue 15). A function is counted from its `fn` line to its
//! closing brace; a file by all its lines, tests included (move them to a sibling file).

use std::collections::BTreeSet;

use syn::spanned::Spanned;
use syn::visit::Visit;

use crate::source_tree::{SourceFile, SourceTree, is_test_code};

const MAX_FUNCTION_LINES: usize = 100;
const MAX_FILE_LINES: usize = 800;

/// What still breaks the rule, `file` for a whole file and `file::function` for a function
/// (`Type::method` for a method), each still to be cut into named parts. The list may only
/// shrink: an entry that no longer breaks the rule fails the test until it is deleted.
const ALLOWED: &[&str] = &[];

/// One thing over its limit: `name` is what [`ALLOWED`] lists.
struct TooLong {
    name: String,
    place: String,
    lines: usize,
    limit: usize,
}

#[test]
fn functions_and_files_fit_their_limits() {
    let tree = SourceTree::load();
    let mut found = Vec::new();
    for file in &tree.files {
        let lines = file.text.lines().count();
        if lines > MAX_FILE_LINES {
            found.push(TooLong {
                name: file.name.clone(),
                place: format!("runner/src/{}", file.name),
                lines,
                limit: MAX_FILE_LINES,
            });
        }
    }
    for file in tree.production_files() {
        found.extend(long_functions(file));
    }

    let allowed: BTreeSet<&str> = ALLOWED.iter().copied().collect();
    let mut problems: Vec<String> = found
        .iter()
        .filter(|too_long| !allowed.contains(too_long.name.as_str()))
        .map(|t| {
            format!(
                "{}: `{}` is {} lines, over the limit of {}",
                t.place, t.name, t.lines, t.limit
            )
        })
        .collect();
    let still_long: BTreeSet<&str> = found.iter().map(|t| t.name.as_str()).collect();
    problems.extend(
        allowed
            .difference(&still_long)
            .map(|name| format!("`{name}` fits its limit now: remove it from ALLOWED")),
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The functions and methods of one file longer than [`MAX_FUNCTION_LINES`], test code left
/// out.
fn long_functions(file: &SourceFile) -> Vec<TooLong> {
    let mut finder = FunctionFinder {
        file,
        scope: Vec::new(),
        found: Vec::new(),
    };
    finder.visit_file(&file.syntax);
    finder.found
}

struct FunctionFinder<'a> {
    file: &'a SourceFile,
    /// Enclosing inline modules, impl types and functions, for the name in [`ALLOWED`].
    scope: Vec<String>,
    found: Vec<TooLong>,
}

impl FunctionFinder<'_> {
    fn measure(&mut self, name: &syn::Ident, first: proc_macro2::Span, body: &syn::Block) {
        let start = first.start().line;
        let end = body.brace_token.span.close().end().line;
        let lines = end - start + 1;
        let mut qualified = self.scope.clone();
        qualified.push(name.to_string());
        if lines > MAX_FUNCTION_LINES {
            self.found.push(TooLong {
                name: format!("{}::{}", self.file.name, qualified.join("::")),
                place: format!("runner/src/{}:{start}", self.file.name),
                lines,
                limit: MAX_FUNCTION_LINES,
            });
        }
    }

    fn within<'ast, T>(
        &mut self,
        scope: String,
        node: &'ast T,
        visit: impl FnOnce(&mut Self, &'ast T),
    ) {
        self.scope.push(scope);
        visit(self, node);
        self.scope.pop();
    }
}

impl<'ast> Visit<'ast> for FunctionFinder<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Trait(t) => &t.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test_code(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.within(m.ident.to_string(), m, syn::visit::visit_item_mod);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        self.within(type_name(&i.self_ty), i, syn::visit::visit_item_impl);
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        self.within(t.ident.to_string(), t, syn::visit::visit_item_trait);
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.measure(&f.sig.ident, f.sig.fn_token.span(), &f.block);
        self.within(f.sig.ident.to_string(), f, syn::visit::visit_item_fn);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_test_code(&f.attrs) {
            return;
        }
        self.measure(&f.sig.ident, f.sig.fn_token.span(), &f.block);
        self.within(f.sig.ident.to_string(), f, syn::visit::visit_impl_item_fn);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if is_test_code(&f.attrs) {
            return;
        }
        if let Some(body) = &f.default {
            self.measure(&f.sig.ident, f.sig.fn_token.span(), body);
        }
        self.within(f.sig.ident.to_string(), f, syn::visit::visit_trait_item_fn);
    }
}

/// The name an impl's methods are listed under: `Board` for `impl Board` and
/// `impl EventSink for &Board` alike.
fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p.path.segments.last().unwrap().ident.to_string(),
        syn::Type::Reference(r) => type_name(&r.elem),
        _ => "impl".to_owned(),
    }
}
