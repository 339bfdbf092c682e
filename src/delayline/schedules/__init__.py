"""Recurring schedules, in the pure core (no I/O):

- recurrence.py — when a schedule's runs fall: cron with a time zone, every, explicit times.
"""
