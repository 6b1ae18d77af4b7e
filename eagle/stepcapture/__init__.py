"""Capture: a plain NumPy step recorded as the nodes eagle already has.

``eagle.capture(step, *arrays)`` calls ``step`` once on stand-ins and returns an unbuilt
graph of what it did (``capture``); the stand-in array (``standin``), the recording of its
operations (``session``), the NumPy functions it maps (``functions``), the graph's
temporaries (``pool``), the line an operation came from (``source``), the refusals
(``refusals``) and the device memory of a step over CUDA arrays (``device``) each have
their module. The page docs/capture.md shows it end to end.
"""
from eagle.stepcapture.capture import CapturedGraph, capture
from eagle.stepcapture.refusals import CaptureError

__all__ = ["capture", "CapturedGraph", "CaptureError"]
