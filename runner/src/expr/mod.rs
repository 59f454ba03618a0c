//! The `${{ }}` expression language. (being written)
