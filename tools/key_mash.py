"""The key monkey in a real terminal: gpt2viz in tmux, driven by the same seeded acts as the suite's
monkey (tests/tui/monkey.py), with real timing (20-50 ms between acts), then checked.

    python tools/key_mash.py --minutes 10 --lang en              # one long run per language
    python tools/key_mash.py --per-screen 60 --lang en zh --size 120x40 80x24 40x12
    python tools/key_mash.py --step-screens 200                  # resident memory over 200 step screens

A run fails when the app ends by itself (a crash: its exit status and the one line it printed are
shown), when errors.log gets a line, or when at the end q (after escape x3, to leave a text field)
and then ctrl+c do not end it within 1 s, or the terminal is left in the alternate screen or with
mouse reporting on. Not part of the test suite (it takes minutes of a real terminal); README and
benchmarks/RESULTS.md quote its results.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "tui"))

from monkey import OPENERS, QUIT_KEYS, acts  # noqa: E402

# Textual's key names -> tmux's.
TMUX_KEYS = {
    "left": "Left", "right": "Right", "up": "Up", "down": "Down", "pageup": "PPage", "pagedown": "NPage",
    "home": "Home", "end": "End", "enter": "Enter", "escape": "Escape", "tab": "Tab", "shift+tab": "BTab",
    "space": "Space", "backspace": "BSpace", "delete": "DC", "ctrl+p": "C-p", "ctrl+c": "C-c",
    "left_square_bracket": "[", "right_square_bracket": "]", "comma": ",", "full_stop": ".", "question_mark": "?",
}


def tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=check).stdout


class Session:
    """gpt2viz running in a tmux session of its own: `args` before its options (a prompt,
    --generate N), `env` set for it besides XDG_STATE_HOME (a tmux server started earlier would
    otherwise give it its own environment, not this process's)."""

    def __init__(self, name: str, size: tuple[int, int], lang: str, model: str, state: Path,
                 args: tuple[str, ...] = (), env: dict[str, str] | None = None) -> None:
        self.name, self.state = name, state
        self.exit_file = state / f"{name}.exit"
        self.exit_file.unlink(missing_ok=True)
        exports = {**(env or {}), "XDG_STATE_HOME": str(state)}
        command = (
            "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in exports.items()) + " "
            + shlex.join([sys.executable, "-m", "gpt2viz", *args, "--model", model, "--lang", lang])
            + f"; echo $? > {shlex.quote(str(self.exit_file))}"
        )
        tmux("kill-session", "-t", name, check=False)
        # In the state folder: the palette's Screenshot, when the mash picks it, saves there.
        tmux("new-session", "-d", "-s", name, "-x", str(size[0]), "-y", str(size[1]), "-c", str(state), command)
        tmux("set-option", "-t", name, "escape-time", "0")
        tmux("set-option", "-t", name, "remain-on-exit", "on")

    @property
    def exited(self) -> bool:
        return self.exit_file.exists() and self.exit_file.read_text().strip() != ""

    def screen(self) -> str:
        return tmux("capture-pane", "-p", "-t", self.name, check=False)

    def wait_for(self, text: str, seconds: float = 60) -> bool:
        deadline = time.time() + seconds
        while time.time() < deadline:
            if text in self.screen() or self.exited:
                return text in self.screen()
            time.sleep(0.1)
        return False

    def keys(self, *keys: str) -> None:
        tmux("send-keys", "-t", self.name, *[TMUX_KEYS.get(k, k) for k in keys], check=False)

    def text(self, text: str) -> None:
        tmux("send-keys", "-t", self.name, "-l", text, check=False)

    def paste(self, text: str) -> None:
        # Through stdin: a paste may hold a NUL, which no argument can.
        subprocess.run(["tmux", "load-buffer", "-b", "mash", "-"], input=text.encode(), capture_output=True)
        tmux("paste-buffer", "-p", "-b", "mash", "-t", self.name, check=False)

    def resize(self, size: tuple[int, int]) -> None:
        tmux("resize-window", "-t", self.name, "-x", str(size[0]), "-y", str(size[1]), check=False)

    def pid(self) -> int | None:
        """The app's process (the pane runs a shell that runs python)."""
        shell = tmux("display", "-p", "-t", self.name, "#{pane_pid}", check=False).strip()
        children = subprocess.run(["pgrep", "-P", shell], capture_output=True, text=True).stdout.split()
        return int(children[0]) if children else None

    def terminal_state(self) -> dict[str, str]:
        fields = "#{alternate_on} #{mouse_any_flag} #{mouse_sgr_flag}"
        alternate, mouse, sgr = (tmux("display", "-p", "-t", self.name, fields, check=False).split() + ["?"] * 3)[:3]
        return {"alternate screen": alternate, "mouse reporting": mouse, "sgr mouse": sgr}

    def close(self) -> None:
        if self.name:
            tmux("kill-session", "-t", self.name, check=False)


def rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def mash(session: Session, seed: int, seconds: float, opener: tuple[str, ...]) -> int:
    """Sends `seed`'s acts for `seconds`; returns the keys sent. Quit keys are left out (the tmux
    run cannot tell when a text field has the focus); typing leaves q out for that reason too."""
    rng = random.Random(seed ^ 0x5EED)
    for key in opener:
        session.keys(key)
        time.sleep(0.5)
    sent, deadline = 0, time.time() + seconds
    for act in acts(seed):
        if time.time() >= deadline or session.exited:
            break
        if act.kind == "resize":
            session.resize(act.size)
        elif act.kind == "paste":
            session.paste(act.text)
        elif act.kind == "type":
            session.text(act.text.replace("q", "w"))
        elif act.kind == "keys":
            keys = [k for k in act.keys if k not in QUIT_KEYS]
            if keys:
                session.keys(*keys)
        sent += act.key_count
        time.sleep(0.5 if act.kind == "settle" else rng.uniform(0.02, 0.05))
    return sent


def cpu_seconds(pid: int | None) -> float | None:
    """The CPU time the process has used so far (user + system)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, TypeError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until_idle(session: Session, limit: float = 30.0) -> float:
    """Until the app has worked through the keys sent so far: less than 10 % of a core used over
    0.3 s. Returns the seconds it took (the backlog a fast typist left)."""
    started, pid = time.time(), session.pid()
    while time.time() - started < limit and not session.exited:
        before = cpu_seconds(pid)
        time.sleep(0.3)
        after = cpu_seconds(pid)
        if before is None or after is None or after - before < 0.03:
            break
    return time.time() - started


def quit_check(session: Session) -> tuple[bool, float, str | None, str]:
    """Once the app has caught up with the keys sent: escape x3 (leaving any text field), then q,
    then ctrl+c if q did not end it: (ended within 1 s of the key that ended it, seconds, that key,
    how). When q does not end it, `how` says what the screen showed."""
    if session.exited:
        return False, 0.0, None, "had ended by itself"
    backlog = wait_until_idle(session)
    session.resize((120, 40))
    for _ in range(3):
        session.keys("escape")
        time.sleep(0.1)
    wait_until_idle(session)
    shown = session.screen()
    for key in ("q", "ctrl+c"):
        started = time.time()
        session.keys(key)
        while time.time() - started < 1.0:
            if session.exited:
                how = f"{key} (after {backlog:.1f} s catching up)"
                if key != "q":
                    how += "; q did not end it on: " + " | ".join(l.strip() for l in shown.splitlines() if l.strip())[-400:]
                return True, time.time() - started, key, how
            time.sleep(0.02)
    return False, 2.0, None, "still running after q and ctrl+c"


KEEP = False  # --keep: a failed run's session stays open to look at


def one_run(label: str, lang: str, size: tuple[int, int], seed: int, seconds: float, opener, state: Path, model: str) -> dict:
    """One run of `seconds`. An app that leaves by itself with status 0 and nothing in errors.log
    was quit on purpose (the palette's Quit): a new one takes over, with the same stream of acts."""
    errors_log = state / "gpt2viz" / "errors.log"
    errors_before = errors_log.stat().st_size if errors_log.exists() else 0
    deadline = time.time() + seconds
    sent = restarts = 0
    problems: list[str] = []
    while True:
        session = Session(f"mash-{os.getpid()}", size, lang, model, state)
        try:
            ready = session.wait_for("gpt2viz", 60) and not session.exited
            time.sleep(1.0)
            if not ready:
                problems.append("did not start")
            else:
                sent += mash(session, seed + 7919 * restarts, max(1.0, deadline - time.time()), opener)
            ended = session.exited
            if ended:
                status = session.exit_file.read_text().strip()
                errors_now = errors_log.stat().st_size if errors_log.exists() else 0
                if status == "0" and errors_now == errors_before:
                    restarts += 1  # quit through the palette: go on in a new app (or end the run)
                    if time.time() < deadline:
                        continue
                    quit_ok, quit_s, quit_key, how = True, 0.0, None, "quit through the palette as the run ended"
                else:
                    problems.append(f"ended by itself, exit status {status}: {session.screen().strip()[-300:]}")
                    quit_ok, quit_s, quit_key, how = False, 0.0, None, "ended by itself"
            else:
                quit_ok, quit_s, quit_key, how = quit_check(session)
                if not quit_ok:
                    problems.append(how)
                    if KEEP:
                        print(f"left open: tmux attach -t {session.name} (pid {session.pid()})", flush=True)
                        session.name = ""  # not closed below
            time.sleep(0.2)
            terminal = session.terminal_state()
            status = session.exit_file.read_text().strip() if session.exited else "running"
        finally:
            session.close()
        break
    errors_after = errors_log.stat().st_size if errors_log.exists() else 0
    if errors_after != errors_before:
        problems.append("errors.log: " + errors_log.read_text(errors="replace")[errors_before:][-2000:])
    if status != "0":
        problems.append(f"exit status {status}")
    if terminal["alternate screen"] != "0" or terminal["mouse reporting"] != "0":
        problems.append(f"terminal left {terminal}")
    ok = not problems
    result = {
        "run": label, "lang": lang, "size": f"{size[0]}x{size[1]}", "seed": seed, "keys": sent, "ok": ok,
        "quit": f"{how} in {quit_s:.2f} s", "quit_s": quit_s, "quit_key": quit_key, "restarts": restarts, "problems": problems,
    }
    print(("ok  " if ok else "FAIL") + f" {label} {lang} {size[0]}x{size[1]} seed {seed}: {sent} keys, quit: {result['quit']}"
          + (f", {restarts} quit through the palette" if restarts else "") + ("" if ok else f"\n     {problems}"), flush=True)
    return result


def step_screens(count: int, state: Path, model: str) -> None:
    """Opens and closes the forward pass of a generation step `count` times, going through the 40
    steps in turn (each recorded anew but step 0's, which is the prompt's pass); prints the app's
    resident memory."""
    session = Session(f"mash-mem-{os.getpid()}", (120, 40), "en", model, state)
    try:
        session.wait_for("stage 1 of")
        session.keys("g")
        session.wait_for("done", 120)
        time.sleep(1)
        pid = session.pid()
        session.keys(*["left"] * 40)
        time.sleep(0.5)
        before = rss_mb(pid)
        print(f"before: {before:.0f} MB", flush=True)
        step = 0
        for i in range(1, count + 1):  # step 0, 1, 2, ...: each but step 0 records its own pass
            session.keys("enter")
            session.wait_for(f"generation step {step}", 20)
            session.keys("escape")
            session.wait_for(f"Step {step} ", 10)
            step = (step + 1) % 40
            session.keys("right" if step else "home")
            if not step:
                session.keys(*["left"] * 40)
            if i % 25 == 0:
                print(f"{i} step screens: {rss_mb(pid):.0f} MB (+{rss_mb(pid) - before:.1f})", flush=True)
        after = rss_mb(pid)
        print(f"{count} step screens opened and closed: resident memory {before:.0f} -> {after:.0f} MB "
              f"(+{after - before:.1f} MB)", flush=True)
    finally:
        session.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, help="one run of this many minutes per language and size")
    ap.add_argument("--per-screen", type=float, metavar="SECONDS", help="a run of SECONDS for every screen")
    ap.add_argument("--step-screens", type=int, metavar="N", help="resident memory over N step screens")
    ap.add_argument("--lang", nargs="+", default=["en", "zh"])
    ap.add_argument("--size", nargs="+", default=["120x40"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--screens", nargs="+", choices=list(OPENERS), help="with --per-screen: only these")
    ap.add_argument("--keep", action="store_true", help="leave a run's tmux session open when it fails")
    args = ap.parse_args(argv)
    global KEEP
    KEEP = args.keep
    state = Path(tempfile.mkdtemp(prefix="gpt2viz-mash-"))
    sizes = [tuple(int(n) for n in s.split("x")) for s in args.size]
    if args.step_screens:
        step_screens(args.step_screens, state, args.model)
        return 0
    results = []
    seed = args.seed
    for lang in args.lang:
        for size in sizes:
            if args.minutes:
                results.append(one_run("mash", lang, size, seed, args.minutes * 60, (), state, args.model))
                seed += 1
            if args.per_screen:
                for screen, opener in OPENERS.items():
                    if args.screens and screen not in args.screens:
                        continue
                    if opener is None:  # the loading screen: keys from the start
                        opener = ()
                    results.append(one_run(screen, lang, size, seed, args.per_screen, opener, state, args.model))
                    seed += 1
    failed = [r for r in results if not r["ok"]]
    keys = sum(r["keys"] for r in results)
    # quit_key: "q", "ctrl+c" (q did not end the app), or None (it ended through the palette's Quit).
    by_ctrl_c = [r for r in results if r["ok"] and r["quit_key"] == "ctrl+c"]
    by_palette = [r for r in results if r["ok"] and r["quit_key"] is None]
    print(f"{len(results)} runs, {keys:,} keys, {len(failed)} failed; quit times: "
          f"max {max((r['quit_s'] for r in results), default=0):.2f} s; "
          f"{len(by_ctrl_c)} runs ended by ctrl+c after q did not end them, {len(by_palette)} through the palette as they ended")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
