//! Free ports of 127.0.0.1, for servers a test publishes, so parallel tests cannot collide.

use std::net::TcpListener;

/// A port of 127.0.0.1 nobody listens on right now (the OS's choice, released at once).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
