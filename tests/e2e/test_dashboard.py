"""The dashboard in a real headless browser (Debian's chromium, driven by Selenium),
against ``delayline api`` and a running scheduler; and the HTTP routes that list
pending messages and recurring schedules, which need the scheduler's scan.

The browser and its driver are system packages (``.ci/run`` installs them); a
machine without them fails here rather than skip.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service as DriverService
from selenium.webdriver.common.by import By

from delayline import Client
from delayline.redis import keys
from delayline.schedules.runs import preview
from delayline.testing import free_port
from delayline.timing import format_time, now_ms
from tests.support.harness import Service, wait_for

pytestmark = pytest.mark.spark

TOKEN = "dashboard-test-token"
#: The browser and its driver, from Debian's chromium and chromium-driver packages.
CHROMIUM = os.environ.get("DELAYLINE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("DELAYLINE_CHROMEDRIVER", "/usr/bin/chromedriver")
#: Set to a path to keep the screenshot there too (docs/img/dashboard.png is made so).
SCREENSHOT = os.environ.get("DELAYLINE_DASHBOARD_SCREENSHOT")


#: The plot as data: its total, each bar's count by bucket start, the hot instants.
PLOT_JS = """
const svg = document.getElementById("timeline");
const bars = {};
for (const bar of svg.querySelectorAll("rect.bar")) bars[bar.dataset.start] = +bar.dataset.count;
const hot = [...svg.querySelectorAll("path.hot")].map((mark) => mark.dataset.at);
return {total: +svg.dataset.total, by: svg.dataset.by, bars, hot};
"""

#: The schedules panel as data: a row of cell texts per schedule.
SCHEDULES_JS = """
return [...document.querySelectorAll("#schedules tr")].map(
  (row) => [...row.cells].map((cell) => cell.textContent));
"""
DAY_MS = 86_400_000

#: The history panel as data: the window's deliveries, its minutes, each bar's count.
HISTORY_JS = """
const svg = document.getElementById("history");
return {delivered: +svg.dataset.delivered, minutes: +svg.dataset.minutes,
        bars: [...svg.querySelectorAll("rect.bar")].map((bar) => +bar.dataset.delivered)};
"""


@pytest.fixture(scope="module")
def api_url(default_service: Service) -> Iterator[str]:
    """``delayline api`` on the shared service, for the module: it keeps no state."""
    port = free_port()
    args = ["--redis-url", default_service.url, "--port", str(port), "--api-token", TOKEN]
    process = subprocess.Popen(
        [sys.executable, "-m", "delayline", "api", *args], start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def serving() -> bool:
            assert process.poll() is None, "delayline api exited"
            try:
                return httpx.get(f"{url}/healthz", timeout=1).status_code in (200, 503)
            except httpx.TransportError:
                return False

        wait_for(serving, 30, "the API to serve")
        yield url
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    for path in (CHROMIUM, CHROMEDRIVER):
        assert shutil.which(path), f"{path} is missing: apt-get install chromium chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1120,1000")
    driver = webdriver.Chrome(options=options, service=DriverService(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def test_the_dashboard_plots_what_is_pending_and_shows_the_rejects(
    default_service: Service, api_url: str, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    topic = f"dash.{uuid.uuid4().hex[:8]}"
    # A thundering herd 20 minutes ahead, and a trickle over the hour.
    herd_ms = (now_ms() + 20 * 60_000) // 1000 * 1000
    with Client(default_service.url) as client:
        sent = client.send_many(
            [{"topic": topic, "body": b"herd", "deliver_at": herd_ms}] * 1_200
            + [
                {"topic": topic, "body": b"trickle", "delay": timedelta(minutes=5 + n)}
                for n in range(30)
            ]
        )
        default_service.raw.xadd(keys.INBOUND, {"v": "1", "op": "unheard-of", "id": "x"})
        wait_for(
            lambda: client.pending(topic=topic).total == 1_230,
            60,
            "the scheduler to count the sends",
            [default_service.scheduler],
        )
    try:
        check_the_plot(browser, api_url, herd_ms, tmp_path / "dashboard.png")
    finally:
        # The service is shared: none of these may be delivered during a later test,
        # whose counters would count it (cancelled, they are only dropped when due).
        with Client(default_service.url) as client:
            assert all(client.cancel(message_id) for message_id in sent)


def check_the_plot(browser: webdriver.Chrome, api_url: str, herd_ms: int, screenshot: Path) -> None:
    """The dashboard's plot shows the 1,230 pending messages, the herd's minute and
    hour, and the reject; ``screenshot`` is where it saves the page."""
    browser.get(f"{api_url}/ui?token={TOKEN}")

    def plot() -> Any:
        """What the plot shows, read in one go (it is redrawn every few seconds)."""
        return browser.execute_script(PLOT_JS)

    wait_for(lambda: plot()["total"] >= 1_230, 30, "the plot to show the pending messages")
    shown = plot()
    bars: dict[str, int] = shown["bars"]
    assert sum(bars.values()) == shown["total"]
    assert bars[format_time(herd_ms // 60_000 * 60_000)] >= 1_200
    assert format_time(herd_ms) in shown["hot"]

    def rejected() -> bool:
        return "unknown op" in browser.find_element(By.ID, "rejects").text

    wait_for(rejected, 30, "the reject to be listed")

    def live() -> bool:
        return all(
            browser.find_element(By.CSS_SELECTOR, f"#{card} b").text not in ("-", "")
            for card in ("rate", "horizon", "last-batch")
        )

    wait_for(live, 30, "the live figures")
    browser.find_element(By.CSS_SELECTOR, "button[data-range=day]").click()
    herd_hour = format_time(herd_ms // 3_600_000 * 3_600_000)
    wait_for(lambda: plot()["by"] == "hour", 30, "the day view")
    assert herd_hour in plot()["bars"]
    browser.find_element(By.CSS_SELECTOR, "button[data-range=hour]").click()
    # Back by minute (a minute can start on the herd's hour: ask the plot which view it is).
    wait_for(lambda: plot()["by"] == "minute", 30, "the hour view again")
    assert browser.save_screenshot(str(screenshot))
    assert screenshot.stat().st_size > 10_000
    if SCREENSHOT:
        shutil.copyfile(screenshot, SCREENSHOT)
    assert not browser.find_element(By.ID, "error").text


def test_the_dashboard_shows_the_servers_history_as_soon_as_it_opens(
    default_service: Service, api_url: str, browser: webdriver.Chrome
) -> None:
    topic = f"hist.{uuid.uuid4().hex[:8]}"
    with Client(default_service.url) as client:
        before = client.history(60).delivered
        client.send_many([{"topic": topic, "body": b"h", "delay": timedelta(seconds=1)}] * 50)
        wait_for(
            lambda: default_service.raw.xlen(topic) == 50,
            60,
            "the deliveries",
            [default_service.scheduler],
        )
        delivered = client.history(60).delivered
    assert delivered >= before + 50
    browser.get(f"{api_url}/ui?token={TOKEN}")

    def shown() -> Any:
        return browser.execute_script(HISTORY_JS)

    wait_for(lambda: shown()["delivered"] >= delivered, 30, "the history")
    assert shown()["minutes"] == 60
    # A reload has no samples of its own: the server's history is drawn at once.
    browser.refresh()
    wait_for(lambda: shown()["delivered"] >= delivered, 10, "the history after a reload")
    panel = shown()
    assert sum(panel["bars"]) == panel["delivered"]
    browser.find_element(By.CSS_SELECTOR, "button[data-history='1440']").click()
    wait_for(lambda: shown()["minutes"] == 1_440, 30, "the last day")
    panel = shown()
    assert sum(panel["bars"]) == panel["delivered"] >= delivered
    assert not browser.find_element(By.ID, "error").text


def test_the_http_api_lists_reschedules_and_cancels_by_key_with_a_running_scheduler(
    default_service: Service, api_url: str
) -> None:
    topic = f"http.{uuid.uuid4().hex[:8]}"
    auth = {"authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=api_url, headers=auth, timeout=60) as http:
        for n, key in enumerate(("42", "42", "42", "7")):
            body = {"topic": topic, "body": f"order-{n}", "delay_ms": 600_000 + n, "key": key}
            assert http.post("/v1/messages", json=body).status_code == 201

        def listed(key: str) -> list[str]:
            response = http.get("/v1/pending/messages", params={"topic": topic, "key": key})
            assert response.status_code == 200, response.text
            return [message["id"] for message in response.json()["messages"]]

        wait_for(lambda: len(listed("42")) == 3, 60, "the listing", [default_service.scheduler])
        [other] = listed("7")
        moved = http.patch(f"/v1/messages/{other}", json={"delay_ms": 1_000})
        assert moved.status_code == 200, moved.text
        doomed = listed("42")
        cancelled = http.delete("/v1/messages", params={"topic": topic, "key": "42"})
        assert cancelled.json() == {"cancelled": 3}
        states = [http.get(f"/v1/messages/{message_id}").json()["state"] for message_id in doomed]
        assert states == ["cancelled"] * 3
        wait_for(lambda: default_service.raw.xlen(topic) == 1, 30, "the moved delivery")
        [(_, fields)] = default_service.raw.xrange(topic)
        assert fields[b"id"].decode() == moved.json()["id"]


def test_the_schedules_over_http_and_on_the_dashboard(
    default_service: Service, api_url: str, browser: webdriver.Chrome
) -> None:
    topic = f"sched.{uuid.uuid4().hex[:8]}"
    # The service is shared: no run may come during the session. The daily one starts in
    # 30 days; the other is paused.
    start_ms = now_ms() + 30 * DAY_MS
    with Client(default_service.url) as client:
        daily = client.schedule(
            "daily", topic, b"run", cron="0 10 * * *", tz="Europe/Paris", start=start_ms
        )
        client.schedule("tick", topic, b"tick", every="15m", paused=True, catch_up="all")
        first_ms, second_ms = preview(daily, now_ms(), 2)
        try:
            wait_for(
                lambda: len(client.schedules(topic=topic)) == 2,
                60,
                "the scheduler to hold the schedules",
                [default_service.scheduler],
            )
            check_the_schedule_routes(api_url, topic, [first_ms, second_ms])
            check_the_schedules_panel(browser, api_url, topic, first_ms)
            client.delete_schedule("tick", topic)
            wait_for(
                lambda: len(client.schedules(topic=topic)) == 1, 60, "the delete to be applied"
            )
            browser.find_element(By.ID, "schedules-refresh").click()
            wait_for(
                lambda: [row[1] for row in panel_rows(browser, topic)] == ["daily"],
                30,
                "the refreshed panel",
            )
        finally:
            for name in ("daily", "tick"):
                client.delete_schedule(name, topic)


def check_the_schedule_routes(api_url: str, topic: str, runs_ms: list[int]) -> None:
    """GET /v1/schedules and a schedule's next runs (``runs_ms``, the daily one's first
    two), against the running scheduler (a stand-in answers the others' cases in
    tests/integration/test_http_schedule_reads.py)."""
    first_ms = runs_ms[0]
    auth = {"authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=api_url, headers=auth, timeout=60) as http:
        listing = http.get("/v1/schedules", params={"topic": topic})
        assert listing.status_code == 200, listing.text
        rows = listing.json()["schedules"]
        assert [(row["name"], row["state"], row["next_run"]) for row in rows] == [
            ("daily", "active", format_time(first_ms)),
            ("tick", "paused", None),
        ]
        assert (rows[0]["definition"]["cron"], rows[0]["runs"]) == ("0 10 * * *", 0)
        # A stored schedule's runs: the scan of its one key (GET /v1/schedules/{topic}/{name}).
        upcoming = http.get(f"/v1/schedules/{topic}/daily/next", params={"n": 2}).json()
        assert upcoming["tz"] == "Europe/Paris"
        assert [run["at_ms"] for run in upcoming["runs"]] == runs_ms
        assert [run["local"][11:19] for run in upcoming["runs"]] == ["10:00:00"] * 2


def panel_rows(browser: webdriver.Chrome, topic: str) -> list[list[str]]:
    """The rows of the schedules panel of ``topic``, as the cells' texts."""
    rows: list[list[str]] = browser.execute_script(SCHEDULES_JS)
    return [row for row in rows if row[0] == topic]


def check_the_schedules_panel(
    browser: webdriver.Chrome, api_url: str, topic: str, first_ms: int
) -> None:
    """The panel lists the schedules as the page opens, with their state and next run."""
    browser.get(f"{api_url}/ui?token={TOKEN}")
    wait_for(lambda: len(panel_rows(browser, topic)) == 2, 30, "the schedules panel")
    assert panel_rows(browser, topic) == [
        [topic, "daily", "active", "cron 0 10 * * * Europe/Paris", format_time(first_ms), "-",
         "latest"],
        [topic, "tick", "paused", "every 15m", "-", "-", "all 1h ≤100"],
    ]  # fmt: skip
    assert "listed as of " in browser.find_element(By.ID, "schedules-status").text
    assert not browser.find_element(By.ID, "error").text


#: Set to a path to keep the Manager's screenshot there too (docs/img/manager.png).
MANAGER_SCREENSHOT = os.environ.get("DELAYLINE_MANAGER_SCREENSHOT")

#: The Manager's history panel as data: whose it is, its deliveries.
MANAGER_HISTORY_JS = """
const svg = document.getElementById("history");
return {group: svg.dataset.group || null, delivered: +svg.dataset.delivered};
"""


def test_the_manager_creates_a_group_whose_token_sends_and_whose_history_stays(
    default_service: Service, api_url: str, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    group = f"m{uuid.uuid4().hex[:8]}"
    browser.get(f"{api_url}/ui/manager?token={TOKEN}")
    browser.find_element(By.NAME, "name").send_keys(group)
    browser.find_element(By.NAME, "max_pending").send_keys("1000")
    browser.find_element(By.NAME, "topic_patterns").send_keys("orders.*")
    browser.find_element(By.CSS_SELECTOR, "#create button[type=submit]").click()
    shown = browser.find_element(By.ID, "token-value")
    wait_for(lambda: shown.text != "", 30, "the new group's token")
    token = shown.text
    assert browser.find_element(By.ID, "token-group").text == group
    # The token acts for the group over HTTP: its topic, its quotas.
    auth = {"Authorization": f"Bearer {token}"}
    message = {"topic": "orders.x", "body": "hi", "delay_ms": 500}
    sent = httpx.post(f"{api_url}/v1/messages", json=message, headers=auth)
    assert sent.status_code == 201, sent.text
    refused = httpx.post(f"{api_url}/v1/messages", json={**message, "topic": "x"}, headers=auth)
    assert refused.status_code == 403
    wait_for(
        lambda: default_service.raw.xlen(f"{group}/orders.x") == 1,
        30,
        "the group's delivery",
        [default_service.scheduler],
    )
    # Reloaded, the page shows the group's history, kept by the server; the token is
    # shown no more.
    browser.get(f"{api_url}/ui/manager")
    row = f"tr.group[data-group='{group}']"
    wait_for(lambda: bool(browser.find_elements(By.CSS_SELECTOR, row)), 30, "the group's row")
    browser.find_element(By.CSS_SELECTOR, row).click()
    wait_for(
        lambda: browser.execute_script(MANAGER_HISTORY_JS) == {"group": group, "delivered": 1},
        30,
        "the group's history",
    )
    assert not browser.find_element(By.ID, "token").is_displayed()
    cells = [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, f"{row} td")]
    assert cells[0] == group
    assert cells[2] == "1"  # delivered
    assert cells[-1] == "pending 1,000, topics orders.*"
    assert not browser.find_element(By.ID, "error").text
    screenshot = tmp_path / "manager.png"
    assert browser.save_screenshot(str(screenshot))
    if MANAGER_SCREENSHOT:
        shutil.copyfile(screenshot, MANAGER_SCREENSHOT)
