"""Recurring schedules, in the pure core (no I/O):

- recurrence.py — when a schedule's runs fall: cron with a time zone, every, explicit times.
- spec.py — a schedule's definition: topic, name, body, recurrence, bounds, catch-up
  policy; its checks and its one JSON encoding.
- runs.py — a schedule's state in the wheel: runs handed to the outbox a horizon
  ahead, missed runs by the catch-up policy, what a change cancels; run ids.
- ops.py — the ``op=schedule`` inbound record (put, delete, pause, resume); a
  schedule's wheel key and Redis shard.
- state.py — how the scheduler stores the schedules of one wheel key.
- listed.py — a schedule as a listing shows it (state, next and last run, runs sent),
  and its row's JSON.
"""
