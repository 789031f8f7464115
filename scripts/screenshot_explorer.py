"""Open an attention explorer page in headless Chromium (networking off) and save a screenshot.

    python scripts/screenshot_explorer.py outputs/my_run/attention/explorer.html docs/explorer.png
    python scripts/screenshot_explorer.py sky.html sky.png --kind encoder_self --query 2 --layer 1 --head 3

Needs Debian's ``chromium`` and ``chromium-driver``, and selenium (no browser downloaded). The page is opened from
disk behind a proxy that leads nowhere: any request it made would fail and be reported.
"""

from __future__ import annotations

import argparse
import base64
import shutil
from pathlib import Path

CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--proxy-server=http://127.0.0.1:9", "--window-size=1400,1000",  # networking off: a proxy that refuses
]
INSTALL_HINT = "apt-get install chromium chromium-driver && pip install selenium"


def headless_chromium():
    """A selenium driver for Debian's Chromium, its console log kept; RuntimeError if none is installed."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        browser = None
    if not (browser and driver):
        raise RuntimeError(f"no headless Chromium here: {INSTALL_HINT}")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


def save_full_page(driver, path: Path) -> None:
    """A PNG of the whole page, not just the window (Chromium's DevTools protocol)."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                             "clip": clip})
    Path(path).write_bytes(base64.b64decode(shot["data"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("page", type=Path, help="an explorer .html file")
    parser.add_argument("png", type=Path, help="where to save the screenshot")
    parser.add_argument("--kind", default="cross", choices=["encoder_self", "decoder_self", "cross"])
    parser.add_argument("--query", type=int, default=None, help="pin this query row (its weights are shown)")
    parser.add_argument("--sentence", type=int, default=0, help="which sentence of a run's page")
    parser.add_argument("--layer", type=int, default=None, help="enlarge this layer (1 = first) ...")
    parser.add_argument("--head", type=int, default=None, help="... and this head (1 = first)")
    args = parser.parse_args()
    driver = headless_chromium()
    try:
        driver.get(args.page.resolve().as_uri())
        driver.execute_script("""
            const [sentence, kind] = arguments;
            const select = document.getElementById("sentence");
            select.value = sentence; select.dispatchEvent(new Event("change"));
            document.querySelector(`#kinds button[data-kind="${kind}"]`).click();""", args.sentence, args.kind)
        if args.layer is not None and args.head is not None:
            selector = f'#model-view canvas[data-layer="{args.layer - 1}"][data-head="{args.head - 1}"]'
            driver.find_element("css selector", selector).click()
        if args.query is not None:
            driver.find_element("css selector", f'#detail th.q[data-q="{args.query}"]').click()
        save_full_page(driver, args.png)
        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        print(f"saved {args.png}" + (f"; console errors: {errors}" if errors else ""))
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
