//! One pooled HTTP/1.1 keep-alive client to one server.
//!
//! Connections are hyper's low-level `http1` ones, kept in a stack of idle senders: a request
//! takes one (or opens a new one), and gives it back only after its response body was read to
//! the end, so a pooled connection is always free. A connection whose response failed is
//! dropped, never reused. Nagle's algorithm is off, so small requests leave at once. Knows
//! nothing about OpenAI shapes or metrics.
//!
//! A lease says whether its connection was reused: a server may close a kept-alive connection
//! just as the next request goes out on it (llama-server closes ~0.6 ms after a stream ends,
//! while still answering `Keep-Alive`), and only a request that failed on a reused connection
//! may be resent on a new one ([`super::request`] decides).
//!
//! A request also waits on its connection's task, not only on hyper's answer: when a server
//! closes a connection at the instant a request is queued on it, hyper can end that task with
//! the request still queued and never answer it (a queued request is only dropped once every
//! handle to the connection is, and the waiting lease holds one). Seen as one request in a few
//! thousand hanging until its timeout against llama-server's manner of closing.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

type Sender = SendRequest<Full<Bytes>>;

/// One connection: where requests are handed over, and the task reading and writing it.
#[derive(Debug)]
struct Connection {
    sender: Sender,
    /// Ends when the connection does (closed by either side, or failed).
    task: JoinHandle<()>,
}

/// Why a request got no response head.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to `{addr}`: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("the connection failed: {0}")]
    Http(#[from] hyper::Error),
    /// The connection ended with the request unanswered (see the module's notes).
    #[error("the connection closed before a response came")]
    Closed,
    /// The target and path do not make a request (a blank or a character a URL cannot hold):
    /// validation refuses such a literal target, but one computed by an expression gets here.
    #[error(
        "cannot build a request for `{uri}`: {source} (help: a URL cannot hold blanks or such characters; percent-encode them, e.g. `%20` for a blank)"
    )]
    Request {
        uri: String,
        source: hyper::http::Error,
    },
}

/// A keep-alive connection pool to one `http://host:port`.
#[derive(Debug)]
pub struct Client {
    /// `host:port`, for connecting and for the `Host` header.
    authority: String,
    /// The target URL's own path (`/proxy` in `http://h/proxy`), put before every path.
    base_path: String,
    idle: Mutex<Vec<Connection>>,
    opened: AtomicU64,
}

/// A connection taken from the pool. [`Lease::release`] returns it; dropping it closes it.
pub struct Lease<'a> {
    client: &'a Client,
    connection: Connection,
    /// Taken from the pool (it carried an earlier request), not opened for this one.
    reused: bool,
}

impl Client {
    /// `base` is `http://host[:port]` as [`super::config`] normalised it.
    pub fn new(base: &str) -> Self {
        let rest = base.strip_prefix("http://").unwrap_or(base);
        let (host, base_path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
        let authority = if host.contains(':') && !host.ends_with(']') {
            host.to_owned()
        } else {
            format!("{host}:80")
        };
        Self {
            authority,
            base_path: base_path.trim_end_matches('/').to_owned(),
            idle: Mutex::new(Vec::new()),
            opened: AtomicU64::new(0),
        }
    }

    /// Connections opened so far (a keep-alive pool opens about as many as the concurrency).
    pub fn connections_opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// An idle pooled connection, or a new one.
    pub async fn lease(&self) -> Result<Lease<'_>, ClientError> {
        loop {
            let pooled = self
                .idle
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop();
            match pooled {
                // Released only after its body ended, so a live one is free (or about to be:
                // `send` waits for `ready`).
                Some(connection)
                    if !connection.sender.is_closed() && !connection.task.is_finished() =>
                {
                    return Ok(Lease {
                        client: self,
                        connection,
                        reused: true,
                    });
                }
                // Closed by the server while idle: drop it and look again.
                Some(_) => {}
                None => break,
            }
        }
        self.open().await
    }

    /// A new connection, never one from the pool.
    pub async fn open(&self) -> Result<Lease<'_>, ClientError> {
        let stream = TcpStream::connect(&self.authority)
            .await
            .map_err(|source| ClientError::Connect {
                addr: self.authority.clone(),
                source,
            })?;
        stream.set_nodelay(true).ok();
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
        // Its error, if any, reaches the request waiting on it through hyper or as `Closed`.
        let task = tokio::spawn(async move {
            let _ = connection.await;
        });
        self.opened.fetch_add(1, Ordering::Relaxed);
        Ok(Lease {
            client: self,
            connection: Connection { sender, task },
            reused: false,
        })
    }

    /// A whole small response, for `/v1/models` and the like.
    pub async fn get(&self, path: &str) -> Result<(u16, Bytes), ClientError> {
        let mut lease = self.lease().await?;
        let response = lease.send(Method::GET, path, Bytes::new(), None).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        lease.release();
        Ok((status, body))
    }
}

impl Lease<'_> {
    /// The connection carried an earlier request (it came from the pool).
    pub fn reused(&self) -> bool {
        self.reused
    }

    /// Sends one request with a JSON body; the response's body is left to the caller.
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Bytes,
        request_id: Option<&str>,
    ) -> Result<Response<Incoming>, ClientError> {
        let uri = format!("{}{path}", self.client.base_path);
        let mut builder = Request::builder()
            .method(method)
            .uri(uri.as_str())
            .header("host", &self.client.authority)
            .header("accept", "text/event-stream, application/json");
        if !body.is_empty() {
            builder = builder.header("content-type", "application/json");
        }
        if let Some(id) = request_id {
            builder = builder.header("x-request-id", id);
        }
        let request = builder
            .body(Full::new(body))
            .map_err(|source| ClientError::Request { uri, source })?;
        let Connection { sender, task } = &mut self.connection;
        let answered = async {
            sender.ready().await?;
            Ok(sender.send_request(request).await?)
        };
        tokio::select! {
            // An answer that is already there wins over the end of its connection.
            biased;
            answered = answered => answered,
            _ = task => Err(ClientError::Closed),
        }
    }

    /// Puts the connection back for the next request: call only once the response's body has
    /// been read to its end.
    pub fn release(self) {
        if self.connection.sender.is_closed() || self.connection.task.is_finished() {
            return;
        }
        self.client
            .idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(self.connection);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authority_and_base_path_from_the_target() {
        let c = Client::new("http://127.0.0.1:30000");
        assert_eq!(
            (c.authority.as_str(), c.base_path.as_str()),
            ("127.0.0.1:30000", "")
        );
        let c = Client::new("http://gpu-box/proxy/");
        assert_eq!(
            (c.authority.as_str(), c.base_path.as_str()),
            ("gpu-box:80", "/proxy")
        );
        let c = Client::new("http://[::1]:8000");
        assert_eq!(c.authority, "[::1]:8000");
    }

    /// hyper's state after a server closed the connection as a request was queued on it: the
    /// connection's task is over, and the queued request is neither answered nor dropped (here
    /// by leaking the connection instead of racing a real close, which loses a few requests in
    /// a thousand: runner/tests/bench_manners.rs sends hundreds that way).
    #[tokio::test]
    async fn a_request_whose_connection_ended_unanswered_fails_instead_of_waiting() {
        let client = Client::new("http://127.0.0.1:9");
        let (ours, _theirs) = tokio::io::duplex(1024);
        let (sender, connection) = http1::handshake(TokioIo::new(ours)).await.unwrap();
        let task = tokio::spawn(async move { std::mem::forget(connection) });
        let mut lease = Lease {
            client: &client,
            connection: Connection { sender, task },
            reused: true,
        };
        let sent = lease.send(
            Method::POST,
            "/v1/completions",
            Bytes::from_static(b"{}"),
            None,
        );
        // Bounded only so that the old behaviour fails instead of hanging the test run.
        let outcome = tokio::time::timeout(std::time::Duration::from_secs(30), sent).await;
        assert!(
            matches!(outcome, Ok(Err(ClientError::Closed))),
            "{outcome:?}"
        );
    }
}
