"""Webhooks: ``store`` keeps what admins create, ``dispatch`` decides which webhooks an
event goes to and what they are sent, ``sender`` POSTs them off the master's critical path
with retries.

May use: ``events``, ``queries``, ``states`` and ``store``.
"""
