"""What one Handle/Activity call sends back besides its outcome: log lines, events and owned
objects, gathered while the handler runs and put into the answer once."""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Tuple


class Collector:
    """Collects what one Handle/Activity call sends back with its answer."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        #: Set once the answer is sent: later lines (a background task kept the logger) go to
        #: the server's own stderr, prefixed like the controller's object lines.
        self.sent = False
        self.logs: List[Tuple[str, str]] = []
        self.events: List[Dict[str, Any]] = []
        self.owned: List[Dict[str, Any]] = []

    def emit(self, what: str, item: Any) -> None:
        if what == "log":
            self.logs.append(item)
        elif what == "event":
            self.events.append(item)
        elif what == "owned":
            self.owned.append(item)

    def send_log(self, level: str, message: str) -> None:
        if self.sent:
            sys.stderr.write(f"{level[len('LEVEL_'):]} {self.prefix}{message}\n")
            return
        self.emit("log", (level, message))

    def fill(self, pb, response) -> None:
        self.sent = True
        for level, message in self.logs:
            response.logs.append(pb.LogLine(level=level, message=message))
        for ev in self.events:
            if hasattr(response, "events"):
                response.events.append(_event(pb, ev))
        for owned in self.owned:
            if hasattr(response, "owned"):
                response.owned.append(pb.OwnedObject(**owned))


def _event(pb, ev: Dict[str, Any]):
    msg = pb.Event(type=ev["type"], reason=ev["reason"], message=ev["message"])
    if ev.get("regarding"):
        msg.regarding.CopyFrom(pb.ObjectReference(**ev["regarding"]))
    return msg
