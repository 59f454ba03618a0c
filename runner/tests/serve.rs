//! `gpuflow serve` (docs/serve.md) started as a user starts it, on a random loopback port,
//! against real stores filled by real runs: the simulator demo's results, a run printing as
//! the page is open, a triggered run cancelled through it. Pages are asked over HTTP and
//! looked at in headless Chromium, which also takes the screenshots README shows
//! (`GPUFLOW_KEEP_SCREENSHOTS=DIR` keeps them).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::support::browser::{Browser, colour_share};
use crate::support::images::{BASE, SIM};
use crate::support::{Running, Workspace, free_port, gpuflow, poll_until};

/// A `gpuflow serve` process and where it listens; stopped when dropped.
struct Served {
    /// Killed when dropped.
    process: Running,
    addr: String,
}

impl Served {
    /// `gpuflow serve --listen 127.0.0.1:0 ARGS` in `dir`, with `home` as `GPUFLOW_HOME`.
    fn start(dir: &Path, home: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut process = gpuflow()
            .current_dir(dir)
            .home(home)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .spawn();
        let first = process.line();
        let addr = first
            .strip_prefix("gpuflow serve: http://")
            .and_then(|a| a.strip_suffix('/'))
            .unwrap_or_else(|| panic!("serve said {first:?}"))
            .to_string();
        Self { process, addr }
    }

    /// The id of the run it lists first, once that one is running.
    fn running_run(&self) -> String {
        let listed = poll_until(
            "the run to be listed as running",
            Duration::from_secs(30),
            || self.json("/runs"),
            |l| l["runs"][0]["state"] == "running",
        );
        listed["runs"][0]["id"].as_str().unwrap().to_string()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `GET path`: status, content type and body.
    fn get(&self, path: &str) -> (u16, String, String) {
        self.request("GET", path, &[], "")
    }

    fn json(&self, path: &str) -> Value {
        let (status, kind, body) = self.get(&format!("/api{path}"));
        assert_eq!(status, 200, "{path}: {body}");
        assert!(kind.starts_with("application/json"), "{path}: {kind}");
        serde_json::from_str(&body).unwrap()
    }

    /// One HTTP/1.0 request (the answer ends with the connection, never chunked).
    fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        let mut head = format!(
            "{method} {path} HTTP/1.0\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        stream
            .write_all(format!("{head}\r\n{body}").as_bytes())
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let kind = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-type: ")
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        (status, kind, body.to_string())
    }
}

/// Where a screenshot goes: `GPUFLOW_KEEP_SCREENSHOTS` (README's pictures are made so), else
/// the test's own folder.
fn screenshot_path(dir: &Path, name: &str) -> PathBuf {
    match std::env::var_os("GPUFLOW_KEEP_SCREENSHOTS") {
        Some(keep) => {
            std::fs::create_dir_all(&keep).unwrap();
            PathBuf::from(keep).join(name)
        }
        None => dir.join(name),
    }
}

fn stand_in_inventory() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/stand-in-8gpu-pcie.toml")
}

/// Two runs of the simulator demo (the second compared with the first), a baseline pinned to
/// the first: every page and its JSON, the secret given to the server masked in all of them,
/// and the pages as Chromium draws them.
#[tokio::test]
async fn every_page_and_its_json_over_two_runs_of_the_simulator_demo() {
    let yaml = crate::bench_steps::demo_without_report(free_port());
    let Some(dir) = Workspace::workflow_repository(&yaml, &[BASE, SIM]).await else {
        return;
    };
    for _ in 0..2 {
        let out = dir.run_plain(&["--input", "output-tokens=16"]);
        assert_eq!(out.code(), Some(0), "{}", out.all());
    }
    let runs: Vec<String> = dir
        .runs()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let (first, second) = (&runs[0], &runs[1]);
    dir.gpuflow()
        .args(["baseline", "set", "first", first])
        .success();
    let home = Workspace::empty();
    let inventory = stand_in_inventory();
    let served = Served::start(
        dir.path(),
        home.path(),
        &["--secret", "SERVE_SECRET"],
        &[
            ("SERVE_SECRET", "simulated"),
            (gpuflow::gpu::STAND_IN_ENV, inventory.to_str().unwrap()),
            (
                "GPUFLOW_LEASE_DIR",
                dir.path().join("leases").to_str().unwrap(),
            ),
        ],
    );

    let listed = served.json("/runs");
    let ids: Vec<&str> = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [second.as_str(), first.as_str()],
        "newest first: {listed}"
    );
    assert!(
        listed["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["state"] == "success")
    );
    let (status, kind, html) = served.get("/runs?state=failure");
    assert_eq!((status, kind.starts_with("text/html")), (200, true));
    assert!(html.contains("No runs match"), "{html}");

    let run = served.json(&format!("/runs/{second}"));
    let jobs = run["view"]["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{run}");
    assert!(
        jobs.iter()
            .all(|j| j["job"] == "bench" && j["state"] == "success")
    );
    assert_eq!(
        run["view"]["headline"]["comparisons"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let (_, _, html) = served.get(&format!("/runs/{second}"));
    assert!(
        html.contains(r#"id="cell-1" class="cell state-success""#),
        "the graph: {html}"
    );
    assert!(html.contains("unchanged"), "the verdicts: {html}");
    let (status, kind, svg) = served.get(&format!("/runs/{second}/graph.svg"));
    assert_eq!((status, kind.as_str()), (200, "image/svg+xml"));
    assert!(svg.starts_with("<svg") && svg.contains("cell-0"), "{svg}");
    let (status, _, report) = served.get(&format!("/runs/{second}/report"));
    assert_eq!(status, 200, "{report}");
    assert!(
        report.contains("output_tok_s") && report.contains(second.as_str()),
        "{report}"
    );

    let history = served.json("/history?metric=output_tok_s");
    let series = history["series"].as_array().unwrap();
    assert_eq!(
        series.len(),
        2,
        "one series per matrix cell (their server flags differ): {history}"
    );
    for s in series {
        let points = s["points"].as_array().unwrap();
        assert_eq!(points.len(), 2, "{s}");
        assert_eq!(points[1]["verdict"], "unchanged", "{s}");
        assert_eq!(s["baselines"][0]["name"], "first", "{s}");
        assert!(
            s.get("chart_svg").is_none(),
            "charts are the page's, not the JSON's"
        );
    }
    let first_metric = served.json("/history");
    assert_eq!(
        first_metric["metric"], first_metric["metrics"][0],
        "opens on a chart"
    );
    assert_eq!(
        first_metric["series"].as_array().unwrap().len(),
        2,
        "{first_metric}"
    );
    let (_, _, html) = served.get("/history?metric=output_tok_s");
    assert_eq!(html.matches(r#"class="history""#).count(), 2, "{html}");
    assert!(
        html.contains(&format!(r#"<a href="/runs/{second}">"#)),
        "points link to runs: {html}"
    );
    assert!(html.contains("baseline first"), "{html}");

    let compare = served.json(&format!("/compare?a={first}&b={second}"));
    let pairs = compare["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 2, "{compare}");
    let metric = pairs[0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "output_tok_s")
        .unwrap();
    assert!(metric["a"]["ci_low"].as_f64().unwrap() <= metric["a"]["mean"].as_f64().unwrap());
    assert!(metric["change_pct"].is_number(), "{metric}");
    assert_eq!(
        pairs[0]["differences"],
        serde_json::json!([]),
        "same fingerprint: {compare}"
    );

    let gpus = served.json("/gpus");
    let local = &gpus["hosts"][0];
    assert_eq!(
        (local["name"].as_str(), local["stand_in"].as_bool()),
        (Some("local"), Some(true)),
        "{gpus}"
    );
    assert_eq!(local["gpus"].as_array().unwrap().len(), 8);

    let (status, _, body) = served.request("GET", "/api/runs/no-such-run", &[], "");
    assert_eq!(status, 404);
    assert!(body.contains(r#""error":"no run `no-such-run`""#), "{body}");
    let (status, _, _) = served.get("/runs/..%2F..%2Fetc%2Fpasswd");
    assert_eq!(status, 404);
    let (status, _, body) = served.request("POST", &format!("/api/runs/{second}/cancel"), &[], "");
    assert_eq!(status, 401, "a read-only server cancels nothing: {body}");

    // The job is named `simulated server`: the secret is in what the pages show of it.
    for path in [format!("/runs/{second}"), format!("/api/runs/{second}")] {
        let (_, _, body) = served.get(&path);
        assert!(!body.contains("simulated"), "the secret shows on {path}");
        assert!(body.contains("***"), "the secret is masked on {path}");
    }
    look_at_the_pages(&served, dir.path(), second);
}

/// The runs, history, GPUs and run pages in Chromium: drawn, the history's charts in their
/// colours, the stand-in GPUs marked as such.
fn look_at_the_pages(served: &Served, dir: &Path, run: &str) {
    let pages = [
        ("serve-runs.png", "/runs".to_string()),
        (
            "serve-history.png",
            "/history?metric=output_tok_s".to_string(),
        ),
        ("serve-gpus.png", "/gpus".to_string()),
        ("serve-run-finished.png", format!("/runs/{run}")),
    ];
    for (name, path) in pages {
        let Some(mut browser) = Browser::open(&served.url(&path), 1200, 1400) else {
            return;
        };
        let shot = screenshot_path(dir, name);
        browser.screenshot(&shot);
        // The header bar is drawn on every page.
        let (header, width, _) = colour_share(&shot, [0x1f, 0x29, 0x33]);
        assert!(
            width == 1200 && header > 0.01,
            "{name}: the page was not drawn"
        );
        if name == "serve-gpus.png" {
            let rows = browser.eval("document.querySelectorAll('table.gpus tbody tr').length");
            assert_eq!(rows, 8, "one row per stand-in GPU");
            let (badge, _, _) = colour_share(&shot, [0xb7, 0x79, 0x1f]);
            assert!(badge > 0.0002, "the stand-in badge is not drawn ({badge})");
        }
        if name == "serve-history.png" {
            assert_eq!(
                browser.eval("document.querySelectorAll('svg.history circle.point').length"),
                4
            );
            let (points, _, _) = colour_share(&shot, [0x2b, 0x6c, 0xb0]);
            assert!(
                points > 0.0002,
                "no series line or unchanged points drawn ({points})"
            );
        }
    }
}

/// A run that holds two stand-in GPUs and prints a line every 0.2 s, followed in Chromium:
/// lines arrive on screen after the page was drawn, the GPUs page names the run as their
/// holder meanwhile, and the page shows the run's end without a reload.
#[test]
fn a_live_runs_page_grows_as_the_run_prints() {
    let dir = Workspace::new().file(
        "w.yml",
        "name: talk\non: workflow_dispatch\njobs:\n  talk:\n    gpus: 2\n    steps:\n      - name: count\n        run: for i in $(seq 1 40); do echo \"line $i\"; sleep 0.2; done\n",
    );
    let home = Workspace::empty();
    let inventory = stand_in_inventory();
    let leases = dir.path().join("leases");
    let env = [
        (gpuflow::gpu::STAND_IN_ENV, inventory.to_str().unwrap()),
        ("GPUFLOW_LEASE_DIR", leases.to_str().unwrap()),
    ];
    let run = gpuflow()
        .current_dir(dir.path())
        .envs(env.iter().copied())
        .args(["run", "--plain", "w.yml"])
        .spawn();
    let served = Served::start(dir.path(), home.path(), &[], &env);
    let id = served.running_run();
    let gpus = poll_until(
        "its GPUs to be leased",
        Duration::from_secs(10),
        || served.json("/gpus"),
        |g| {
            g["hosts"][0]["gpus"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|g| g["holder_run"] == id.as_str())
                .count()
                == 2
        },
    );
    let held = gpus["hosts"][0]["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["holder_run"] == id.as_str())
        .unwrap()
        .clone();
    assert!(held["held_since"].as_f64().is_some(), "{held}");
    assert!(held["holder"].as_str().unwrap().contains("talk"), "{held}");

    let Some(mut browser) = Browser::open(&served.url(&format!("/runs/{id}")), 1200, 900) else {
        return;
    };
    // Lines the server drew, not those the page's script added since.
    let drawn_count = "document.querySelectorAll('#s0-1 .line:not(.live)').length";
    let drawn = browser.eval(drawn_count).as_u64().unwrap();
    assert!(
        drawn < 40,
        "the page was drawn before the run ended ({drawn} lines)"
    );
    browser.wait_for(
        "lines to arrive on screen",
        "document.querySelectorAll('#s0-1 .line.live').length >= 5",
        Duration::from_secs(20),
    );
    browser.screenshot(&screenshot_path(dir.path(), "serve-run-live.png"));
    browser.wait_for(
        "the run's end on screen",
        "document.getElementById('run-state').textContent === 'success'",
        Duration::from_secs(30),
    );
    let text = browser.eval("document.querySelector('#s0-1 pre.log').textContent");
    let expected: String = (1..=40).map(|i| format!("line {i}\n")).collect();
    assert_eq!(
        text.as_str().unwrap(),
        expected,
        "every line once, in order"
    );
    let live = browser
        .eval("document.querySelectorAll('#s0-1 .line.live').length")
        .as_u64()
        .unwrap();
    assert_eq!(browser.eval(drawn_count).as_u64().unwrap(), drawn);
    assert_eq!(
        live,
        40 - drawn,
        "the lines after the first drawing came live"
    );
    assert_eq!(
        browser.eval("document.getElementById('cell-0').getAttribute('class')"),
        "cell state-success"
    );
    assert_eq!(
        browser.eval("document.getElementById('job-state-0').textContent"),
        "success"
    );
    let (status, _) = run.wait();
    assert!(status.success());
}

/// Streams asked for after the run ended get every event and an end; a follower asking
/// from the middle gets the rest.
#[test]
fn an_event_stream_carries_every_event_from_where_it_is_asked() {
    let dir = Workspace::new().file(
        "w.yml",
        "on: workflow_dispatch\njobs:\n  a:\n    steps:\n      - run: for i in $(seq 1 5); do echo \"line $i\"; done\n",
    );
    dir.gpuflow().args(["run", "--plain", "w.yml"]).success();
    let home = Workspace::empty();
    let served = Served::start(dir.path(), home.path(), &[], &[]);
    let (status, _, body) = served.request("GET", "/api/history", &[], "");
    assert_eq!(status, 404, "no run here recorded results: {body}");
    assert!(body.contains("no results store at"), "{body}");
    let id = served.json("/runs")["runs"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let total = served.json(&format!("/runs/{id}"))["view"]["events"]
        .as_u64()
        .unwrap();
    let events = |after: u64| -> Vec<Value> {
        let mut stream = TcpStream::connect(&served.addr).unwrap();
        write!(
            stream,
            "GET /runs/{id}/events?after={after} HTTP/1.0\r\n\r\n"
        )
        .unwrap();
        let mut got = Vec::new();
        for line in BufReader::new(stream).lines() {
            let line = line.unwrap();
            if line == "event: end" {
                return got;
            }
            if let Some(data) = line.strip_prefix("data: ") {
                got.push(serde_json::from_str::<Value>(data).unwrap());
            }
        }
        panic!("the stream ended without `event: end`: {got:?}");
    };
    let all = events(0);
    let numbers: Vec<u64> = all.iter().map(|m| m["n"].as_u64().unwrap()).collect();
    assert_eq!(numbers, (0..total).collect::<Vec<_>>());
    let lines: Vec<&str> = all
        .iter()
        .filter(|m| m["event"]["type"] == "log_line")
        .map(|m| m["event"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(lines, ["line 1", "line 2", "line 3", "line 4", "line 5"]);
    let rest = events(total - 2);
    assert_eq!(rest.len(), 2);
    assert_eq!(
        rest[1]["event"]["type"],
        all.last().unwrap()["event"]["type"]
    );
}

#[test]
fn a_run_stopped_by_preflight_shows_each_failed_check_with_its_message() {
    // `assert-file` on the host runs in preflight: the missing file stops the run before any
    // job starts, and the page says which check failed and why, as the terminal does.
    let dir = Workspace::new().file(
        "w.yml",
        "on: workflow_dispatch\njobs:\n  a:\n    steps:\n      - uses: assert-file\n        with: { path: /nonexistent/gpuflow-model/config.json }\n",
    );
    let out = dir.gpuflow().args(["run", "--plain", "w.yml"]).output();
    assert_eq!(out.code(), Some(1), "{}", out.all());
    assert!(
        out.all().contains("/nonexistent/gpuflow-model/config.json"),
        "{}",
        out.all()
    );
    let home = Workspace::empty();
    let served = Served::start(dir.path(), home.path(), &[], &[]);
    let id = served.json("/runs")["runs"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let view = &served.json(&format!("/runs/{id}"))["view"];
    let failed = view["preflight"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{view}");
    assert_eq!(failed[0]["job"], "a");
    assert!(
        failed[0]["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/gpuflow-model/config.json"),
        "{view}"
    );
    let (status, _, page) = served.get(&format!("/runs/{id}"));
    assert_eq!(status, 200);
    assert!(
        page.contains("Preflight failed: nothing was started"),
        "{page}"
    );
    assert!(
        page.contains("/nonexistent/gpuflow-model/config.json"),
        "{page}"
    );
}

/// Cancel through the page: refused without the token (401, the run goes on), with it the
/// run ends cancelled and its container is gone.
#[tokio::test]
async fn cancel_needs_the_token_and_with_it_the_run_ends_and_its_containers_go() {
    let Some(docker) = crate::support::docker::connect_or_skip().await else {
        return;
    };
    let node = crate::triggers::Node::new(&[(
        "box.yml",
        "on: push\njobs:\n  j:\n    steps:\n      - uses: start-container\n        with: { name: box, image: gpuflow-base:test, command: sleep 300 }\n      - run: sleep 120\n",
    )]);
    node.install_node_hook();
    node.push("HEAD:refs/heads/main");
    let runs = node.wait_for("the run to start", Duration::from_secs(60), |r| {
        r[0]["state"] == "running"
    });
    let id = runs[0]["id"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while docker.run_containers(&id).await.map_or(0, |c| c.len()) != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "its container never started"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let token_file = node.home().join("token");
    let token = "0123456789abcdef0123456789abcdef";
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    std::fs::set_permissions(
        &token_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let served = Served::start(
        &node.dev(),
        &node.home(),
        &["--token-file", token_file.to_str().unwrap()],
        &[],
    );
    let path = format!("/api/runs/{id}/cancel");
    let (status, _, body) = served.request("POST", &path, &[], "");
    assert_eq!(status, 401, "{body}");
    let (status, _, body) = served.request(
        "POST",
        &path,
        &[("Authorization", "Bearer 0123456789abcdef0123456789abcdeX")],
        "",
    );
    assert_eq!(status, 401, "{body}");
    let (status, kind, body) = served.request(
        "POST",
        &format!("/runs/{id}/cancel"),
        &[("Content-Type", "application/x-www-form-urlencoded")],
        "token=guess",
    );
    assert_eq!(
        (status, kind.starts_with("text/html")),
        (401, true),
        "{body}"
    );
    assert_eq!(
        node.runs()[0]["state"],
        "running",
        "a refused cancel changes nothing"
    );
    let (status, _, body) = served.request(
        "POST",
        &path,
        &[("Authorization", &format!("Bearer {token}"))],
        "",
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("its worker is stopping it"), "{body}");
    let runs = node.wait_for("the run to end", Duration::from_secs(60), |r| {
        r[0]["state"] != "running"
    });
    assert_eq!(runs[0]["state"], "cancelled");
    assert_eq!(
        docker.run_containers(&id).await.unwrap(),
        Vec::<String>::new(),
        "its container is gone"
    );
    assert_eq!(served.json("/runs")["runs"][0]["state"], "cancelled");
}

#[test]
fn a_server_beyond_loopback_needs_a_token_and_a_token_file_must_be_private() {
    let dir = Workspace::empty();
    gpuflow()
        .current_dir(dir.path())
        .args(["serve", "--listen", "0.0.0.0:0"])
        .stderr_contains("reachable from other machines: give `--token-file FILE`")
        .status(2);
    let token = dir.path().join("token");
    std::fs::write(&token, "0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    gpuflow()
        .current_dir(dir.path())
        .args(["serve", "--token-file"])
        .arg(&token)
        .stderr_contains("can be read by other users (mode 0644): `chmod 600")
        .status(2);
}

/// Ctrl-C stops the server at once, though a browser still follows a running run.
#[test]
fn ctrl_c_ends_the_server_while_a_stream_is_open() {
    let dir = Workspace::new().file(
        "w.yml",
        "on: workflow_dispatch\njobs:\n  a:\n    steps:\n      - run: for i in $(seq 1 100); do echo \"line $i\"; sleep 0.1; done\n",
    );
    let _run = gpuflow()
        .current_dir(dir.path())
        .args(["run", "--plain", "w.yml"])
        .spawn();
    let home = Workspace::empty();
    let mut served = Served::start(dir.path(), home.path(), &[], &[]);
    let id = served.running_run();
    let mut stream = TcpStream::connect(&served.addr).unwrap();
    write!(stream, "GET /runs/{id}/events?after=0 HTTP/1.0\r\n\r\n").unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    while !line.starts_with("data: ") {
        line.clear();
        reader.read_line(&mut line).unwrap();
    }
    served.process.signal(crate::support::Signal::INT);
    let stopped = std::time::Instant::now();
    let status = loop {
        if let Some(status) = served.process.try_wait() {
            break status;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(5),
            "the server did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130), "stopped by Ctrl-C");
    let mut rest = String::new();
    assert!(
        reader.read_to_string(&mut rest).is_ok(),
        "the stream ended with it"
    );
}
