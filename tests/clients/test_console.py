"""End-to-end test of the web console (`GET /`) in a real headless browser: Debian's Chromium
driven by Selenium through chromedriver (setup.sh installs both).

One walk through the console as a user would: create a table and insert rows from the editor
(Ctrl-Enter), see them in the grid and page through them, plot a SAMPLE BY query and a keyed one
(one series per key), upload a CSV and see its table in the side panel, and see a bad query's
error marked in the editor at the place the server names; that walk runs on a server started
with `--auth off` (no login form, no log-out button). Then the login (`--auth required`): the
form, a wrong password's error, admin's login and a query, the session cookie (HttpOnly,
SameSite=Strict, invisible to the page), an ended session sending the page back to the form, the
log-out, and the 401 (without a Basic challenge to the console) of a request without a session;
and a read-only user whose CREATE TABLE is refused. Every step waits for what it expects on the
page (explicit waits, no sleeps) and saves a screenshot into $SUNDIAL_CONSOLE_SCREENSHOTS
(default target/console-screenshots); with SUNDIAL_CONSOLE_DOCS=1 the set is also copied into
docs/console/ for the README.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO_ROOT

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import (  # noqa: E402
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

WAIT_S = 30
EDITOR_TEXT = """
const root = document.getElementById('editor').shadowRoot;
return [...root.querySelectorAll('.cm-content .cm-line')].map((line) => {
  const copy = line.cloneNode(true);
  copy.querySelectorAll('.cm-placeholder, .cm-widgetBuffer').forEach((w) => w.remove());
  return copy.textContent;
}).join('\\n');
"""
# How many statements the console has answered.
RUNS = "return Number(document.getElementById('result-info').dataset.runs || 0)"
CHROMIUM = [os.environ.get("CHROMIUM", ""), "/usr/bin/chromium", "/usr/bin/chromium-browser"]
CHROMEDRIVER = [os.environ.get("CHROMEDRIVER", ""), "/usr/bin/chromedriver"]


# A request to /exec made by the page itself (with the console's header): its status, the
# WWW-Authenticate header and the body.
FETCH_EXEC = """
const done = arguments[arguments.length - 1];
fetch('exec?query=SELECT%201', {headers: {'X-Sundial-Console': '1'}})
  .then(async (r) => done({status: r.status, challenge: r.headers.get('WWW-Authenticate'),
                           body: await r.text()}))
  .catch((e) => done({status: -1, challenge: null, body: String(e)}));
"""
# Records every state of the login button's `disabled` while a login is under way (the page
# disables it before its request starts, so no timing is involved).
WATCH_SUBMIT = """
const button = document.getElementById('login-submit');
window.submitStates = [];
new MutationObserver(() => window.submitStates.push(button.disabled))
  .observe(button, {attributes: true, attributeFilter: ['disabled']});
"""


def http_get(url: str, headers: dict[str, str] | None = None):
    """GET `url`: (status, headers, body), whatever the status."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def first_file(paths: list[str]) -> str | None:
    return next((p for p in paths if p and Path(p).is_file()), None)


def screenshot_dir() -> Path:
    path = Path(os.environ.get("SUNDIAL_CONSOLE_SCREENSHOTS", "target/console-screenshots"))
    if not path.is_absolute():
        path = REPO_ROOT / path
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def browser():
    chromium, driver_path = first_file(CHROMIUM), first_file(CHROMEDRIVER)
    if not chromium or not driver_path:
        pytest.skip("Chromium or chromedriver not installed (tests/clients/setup.sh installs them)")
    options = Options()
    options.binary_location = chromium
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,800", "--force-device-scale-factor=1",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-features=Translate,MediaRouter"]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        # A 1280x800 page, whatever the headless window's decorations take.
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
        yield driver
    finally:
        driver.quit()


class Console:
    """The console page in `driver`, with the steps of the test."""

    def __init__(self, driver, shots: Path):
        self.driver = driver
        self.shots = shots
        self.wait = WebDriverWait(driver, WAIT_S)

    def shot(self, name: str) -> None:
        assert self.driver.save_screenshot(str(self.shots / f"{name}.png")), name

    def until(self, condition, message: str):
        try:
            return self.wait.until(condition)
        except TimeoutException:
            pytest.fail(f"{message}; the page shows:\n{self.text('body')[:2000]}")

    def click(self, css: str) -> None:
        """Clicks the element at `css`, looking it up again if the page replaced it meanwhile
        (the side panel is rebuilt when the tables are listed again)."""
        def clicked(driver) -> bool:
            try:
                driver.find_element(By.CSS_SELECTOR, css).click()
                return True
            except (StaleElementReferenceException, NoSuchElementException):
                return False
        self.until(clicked, f"cannot click {css}")

    def text(self, css: str) -> str:
        return self.driver.find_element(By.CSS_SELECTOR, css).text

    def shadow(self):
        """The editor's shadow root (CodeMirror lives there, see console/src/editor.js)."""
        return self.driver.find_element(By.ID, "editor").shadow_root

    def type_sql(self, sql: str) -> None:
        """Replaces the editor's text with `sql`, typed as a user does (one line, so that no
        Enter lands in an open completion list)."""
        content = self.shadow().find_element(By.CSS_SELECTOR, ".cm-content")
        content.click()
        ActionChains(self.driver).key_down(Keys.CONTROL).send_keys("a").key_up(
            Keys.CONTROL).send_keys(Keys.DELETE).perform()
        self.until(lambda d: self.editor_text() == "", "the editor was not cleared")
        content.send_keys(sql)
        # Closing brackets and quotes are typed over the ones the editor inserted.
        self.until(lambda d: self.editor_text() == sql,
                   f"the editor does not hold what was typed: {self.editor_text()!r}")
        content.send_keys(Keys.ESCAPE)

    def editor_text(self) -> str:
        """The editor's lines as shown, without its placeholder."""
        return self.driver.execute_script(EDITOR_TEXT)

    def run(self, sql: str | None) -> str:
        """Types `sql` (None: runs what the editor holds), runs it with Ctrl-Enter and waits for
        its answer; returns the info line."""
        before = self.driver.execute_script(RUNS)
        if sql is not None:
            self.type_sql(sql)
        ActionChains(self.driver).key_down(Keys.CONTROL).send_keys(Keys.ENTER).key_up(
            Keys.CONTROL).perform()
        self.until(lambda d: d.execute_script(RUNS) > before,
                   f"no answer to {sql!r}")
        return self.text("#result-info")

    def grid_rows(self) -> list[list[str]]:
        rows = self.driver.find_elements(By.CSS_SELECTOR, "#grid-view table.grid tbody tr")
        return [[c.text for c in r.find_elements(By.CSS_SELECTOR, "td")] for r in rows]

    def grid_header(self) -> list[str]:
        heads = self.driver.find_elements(By.CSS_SELECTOR, "#grid-view table.grid thead th")
        return [h.get_attribute("textContent") for h in heads]

    def legend(self) -> list[str]:
        labels = self.driver.find_elements(By.CSS_SELECTOR, "#chart-view .u-legend .u-series .u-label")
        return [label.text for label in labels]

    def shown(self, css: str) -> bool:
        found = self.driver.find_elements(By.CSS_SELECTOR, css)
        return bool(found) and found[0].is_displayed()

    def wait_app(self) -> None:
        """Waits for the app (editor and side panel) to show."""
        self.until(lambda d: self.shown("#app") and d.execute_script(
            "return !!document.getElementById('editor').shadowRoot?.querySelector('.cm-content')"),
            "the app did not show")

    def wait_form(self) -> None:
        self.until(lambda d: self.shown("#login-form") and not self.shown("#app"),
                   "the login form did not show")

    def log_in(self, user: str, password: str) -> None:
        """Types `user` and `password` into the login form and submits it with Enter."""
        self.wait_form()
        name = self.driver.find_element(By.ID, "login-user")
        name.clear()
        name.send_keys(user)
        secret = self.driver.find_element(By.ID, "login-password")
        secret.clear()
        secret.send_keys(password, Keys.ENTER)

    def fetch_exec(self) -> dict:
        """GET /exec from the page (same origin, the console's header, the page's cookies)."""
        return self.driver.execute_async_script(FETCH_EXEC)


def test_console(start_server, browser, tmp_path):
    # No login: the walk through the console as before, with no form and no log-out button.
    server = start_server(["--auth", "off"])
    shots = screenshot_dir()
    page = Console(browser, shots)
    # The page and its assets, with the headers the console relies on.
    with urllib.request.urlopen(f"{server.http_url}/", timeout=30) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/html")
        assert "script-src 'self'" in answer.headers["Content-Security-Policy"]
        assert answer.headers["X-Content-Type-Options"] == "nosniff"

    browser.get(f"{server.http_url}/")
    page.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#editor")), "no editor")
    page.until(lambda d: d.execute_script(
        "return !!document.getElementById('editor').shadowRoot?.querySelector('.cm-content')"),
        "CodeMirror did not start")
    page.until(lambda d: "no tables yet" in page.text("#schema"), "the side panel is not empty")
    assert not page.shown("#login-form") and not page.shown("#logout")
    # The status panel shows the server's /status, or n/a where it has none.
    page.until(lambda d: page.text("#status-version") != "", "no status")
    status = json.loads(urllib.request.urlopen(f"{server.http_url}/exec?query=SELECT%201",
                                               timeout=30).read())
    assert status["dataset"] == [[1]]

    # DDL and INSERT from the editor; the side panel follows the DDL.
    info = page.run("CREATE TABLE cpu (ts TIMESTAMP, host SYMBOL INDEX, usage DOUBLE, n LONG) "
                    "TIMESTAMP(ts) PARTITION BY DAY")
    assert info.startswith("OK"), info
    page.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#schema li[data-table='cpu']"),
               "the new table is not in the side panel")
    info = page.run(
        "INSERT INTO cpu SELECT to_timestamp_micros(1700000000000000 + x * 60000000) AS ts, "
        "CASE x % 3 WHEN 0 THEN 'a' WHEN 1 THEN 'b' ELSE 'c' END AS host, "
        "(x % 50) * 1.5 AS usage, x AS n FROM generate_series(1, 250) AS g(x)")
    assert info.startswith("OK"), info
    # The table's columns: types, designated timestamp, index, partitioning.
    page.click("#schema li[data-table='cpu'] .table-name")
    page.until(lambda d: "partition by DAY" in page.text("#schema li[data-table='cpu']"),
               "no columns for cpu")
    columns = page.text("#schema li[data-table='cpu'] .columns")
    assert "ts\nTIMESTAMP\nts" in columns and "host\nSYMBOL\nidx" in columns, columns

    # A query with Ctrl-Enter: the grid shows the first page and the row count.
    page.type_sql("SELECT * FROM cpu ORDER BY n")
    page.shot("editor")
    info = page.run(None)
    page.until(lambda d: len(page.grid_rows()) == 100, "the first page did not show")
    assert "250 rows" in info, info
    assert page.grid_header() == ["#", "tsTIMESTAMP", "hostSYMBOL", "usageDOUBLE", "nLONG"]
    rows = page.grid_rows()
    assert rows[0] == ["1", "2023-11-14T22:14:20.000000Z", "b", "1.5", "1"], rows[0]
    assert rows[99][0] == "100" and rows[99][4] == "100"
    assert "rows 1–100 of 250" in page.text("#grid-view .pager")
    page.shot("results")
    # Paging: /exec?limit=101,200 and then the last page.
    page.click("#grid-view .pager button[title='next page']")
    page.until(lambda d: "rows 101–200 of 250" in page.text("#grid-view .pager"), "no page 2")
    rows = page.grid_rows()
    assert rows[0][0] == "101" and rows[0][4] == "101", rows[0]
    page.click("#grid-view .pager button[title='last page']")
    page.until(lambda d: "rows 201–250 of 250" in page.text("#grid-view .pager"), "no last page")
    assert len(page.grid_rows()) == 50
    assert not browser.find_element(
        By.CSS_SELECTOR, "#grid-view .pager button[title='next page']").is_enabled()

    # The history keeps what ran; a click puts it back into the editor.
    history = browser.find_elements(By.CSS_SELECTOR, "#history li")
    assert history[0].text == "SELECT * FROM cpu ORDER BY n"
    assert any(h.text.startswith("CREATE TABLE cpu") for h in history)

    # Chart of a SAMPLE BY query: one series.
    page.run("SELECT ts, avg(usage) AS usage FROM cpu SAMPLE BY 1h")
    browser.find_element(By.ID, "tab-chart").click()
    page.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-view .chart-area canvas"),
               "no chart")
    page.until(lambda d: page.legend() == ["ts", "usage"], "no legend for one series")
    assert "5 points, 1 series" in page.text("#chart-view .chart-note")
    # Keyed: one series per host (the chart view stays open for the next query).
    page.run("SELECT ts, host, avg(usage) FROM cpu SAMPLE BY 1h")
    page.until(lambda d: page.legend() == ["ts", "a", "b", "c"],
               f"not one series per key: {page.legend()}")
    assert "5 points, 3 series" in page.text("#chart-view .chart-note")
    page.shot("chart")
    # As bars.
    kind = browser.find_element(By.ID, "chart-kind")
    kind.find_element(By.CSS_SELECTOR, "option[value='bar']").click()
    page.until(lambda d: page.legend() == ["ts", "a", "b", "c"], "no bar chart")
    page.shot("chart-bars")
    browser.find_element(By.ID, "tab-grid").click()

    # CSV upload through the upload control; the table shows up in the side panel.
    csv_path = tmp_path / "weather.csv"
    lines = ["ts,city,temperature"] + [
        f"2024-01-0{1 + i // 24}T{i % 24:02d}:00:00.000000Z,{['Oslo', 'Lima'][i % 2]},{i * 0.5}"
        for i in range(48)
    ] + ["2024-01-03T00:00:00.000000Z,Oslo,warm"]
    csv_path.write_text("\n".join(lines) + "\n")
    browser.find_element(By.ID, "upload-file").send_keys(str(csv_path))
    browser.find_element(By.ID, "upload-timestamp").send_keys("ts")
    browser.find_element(By.CSS_SELECTOR, "#upload-partition option[value='DAY']").click()
    browser.find_element(By.ID, "upload-submit").click()
    page.until(lambda d: "rows imported" in page.text("#upload-result")
               or "error" in (d.find_element(By.ID, "upload-result").get_attribute("innerHTML")),
               "no answer to the upload")
    result = page.text("#upload-result")
    assert "49 rows imported into weather" in result, result
    assert "temperature (DOUBLE): 1 bad values" in result, result
    page.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#schema li[data-table='weather']"),
               "the uploaded table is not in the side panel")
    page.click("#schema li[data-table='weather'] .table-name")
    page.until(lambda d: "partition by DAY" in page.text("#schema li[data-table='weather']"),
               "no columns for weather")
    page.run("SELECT city, count(*) AS n, avg(temperature) FROM weather GROUP BY city ORDER BY city")
    page.until(lambda d: len(page.grid_rows()) == 2, "no rows from the uploaded table")
    assert [r[1:3] for r in page.grid_rows()] == [["Lima", "24"], ["Oslo", "25"]]
    page.shot("upload")

    # A bad query: the error is shown and marked in the editor where the server says. Two
    # statements on the line: the one under the cursor (the second) runs, so the mark is at its
    # offset in the editor plus the server's position in the statement.
    sql = "SELECT 1; SELECT * FROM no_such_table"
    page.run(sql)
    page.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#grid-view .message.error"),
               "no error shown")
    assert "no_such_table" in page.text("#grid-view .message.error")
    marked = page.until(
        lambda d: page.shadow().find_elements(By.CSS_SELECTOR, ".cm-lintRange-error"),
        "the error is not marked in the editor")
    assert "".join(m.get_attribute("textContent") for m in marked) == "no_such_table"
    # Its tooltip (hover) carries the message.
    ActionChains(browser).move_to_element(marked[0]).perform()
    page.until(lambda d: any("no_such_table" in t.get_attribute("textContent") for t in
                             page.shadow().find_elements(By.CSS_SELECTOR, ".cm-tooltip-lint")),
               "no tooltip on the marked error")
    page.shot("error")

    # Nothing was refused by the Content-Security-Policy, and no script failed.
    # (Failed requests, such as the bad query's 400, are logged as "network" errors.)
    severe = [e for e in browser.get_log("browser")
              if e["level"] == "SEVERE" and e.get("source") != "network"]
    assert not severe, severe

    if os.environ.get("SUNDIAL_CONSOLE_DOCS") == "1":
        docs = REPO_ROOT / "docs" / "console"
        docs.mkdir(parents=True, exist_ok=True)
        for name in ["editor", "results", "chart", "upload", "error"]:
            shutil.copyfile(shots / f"{name}.png", docs / f"{name}.png")


def test_console_login(start_server, browser):
    server = start_server(["--auth", "required"])
    shots = screenshot_dir()
    page = Console(browser, shots)
    # Without credentials every request is refused; the console's own (X-Sundial-Console) get
    # no Basic challenge, which would make the browser ask for a password itself.
    status, headers, body = http_get(f"{server.http_url}/exec?query=SELECT%201")
    assert status == 401, body
    assert headers["WWW-Authenticate"].startswith("Basic"), dict(headers)
    status, headers, body = http_get(f"{server.http_url}/exec?query=SELECT%201",
                                     {"X-Sundial-Console": "1"})
    assert status == 401 and "error" in json.loads(body), body
    assert headers["WWW-Authenticate"] is None, dict(headers)
    status, _, body = http_get(f"{server.http_url}/login")
    assert status == 200 and json.loads(body) == {"auth": "required", "user": None, "role": None}

    # The page opens on the login form, with labelled fields a password manager understands.
    browser.get(f"{server.http_url}/")
    page.wait_form()
    assert not page.shown("#status") and not page.shown("#session")
    assert browser.switch_to.active_element.get_attribute("id") == "login-user"
    for field, autocomplete in [("login-user", "username"), ("login-password", "current-password")]:
        element = browser.find_element(By.ID, field)
        assert element.get_attribute("autocomplete") == autocomplete
        assert browser.find_elements(By.CSS_SELECTOR, f"label[for='{field}']"), field
    assert browser.find_element(By.ID, "login-password").get_attribute("type") == "password"
    page.shot("login")

    # A wrong password: the error line, the button disabled while the server took its time.
    browser.execute_script(WATCH_SUBMIT)
    page.log_in("admin", "not the password")
    page.until(lambda d: page.text("#login-error") == "wrong user name or password",
               "no error for a wrong password")
    assert browser.execute_script("return window.submitStates") == [True, False]
    assert browser.find_element(By.ID, "login-password").get_attribute("value") == ""
    assert page.shown("#login-form") and not page.shown("#app")
    page.shot("login-error")

    # admin logs in (Enter in the password field) and runs statements.
    page.log_in("admin", "quest")
    page.wait_app()
    assert page.text("#session-user") == "admin (admin)"
    assert page.shown("#logout")
    page.until(lambda d: "no tables yet" in page.text("#schema"), "the side panel did not fill")
    page.until(lambda d: page.text("#status-version") not in ("", "n/a"), "no status")
    info = page.run("CREATE TABLE readings (ts TIMESTAMP, v DOUBLE) TIMESTAMP(ts)")
    assert info.startswith("OK"), info
    info = page.run("INSERT INTO readings SELECT to_timestamp_micros(x * 1000000) AS ts, "
                    "x * 0.5 AS v FROM generate_series(1, 3) AS g(x)")
    assert info.startswith("OK"), info
    info = page.run("SELECT v FROM readings ORDER BY ts")
    assert "3 rows" in info, info
    assert [r[1:] for r in page.grid_rows()] == [["0.5"], ["1"], ["1.5"]]
    page.shot("logged-in")

    # The session cookie: HttpOnly (the page's scripts cannot read it), SameSite=Strict.
    assert "sundial_session" not in browser.execute_script("return document.cookie")
    cookies = {c["name"]: c for c in browser.get_cookies()}
    assert "sundial_session" in cookies, cookies
    assert cookies["sundial_session"]["httpOnly"] is True
    assert cookies["sundial_session"]["sameSite"] == "Strict"
    assert page.fetch_exec()["status"] == 200
    # A page opened again with the cookie goes straight to the app.
    browser.refresh()
    page.wait_app()
    page.until(lambda d: page.text("#session-user") == "admin (admin)", "not logged in after reload")

    # A session that ends while the console is in use (here: its cookie is gone) sends the page
    # back to the form; logging in again finds the editor as it was.
    browser.delete_cookie("sundial_session")
    page.type_sql("SELECT count(*) FROM readings")
    ActionChains(browser).key_down(Keys.CONTROL).send_keys(Keys.ENTER).key_up(
        Keys.CONTROL).perform()
    page.wait_form()
    assert "session has ended" in page.text("#login-note")
    page.log_in("admin", "quest")
    page.wait_app()
    assert page.editor_text() == "SELECT count(*) FROM readings"
    page.run(None)
    page.until(lambda d: page.grid_rows() and page.grid_rows()[0][1:] == ["3"], "no count")

    # Log out: back at the form; the cookie is gone and the server refuses the page's requests
    # (401, still without a Basic challenge).
    page.click("#logout")
    page.wait_form()
    assert "logged out" in page.text("#login-note")
    assert not page.grid_rows()
    assert "sundial_session" not in {c["name"] for c in browser.get_cookies()}
    answer = page.fetch_exec()
    assert answer["status"] == 401, answer
    assert answer["challenge"] is None, answer
    assert "error" in json.loads(answer["body"]), answer
    status, _, body = http_get(f"{server.http_url}/login")
    assert json.loads(body)["user"] is None

    # Nothing was refused by the Content-Security-Policy, and no script failed (the refused
    # requests are logged as "network" errors).
    severe = [e for e in browser.get_log("browser")
              if e["level"] == "SEVERE" and e.get("source") != "network"]
    assert not severe, severe

    if os.environ.get("SUNDIAL_CONSOLE_DOCS") == "1":
        docs = REPO_ROOT / "docs" / "console"
        docs.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shots / "login.png", docs / "login.png")


def test_console_read_only_user(start_server, browser, tmp_path):
    psycopg = pytest.importorskip("psycopg")
    server = start_server(["--auth", "required"])
    # Users are made over PostgreSQL's protocol as admin (GET /exec cannot change anything).
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        try:
            conn.execute("CREATE USER bob WITH PASSWORD 'pw'")
            conn.execute("GRANT READ TO bob")
        except psycopg.Error as e:
            pytest.skip(f"the server cannot create users yet: {e}")
        conn.execute("CREATE TABLE notes (ts TIMESTAMP, n LONG) TIMESTAMP(ts)")
        conn.execute("INSERT INTO notes VALUES ('2024-01-01T00:00:00Z', 7)")
    page = Console(browser, screenshot_dir())
    browser.get(f"{server.http_url}/")
    page.log_in("bob", "pw")
    page.wait_app()
    assert page.text("#session-user") == "bob (read)"
    page.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#schema li[data-table='notes']"),
               "bob does not see the table")
    page.run("SELECT n FROM notes")
    page.until(lambda d: [r[1:] for r in page.grid_rows()] == [["7"]], "bob cannot query")
    # A statement above bob's role is refused with its error, shown like any other; bob stays
    # logged in (403 is not 401).
    info = page.run("CREATE TABLE bobs (ts TIMESTAMP) TIMESTAMP(ts)")
    assert "error" in info, info
    page.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#grid-view .message.error"),
               "no error shown")
    error = page.text("#grid-view .message.error")
    assert "permission denied" in error and "bob" in error, error
    assert page.shown("#app") and not page.shown("#login-form")
    page.shot("read-only")
    # So is an upload (/imp needs the write role).
    csv_path = tmp_path / "more.csv"
    csv_path.write_text("ts,n\n2024-01-02T00:00:00.000000Z,8\n")
    browser.find_element(By.ID, "upload-file").send_keys(str(csv_path))
    browser.find_element(By.ID, "upload-submit").click()
    page.until(lambda d: "permission denied" in page.text("#upload-result"),
               "no error for bob's upload")
    assert page.shown("#app") and page.text("#session-user") == "bob (read)"
    severe = [e for e in browser.get_log("browser")
              if e["level"] == "SEVERE" and e.get("source") != "network"]
    assert not severe, severe
