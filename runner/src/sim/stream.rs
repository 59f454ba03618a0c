//! One generation as an HTTP body: streamed chunks released at their scheduled moments, each
//! stamped into the record the instant it is handed to the connection.
//!
//! The body itself waits for each deadline (no task per request, no channel between the clock
//! and the socket), so the stamp is taken in the same poll that gives hyper the bytes, which it
//! writes and flushes before polling again. A [`RequestGuard`] writes the request's record line
//! once, whether it completes or the client goes away first.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use bytes::Bytes;
use hyper::body::{Body, Frame};
use tokio::sync::OwnedSemaphorePermit;

use super::config::UsageChunk;
use super::connection::StreamEnd;
use super::record::{ChunkStamp, Outcome, RequestRecord};
use super::request::Endpoint;
use super::response::{Envelope, Usage, token_text};
use super::schedule::{PlannedChunk, TokenSchedule};
use super::state::State;
use super::timer::{self, Sleep};

/// Writes a request's record exactly once: complete, or cancelled when dropped before that.
pub struct RequestGuard {
    state: Arc<State>,
    record: Option<RequestRecord>,
    /// Prompt and sent tokens: what its KV cache holds until it ends.
    held: u64,
}

impl RequestGuard {
    /// The request got its slot: counted as running from now until the guard closes.
    pub fn new(state: Arc<State>, record: RequestRecord) -> Self {
        state
            .metrics
            .started(record.prompt_tokens, record.cached_tokens);
        Self {
            held: u64::from(record.prompt_tokens),
            state,
            record: Some(record),
        }
    }

    pub fn push_chunk(&mut self, chunk: ChunkStamp) {
        if let Some(record) = &mut self.record {
            self.state.metrics.chunk(chunk.tokens);
            self.held += u64::from(chunk.tokens);
            record.chunks.push(chunk);
        }
    }

    /// The request was answered in full.
    pub fn complete(&mut self) {
        self.close(Outcome::Complete);
        self.state.answered();
    }

    fn close(&mut self, outcome: Outcome) {
        if let Some(mut record) = self.record.take() {
            record.outcome = outcome;
            record.finished = self.state.recorder.clock().now().1;
            self.state
                .metrics
                .ended(self.held, outcome == Outcome::Complete);
            self.state.recorder.finish(record);
        }
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.close(Outcome::Cancelled);
    }
}

/// What a response needs besides its schedule.
pub struct StreamPlan {
    pub endpoint: Endpoint,
    pub id: String,
    pub created: u64,
    pub stream: bool,
    pub completion_tokens: u32,
    pub finish_reason: &'static str,
    pub usage: Option<Usage>,
    /// Whether `usage` goes in its own event or on the finish_reason chunk.
    pub usage_chunk: UsageChunk,
    pub start: Instant,
}

/// The SSE body of one streamed response.
pub struct SseStream {
    plan: StreamPlan,
    schedule: TokenSchedule,
    next: Option<PlannedChunk>,
    sent_tokens: u32,
    sleep: Option<Sleep>,
    closed: bool,
    guard: RequestGuard,
    /// Under --close-after-stream: told when the last bytes are handed over.
    end: Option<StreamEnd>,
    /// Held until the stream ends, so the slot frees when the response does.
    _slot: Option<OwnedSemaphorePermit>,
}

impl SseStream {
    pub fn new(
        plan: StreamPlan,
        mut schedule: TokenSchedule,
        guard: RequestGuard,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Self {
        let next = schedule.next();
        Self {
            plan,
            schedule,
            next,
            sent_tokens: 0,
            sleep: None,
            closed: false,
            guard,
            end: None,
            _slot: slot,
        }
    }

    /// Under --close-after-stream: the connection is closed shortly after this stream ends.
    pub fn close_connection_after(mut self, end: StreamEnd) -> Self {
        self.end = Some(end);
        self
    }

    fn envelope(&self) -> Envelope<'_> {
        Envelope {
            endpoint: self.plan.endpoint,
            id: &self.plan.id,
            created: self.plan.created,
            model: &self.guard.state.config.model_name,
        }
    }
}

impl Body for SseStream {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let Some(chunk) = this.next else {
            if this.closed {
                return Poll::Ready(None);
            }
            this.closed = true;
            let usage = match this.plan.usage_chunk {
                UsageChunk::Separate => this.plan.usage,
                UsageChunk::Final => None,
            };
            let bytes = this.envelope().closing(usage);
            this.guard.complete();
            if let Some(end) = &this.end {
                // This is the body's last frame (`is_end_stream` is now true), so hyper writes
                // it together with the terminating chunk.
                end.mark();
            }
            return Poll::Ready(Some(Ok(Frame::data(bytes))));
        };

        let deadline = this.plan.start + chunk.due;
        let sleep = this
            .sleep
            .get_or_insert_with(|| timer::sleep_until(deadline));
        ready!(Pin::new(sleep).poll(cx));
        this.sleep = None;

        let text = token_text(this.sent_tokens, chunk.tokens);
        this.sent_tokens += chunk.tokens;
        let last = this.sent_tokens >= this.plan.completion_tokens;
        let finish = last.then_some(this.plan.finish_reason);
        let usage = match this.plan.usage_chunk {
            UsageChunk::Final if last => this.plan.usage,
            _ => None,
        };
        let bytes = this
            .envelope()
            .chunk(&text, chunk.index == 0, finish, usage);
        // Stamped after the bytes are built, just before hyper writes them.
        let (_, at) = this.guard.state.recorder.clock().now();
        this.guard.push_chunk(ChunkStamp {
            index: chunk.index,
            tokens: chunk.tokens,
            mono_ns: at.mono_ns,
            unix_ns: at.unix_ns,
        });
        this.next = this.schedule.next();
        Poll::Ready(Some(Ok(Frame::data(bytes))))
    }

    fn is_end_stream(&self) -> bool {
        self.next.is_none() && self.closed
    }
}
