//! OS signals turned into a stream of meaning, and the cancellation they cause.
//!
//! As in nextest, nothing downstream sees signal numbers: [`SignalHandler`] yields
//! [`SignalEvent::Shutdown`] with which signal it was and how many shutdown signals have
//! arrived so far. [`cancel_on_signals`] is the policy gpuflow runs with:
//!
//! 1. the first SIGINT or SIGTERM (or SIGHUP) fires the `cancel` token: the engine stops
//!    starting work, cancels running steps, runs `always()` steps and removes its containers;
//! 2. the second fires the `force` token: clean-up stops waiting for anything but removal;
//! 3. the third exits at once with 130: a process that ignores two requests to stop is stuck,
//!    and the next `gpuflow run` (or `gpuflow gc`) sweeps what it leaves.
//!
//! Unlike just, gpuflow does not ignore SIGINT while children run: its children are containers
//! on a Docker engine, outside the terminal's process group, so a Ctrl-C reaches only gpuflow
//! and gpuflow must pass it on by cancelling.
//!
//! This module knows nothing of the engine, Docker or the CLI; it owns only the mapping and the
//! escalation. [`SignalHandlerKind::Noop`] never yields, for tests and library callers that
//! handle signals themselves.

use std::fmt;
use std::io;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::diag::ExitCode;

/// A signal that asks gpuflow to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownSignal {
    /// SIGINT: Ctrl-C on a terminal.
    Interrupt,
    /// SIGTERM: `kill`, a service manager, a CI runner's timeout.
    Terminate,
    /// SIGHUP: the terminal went away.
    Hangup,
}

impl ShutdownSignal {
    /// The conventional name, as `kill -l` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Interrupt => "SIGINT",
            Self::Terminate => "SIGTERM",
            Self::Hangup => "SIGHUP",
        }
    }
}

impl fmt::Display for ShutdownSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a signal means to gpuflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalEvent {
    /// Stop. `count` is how many shutdown signals have arrived, this one included (1-based).
    Shutdown { signal: ShutdownSignal, count: u32 },
}

/// Which signals a [`SignalHandler`] listens to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SignalHandlerKind {
    /// SIGINT, SIGTERM and SIGHUP.
    #[default]
    Standard,
    /// None: the handler never yields. For tests, and for embedding gpuflow in a program that
    /// owns its signals.
    Noop,
}

/// A stream of [`SignalEvent`]s.
#[derive(Debug)]
pub struct SignalHandler {
    events: Option<mpsc::UnboundedReceiver<SignalEvent>>,
}

impl SignalHandler {
    /// Starts listening. Must be called inside a tokio runtime. Once a `Standard` handler
    /// exists, these signals no longer kill the process: the caller must act on the events.
    pub fn new(kind: SignalHandlerKind) -> io::Result<Self> {
        match kind {
            SignalHandlerKind::Noop => Ok(Self { events: None }),
            SignalHandlerKind::Standard => Self::standard(),
        }
    }

    /// A handler fed by the returned sender instead of the OS, so code that reacts to signals
    /// can be tested without sending real ones.
    pub fn manual() -> (mpsc::UnboundedSender<SignalEvent>, Self) {
        let (tx, rx) = mpsc::unbounded_channel();
        (tx, Self { events: Some(rx) })
    }

    /// The next event; `None` when no more can come (a `Noop` handler waits forever instead,
    /// so it can sit in a `select!` without winning it).
    pub async fn recv(&mut self) -> Option<SignalEvent> {
        match &mut self.events {
            Some(events) => events.recv().await,
            None => std::future::pending().await,
        }
    }

    #[cfg(unix)]
    fn standard() -> io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};

        // Registered here, not in the task, so a signal that arrives right after this returns
        // is already caught rather than killing the process.
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let mut hangup = signal(SignalKind::hangup())?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut count = 0u32;
            loop {
                let signal = tokio::select! {
                    Some(()) = interrupt.recv() => ShutdownSignal::Interrupt,
                    Some(()) = terminate.recv() => ShutdownSignal::Terminate,
                    Some(()) = hangup.recv() => ShutdownSignal::Hangup,
                    else => break,
                };
                count = count.saturating_add(1);
                if tx.send(SignalEvent::Shutdown { signal, count }).is_err() {
                    break;
                }
            }
        });
        Ok(Self { events: Some(rx) })
    }

    #[cfg(not(unix))]
    fn standard() -> io::Result<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut count = 0u32;
            while tokio::signal::ctrl_c().await.is_ok() {
                count = count.saturating_add(1);
                let event = SignalEvent::Shutdown {
                    signal: ShutdownSignal::Interrupt,
                    count,
                };
                if tx.send(event).is_err() {
                    break;
                }
            }
        });
        Ok(Self { events: Some(rx) })
    }
}

/// What the `count`-th shutdown signal asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Escalation {
    /// Cancel gracefully: `always()` steps run, containers are removed.
    Cancel,
    /// Stop waiting on anything but removal.
    Force,
    /// Leave now.
    Exit,
}

impl Escalation {
    pub fn for_count(count: u32) -> Self {
        match count {
            0 | 1 => Self::Cancel,
            2 => Self::Force,
            _ => Self::Exit,
        }
    }
}

/// What [`cancel_on_signals`] hands back: the tokens it fires and the first signal seen.
#[derive(Clone, Debug)]
pub struct Shutdown {
    /// Fired by the first signal (the token passed in).
    pub cancel: CancellationToken,
    /// Fired by the second signal, together with `cancel` (a forced stop is a cancelled one
    /// too).
    pub force: CancellationToken,
    first: std::sync::Arc<std::sync::OnceLock<ShutdownSignal>>,
}

impl Shutdown {
    /// The signal that started the shutdown, if one has arrived.
    pub fn signal(&self) -> Option<ShutdownSignal> {
        self.first.get().copied()
    }

    /// The exit status to end with once cancelled by a signal: 130 for every shutdown signal,
    /// so scripts see one documented "interrupted" status (README.md, exit codes).
    pub fn exit_code(&self) -> Option<ExitCode> {
        self.signal().map(|_| ExitCode::Interrupted)
    }
}

/// Spawns the listener that turns signals into cancellation: the first fires `cancel`, the
/// second `force`, the third exits the process with 130. `notify` is told of each event
/// (e.g. to print "cancelling: press Ctrl-C again to force"). Must be called inside a tokio
/// runtime; the listener ends with the runtime.
pub fn cancel_on_signals(
    kind: SignalHandlerKind,
    cancel: CancellationToken,
    notify: impl Fn(SignalEvent, Escalation) + Send + 'static,
) -> io::Result<Shutdown> {
    let handler = SignalHandler::new(kind)?;
    Ok(escalate(handler, cancel, notify))
}

/// The escalation policy over any handler (a manual one in tests).
pub fn escalate(
    mut handler: SignalHandler,
    cancel: CancellationToken,
    notify: impl Fn(SignalEvent, Escalation) + Send + 'static,
) -> Shutdown {
    let shutdown = Shutdown {
        force: CancellationToken::new(),
        cancel,
        first: std::sync::Arc::default(),
    };
    let state = shutdown.clone();
    tokio::spawn(async move {
        while let Some(event) = handler.recv().await {
            let SignalEvent::Shutdown { signal, count } = event;
            let _ = state.first.set(signal);
            let escalation = Escalation::for_count(count);
            notify(event, escalation);
            match escalation {
                Escalation::Cancel => state.cancel.cancel(),
                Escalation::Force => {
                    state.cancel.cancel();
                    state.force.cancel();
                }
                Escalation::Exit => std::process::exit(i32::from(ExitCode::Interrupted.code())),
            }
        }
    });
    shutdown
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use test_case::test_case;

    #[test_case(1, Escalation::Cancel ; "first cancels")]
    #[test_case(2, Escalation::Force ; "second forces")]
    #[test_case(3, Escalation::Exit ; "third exits")]
    #[test_case(9, Escalation::Exit ; "later ones exit too")]
    fn escalation_by_count(count: u32, expected: Escalation) {
        assert_eq!(Escalation::for_count(count), expected);
    }

    #[tokio::test]
    async fn noop_never_yields() {
        let mut handler = SignalHandler::new(SignalHandlerKind::Noop).unwrap();
        let waited = tokio::time::timeout(Duration::from_millis(50), handler.recv()).await;
        assert!(waited.is_err(), "a noop handler yielded {waited:?}");
    }

    #[tokio::test]
    async fn first_signal_cancels_second_forces() {
        let (tx, handler) = SignalHandler::manual();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let shutdown = escalate(handler, CancellationToken::new(), move |event, esc| {
            log.lock().unwrap().push((event, esc));
        });
        assert_eq!(shutdown.signal(), None);
        assert_eq!(shutdown.exit_code(), None);

        let first = SignalEvent::Shutdown {
            signal: ShutdownSignal::Terminate,
            count: 1,
        };
        tx.send(first).unwrap();
        shutdown.cancel.cancelled().await;
        assert!(!shutdown.force.is_cancelled());
        assert_eq!(shutdown.signal(), Some(ShutdownSignal::Terminate));
        assert_eq!(shutdown.exit_code(), Some(ExitCode::Interrupted));

        let second = SignalEvent::Shutdown {
            signal: ShutdownSignal::Interrupt,
            count: 2,
        };
        tx.send(second).unwrap();
        shutdown.force.cancelled().await;
        // The first signal is the one that is reported.
        assert_eq!(shutdown.signal(), Some(ShutdownSignal::Terminate));
        assert_eq!(
            *seen.lock().unwrap(),
            [(first, Escalation::Cancel), (second, Escalation::Force)]
        );
    }

    #[test]
    fn names_are_the_conventional_ones() {
        assert_eq!(ShutdownSignal::Interrupt.to_string(), "SIGINT");
        assert_eq!(ShutdownSignal::Terminate.name(), "SIGTERM");
    }
}
