"""``g.launch(n, progress=True)``: a progress bar for long launches.

The executor calls the bar from the launching thread when it takes the GIL for
its signal check (the ticker's clock, every few ms), at most every 100 ms, with
the replays done (and, once the launch has run ``while_loop`` iterations, those
too: a launch that is one long loop moves by its iterations), so a replay never
waits for the display. Nothing is shown
for a launch shorter than ``DELAY_S``; after that a tqdm bar (``tqdm.auto``,
when tqdm is installed) or a line on stderr rewritten in place.

A ``launch_until_done`` bar counts samples, not replays: the replay cap says
only when it would stop at the latest, the live samples say how far it is. Its
total is the live samples at the launch's start (the logical size), its
progress the samples finished since (the logical size after each replay is
what the compaction left), its estimate of the time left the live count over
the rate samples finish at; it ends at 100% when every sample finished.

A bar never costs the launch: if showing it fails (stderr a broken pipe, a
closed file, a writer raising OSError, tqdm raising anything), the bar is
dropped silently and the launch goes on. Silently, because the only place to
say so is the stream that just failed, and a warning turned into an error
(``-W error``) would stop the launch the bar was meant to watch. Ctrl-C
(KeyboardInterrupt, not an ``Exception``) still stops the launch.
"""
from __future__ import annotations

import sys
import time

from eagle import _core

#: seconds a launch runs before its progress is shown
DELAY_S = 1.0


def _tqdm():
    """tqdm's bar class, or None (then a plain line is written)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


def start(progress, n, until_done, backend=None):
    """The bar for a launch of n replays, or None when progress is off (False). Anything
    but True or False (None, 0, 1 too) is refused before the launch runs, by ``launch`` and
    ``launch_until_done`` alike. An until-done launch's bar follows
    ``backend.logical_size``, the live samples."""
    if not isinstance(progress, bool):
        raise TypeError(f"progress= takes True or False, got {progress!r}")
    if not progress:
        return None
    if until_done and backend is not None:
        return Progress(n, "launch_until_done", live=lambda: backend.logical_size)
    return Progress(n, "launch_until_done" if until_done else "launch")


class Progress:
    """Called as ``bar(done)`` by the executor; ``close(done)`` after the launch.

    ``live``: for an until-done launch, a callable giving the live samples now; the bar
    then shows the samples finished out of those live at its start (``total`` is the
    replay cap, reported beside them). ``clock`` gives seconds (``time.monotonic``)."""

    def __init__(self, total, what, delay=None, file=None, live=None, clock=time.monotonic):
        self.iterations = None   # while-loop iterations the launch ran so far (any depth)
        self.total = total
        self.what = what
        self.delay = DELAY_S if delay is None else delay
        self.file = file
        self.clock = clock
        self.live = live
        self.live_start = int(live()) if live is not None else None
        self.t0 = clock()
        self.done = 0
        self._bar = None        # the tqdm bar, once shown
        self._line = False      # the plain line, once shown
        self._width = 0         # the characters of the plain line last written
        self.dropped = False    # showing it failed: nothing more is shown

    def __call__(self, done, iterations=None):
        self.done = done
        if iterations is not None:
            self.iterations = iterations
        if self.dropped:
            return
        try:
            self._show(done)
        except Exception:   # the executor would stop the launch on it (as for Ctrl-C): drop the bar
            self._drop()

    def _drop(self):
        self.dropped = True
        bar, self._bar, self._line = self._bar, None, False
        if bar is not None:
            try:
                bar.close()
            except Exception:
                pass

    def _count(self, done):
        """(progress, its total, unit) for the bar: replays, or samples finished."""
        if self.live is None:
            return done, self.total, "replay"
        return self.live_start - int(self.live()), self.live_start, "sample"

    def _show(self, done):
        elapsed = self.clock() - self.t0
        count, total, unit = self._count(done)
        if self._bar is None and not self._line:
            if elapsed < self.delay or (self.file or sys.stderr) is None:   # no stderr (pythonw): show nothing
                return
            tqdm = _tqdm()
            if tqdm is not None:
                self._bar = tqdm(total=total, desc=f"eagle {self.what}", unit=unit, initial=count,
                                 file=self.file or sys.stderr, dynamic_ncols=True)
            else:
                self._line = True
        if self._bar is not None:
            self._bar.update(count - self._bar.n)
            self._postfix(done)
        else:
            self._write(done, elapsed, end="")

    def _postfix(self, done):
        parts = ([f"{done:,} replays"] if self.live is not None else []) + (
            [f"{self.iterations:,} loop iterations"] if self.iterations is not None else [])
        if parts:
            self._bar.set_postfix_str(", ".join(parts), refresh=False)

    def _write(self, done, elapsed, end):
        out = self.file or sys.stderr
        count, total, unit = self._count(done)
        frac = count / total if total else 1.0
        rate = count / elapsed if elapsed > 0 else 0.0
        ended = end == "\n"   # the launch's last line: no time left to estimate
        left = f", ~{(total - count) / rate:.0f} s left" if rate > 0 and count < total and not ended else ""
        if self.live is None:
            what = f"{done:,}/{total:,} replays"
        else:
            what = f"{count:,}/{total:,} samples finished, {done:,} replays"
        if self.iterations is not None:
            what += f", {self.iterations:,} loop iterations"
        text = f"eagle {self.what}: {what} ({100 * frac:.0f}%), {elapsed:.1f} s{left}"
        # blanks over what a longer line before it left on the terminal ("… 6.5 s    s left")
        out.write(f"\r{text}{' ' * max(0, self._width - len(text))}{end}")
        self._width = len(text)
        out.flush()

    def close(self, done=None):
        """After the launch (done: replays run, None if it raised): finish what was shown."""
        if done is not None:
            self.done = done
        if self.dropped:
            return
        try:
            self._finish()
        except Exception:   # the launch ran: a display failing at its end must not lose it
            self._drop()

    def _finish(self):
        if self._bar is not None:
            count, _, _ = self._count(self.done)
            self._bar.update(count - self._bar.n)
            self._postfix(self.done)
            self._bar.close()
        elif self._line:
            self._write(self.done, self.clock() - self.t0, end="\n")


def launch_in_chunks(backend, n, until_done, bar):
    """A backend without a progress hook (cuda): launch in chunks of about 100 ms,
    calling bar(done) between them. Returns the replays run."""
    done, chunk = 0, 1
    while done < n:
        k = min(chunk, n - done)
        t = time.monotonic()
        got = backend.launch(k, True) if until_done else (backend.launch(k), k)[1]
        done += got
        bar(done)
        if until_done and got < k:
            break
        dt = time.monotonic() - t
        chunk = max(1, min(2 * k, int(k * 0.1 / dt))) if dt > 0 else 2 * k
    return done


_core.register_observer(progress_start=start)
