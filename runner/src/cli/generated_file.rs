//! Files `gpuflow docs` and `gpuflow schema` generate.

/// Writes a generated file only when its content changed, so `make schema docs` leaves
/// timestamps (and editors' buffers) alone when nothing moved.
pub(super) fn write_if_changed(path: &std::path::Path, content: &str) -> std::io::Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == content) {
        return Ok(());
    }
    std::fs::write(path, content)
}
