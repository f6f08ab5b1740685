#!/usr/bin/env python3
"""Drive a device under test through `ble-hci session --json` (docs/cli.md, "session").

    Tools/examples/session.py --transport tcp:127.0.0.1:9002 name:ble-hci 2a00 fff2
    Tools/examples/session.py --transport hci0 F0:F1:F2:F3:F4:F5 2a19 --subscribe 2a37 --count 5

Connects to TARGET, reads each CHAR and prints `CHAR = HEX`, optionally subscribes and prints
COUNT notifications, then quits (the session disconnects and leaves the controller as found).
Exit status 0 when every step succeeded, 1 otherwise. Standard library only: copy the
`Session` class into your own tests.
"""
import argparse
import itertools
import json
import queue
import subprocess
import sys
import threading


class SessionError(Exception):
    """A request ended with {"id":..,"error":..}: the message and the one-shot exit code."""

    def __init__(self, message, exit_code):
        super().__init__(message)
        self.exit_code = exit_code


class Session:
    """One `ble-hci session --json` process: requests by id, answers and events by id."""

    def __init__(self, ble_hci="ble-hci", transport="hci0", extra=()):
        self.process = subprocess.Popen([ble_hci, "-t", transport, "session", "--json", *extra],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        self.queues = {}          # id -> queue of that request's lines (events and the final answer)
        self.other = queue.Queue()  # lines with no id (trace, errors about unreadable lines)
        self.ready = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.controller = self.ready.get(timeout=30)

    def _read(self):
        for line in self.process.stdout:
            message = json.loads(line)
            if message.get("event") == "ready" and "id" not in message:
                self.ready.put(message)
                continue
            with self.lock:
                q = self.queues.get(message.get("id"))
            (q or self.other).put(message)
        with self.lock:
            for q in self.queues.values():
                q.put({"error": "the session ended", "exit": 3})

    def send(self, line, link=None):
        """Starts a request; returns its id (answers and events arrive on `events(id)`)."""
        request_id = next(self.ids)
        with self.lock:
            self.queues[request_id] = queue.Queue()
        request = {"id": request_id, "line": line}
        if link is not None:
            request["link"] = link
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return request_id

    def next(self, request_id, timeout=30):
        """The request's next line: an event, or its final answer."""
        return self.queues[request_id].get(timeout=timeout)

    def run(self, line, link=None, timeout=30):
        """Runs a request to its end; returns its events, raises SessionError on an error."""
        request_id = self.send(line, link)
        events = []
        while True:
            message = self.next(request_id, timeout)
            if "done" in message:
                return events
            if "error" in message:
                raise SessionError(message["error"], message.get("exit", 1))
            events.append(message)

    def close(self):
        try:
            self.run("quit")
        except (SessionError, BrokenPipeError, queue.Empty):
            pass
        self.process.stdin.close()
        self.process.wait(timeout=15)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ble-hci", default="ble-hci", help="the ble-hci executable")
    parser.add_argument("-t", "--transport", default="hci0", help="the controller (-t SPEC)")
    parser.add_argument("target", help="AA:BB:CC:DD:EE:FF[/public|/random] or name:TEXT")
    parser.add_argument("chars", nargs="*", help="characteristics to read (UUID or 0xHANDLE)")
    parser.add_argument("--subscribe", help="a characteristic to subscribe to")
    parser.add_argument("--count", type=int, default=3, help="notifications to wait for")
    args = parser.parse_args()

    session = Session(args.ble_hci, args.transport)
    try:
        link = session.run(f"connect {args.target}")[0]["link"]
        print(f"connected to {link}")
        for char in args.chars:
            for event in session.run(f"read {char}", link=link):
                if event.get("event") == "read":
                    print(f"{char} = {event['value']}")
        if args.subscribe:
            request_id = session.send(f"subscribe {args.subscribe}", link=link)
            seen = 0
            while seen < args.count:
                message = session.next(request_id)
                if "error" in message:
                    raise SessionError(message["error"], message.get("exit", 1))
                if message.get("event") in ("notification", "indication"):
                    seen += 1
                    print(f"{args.subscribe} -> {message['value']}")
        return 0
    except SessionError as error:
        print(f"session.py: {error}", file=sys.stderr)
        return 1
    finally:
        session.close()


if __name__ == "__main__":
    sys.exit(main())
