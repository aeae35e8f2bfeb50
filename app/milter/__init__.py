"""The milter: Postfix (`smtpd_milters`) and Sendmail (`INPUT_MAIL_FILTER`) hand each message
to `spamsift serve` during SMTP, and it is marked, held or refused before it is queued.

The protocol is spoken here directly on asyncio (protocol.py), not through a library: pymilter
needs Sendmail's libmilter (C) and its thread per connection; purepythonmilter is at 0.0.1 and
kilter is not on PyPI. What spamsift needs of the protocol is small (option negotiation,
recipients, headers, body, end of message, and five replies), and runs on the server's own
event loop beside the HTTP API, calling the service layer only (server.py).
"""
