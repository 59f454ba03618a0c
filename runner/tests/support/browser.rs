//! Headless Chromium driven through its DevTools protocol, for tests that look at a page as
//! a user does while it changes (`gpuflow serve`'s live run page): the protocol travels over
//! two named pipes (`--remote-debugging-pipe`: commands in on fd 3, answers out on fd 4, each
//! a JSON message ended by a NUL byte), so no port and no WebSocket client are needed.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use super::Workspace;

/// The Chromium on this machine; `None` (the test skips) where there is none, except on CI,
/// where `.ci/run` installs it and its absence fails the test.
pub(crate) fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is missing on CI: .ci/run installs it (apt-get install chromium)"
        );
        eprintln!("skipped: no chromium on this machine (apt-get install -y chromium)");
    }
    found
}

/// One headless Chromium showing one page; closed when dropped.
pub(crate) struct Browser {
    child: Child,
    to: File,
    from: BufReader<File>,
    session: String,
    next: u64,
    _dir: Workspace,
}

impl Browser {
    /// Chromium showing `url` in a window of `width`×`height`; `None` when there is no Chromium.
    pub(crate) fn open(url: &str, width: u32, height: u32) -> Option<Self> {
        let chromium = chromium()?;
        let dir = Workspace::empty();
        let (commands, answers) = (dir.path().join("in"), dir.path().join("out"));
        for fifo in [&commands, &answers] {
            let made = Command::new("mkfifo").arg(fifo).status().unwrap();
            assert!(made.success(), "mkfifo {}", fifo.display());
        }
        let child = Command::new("bash")
            .args([
                "-c",
                r#"exec "$0" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="$1" --user-data-dir="$2" --remote-debugging-pipe "$3" 3<"$4" 4>"$5""#,
                chromium,
            ])
            .arg(format!("{width},{height}"))
            .arg(dir.path().join("profile"))
            .arg(url)
            .arg(&commands)
            .arg(&answers)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Each open waits for Chromium's end of the pipe.
        let to = File::options().write(true).open(&commands).unwrap();
        let from = BufReader::new(File::open(&answers).unwrap());
        let mut browser = Self {
            child,
            to,
            from,
            session: String::new(),
            next: 0,
            _dir: dir,
        };
        let targets = browser.call(None, "Target.getTargets", json!({}));
        let page = targets["targetInfos"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .unwrap_or_else(|| panic!("no page among {targets}"))["targetId"]
            .clone();
        let attached = browser.call(
            None,
            "Target.attachToTarget",
            json!({ "targetId": page, "flatten": true }),
        );
        browser.session = attached["sessionId"].as_str().unwrap().to_string();
        // Attached, the tab may still show the blank page it starts with.
        browser.wait_for(
            "the page to load",
            "location.href !== 'about:blank' && document.readyState === 'complete'",
            Duration::from_secs(30),
        );
        Some(browser)
    }

    /// Sends one command and waits for its answer's `result`.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            message["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        loop {
            let mut raw = Vec::new();
            let n = self.from.read_until(0, &mut raw).unwrap();
            assert!(n > 0, "Chromium closed its pipe waiting for {method}");
            raw.pop();
            let answer: Value = serde_json::from_slice(&raw).unwrap();
            if answer["id"] == id {
                assert!(answer.get("error").is_none(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
    }

    /// The value of the JavaScript expression `js` in the page.
    pub(crate) fn eval(&mut self, js: &str) -> Value {
        let session = self.session.clone();
        let out = self.call(
            Some(&session),
            "Runtime.evaluate",
            json!({ "expression": js, "returnByValue": true }),
        );
        assert!(out.get("exceptionDetails").is_none(), "{js}: {out}");
        out["result"]["value"].clone()
    }

    /// Waits (up to `limit`) until `js` is true in the page.
    pub(crate) fn wait_for(&mut self, what: &str, js: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.eval(js) != json!(true) {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what} ({js})"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The page as it is on screen now, as a PNG file at `path`.
    pub(crate) fn screenshot(&mut self, path: &Path) {
        let session = self.session.clone();
        let shot = self.call(
            Some(&session),
            "Page.captureScreenshot",
            json!({ "format": "png" }),
        );
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The share of a PNG's pixels within a few levels of `rgb`, and the image's size.
pub(crate) fn colour_share(png: &Path, rgb: [u8; 3]) -> (f64, u32, u32) {
    let decoder = png::Decoder::new(BufReader::new(File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels = buf[..info.buffer_size()].chunks(channels);
    let total = pixels.len();
    let near = pixels
        .filter(|px| {
            px[..3]
                .iter()
                .zip(rgb)
                .all(|(a, b)| (i16::from(*a) - i16::from(b)).abs() <= 6)
        })
        .count();
    (near as f64 / total.max(1) as f64, info.width, info.height)
}
