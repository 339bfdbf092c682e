"""The HTTP API's routes, one router per area; :func:`delayline.api.app.create_app`
includes them in this order:

- :mod:`.messages`: ``/v1/messages...``, send, batch, status, cancel, reschedule.
- :mod:`.schedules`: ``/v1/schedules...``, put, pause, resume and delete a recurring
  schedule; list schedules, show one, preview its next runs.
- :mod:`.pending`: ``/v1/pending...``, the forecast and the listing of pending messages.
- :mod:`.monitoring`: ``/v1/stats``, ``/v1/history``, ``/v1/rejects``, ``/v1/dead-letters``,
  ``/healthz`` and ``/metrics``.
- :mod:`.groups`: ``/v1/admin/groups...``, the Manager: groups, their quotas, health and
  history (the admin token only).
- :mod:`.dashboard`: ``/ui``.
"""
