"""Helpers the tests share (never imported by src/ or bench/; what bench shares with the
tests lives in ``delayline.testing``):

- ``processes``: alive, tagged, killed with their process groups;
- ``harness``: ``delayline run`` and the whole service as processes, workloads and checks;
- ``sinking``: the scheduler's sink and listing answers driven by hand;
- ``asgi``: an HTTP client over the app, with its lifespan run as uvicorn runs it;
- ``pump_process``: a pump in a process of its own, for crash points (``python -m``).
"""
