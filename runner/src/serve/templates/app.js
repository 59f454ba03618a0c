// The run page, live: the run's events arrive as Server-Sent Events (`/runs/ID/events`,
// docs/serve.md) and update the job graph, the jobs' states and the steps' logs in place.
// Text is only ever set with textContent: a log line is data, never markup.
(function () {
  "use strict";
  const root = document.getElementById("run");
  if (!root || root.dataset.live !== "true") return;
  const LINES_KEPT = 400;
  const run = root.dataset.run;
  let received = 0;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function seconds(s) {
    if (s < 10) return s.toFixed(1) + "s";
    const m = Math.floor(s / 60), r = Math.floor(s % 60);
    return m > 0 ? m + "m " + r + "s" : r + "s";
  }
  function setBadge(node, state) {
    if (!node) return;
    node.textContent = state;
    node.className = "badge state-" + state;
  }
  function jobState(j, state, reason) {
    setBadge(document.getElementById("job-state-" + j), state);
    const cell = document.getElementById("cell-" + j);
    if (cell) cell.setAttribute("class", "cell state-" + state);
    if (reason !== undefined) document.getElementById("job-reason-" + j).textContent = reason || "";
  }
  function step(j, id, name) {
    let s = document.getElementById("s" + j + "-" + id);
    if (s) return s;
    const steps = document.getElementById("job-steps-" + j);
    if (!steps) return null;
    s = el("details", "step state-" + (id === "output" ? "output" : "running"));
    s.id = "s" + j + "-" + id;
    s.open = true;
    const summary = el("summary");
    summary.append(el("span", "step-state", id === "output" ? "output" : "running"), " " + id + ". " + name + " ",
      el("span", "dim step-took"), " ", el("span", "progress"));
    const earlier = el("p", "earlier");
    earlier.hidden = true;
    earlier.append(el("span", "count", "0"), " earlier lines");
    s.append(summary, earlier, el("pre", "log"));
    steps.append(s);
    return s;
  }
  function line(j, e) {
    const id = e.step || "output";
    const s = step(j, id, e.step ? "" : "containers' output");
    if (!s) return;
    const log = s.querySelector("pre.log");
    log.append(el("span", "line live stream-" + e.stream, e.text + "\n"));
    if (log.childElementCount > LINES_KEPT) {
      log.firstElementChild.remove();
      const earlier = s.querySelector(".earlier");
      const count = earlier.querySelector(".count");
      count.textContent = String(Number(count.textContent) + 1);
      earlier.hidden = false;
    }
  }
  function apply(m) {
    const e = m.event, j = m.job;
    received += 1;
    switch (e.type) {
      case "job_queued":
        if (!document.getElementById("job-" + j)) location.reload();
        break;
      case "job_started": jobState(j, "running", ""); break;
      case "job_waiting": jobState(j, "waiting", e.reason); break;
      case "job_skipped": jobState(j, "skipped", e.reason); break;
      case "job_cannot_run": jobState(j, "failure", e.reason); break;
      case "job_finished":
        jobState(j, e.result, e.failure);
        document.getElementById("job-took-" + j).textContent = seconds(e.duration);
        break;
      case "gpus_leased":
        document.getElementById("job-gpus-" + j).textContent =
          "GPUs " + e.indexes.join(", ") + (e.stand_in ? " (stand-in)" : "");
        break;
      case "step_started": step(j, e.step, e.name); break;
      case "step_finished": {
        const s = step(j, e.step, e.name);
        if (!s) break;
        s.className = "step state-" + e.conclusion;
        s.querySelector(".step-state").textContent = e.conclusion;
        s.querySelector(".step-took").textContent = seconds(e.duration);
        s.querySelector(".progress").textContent = "";
        break;
      }
      case "step_progress": {
        const s = step(j, e.step, "");
        if (s) s.querySelector(".progress").textContent = e.message;
        break;
      }
      case "log_line": line(j, e); break;
      case "run_finished": setBadge(document.getElementById("run-state"), e.result); break;
      case "run_headline": {
        const note = document.getElementById("live");
        if (note) { note.textContent = "over: reload for its results"; }
        break;
      }
    }
  }

  const source = new EventSource("/runs/" + encodeURIComponent(run) + "/events?after=" + root.dataset.after);
  source.addEventListener("events", function (ev) {
    for (const text of ev.data.split("\n")) apply(JSON.parse(text));
  });
  source.addEventListener("behind", function () { location.reload(); });
  source.addEventListener("end", function () {
    source.close();
    const note = document.getElementById("live");
    if (note && note.textContent === "live") note.textContent = "over";
    // Started before the run wrote anything: read it again once it has.
    if (received === 0 && root.dataset.after === "0") setTimeout(function () { location.reload(); }, 2000);
  });
})();
