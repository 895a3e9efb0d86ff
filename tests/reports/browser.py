"""A headless Chromium driven over its DevTools protocol through a pipe (--remote-debugging-pipe:
JSON messages ending in a NUL byte on file descriptors 3 and 4), so a test loads a page from
file://, runs script in it, presses keys and takes screenshots with the standard library alone.
Every console message and uncaught exception of the page is kept in ``problems``."""
import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

NAMES = ('chromium', 'chromium-browser', 'google-chrome', 'chrome')


def find_chromium() -> Optional[str]:
    return next((path for path in map(shutil.which, NAMES) if path), None)


class Browser:
    """One headless Chromium with one page (`open`, `evaluate`, `press`, `screenshot`)."""

    def __init__(self, executable: str, profile: Path, timeout: float = 30.0) -> None:
        self.timeout, self.next_id, self.events, self.problems = timeout, 0, [], []
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()
        # The browser reads commands on fd 3 and writes answers on fd 4.
        self.process = subprocess.Popen(
            ['bash', '-c', f'exec "$@" 3<&{to_browser} 4>&{from_browser}', 'chromium',
             executable, '--headless', '--remote-debugging-pipe', '--no-sandbox',
             '--disable-gpu', '--no-first-run', '--no-default-browser-check',
             '--disable-extensions', '--disable-background-networking', '--mute-audio',
             '--hide-scrollbars', f'--user-data-dir={profile}', 'about:blank'],
            pass_fds=(to_browser, from_browser), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self.buffer = b''
        target = self.call('Target.createTarget', url='about:blank')['targetId']
        self.session = self.call('Target.attachToTarget', targetId=target, flatten=True)['sessionId']
        for domain in ('Page', 'Runtime', 'Log'):
            self.call(f'{domain}.enable', session=True)

    def _send(self, method: str, params: Dict[str, Any], session: bool) -> int:
        self.next_id += 1
        message = dict(id=self.next_id, method=method, params=params)
        if session:
            message['sessionId'] = self.session
        os.write(self._write, json.dumps(message).encode() + b'\0')
        return self.next_id

    def _receive(self, deadline: float) -> Dict[str, Any]:
        while b'\0' not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                raise TimeoutError('Chromium did not answer in time')
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise RuntimeError('Chromium closed its pipe')
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b'\0', 1)
        message = json.loads(raw)
        method = message.get('method', '')
        params = message.get('params', {})
        if method == 'Runtime.exceptionThrown':
            details = params['exceptionDetails']
            self.problems.append('exception: ' + (details.get('exception', {}).get('description')
                                                  or details.get('text', '')))
        elif method == 'Runtime.consoleAPICalled':
            self.problems.append(f"console.{params['type']}: " + ' '.join(
                str(a.get('value', a.get('description', ''))) for a in params['args']))
        elif method == 'Log.entryAdded':
            self.problems.append(f"{params['entry']['level']}: {params['entry']['text']}")
        elif method:
            self.events.append(method)
        return message

    def call(self, method: str, session: bool = False, **params) -> Dict[str, Any]:
        wanted = self._send(method, params, session)
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._receive(deadline)
            if message.get('id') == wanted:
                if 'error' in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get('result', {})

    def open(self, url: str, width: int, height: int) -> None:
        """Load `url` at a viewport of width x height and wait for its load event."""
        self.call('Emulation.setDeviceMetricsOverride', session=True, width=width,
                  height=height, deviceScaleFactor=1, mobile=width < 700)
        self.events.clear()
        self.call('Page.navigate', session=True, url=url)
        deadline = time.monotonic() + self.timeout
        while 'Page.loadEventFired' not in self.events:
            self._receive(deadline)

    def resize(self, width: int, height: int) -> None:
        self.call('Emulation.setDeviceMetricsOverride', session=True, width=width,
                  height=height, deviceScaleFactor=1, mobile=width < 700)

    def evaluate(self, expression: str) -> Any:
        result = self.call('Runtime.evaluate', session=True, expression=expression,
                           returnByValue=True, awaitPromise=True)
        if 'exceptionDetails' in result:
            raise RuntimeError(f"{expression[:60]}: {result['exceptionDetails'].get('text')}")
        return result['result'].get('value')

    def press(self, key: str, code: str, key_code: int) -> None:
        """A key pressed and released on the focused element, as a keyboard does it."""
        for kind in ('keyDown', 'keyUp'):
            self.call('Input.dispatchKeyEvent', session=True, type=kind, key=key, code=code,
                      windowsVirtualKeyCode=key_code, **({'text': '\r'} if key == 'Enter'
                                                         and kind == 'keyDown' else {}))

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        params = dict(format='png')
        if full_page:
            params.update(captureBeyondViewport=True)
        data = self.call('Page.captureScreenshot', session=True, **params)['data']
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> List[str]:
        try:
            self.call('Browser.close')
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass
        return self.problems
