"""The project speaks of itself in the present tense: no process bookkeeping in the tracked tree.

Markers such as a numbered work stop, issue or session ("stop" / "issue" / "session" followed by a
number, with a space, a hyphen or "#" between) date a sentence to one moment of the project's
history; the history lives in git. A comment justifies a constant by what it does and by a
benchmark results file, not by an anecdote. Words alone ("stop iteration", "early stop",
"the issue") are fine: only a number after the word counts.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: The word (stop, issue or session, either case, singular or plural), then a number after a space, a hyphen or "#".
MARKER = re.compile(r"\b(?:stops?|issues?|sessions?)(?:[ -]#?|#)\d+\b", re.IGNORECASE)
#: This file states the pattern in its own words.
SELF = Path(__file__).resolve().relative_to(REPO).as_posix()


def tracked_text_files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout (or no git): nothing tracked to scan")
    return [name for name in out.decode("utf-8", "replace").split("\0") if name and name != SELF]


def markers(text: str) -> list[tuple[int, str]]:
    """``(line number, match)`` for every marker in ``text``."""
    return [(i, m.group(0)) for i, line in enumerate(text.splitlines(), 1) for m in MARKER.finditer(line)]


#: The words of the examples below, kept apart from their numbers so that this file holds no marker itself.
S, SS, I, IS, N = "stop", "Stop", "issue", "issues", "session"


@pytest.mark.parametrize("text, found", [
    (f"measured at {S} 45 on two cores", [f"{S} 45"]),
    (f"{SS}-29's solver", [f"{SS}-29"]),
    (f"see {I} #12 and {IS} 3", [f"{I} #12", f"{IS} 3"]),
    (f"in {N} 7", [f"{N} 7"]),
    (f"raise StopIteration to {S} 3 solves early", [f"{S} 3"]),
    ("stop iteration; early stop; the issue is; sessions end", []),
    ("stop_45 and issue12 are names, not markers", []),
])
def test_the_pattern(text, found):
    assert [m for _, m in markers(text)] == found


def test_no_history_markers_in_the_tracked_tree():
    hits = []
    for name in tracked_text_files():
        path = REPO / name
        try:
            data = path.read_bytes()
        except OSError:  # listed but absent (a deletion not yet committed)
            continue
        if b"\0" in data:  # binary
            continue
        text = data.decode("utf-8", "replace")
        hits += [f"{name}:{line}: {match}" for line, match in markers(text)]
    assert not hits, "process history in the tracked tree (rewrite in the present tense):\n" + "\n".join(hits)
