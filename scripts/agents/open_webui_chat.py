#!/usr/bin/env python3
"""Drives Open WebUI in headless Chromium as its users do: opens the page,
dismisses the release-notes dialog a fresh install shows, types a question
into the chat box, presses Enter and waits for the answer to stop growing.

Why a browser: Open WebUI is a web app; what it sends to the model server
(its own system prompt, its built-in tools, a follow-up title request) is
decided by the page and its backend together, so only a real page shows
whether a chat against `minfer serve` works.

Usage: open_webui_chat.py URL QUESTION [TIMEOUT_S]
Prints one JSON line: {"answer": ..., "secs": ...}; exits 1 when no answer
came within the timeout (a screenshot is left next to --shot when given).
Needs selenium, and chromium with chromedriver on PATH.
"""

import json
import shutil
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys


def browser():
    path = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
    driver = shutil.which("chromedriver")
    if path is None or driver is None:
        raise SystemExit("chromium and chromedriver are needed (apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    # Both paths given: Selenium Manager never tries to download a browser.
    opts.binary_location = path
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--no-first-run"):
        opts.add_argument(arg)
    d = webdriver.Chrome(options=opts, service=Service(executable_path=driver))
    d.set_page_load_timeout(120)
    return d


def visible(d, css):
    return [e for e in d.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()]


def main():
    url, question = sys.argv[1], sys.argv[2]
    limit = float(sys.argv[3]) if len(sys.argv) > 3 else 300.0
    shot = None
    if "--shot" in sys.argv:
        shot = sys.argv[sys.argv.index("--shot") + 1]
    d = browser()
    try:
        d.get(url)
        deadline = time.time() + 120
        while not visible(d, "#chat-input"):
            if time.time() > deadline:
                raise SystemExit("the chat box never showed")
            time.sleep(0.5)
        # A fresh install greets its first user with the release notes.
        time.sleep(2)
        for b in d.find_elements(By.XPATH, "//button[contains(., \"Okay, Let's Go\")]"):
            if b.is_displayed():
                b.click()
                time.sleep(1)
        box = visible(d, "#chat-input")[0]
        box.click()
        box.send_keys(question)
        box.send_keys(Keys.ENTER)
        t0 = time.time()
        answer, stable_since = "", None
        while time.time() - t0 < limit:
            # Read in the page: the streamed answer re-renders its nodes,
            # so a held element goes stale.
            text = d.execute_script(
                "const e = document.querySelectorAll('#response-content-container');"
                "return e.length ? e[e.length - 1].innerText : '';"
            ).strip()
            if text and text == answer:
                # The answer is whole once it has stopped growing for a while.
                if stable_since and time.time() - stable_since > 8:
                    break
            else:
                answer, stable_since = text, time.time()
            time.sleep(0.5)
        if shot:
            d.save_screenshot(shot)
        print(json.dumps({"answer": answer, "secs": round(time.time() - t0, 1)}))
        sys.exit(0 if answer else 1)
    finally:
        d.quit()


if __name__ == "__main__":
    main()
