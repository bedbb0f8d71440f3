"""The chat page at `/`, in Debian's headless Chromium through Selenium and
chromedriver, used as a person would: type, send, watch the answer stream
in, stop a long one, start over. The page must fetch nothing from any
origin but the server's own.

Chromium, chromedriver and Selenium are test dependencies like the models:
missing, they fail these tests, unless MINFER_REQUIRE_MODELS=0 turns that
into a skip recorded in target/minfer-skipped.txt (as the Rust harness
does). scripts/test.sh installs all three.
"""

import json
import os
import pathlib
import re
import shutil
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[4]
SCREENSHOT = ROOT / "target" / "chat-page.png"
WAIT = 120  # seconds for anything the model does; loaded 2-core machines are slow


def missing(what, fix):
    """Fails, or with MINFER_REQUIRE_MODELS=0 skips and records the skip."""
    required = os.environ.get("MINFER_REQUIRE_MODELS")
    if required is None or required not in ("", "0"):
        pytest.fail(f"{what} is missing ({fix}); MINFER_REQUIRE_MODELS=0 turns this into a recorded skip")
    ledger = ROOT / "target" / "minfer-skipped.txt"
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with open(ledger, "a") as f:
        f.write(f"test_page.py: {what} ({fix})\n")
    pytest.skip(f"{what} is missing ({fix})")


@pytest.fixture(scope="module")
def driver():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing("the Python package selenium", "target/pyenv/bin/pip install selenium; scripts/test.sh does")
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
    if browser is None:
        missing("chromium", "apt-get install chromium; scripts/test.sh does")
    chromedriver = shutil.which("chromedriver")
    if chromedriver is None:
        missing("chromedriver", "apt-get install chromium-driver; scripts/test.sh does")

    opts = webdriver.ChromeOptions()
    # Both paths given: Selenium Manager never tries to download a browser.
    opts.binary_location = browser
    # chromedriver gives the browser a fresh temporary profile of its own.
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900", "--no-first-run"):
        opts.add_argument(arg)
    # The performance log carries every network request the page makes,
    # with its body: how the test sees what the page sent and to where.
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    d = webdriver.Chrome(options=opts, service=Service(executable_path=chromedriver))
    d.requests = []  # every request seen so far: {"url", "method", "body"}
    try:
        yield d
    finally:
        d.quit()


def requests_seen(d):
    """Drains the performance log into d.requests and returns the list:
    the requests of web documents, not those of the browser's own pages
    (chrome://, such as a new tab page)."""
    for entry in d.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.requestWillBeSent":
            if msg["params"].get("documentURL", "").startswith("chrome"):
                continue
            r = msg["params"]["request"]
            d.requests.append({"url": r["url"], "method": r["method"], "body": r.get("postData")})
    return d.requests


def chat_bodies(d, origin):
    return [json.loads(r["body"]) for r in requests_seen(d)
            if r["method"] == "POST" and r["url"] == origin + "/v1/chat/completions"]


def assert_only_own_origin(d, origin):
    """Every request, by the network log and by the page's own resource
    timing, went to `origin` (data: URLs load nothing)."""
    logged = [r["url"] for r in requests_seen(d)]
    timed = d.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert logged and timed, "no requests were seen at all"
    for url in logged + timed:
        assert url.startswith(origin + "/") or url.startswith("data:"), f"the page fetched {url}: {logged} {timed}"


def console_errors(d):
    return [e for e in d.get_log("browser") if e["level"] == "SEVERE"]


def assert_clean(d, origin):
    """The page fetched from `origin` alone and logged no error."""
    assert_only_own_origin(d, origin)
    assert console_errors(d) == []


def wait_until(cond, what, timeout=WAIT, every=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(every)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def el(d, css):
    from selenium.webdriver.common.by import By

    return d.find_element(By.CSS_SELECTOR, css)


def els(d, css):
    from selenium.webdriver.common.by import By

    return d.find_elements(By.CSS_SELECTOR, css)


def last_answer(d):
    """(text shown, still streaming, meta line) of the last assistant message."""
    return d.execute_script(
        "const m = [...document.querySelectorAll('#messages .msg.assistant')].pop();"
        "return m ? [m.querySelector('.content').innerText, m.classList.contains('streaming'),"
        " m.querySelector('.meta').innerText] : null;"
    )


def set_field(d, css, value):
    f = el(d, css)
    f.clear()
    f.send_keys(value)


def open_settings(d):
    if not el(d, "#settings").is_displayed():
        el(d, "#settings-button").click()
    assert el(d, "#settings").is_displayed()


def send(d, text, **fields):
    """Sets the settings `fields` (keyed by their inputs' ids) and sends
    `text` as the next message."""
    if fields:
        open_settings(d)
    for name, value in fields.items():
        set_field(d, "#" + name, value)
    el(d, "#input").send_keys(text)
    el(d, "#send").click()


def open_page(d, url, model=None):
    # What came before (the browser's own start page) is not the page's.
    requests_seen(d).clear()
    d.get_log("browser")
    d.get(url + "/")
    if model:
        wait_until(lambda: el(d, "#model-name").text == model, f"the model name {model!r} in the header", 30)


def new_chat(d, url, model):
    """Opens the page of the server at `url` and starts a new chat."""
    open_page(d, url, model)
    el(d, "#new-chat").click()


def metric(base_url, name):
    with urllib.request.urlopen(base_url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert m, f"{name} missing from /metrics"
    return float(m.group(1))


def test_the_page_is_self_contained(base_url):
    with urllib.request.urlopen(base_url + "/", timeout=30) as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "text/html; charset=utf-8"
        assert r.headers["Cache-Control"] == "no-cache"
        html = r.read().decode()
    assert html.startswith("<!doctype html>")
    # No address of anything: no scripts, styles, fonts or images from
    # outside, and nothing in the script that could build one.
    for bad in ("http://", "https://", "<script src", "<img", "<iframe", "@import", "url(", "@font-face"):
        assert bad not in html, f"the page contains {bad!r}"
    for tag in re.findall(r"<link\b[^>]*>", html):
        assert 'href="data:' in tag, f"the page links {tag}"


def test_chat_streams_answers_and_sends_the_history(driver, base_url, model):
    d = driver
    open_page(d, base_url, model)
    assert els(d, "#messages .msg") == []
    send(d, "Write a short poem about the sea.", max_tokens="64", temperature="0")
    # Watch the answer as it grows: it must be seen part-written at least
    # twice (two different texts) before it is finished.
    partial = []
    while True:
        a = wait_until(lambda: last_answer(d), "the assistant's message", 30, 0.01)
        text, streaming, meta = a
        if not streaming:
            break
        if text.strip() and (not partial or partial[-1] != text):
            partial.append(text)
        time.sleep(0.01)
    final = text
    assert final.strip(), "the answer is empty"
    assert len(partial) >= 2, f"the answer did not stream in: {partial!r} then {final!r}"
    assert len(partial[0]) < len(final)
    assert el(d, "#send").is_enabled() and not el(d, "#stop").is_enabled()
    # max_tokens reached the server: the usage line counts at most 64.
    n = int(re.search(r"(\d+) tokens", meta).group(1))
    assert 0 < n <= 64, meta

    # A second turn sends the whole conversation, the settings with it.
    send(d, "Now give it a title.")
    wait_until(lambda: len(els(d, "#messages .msg.assistant")) == 2 and not last_answer(d)[1], "the second answer")
    assert last_answer(d)[0].strip()
    roles = [m.get_attribute("class") for m in els(d, "#messages .msg")]
    assert roles == ["msg user", "msg assistant", "msg user", "msg assistant"]
    first, second = chat_bodies(d, base_url)[-2:]
    for body in (first, second):
        assert body["model"] == model and body["stream"] is True
        assert body["max_tokens"] == 64 and body["temperature"] == 0
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert second["messages"][0] == first["messages"][0]
    assert second["messages"][1]["content"].strip()
    assert second["messages"][2] == {"role": "user", "content": "Now give it a title."}

    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    d.save_screenshot(str(SCREENSHOT))
    assert SCREENSHOT.stat().st_size > 10_000
    assert_clean(d, base_url)


def test_stop_keeps_the_partial_answer_and_cancels_generation(driver, base_url, model):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    d = driver
    new_chat(d, base_url, model)
    assert els(d, "#messages .msg") == []
    story = "Write a very long story, at least two thousand words, about a dragon who learns to sail."
    send(d, story, max_tokens="2000")
    wait_until(lambda: el(d, "#stop").is_enabled(), "Stop to be enabled")
    assert not el(d, "#send").is_enabled()
    wait_until(lambda: len(last_answer(d)[0].strip()) >= 20, "the answer to begin")
    el(d, "#stop").click()
    wait_until(lambda: el(d, "#send").is_enabled(), "Send to be usable again", 10)
    assert not el(d, "#stop").is_enabled()
    text, streaming, meta = last_answer(d)
    assert text.strip() and not streaming
    assert meta.startswith("stopped"), meta
    time.sleep(1.5)
    assert last_answer(d)[0] == text, "the answer grew after Stop"
    # Closing the connection cancelled the generation on the server: 2000
    # tokens would take half a minute or more here.
    wait_until(lambda: metric(base_url, "minfer_requests_active") == 0, "the server to cancel the generation", 15, 0.2)

    # Shift+Enter is a new line; Enter sends, the stopped answer in the history.
    set_field(d, "#max_tokens", "8")
    box = el(d, "#input")
    box.click()
    box.send_keys("Thanks.")
    ActionChains(d).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
    box.send_keys("That is enough.")
    assert box.get_attribute("value") == "Thanks.\nThat is enough."
    assert len(els(d, "#messages .msg")) == 2
    box.send_keys(Keys.ENTER)
    wait_until(lambda: len(els(d, "#messages .msg.assistant")) == 2 and not last_answer(d)[1], "the answer after Stop")
    assert box.get_attribute("value") == ""
    body = chat_bodies(d, base_url)[-1]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"].strip()
    assert body["messages"][2]["content"] == "Thanks.\nThat is enough."
    assert body["max_tokens"] == 8
    assert_clean(d, base_url)


def test_a_refused_request_shows_the_servers_message(driver, base_url, model):
    d = driver
    new_chat(d, base_url, model)
    send(d, "Hello?", temperature="9")
    wait_until(lambda: els(d, "#messages .msg.assistant .error"), "the error message")
    error = el(d, "#messages .msg.assistant .error").text
    assert "temperature must be between 0 and 2" in error, error
    assert el(d, "#send").is_enabled() and not el(d, "#stop").is_enabled()
    # The failed turn is not part of the conversation any more.
    send(d, "Hello again.", temperature="0", max_tokens="4")
    wait_until(lambda: len(els(d, "#messages .msg.assistant")) == 2 and not last_answer(d)[1], "the next answer")
    body = chat_bodies(d, base_url)[-1]
    assert body["messages"] == [{"role": "user", "content": "Hello again."}]


def test_markdown_is_rendered_safely(driver, base_url):
    d = driver
    open_page(d, base_url)
    html = d.execute_script(
        "return renderMarkdown(arguments[0]);",
        "# Title\n\nSome **bold**, *it*, `x<y` and snake_case_name.\n\n- one\n- two\n\n1. first\n\n"
        "```rust\nfn main() { println!(\"<b>\"); }\n```\n\n"
        "[ok](https://example.com/a?b=1&c=2) [bad](javascript:alert(1)) <script>alert(1)</script>"
        " <img src=x onerror=alert(1)>",
    )
    assert "<h1>Title</h1>" in html
    assert "<strong>bold</strong>" in html and "<em>it</em>" in html
    assert "<code>x&lt;y</code>" in html and "snake_case_name" in html
    assert "<ul><li>one</li><li>two</li></ul>" in html and "<ol><li>first</li></ol>" in html
    assert '<code class="language-rust">fn main() { println!(&quot;&lt;b&gt;&quot;); }</code>' in html
    assert 'class="copy"' in html
    assert '<a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">ok</a>' in html
    assert "javascript:" not in html.replace("[bad](javascript:alert(1))", "")
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and "&lt;img" in html
    # Reasoning written inline by the model goes to the "thinking" block.
    split = d.execute_script("return splitThinking(arguments[0]);", "<think>Hmm.</think>\n\nThe answer.")
    assert split == {"reasoning": "Hmm.", "answer": "The answer."}


def test_the_api_key_is_asked_for_and_kept(driver, keyed_url, api_key, model):
    from selenium.webdriver.common.keys import Keys

    d = driver
    # The page itself needs no key (a browser cannot send one on navigation).
    open_page(d, keyed_url)
    wait_until(lambda: "API key" in el(d, "#model-name").text, "the page to ask for the API key", 30)
    open_settings(d)
    el(d, "#api-key").send_keys(api_key, Keys.TAB)
    wait_until(lambda: el(d, "#model-name").text == model, "the model name once the key is given", 30)
    # Kept in local storage: a reload needs no typing.
    open_page(d, keyed_url, model)
    open_settings(d)
    assert el(d, "#api-key").get_attribute("value") == api_key
    send(d, "Hi", max_tokens="4")
    wait_until(lambda: last_answer(d) and not last_answer(d)[1], "the answer from the keyed server")
    assert last_answer(d)[0].strip()
    assert "error" not in d.execute_script("return document.querySelector('#messages').innerHTML")
    assert_only_own_origin(d, keyed_url)


def test_reasoning_is_shown_in_a_folded_thinking_block(driver, think_url, think_model):
    d = driver
    # The reasoning fixture is a random model: steered, through the page's
    # extra fields, to open a thinking block with "Paris" in it and close it
    # (test_reasoning.py); the answer after it is random words.
    def token(text):
        req = urllib.request.Request(
            think_url + "/tokenize",
            json.dumps({"content": text, "add_special": False}).encode(),
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            (t,) = json.loads(r.read())["tokens"]
        return t

    steps = ["<think>", "Paris", "</think>", " Rome", "<|im_end|>"]
    extra = {"logit_bias": {str(token(t)): 100 - 5 * i for i, t in enumerate(steps)}, "repeat_penalty": 1000}
    open_page(d, think_url, think_model)
    send(d, "What is the capital of France?", max_tokens="12", temperature="0", extra=json.dumps(extra))
    wait_until(lambda: last_answer(d) and not last_answer(d)[1], "the answer")
    box = el(d, "#messages .msg.assistant details.thinking")
    assert box.get_attribute("open") is None, "the thinking block is folded once the answer came"
    box.find_element("css selector", "summary").click()
    assert "Paris" in box.find_element("css selector", ".reasoning").text
    answer = last_answer(d)[0]
    assert answer.strip() and "Paris" not in answer and "think>" not in answer
    body = chat_bodies(d, think_url)[-1]
    assert body["logit_bias"] == extra["logit_bias"] and body["repeat_penalty"] == 1000
    assert_clean(d, think_url)
