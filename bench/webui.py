"""How fast the WebUI shows big data, measured in headless Chromium (Debian's, via Playwright).

Seeds a fresh master's SQLite store with 10,000 experiments (one trial each) and one trial
with 100,000 metric reports, starts the master on it, and times the first render of

- the experiments page: from navigation start until the table shows rows, and
- the trial page: until the training chart has drawn its (downsampled) 100,000 points,

each in a fresh browser context (cold cache), as medians over several runs. Also prints
the JSON API's own time for the data each page fetches. Target: under 1 s each.

    scripts/webui.sh build && scripts/webui.sh browser
    python bench/webui.py [--runs 5] [--experiments 10000] [--points 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from pydet.master.gateway import spa
from tests.cluster import EXAMPLES, Cluster

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# Marks the first frame after the page shows its data (a MutationObserver, then one
# animation frame so that the paint is included).
MARKS = """
window.__marks = {};
const mark = (name) => {
  if (window.__marks[name] !== undefined || window.__marks[name + '_pending']) return;
  window.__marks[name + '_pending'] = true;
  requestAnimationFrame(() => { window.__marks[name] = performance.now(); });
};
const check = () => {
  const row = document.querySelector('tbody tr[data-key]');
  if (row && row.offsetParent !== null) mark('experiments');
  const c = document.querySelector(".metric-panel[data-group='training'] .chart");
  if (c && c.offsetParent !== null && Number(c.dataset.points || 0) > 0) mark('trial');
  if (document.querySelector('.metric-table[data-total]')) mark('trial_all');
};
new MutationObserver(check).observe(document, {subtree: true, childList: true, attributes: true});
"""


def columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def seed(path: pathlib.Path, *, experiments: int, points: int) -> None:
    """Copy the one real experiment (and its trial) the master created, then add metrics."""
    rng = random.Random(0)
    db = sqlite3.connect(path)
    with db:
        exp_cols = [c for c in columns(db, "experiments") if c != "id"]
        trial_cols = [c for c in columns(db, "trials") if c not in ("id", "experiment_id")]
        template = db.execute("SELECT id FROM experiments ORDER BY id LIMIT 1").fetchone()[0]
        trial_id = db.execute(
            "SELECT id FROM trials WHERE experiment_id = ?", (template,)
        ).fetchone()[0]
        states = ["COMPLETED", "CANCELED", "ERROR"]
        now = time.time()
        for i in range(1, experiments):
            overrides = {
                "name": f"bench-{i:05d}",
                "state": states[i % 3],
                "start_time": now - (experiments - i) * 60,
                "end_time": now - (experiments - i) * 60 + 30,
                "progress": 1.0,
                "job_id": f"{i:08x}",
            }
            cols = ", ".join(exp_cols)
            picks = ", ".join("?" if c in overrides else c for c in exp_cols)
            values = [overrides[c] for c in exp_cols if c in overrides]
            cur = db.execute(
                f"INSERT INTO experiments ({cols}) SELECT {picks} FROM experiments WHERE id = ?",
                [*values, template],
            )
            new_id = cur.lastrowid
            t_over = {"best_validation": rng.random(), "state": states[i % 3]}
            t_cols = ", ".join(["experiment_id", *trial_cols])
            t_picks = ", ".join(["?", *("?" if c in t_over else c for c in trial_cols)])
            t_values = [new_id, *(t_over[c] for c in trial_cols if c in t_over)]
            db.execute(
                f"INSERT INTO trials ({t_cols}) SELECT {t_picks} FROM trials WHERE id = ?",
                [*t_values, trial_id],
            )
        rows = []
        for step in range(1, points + 1):
            loss = 1.0 / (1 + step / 1000) + rng.random() * 0.01
            rows.append(
                (trial_id, 0, "training", step, json.dumps({"loss": loss, "lr": 0.01}), "", now)
            )
            if step % 100 == 0:
                rows.append((trial_id, 0, "validation", step, json.dumps({"loss": loss}), "", now))
        db.executemany(
            "INSERT INTO metrics (trial_id, run_id, grp, steps_completed, metrics,"
            " batch_metrics, timestamp) VALUES (?,?,?,?,?,?,?)",
            rows,
        )
    db.close()


def fetch_seconds(url: str, token: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=60) as r:
            r.read()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def first_render(
    browser: Any, url: str, token: str, *marks: str, screenshot: pathlib.Path | None = None
) -> list[float]:
    """Seconds from navigation start to each mark, in a fresh (logged-in) browser context."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    # The cookie for the whole origin: one set for a deeper page's URL would have that
    # page's directory as its path, and the API's calls would go without it.
    origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(url))
    context.add_cookies([{"name": "det_session", "value": token, "url": origin}])
    try:
        page = context.new_page()
        page.add_init_script(MARKS)
        page.goto(url)
        out = []
        for mark in marks:
            page.wait_for_function(
                f"() => window.__marks && window.__marks.{mark} !== undefined", timeout=120_000
            )
            out.append(float(page.evaluate(f"() => window.__marks.{mark}")) / 1000)
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
        return out
    finally:
        context.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--experiments", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--screenshots", type=pathlib.Path, help="save each page's last run here")
    args = parser.parse_args()
    if not (spa.packaged_build() / "index.html").is_file():
        print("the WebUI is not built: run scripts/webui.sh build", file=sys.stderr)
        return 1
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("Playwright is missing: run scripts/webui.sh browser", file=sys.stderr)
        return 1

    with tempfile.TemporaryDirectory(prefix="pydet-bench-webui-") as tmp:
        cluster = Cluster(pathlib.Path(tmp))
        try:
            cluster.start_master()
            exp_id = cluster.create(EXAMPLES / "minimal" / "const.yaml", EXAMPLES / "minimal")
            cluster.det("experiment", "kill", str(exp_id))
            cluster.wait_state(exp_id, "CANCELED", "COMPLETED", "ERROR")
            cluster.stop_master()
            began = time.perf_counter()
            seed(
                pathlib.Path(tmp) / "master" / "pydet.db",
                experiments=args.experiments,
                points=args.points,
            )
            print(f"seeded in {time.perf_counter() - began:.1f}s", file=sys.stderr)
            cluster.start_master()
            base = f"http://{cluster.address}"
            token = cluster.token
            api_list = fetch_seconds(
                f"{base}/api/v1/experiments?limit=50&sortBy=SORT_BY_ID&orderBy=ORDER_BY_DESC"
                "&archived=false",
                token,
                args.runs,
            )
            api_first = fetch_seconds(
                f"{base}/api/v1/trials/1/metrics?max_points=2000", token, args.runs
            )
            api_metrics = fetch_seconds(f"{base}/api/v1/trials/1/metrics", token, args.runs)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    first_render(browser, f"{base}/experiments", token, "experiments")  # warm-up
                    shots = args.screenshots
                    exps = [
                        first_render(
                            browser,
                            f"{base}/experiments",
                            token,
                            "experiments",
                            screenshot=shots / "experiments.png" if shots and i == 0 else None,
                        )[0]
                        for i in range(args.runs)
                    ]
                    both = [
                        first_render(
                            browser,
                            f"{base}/trials/1",
                            token,
                            "trial",
                            "trial_all",
                            screenshot=shots / "trial.png" if shots and i == 0 else None,
                        )
                        for i in range(args.runs)
                    ]
                    trials = [t[0] for t in both]
                    trials_all = [t[1] for t in both]
                finally:
                    browser.close()
        finally:
            cluster.close()

    rows = [
        (
            f"experiments page ({args.experiments:,} experiments)",
            statistics.median(exps),
            min(exps),
            max(exps),
            api_list,
        ),
        (
            f"trial page ({args.points:,} metric points)",
            statistics.median(trials),
            min(trials),
            max(trials),
            api_first,
        ),
        (
            "  ... all points loaded (table, export)",
            statistics.median(trials_all),
            min(trials_all),
            max(trials_all),
            api_metrics,
        ),
    ]
    print(f"first render in headless Chromium, {args.runs} runs each, fresh context per run;")
    print("API: the JSON the page waits for, alone (first view: max_points=2000)")
    header = f"{'page':<42} {'median':>8} {'min':>8} {'max':>8} {'API':>8}  target"
    print(header)
    print("-" * len(header))
    for i, (name, med, lo, hi, api) in enumerate(rows):
        target = "-" if i == 2 else ("< 1 s ok" if med < 1.0 else "< 1 s SLOW")
        print(f"{name:<42} {med:>7.3f}s {lo:>7.3f}s {hi:>7.3f}s {api:>7.3f}s  {target}")
    load = pathlib.Path("/proc/loadavg")
    if load.exists():
        cores = len(os.sched_getaffinity(0))
        print(f"load average {load.read_text().split()[0]} on {cores} cores during the run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
